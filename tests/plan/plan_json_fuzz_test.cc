// Deterministic mutation fuzzing of the plan JSON reader (versions 1, 2, 3), in every build: the
// libFuzzer seeds (fuzz/corpus_plan/) load and round trip, and every mutant of them either reads
// into a valid plan that writes back to the same plan, or fails with a diagnostic naming the file.
// fuzz/plan_json_fuzzer.cc explores further under libFuzzer (TUCCL_FUZZ=ON).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "plan/plan_json.h"
#include "plan/plan_validate.h"

namespace tuccl {
namespace {

std::vector<std::string> seeds() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TUCCL_SOURCE_DIR) + "/fuzz/corpus_plan")) {
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> texts;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    texts.push_back(text.str());
  }
  return texts;
}

PlanReadLimits smallLimits() {
  PlanReadLimits limits;
  limits.maxExpandedItems = 1 << 16;
  return limits;
}

// What the libFuzzer target checks, for one input.
void checkInput(const std::string& text, const std::string& what) {
  const Expected<Plan> plan = readPlanJson(SourceText("m.json", text), smallLimits());
  if (!plan.ok()) {
    EXPECT_EQ(plan.diagnostic().file, "m.json") << what;
    EXPECT_FALSE(plan.diagnostic().message.empty()) << what;
    return;
  }
  EXPECT_TRUE(validatePlan(*plan).ok()) << what;
  for (int version : {2, 3, 4}) {
    const Expected<Plan> back = readPlanJson(SourceText("again.json", writePlanJson(*plan, version)));
    ASSERT_TRUE(back.ok()) << what << ": " << back.status().toString();
    // Versions before 4 have no fused primitives: they carry the plan unfused.
    EXPECT_TRUE(*back == (version < 4 ? unfusedPlan(*plan) : *plan)) << what << " (version " << version << ")";
  }
}

TEST(PlanJsonFuzz, SeedsLoadAndRoundTrip) {
  const std::vector<std::string> texts = seeds();
  ASSERT_GE(texts.size(), 5u);
  for (size_t s = 0; s < texts.size(); ++s) {
    const Expected<Plan> plan = readPlanJson(SourceText("seed.json", texts[s]));
    ASSERT_TRUE(plan.ok()) << s << ": " << plan.status().toString();
    checkInput(texts[s], "seed " + std::to_string(s));
  }
}

// Replaces the i-th number of the text, deletes or duplicates a span, or swaps in a token.
std::string mutate(const std::string& text, std::mt19937& random) {
  static const std::vector<std::string> tokens = {
      "0", "-1", "1", "-2", "7", "2147483647", "-2147483648", "4294967296", "99999999999999999999", "1.5", "\"x\"",
      "null", "[]", "{}", "{\"perRank\": 0}", "{\"a\": 1, \"b\": 0, \"m\": 3}", "{\"a\": -1, \"b\": 5}", "true"};
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(random); };
  std::string result = text;
  const size_t at = pick(result.size());
  switch (pick(4)) {
    case 0: {  // a number (or what follows a colon) becomes a token
      size_t start = result.find_first_of("-0123456789", at);
      if (start == std::string::npos) start = at;
      size_t end = result.find_first_not_of("-0123456789", start);
      if (end == std::string::npos) end = result.size();
      result.replace(start, std::max<size_t>(end - start, 1), tokens[pick(tokens.size())]);
      break;
    }
    case 1:  // a span disappears
      result.erase(at, 1 + pick(40));
      break;
    case 2:  // a span repeats
      result.insert(at, result.substr(at, 1 + pick(200)));
      break;
    default:  // a key or value in quotes changes
      if (const size_t quote = result.find('"', at); quote != std::string::npos) {
        const size_t close = result.find('"', quote + 1);
        if (close != std::string::npos) {
          static const std::vector<std::string> words = {"repeat", "stride", "modulo", "entry", "runs", "tbs",
                                                         "perRank", "templates", "values", "template", "deps", "peer"};
          result.replace(quote + 1, close - quote - 1, words[pick(words.size())]);
        }
      }
  }
  return result;
}

// Inputs libFuzzer found (fuzz/plan_json_fuzzer.cc), replayed.
TEST(PlanJsonFuzz, FoundInputsFailWithADiagnostic) {
  // A number no double holds: nlohmann throws out_of_range, not parse_error.
  const std::string overflow = "999e999999999999999999\341\": \"B \"chunkSize\": 10  ]}\n  ]}er\": \"oup,\":u tt 6\n}\n";
  const Expected<Plan> plan = readPlanJson(SourceText("m.json", overflow));
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().toString().find("m.json: error: not valid JSON: number overflow parsing"), std::string::npos)
      << plan.status().toString();
  checkInput("{\"format\": \"tuccl-plan\", \"version\": 3, \"nRanks\": 1e999}", "overflow in a field");
}

TEST(PlanJsonFuzz, MutantsLoadOrFailWithADiagnostic) {
  const std::vector<std::string> texts = seeds();
  std::mt19937 random(17);
  int loaded = 0;
  for (int m = 0; m < 1500; ++m) {
    std::string text = texts[static_cast<size_t>(m) % texts.size()];
    const int rounds = 1 + m % 3;
    for (int r = 0; r < rounds; ++r) text = mutate(text, random);
    const Expected<Plan> plan = readPlanJson(SourceText("m.json", text), smallLimits());
    loaded += plan.ok() ? 1 : 0;
    checkInput(text, "mutant " + std::to_string(m));
  }
  EXPECT_GT(loaded, 0);  // some mutants are still plans (a changed source line, a duplicated key)
}

}  // namespace
}  // namespace tuccl
