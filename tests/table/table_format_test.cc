// The table file formats: JSON schema v1 and NCCL's example tuner CSV, readers, writers, errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "table/table_io.h"
#include "table/tuner_constants.h"

namespace tuccl {
namespace {

const std::string kData = std::string(TUCCL_SOURCE_DIR) + "/tests/data/table/";

using A = NcclAlgorithm;
using P = Protocol;
constexpr std::nullopt_t kAny = std::nullopt;

LookupTable parseJson(const std::string& text) {
  Expected<LookupTable> result = readTableJson(text, "t.json");
  EXPECT_TRUE(result.ok()) << formatTableError(result.status());
  return result.ok() ? *result : LookupTable{};
}

std::string jsonError(const std::string& text) {
  Expected<LookupTable> result = readTableJson(text, "t.json");
  EXPECT_FALSE(result.ok());
  return formatTableError(result.status());
}

std::string csvError(const std::string& text) {
  Expected<LookupTable> result = readTableCsv(text, "t.conf");
  EXPECT_FALSE(result.ok());
  return formatTableError(result.status());
}

/// `line` after a valid first line: the table keeps the valid line, and the notes (skipped lines
/// first, then warnings) as formatTableNotes writes them.
std::vector<std::string> csvNotes(const std::string& line, size_t* entries = nullptr) {
  TableNotes notes;
  Expected<LookupTable> result = readTableCsv("allreduce,0,10,ring,ll,-1,-1,-1\n" + line + "\n", "t.conf", &notes);
  EXPECT_TRUE(result.ok()) << formatTableError(result.status());
  if (entries != nullptr) *entries = result.ok() ? result->entries.size() : 0;
  return formatTableNotes(notes);
}

using Lines = std::vector<std::string>;

TEST(Names, AlgorithmsCaseInsensitiveAndIndices) {
  EXPECT_EQ(parseNcclAlgorithm("NVLS_TREE"), A::NvlsTree);
  EXPECT_EQ(parseNcclAlgorithm("collnet_chain"), A::CollNetChain);
  EXPECT_FALSE(parseNcclAlgorithm("any"));
  EXPECT_FALSE(parseNcclAlgorithm("ring2"));
  EXPECT_EQ(ncclAlgorithmName(A::Pat), "PAT");
  EXPECT_EQ(ncclAlgorithmAt(1), A::Ring);
  EXPECT_FALSE(ncclAlgorithmAt(7));
  EXPECT_FALSE(ncclAlgorithmAt(-1));
  EXPECT_EQ(protocolAt(2), P::Simple);
  EXPECT_FALSE(protocolAt(3));
  EXPECT_TRUE(isTunerCollective(Collective::ReduceScatter));
  EXPECT_FALSE(isTunerCollective(Collective::AllToAll));
}

TEST(Names, FilesSpellChoicesInAnyCaseAndAny) {
  LookupTable t = parseJson(
      "{\"version\": 1, \"entries\": [{\"collective\": \"AllReduce\", \"algorithm\": \"NVLS_tree\", "
      "\"protocol\": \"LL128\"}, {\"collective\": \"reduce_scatter\", \"algorithm\": \"-1\", "
      "\"protocol\": \"Simple\"}, {\"collective\": \"broadcast\", \"algorithm\": \"ANY\"}]}");
  ASSERT_EQ(t.entries.size(), 3u);
  EXPECT_EQ(t.entries[0].choices, (std::vector<Choice>{{A::NvlsTree, P::LL128}}));
  EXPECT_EQ(t.entries[1].collective, Collective::ReduceScatter);
  EXPECT_EQ(t.entries[1].choices, (std::vector<Choice>{{kAny, P::Simple}}));
  EXPECT_EQ(t.entries[2].choices, (std::vector<Choice>{{kAny, kAny}}));
  // Written lower case, as docs/tuning-table.md spells them.
  const std::string text = writeTableJson(t);
  EXPECT_NE(text.find("\"algorithm\": \"nvls_tree\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"protocol\": \"ll128\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"collective\": \"reducescatter\""), std::string::npos) << text;
  EXPECT_NE(
      jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"alltoall\"}]}").find("unknown collective"),
      std::string::npos);
}

TEST(Hash, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(formatHash(0xaf63dc4c8601ec8cull), "0xaf63dc4c8601ec8c");
}

TEST(TableJson, ReadsTheValidTestTable) {
  Expected<LoadedTable> loaded = loadTableFile(kData + "valid.json");
  ASSERT_TRUE(loaded.ok()) << formatTableError(loaded.status());
  const LookupTable& table = loaded->table;
  EXPECT_EQ(loaded->format, TableFormat::Json);
  EXPECT_EQ(table.matchOrder, MatchOrder::SpecificFirst);
  ASSERT_EQ(table.entries.size(), 9u);
  const TableEntry& e1 = table.entries[1];
  EXPECT_EQ(e1.collective, Collective::AllReduce);
  EXPECT_EQ(e1.minBytes, 65537u);
  EXPECT_EQ(e1.maxBytes, 4u << 20);
  EXPECT_EQ(e1.nNodes, 2);
  EXPECT_EQ(e1.nRanks, 16);
  ASSERT_EQ(e1.choices.size(), 3u);
  EXPECT_EQ(e1.choices[0], (Choice{A::Ring, P::LL128}));
  EXPECT_EQ(e1.choices[1], (Choice{A::Tree, P::LL128}));
  EXPECT_EQ(e1.choices[2], (Choice{kAny, P::Simple}));
  EXPECT_EQ(e1.nChannels, 16);
  EXPECT_EQ(e1.chunkSize, 512u << 10);
  EXPECT_EQ(table.entries[2].maxBytes, UINT64_MAX);
  EXPECT_EQ(table.entries[5].choices, (std::vector<Choice>{{kAny, P::LL128}}));
  EXPECT_TRUE(table.entries[7].choices.empty());
  EXPECT_EQ(table.entries[7].nChannels, 8);
  EXPECT_EQ(table.entries[6].topology, "dgx-h100");
  ASSERT_EQ(table.environment.size(), 2u);
  EXPECT_EQ(table.environment[0].settings, (std::vector<std::pair<std::string, std::string>>{
                                               {"NCCL_NTHREADS", "512"}, {"NCCL_BUFFSIZE", "8388608"}}));
  ASSERT_EQ(table.constants.size(), 3u);
  EXPECT_EQ(table.constants[0].name, "baseLatencies.RING.LL");
  EXPECT_EQ(tunerConstantOffset(table.constants[0].name, TunerConstantsLayout::V5), 1u * 3 + 0);
  EXPECT_DOUBLE_EQ(table.constants[0].value, 6.6);
}

TEST(TableJson, WriteReadRoundTrip) {
  Expected<LoadedTable> loaded = loadTableFile(kData + "valid.json");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->table.entries[3].comment,
            "any communicator size: a lower priority than the entries above");
  EXPECT_NE(loaded->table.description.find("Test table"), std::string::npos);
  std::string text = writeTableJson(loaded->table);
  LookupTable again = parseJson(text);
  // origin is the JSON index, which the round trip keeps.
  EXPECT_EQ(again, loaded->table);
  EXPECT_EQ(writeTableJson(again), text) << "the writer is deterministic";
}

TEST(TableJson, CommentsDescriptionGeneratorAndMetadataRoundTrip) {
  LookupTable table;
  TableEntry entry;
  entry.collective = Collective::AllGather;
  entry.choices = {{A::Ring, P::LL}};
  entry.comment = "tuned at 64K";
  table.entries.push_back(entry);
  EnvRecommendation env;
  env.settings = {{"NCCL_NTHREADS", "256"}};
  env.comment = "most sizes";
  table.environment.push_back(env);
  table.description = "a test";
  table.generator = "tuccl-tune 0.1.0";
  table.metadataJson = R"({"tuccl":{"zeta":1,"alpha":[2.5,"x"]}})";
  const std::string text = writeTableJson(table);
  // Free-form metadata keeps its key order; the extras come after the schema's keys.
  EXPECT_LT(text.find("\"zeta\""), text.find("\"alpha\"")) << text;
  EXPECT_LT(text.find("\"entries\""), text.find("\"generator\"")) << text;
  EXPECT_LT(text.find("\"generator\""), text.find("\"description\"")) << text;
  EXPECT_LT(text.find("\"description\""), text.find("\"metadata\"")) << text;
  LookupTable again = parseJson(text);
  EXPECT_EQ(again, table);
  EXPECT_EQ(writeTableJson(again), text);
  EXPECT_NE(jsonError("{\"version\": 1, \"metadata\": 3}").find("metadata: expected an object"),
            std::string::npos);
  EXPECT_NE(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"reduce\", \"comment\": 1}]}")
                .find("entries[0].comment: expected a string"),
            std::string::npos);
}

TEST(TableJson, ErrorsNameThePlace) {
  EXPECT_EQ(
      jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"protocol\": \"ll256\"}]}"),
      "t.json: entries[0].protocol: unknown protocol \"ll256\" (expected ll, ll128, simple or any)");
  EXPECT_EQ(jsonError("{\"version\": 2}"),
            "t.json: version: unsupported table version 2 (this plugin reads version 1)");
  EXPECT_EQ(jsonError("{\"entries\": []}"), "t.json: missing \"version\" (this plugin reads version 1)");
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"nChanels\": 4}]}"),
            "t.json: entries[0].nChanels: unknown key \"nChanels\"");
  EXPECT_EQ(
      jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"algorithm\": \"ring2\"}]}"),
      "t.json: entries[0].algorithm: unknown algorithm \"ring2\" (expected tree, ring, collnet_direct, "
      "collnet_chain, nvls, nvls_tree, pat or any)");
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"nChannels\": 65}]}"),
            "t.json: entries[0].nChannels: 65 is out of range [1, 64]");
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"minBytes\": 10, "
                      "\"maxBytes\": 5}]}"),
            "t.json: entries[0]: minBytes 10 is larger than maxBytes 5");
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"fallback\": []}]}"),
            "t.json: entries[0].fallback: a fallback list needs an \"algorithm\" or \"protocol\" first");
  EXPECT_EQ(jsonError("{\"version\": 1, \"environment\": [{\"NCCL_NTHREADS\": 100}]}"),
            "t.json: environment[0].NCCL_NTHREADS: 100 is not a multiple of 32");
  EXPECT_EQ(jsonError("{\"version\": 1, \"environment\": [{\"NCCL_NTHREADS\": 1024}]}"),
            "t.json: environment[0].NCCL_NTHREADS: 1024 is out of range [64, 512]");
  EXPECT_NE(jsonError("{\"version\": 1, \"constants\": {\"baseLatencies\": {\"RING\": {\"LL512\": 1}}}}")
                .find("constants.baseLatencies.RING.LL512: not a constant"),
            std::string::npos);
  EXPECT_NE(jsonError("{\"version\": 1, \"constants\": {\"llMaxBws\": {\"HOPPER\": {\"2\": -3}}}}")
                .find("finite, non-negative"),
            std::string::npos);
  EXPECT_NE(jsonError("[]").find("a table is a JSON object"), std::string::npos);
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"nChannels\": 4.5}]}"),
            "t.json: entries[0].nChannels: expected an integer, got 4.5");
  EXPECT_EQ(
      parseJson("{\"version\": 1.0, \"entries\": [{\"collective\": \"allreduce\", \"nChannels\": 4.0}]}")
          .entries.at(0)
          .nChannels,
      4);
}

TEST(TableJson, LibtucclAlgorithmRoundTripsAndCsvCannotHoldIt) {
  LookupTable t = parseJson(
      "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"algorithm\": \"ring\", "
      "\"tucclAlgorithm\": \"algorithms/hm.resccl\"}, {\"collective\": \"broadcast\", "
      "\"tucclAlgorithm\": \"binomial\"}]}");
  ASSERT_EQ(t.entries.size(), 2u);
  EXPECT_EQ(t.entries[0].tucclAlgorithm, "algorithms/hm.resccl");
  EXPECT_EQ(t.entries[0].choices, (std::vector<Choice>{{A::Ring, kAny}}));
  EXPECT_EQ(t.entries[1].tucclAlgorithm, "binomial");
  EXPECT_TRUE(t.entries[1].choices.empty()) << "a libtuccl algorithm decides nothing for NCCL";
  EXPECT_EQ(parseJson(writeTableJson(t)), t);
  EXPECT_EQ(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"tucclAlgorithm\": 3}]}"),
            "t.json: entries[0].tucclAlgorithm: expected a string, got 3");
  EXPECT_NE(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"tucclAlgorithm\": \"\"}]}")
                .find("entries[0].tucclAlgorithm: expected a built-in algorithm name or a ResCCLang file"),
            std::string::npos);
  Expected<CsvTable> refused = writeTableCsv(t, false);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("entries[0]: tucclAlgorithm"), std::string::npos)
      << refused.status().message();
  Expected<CsvTable> lossy = writeTableCsv(t, true);
  ASSERT_TRUE(lossy);
  EXPECT_EQ(lossy->dropped.size(), 2u);
}

// Configuration groups: the entry's own decision is group 0, "groups" the alternatives with their
// profiled times; they round-trip, errors name the group and key, and the CSV cannot hold them.
TEST(TableJson, ConfigurationGroupsRoundTripAndAreChecked) {
  LookupTable t = parseJson(
      "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"algorithm\": \"ring\", "
      "\"protocol\": \"simple\", \"nChannels\": 8, \"chunkSize\": \"512K\", \"timeUs\": 120.5, "
      "\"groups\": [{\"algorithm\": \"tree\", \"protocol\": \"ll128\", \"nChannels\": 16, \"timeUs\": 130}, "
      "{\"protocol\": \"simple\", \"tucclAlgorithm\": \"direct\", \"chunkSize\": 65536}]}]}");
  ASSERT_EQ(t.entries.size(), 1u);
  const std::vector<ConfigGroup> groups = entryGroups(t.entries[0]);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].choice, (Choice{A::Ring, P::Simple}));
  EXPECT_EQ(groups[0].nChannels, 8);
  EXPECT_EQ(groups[0].chunkSize, 512u << 10);
  EXPECT_DOUBLE_EQ(groups[0].timeUs, 120.5);
  EXPECT_EQ(groups[1].choice, (Choice{A::Tree, P::LL128}));
  EXPECT_EQ(groups[1].nChannels, 16);
  EXPECT_DOUBLE_EQ(groups[1].timeUs, 130);
  EXPECT_EQ(groups[2].choice, (Choice{kAny, P::Simple}));
  EXPECT_EQ(groups[2].tucclAlgorithm, "direct");
  EXPECT_EQ(groups[2].chunkSize, 65536u);
  EXPECT_LT(groups[2].timeUs, 0) << "no time given";
  EXPECT_EQ(parseJson(writeTableJson(t)), t);

  const std::string head = "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", ";
  EXPECT_EQ(jsonError(head + "\"groups\": {}}]}"), "t.json: entries[0].groups: expected an array of configuration groups");
  EXPECT_EQ(jsonError(head + "\"groups\": [{\"nChannels\": 4}, {\"chanels\": 4}]}]}"),
            "t.json: entries[0].groups[1].chanels: unknown key \"chanels\"");
  EXPECT_EQ(jsonError(head + "\"groups\": [{\"fallback\": []}]}]}"),
            "t.json: entries[0].groups[0].fallback: unknown key \"fallback\"");
  EXPECT_NE(jsonError(head + "\"timeUs\": -1}]}").find("entries[0].timeUs: expected a non-negative number"),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"groups\": [{\"timeUs\": \"fast\"}]}]}").find("entries[0].groups[0].timeUs"),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"groups\": [{\"protocol\": \"ll256\"}]}]}").find("entries[0].groups[0].protocol"),
            std::string::npos);
  std::string eight = head + "\"groups\": [";
  for (int i = 0; i < kMaxGroups; ++i) eight += std::string(i ? ", " : "") + "{\"nChannels\": " + std::to_string(i + 1) + "}";
  EXPECT_EQ(jsonError(eight + "]}]}"), "t.json: entries[0].groups: at most 7 alternative groups per entry");

  Expected<CsvTable> refused = writeTableCsv(t, false);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("entries[0]: 2 alternative group(s)"), std::string::npos)
      << refused.status().message();
}

// tuccl-tune's evidence: a time's interval and samples, and an entry's comparison with the
// default; a default entry sets nothing of its own.
TEST(TableJson, EvidenceAndDefaultEntriesRoundTripAndAreChecked) {
  LookupTable t = parseJson(
      "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"maxBytes\": 65535, \"timeUs\": 40, "
      "\"lowUs\": 38.5, \"highUs\": 41, \"samples\": 6, \"default\": true, \"versusDefault\": {\"ratio\": 1.1, "
      "\"low\": 1.02, \"high\": 1.2, \"pairs\": 6, \"won\": 0, \"versus\": \"chunkBytes=8192 algorithm=direct\"}, "
      "\"groups\": [{\"tucclAlgorithm\": \"direct\", \"chunkSize\": 8192, \"timeUs\": 44, \"lowUs\": 43, "
      "\"highUs\": 45, \"samples\": 6}]}, "
      "{\"collective\": \"allreduce\", \"minBytes\": 65536, \"tucclAlgorithm\": \"ring\", \"timeUs\": 80, "
      "\"versusDefault\": {\"ratio\": 0.8, \"low\": 0.75, \"high\": 0.86, \"pairs\": 6, \"won\": 6}}]}");
  ASSERT_EQ(t.entries.size(), 2u);
  const TableEntry& d = t.entries[0];
  EXPECT_TRUE(d.isDefault);
  EXPECT_EQ(d.interval, (TimeInterval{38.5, 41, 6}));
  ASSERT_TRUE(d.versusDefault.has_value());
  EXPECT_EQ(*d.versusDefault, (DefaultComparison{1.1, 1.02, 1.2, 6, 0, "chunkBytes=8192 algorithm=direct"}));
  EXPECT_EQ(d.groups.at(0).interval, (TimeInterval{43, 45, 6}));
  EXPECT_EQ(entryGroups(d).at(0).interval, d.interval);
  EXPECT_FALSE(t.entries[1].isDefault);
  EXPECT_DOUBLE_EQ(t.entries[1].versusDefault->high, 0.86);
  EXPECT_EQ(parseJson(writeTableJson(t)), t);

  const std::string head = "{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", ";
  EXPECT_NE(jsonError(head + "\"default\": true, \"nChannels\": 4}]}")
                .find("t.json: entries[0].default: a default entry keeps the defaults: it sets no algorithm"),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"default\": 1}]}").find("entries[0].default: expected true or false"), std::string::npos);
  EXPECT_NE(jsonError(head + "\"lowUs\": 3}]}").find("entries[0]: lowUs, highUs and samples describe a \"timeUs\""),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"timeUs\": 2, \"lowUs\": 3}]}").find("entries[0].lowUs: the interval's low end"),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"groups\": [{\"timeUs\": 5, \"highUs\": 4}]}]}").find("entries[0].groups[0].highUs"),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"timeUs\": 5, \"samples\": 0}]}").find("entries[0].samples"), std::string::npos);
  EXPECT_NE(jsonError(head + "\"versusDefault\": {\"low\": 1}}]}").find("entries[0].versusDefault: missing \"ratio\""),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"versusDefault\": {\"ratio\": 0}}]}").find("entries[0].versusDefault.ratio"),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"versusDefault\": {\"ratio\": 1, \"high\": 0.9}}]}").find("versusDefault.high"),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"versusDefault\": {\"ratio\": 1, \"pairs\": 2, \"won\": 3}}]}").find("versusDefault.won"),
            std::string::npos);
  EXPECT_NE(jsonError(head + "\"versusDefault\": {\"ratio\": 1, \"p\": 2}}]}").find("versusDefault.p: unknown key"),
            std::string::npos);
}

TEST(TableJson, SyntaxErrorHasLineAndColumn) {
  Expected<LookupTable> result = readTableJson("{\n  \"version\": 1,\n  \"entries\": [,]\n}\n", "t.json");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), ErrorCode::InvalidInput);
  EXPECT_EQ(result.diagnostic().file, "t.json");
  EXPECT_EQ(result.diagnostic().loc.line, 3u);
  EXPECT_EQ(result.diagnostic().loc.column, 15u);
  EXPECT_NE(result.status().message().find("invalid JSON"), std::string::npos);
}

TEST(TableJson, TooManyFallbacksAndPipeOpsValues) {
  std::string fallbacks;
  for (int i = 0; i < kMaxChoices; ++i) fallbacks += std::string(i ? "," : "") + "{\"protocol\": \"ll\"}";
  EXPECT_NE(jsonError("{\"version\": 1, \"entries\": [{\"collective\": \"allreduce\", \"protocol\": \"ll\", "
                      "\"fallback\": [" +
                      fallbacks + "]}]}")
                .find("at most 7 fallbacks"),
            std::string::npos);
  std::string entries;
  for (int i = 0; i <= kMaxPipeOpsValues; ++i) {
    entries += std::string(i ? "," : "") +
               "{\"collective\": \"allreduce\", \"numPipeOps\": " + std::to_string(i + 1) + "}";
  }
  EXPECT_NE(jsonError("{\"version\": 1, \"entries\": [" + entries + "]}").find("distinct numPipeOps"),
            std::string::npos);
}

TEST(TunerConstants, NamesCoverTheV5Struct) {
  constexpr auto V5 = TunerConstantsLayout::V5;
  EXPECT_EQ(tunerConstantOffset("baseLatencies.TREE.LL", V5), 0u);
  EXPECT_EQ(tunerConstantOffset("baseLatencies.PAT.SIMPLE", V5), 20u);
  EXPECT_EQ(tunerConstantOffset("hwLatencies.NVLINK.TREE.LL", V5), 21u);
  EXPECT_EQ(tunerConstantOffset("hwLatencies.NET.PAT.SIMPLE", V5), 83u);
  EXPECT_EQ(tunerConstantOffset("llMaxBws.VOLTA.1", V5), 84u);
  EXPECT_EQ(tunerConstantOffset("perChMaxRingLL128Bws.VOLTA.1", V5), 96u);
  EXPECT_EQ(tunerConstantOffset("perChMaxNVLSTreeBws.BLACKWELL.4+", V5), kNumTunerConstantsV5 - 1);
  EXPECT_FALSE(tunerConstantOffset("llMaxBws.HOPPER.3", V5));
  EXPECT_FALSE(tunerConstantOffset("llMaxBws.RUBIN.1", V5)) << "v5/v6 have no Rubin row";
  EXPECT_FALSE(tunerConstantOffset("baseLatencies.RING", V5));
  EXPECT_EQ(tunerConstantCount(V5), 144u);
  for (uint32_t offset = 0; offset < kNumTunerConstantsV5; ++offset) {
    EXPECT_EQ(tunerConstantOffset(tunerConstantName(offset, V5), V5), offset)
        << tunerConstantName(offset, V5);
  }
}

TEST(TunerConstants, V7AddsARubinRowToEveryBandwidthArray) {
  constexpr auto V5 = TunerConstantsLayout::V5;
  constexpr auto V7 = TunerConstantsLayout::V7;
  EXPECT_EQ(tunerConstantCount(V7), 159u);
  // The latencies do not move; llMaxBws starts where it did; the later arrays move by 3 per array.
  EXPECT_EQ(tunerConstantOffset("hwLatencies.NET.PAT.SIMPLE", V7), 83u);
  EXPECT_EQ(tunerConstantOffset("llMaxBws.BLACKWELL.4", V7), 84u + 3 * 3 + 2);
  EXPECT_EQ(tunerConstantOffset("llMaxBws.RUBIN.1", V7), 84u + 4 * 3);
  EXPECT_EQ(tunerConstantOffset("perChMaxRingLL128Bws.VOLTA.1", V7), 84u + 15);
  EXPECT_EQ(tunerConstantOffset("perChMaxNVLSTreeBws.RUBIN.4+", V7), kNumTunerConstantsV7 - 1);
  for (uint32_t offset = 0; offset < kNumTunerConstantsV7; ++offset) {
    const std::string name = tunerConstantName(offset, V7);
    EXPECT_EQ(tunerConstantOffset(name, V7), offset) << name;
    // Every v5 constant names the same quantity in v7.
    if (auto v5 = tunerConstantOffset(name, V5)) {
      EXPECT_EQ(tunerConstantName(*v5, V5), name);
    }
  }
  EXPECT_EQ(canonicalTunerConstantName("llmaxbws.rubin.4+"), std::nullopt)
      << "array names are case-sensitive";
  EXPECT_EQ(canonicalTunerConstantName("llMaxBws.rubin.4+"), "llMaxBws.RUBIN.4");
  LookupTable t =
      parseJson("{\"version\": 1, \"constants\": {\"perChMaxTreeBws\": {\"RUBIN\": {\"2\": 70}}}}");
  ASSERT_EQ(t.constants.size(), 1u);
  EXPECT_EQ(t.constants[0].name, "perChMaxTreeBws.RUBIN.2");
  EXPECT_NE(
      jsonError(
          "{\"version\": 1, \"constants\": {\"llMaxBws\": {\"HOPPER\": {\"2\": 1}, \"hopper\": {\"2\": 2}}}}")
          .find("set twice"),
      std::string::npos);
}

TEST(TableCsv, ReadsNcclExampleFormat) {
  Expected<LoadedTable> loaded = loadTableFile(kData + "valid.csv");
  ASSERT_TRUE(loaded.ok()) << formatTableError(loaded.status());
  EXPECT_EQ(loaded->format, TableFormat::Csv);
  const LookupTable& table = loaded->table;
  EXPECT_EQ(table.matchOrder, MatchOrder::FileOrder);
  ASSERT_EQ(table.entries.size(), 9u);
  const TableEntry& first = table.entries[0];
  EXPECT_EQ(first.origin, 3u) << "CSV entries remember their line";
  EXPECT_EQ(first.nChannels, 2);
  EXPECT_EQ(first.nNodes, 1);
  EXPECT_EQ(first.nRanks, -1);
  const TableEntry& spaced = table.entries[2];
  EXPECT_EQ(spaced.collective, Collective::AllReduce);
  EXPECT_EQ(spaced.choices, (std::vector<Choice>{{A::Ring, P::LL128}}));
  EXPECT_EQ(spaced.minBytes, 65537u);
  EXPECT_EQ(table.entries[1].nChannels, 0) << "channels -1 keeps NCCL's";
  EXPECT_EQ(table.entries[3].numPipeOps, 1);
  EXPECT_EQ(table.entries[3].regBuff, -1);
  EXPECT_EQ(table.entries[4].regBuff, 1);
  EXPECT_EQ(table.entries[4].maxBytes, 4294967296u);
}

// A line that cannot be read is skipped and named with its line and column; the rest of the table
// is used. Only a table without any valid line fails.
TEST(TableCsv, BadLinesAreSkippedAndNamedWithLineAndColumn) {
  size_t entries = 0;
  EXPECT_EQ(csvNotes("allreduce,0,10,ring,ll256,-1,-1,-1", &entries),
            Lines{"t.conf:2:21: line skipped: unknown protocol 'll256' (expected ll, ll128 or simple)"});
  EXPECT_EQ(entries, 1u);
  EXPECT_EQ(csvNotes("allreduce,0,10,ring"),
            Lines{"t.conf:2:1: line skipped: expected 8 to 10 comma-separated fields (collective,minbytes,"
                  "maxbytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]), got 4"});
  EXPECT_EQ(csvNotes("alltoall,0,10,ring,ll,-1,-1,-1"),
            Lines{"t.conf:2:1: line skipped: unknown collective 'alltoall' (expected broadcast, reduce, allgather, "
                  "reducescatter or allreduce)"});
  EXPECT_EQ(csvNotes("allreduce,0,10,ring,ll,65,-1,-1"),
            Lines{"t.conf:2:24: line skipped: channels '65' is not -1 or an integer in [0, 64]"});
  EXPECT_EQ(csvNotes("allreduce,0,10,ring,ll,-1,-1,-1,1,2"),
            Lines{"t.conf:2:35: line skipped: regBuff '2' is not -1 or an integer in [0, 1]"});
  EXPECT_EQ(csvNotes("allreduce,20,10,ring,ll,-1,-1,-1"),
            Lines{"t.conf:2:11: line skipped: minbytes (20) is larger than maxbytes (10)"});
  EXPECT_EQ(csvNotes("allreduce,1024,64K,ring,ll,-1,-1,-1"),
            (Lines{"t.conf:2:11: line skipped: minbytes (1024) is larger than maxbytes (64)",
                   "t.conf:2:16: warning: maxbytes '64K' is read as 64, as NCCL's example tuner reads it: the text "
                   "after the number is ignored; write 65536 for 64 KiB"}))
      << "the warning that explains the skip stays";
  EXPECT_EQ(csvNotes("allreduce,x,10,ring,ll,-1,-1,-1"),
            Lines{"t.conf:2:11: line skipped: minbytes 'x' is not a byte count"});
  EXPECT_EQ(csvNotes("allreduce,0,-2,ring,ll,-1,-1,-1"),
            Lines{"t.conf:2:13: line skipped: maxbytes '-2' is not a byte count or -1 (no upper bound)"});
  EXPECT_EQ(csvNotes("allreduce,0,99999999999999999999,ring,ll,-1,-1,-1"),
            Lines{"t.conf:2:13: line skipped: maxbytes '99999999999999999999' is not a byte count or -1 (no "
                  "upper bound): more than 2^64-1"});
  EXPECT_EQ(csvNotes("allreduce,0,10,ring,ll,-1,4,2"),
            Lines{"t.conf:2:29: line skipped: nRanks 2 is smaller than nNodes 4: no communicator matches"});
  EXPECT_EQ(csvNotes("allreduce,0,10,ring,ll, ,-1,-1"),
            Lines{"t.conf:2:24: line skipped: channels '' is not -1 or an integer in [0, 64]"})
      << "a blank field stays a field (NCCL's example reads it as 0)";

  // Every line bad: the table fails, naming the first line and how many were skipped.
  EXPECT_EQ(csvError("# c\nallreduce,0,10,ring,ll256,-1,-1,-1\nallreduce,0,10,ring\n"),
            "t.conf:2:21: unknown protocol 'll256' (expected ll, ll128 or simple) (no line of the table is "
            "valid: 2 skipped, this is the first)");
  // A file of comments only is an empty table, as before.
  Expected<LookupTable> comments = readTableCsv("# nothing yet\n\n", "t.conf");
  ASSERT_TRUE(comments.ok());
  EXPECT_TRUE(comments->entries.empty());
}

// What NCCL's example tuner accepts (it splits with strtok and reads numbers with strtoull and
// atoi) means the same here: trailing commas, inline comments, fields after the tenth, empty
// fields that shift the rest, and "64K" as 64. All but the first two are warned about.
TEST(TableCsv, ReadsLinesAsNcclsExampleTunerDoes) {
  TableNotes notes;
  Expected<LookupTable> result = readTableCsv(
      "allreduce,0,65536,ring,ll,4,1,8,\n"                         // trailing comma
      "allreduce,65537,1048576,tree,simple,-1,1,8   # tuned 2024\n"  // inline comment
      "allgather,0,1048576,ring,simple,2,1,8,-1,1,extra,more\n"     // fields 11 and 12
      "reduce,,0,100,tree,ll,2,1,8\n"                               // empty field: the rest move left
      "broadcast,0,64K,tree,LL128,2x,1,8\n",                        // strtoull / atoi prefixes
      "t.conf", &notes);
  ASSERT_TRUE(result.ok()) << formatTableError(result.status());
  const std::vector<TableEntry>& e = result->entries;
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[0].maxBytes, 65536u);
  EXPECT_EQ(e[0].numPipeOps, -1);
  EXPECT_EQ(e[0].nRanks, 8);
  EXPECT_EQ(e[1].nRanks, 8);
  EXPECT_EQ(e[1].choices, (std::vector<Choice>{{A::Tree, P::Simple}}));
  EXPECT_EQ(e[2].regBuff, 1);
  EXPECT_EQ(e[3].collective, Collective::Reduce);
  EXPECT_EQ(e[3].maxBytes, 100u);
  EXPECT_EQ(e[3].choices, (std::vector<Choice>{{A::Tree, P::LL}}));
  EXPECT_EQ(e[3].nRanks, 8);
  EXPECT_EQ(e[4].maxBytes, 64u) << "64K is 64 bytes to NCCL's example tuner";
  EXPECT_EQ(e[4].nChannels, 2);
  EXPECT_EQ(notes.skippedLines, 0u);
  EXPECT_EQ(formatTableNotes(notes),
            (Lines{"t.conf:3:44: warning: fields after the tenth (regBuff) are ignored, as NCCL's example tuner "
                   "ignores them",
                   "t.conf:4:8: warning: empty field dropped: the fields after it move one place left, as NCCL's "
                   "example tuner reads them; remove the extra comma",
                   "t.conf:5:13: warning: maxbytes '64K' is read as 64, as NCCL's example tuner reads it: the text "
                   "after the number is ignored; write 65536 for 64 KiB",
                   "t.conf:5:28: warning: channels '2x' is read as 2, as NCCL's example tuner reads it: the text "
                   "after the number is ignored"}));
}

// The loaded table carries the notes; the valid lines are the table.
TEST(LoadTable, CsvWithBadLinesKeepsTheOthersAndListsThem) {
  Expected<LoadedTable> loaded = loadTableFile(kData + "partly_broken.csv");
  ASSERT_TRUE(loaded.ok()) << formatTableError(loaded.status());
  ASSERT_EQ(loaded->table.entries.size(), 3u);
  EXPECT_EQ(loaded->table.entries[1].collective, Collective::Broadcast);
  EXPECT_EQ(loaded->table.entries[1].maxBytes, 64u);
  EXPECT_EQ(loaded->notes.skippedLines, 2u);
  ASSERT_EQ(loaded->notes.skipped.size(), 2u);
  EXPECT_EQ(loaded->notes.skipped[0].loc.line, 3u);
  EXPECT_EQ(loaded->notes.skipped[0].loc.column, 24u);
  EXPECT_EQ(loaded->notes.skipped[1].loc.line, 5u);
  EXPECT_EQ(loaded->notes.skipped[0].file, kData + "partly_broken.csv");
  EXPECT_EQ(loaded->notes.warningCount, 2u);
  EXPECT_TRUE(loadTableFile(kData + "valid.csv")->notes.empty());
}

// A table with more bad lines than the notes keep: the first kMaxTableNotes are listed, the count
// is whole, and the valid lines are all there.
TEST(TableCsv, NotesAreBoundedAndCounted) {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "allreduce," + std::to_string(i) + "," + std::to_string(i) + ",ring,ll,-1,-1,-1\n";
  for (int i = 0; i < 50; ++i) text += "allreduce,0,1,ring,bogus,-1,-1,-1\n";
  TableNotes notes;
  Expected<LookupTable> result = readTableCsv(text, "t.conf", &notes);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->entries.size(), 100u);
  EXPECT_EQ(notes.skippedLines, 50u);
  EXPECT_EQ(notes.skipped.size(), kMaxTableNotes);
  EXPECT_EQ(notes.skipped.front().loc.line, 101u);
  const std::vector<std::string> lines = formatTableNotes(notes);
  ASSERT_EQ(lines.size(), kMaxTableNotes + 1);
  EXPECT_EQ(lines.back(), "... and 30 more lines skipped");
}

TEST(TableCsv, CommentsBlankLinesCrLfAndWildcardExtensions) {
  Expected<LookupTable> result =
      readTableCsv("\r\n  # comment\r\nallgather,0,-1,-1,LL128,-1,-1,-1\r\n\r\n", "t.conf");
  ASSERT_TRUE(result.ok()) << formatTableError(result.status());
  ASSERT_EQ(result->entries.size(), 1u);
  EXPECT_EQ(result->entries[0].maxBytes, UINT64_MAX);
  EXPECT_EQ(result->entries[0].choices, (std::vector<Choice>{{kAny, P::LL128}}));
  EXPECT_EQ(result->entries[0].origin, 3u);
}

TEST(TableCsv, CsvJsonCsvRoundTrip) {
  Expected<LoadedTable> loaded = loadTableFile(kData + "valid.csv");
  ASSERT_TRUE(loaded.ok());
  LookupTable fromJson = parseJson(writeTableJson(loaded->table));
  EXPECT_EQ(fromJson.matchOrder, MatchOrder::FileOrder);
  ASSERT_EQ(fromJson.entries.size(), loaded->table.entries.size());
  Expected<CsvTable> csv = writeTableCsv(fromJson, false);
  ASSERT_TRUE(csv) << csv.status().message();
  EXPECT_TRUE(csv->dropped.empty());
  Expected<LookupTable> again = readTableCsv(csv->text, "again.conf");
  ASSERT_TRUE(again.ok()) << formatTableError(again.status());
  for (size_t i = 0; i < fromJson.entries.size(); ++i) {
    TableEntry a = fromJson.entries[i];
    TableEntry b = again->entries[i];
    a.origin = b.origin = 0;
    EXPECT_EQ(a, b) << "entry " << i;
  }
}

TEST(TableCsv, JsonToCsvRefusesWhatCsvCannotHoldUnlessLossy) {
  Expected<LoadedTable> loaded = loadTableFile(kData + "valid.json");
  ASSERT_TRUE(loaded.ok());
  Expected<CsvTable> refused = writeTableCsv(loaded->table, false);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), ErrorCode::InvalidArgument);
  EXPECT_NE(refused.status().message().find("fallback"), std::string::npos);
  EXPECT_NE(refused.status().message().find("environment"), std::string::npos);
  Expected<CsvTable> csv = writeTableCsv(loaded->table, true);
  ASSERT_TRUE(csv);
  EXPECT_FALSE(csv->dropped.empty());
  Expected<LookupTable> again = readTableCsv(csv->text, "lossy.conf");
  ASSERT_TRUE(again.ok()) << formatTableError(again.status());
  EXPECT_EQ(again->entries.size(), 8u) << "the topology entry is dropped, not broadened";
  // Specific-first order is flattened into file order: the wildcard allreduce entry comes after
  // every entry keyed on nNodes / nRanks.
  const auto& entries = again->entries;
  size_t wildcard = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].collective == Collective::AllReduce && entries[i].nNodes < 0 && entries[i].nRanks < 0)
      wildcard = i;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].collective == Collective::AllReduce && entries[i].nNodes >= 0) {
      EXPECT_LT(i, wildcard);
    }
  }
}

TEST(LoadTable, DetectsFormatAndFailsCleanly) {
  EXPECT_TRUE(loadTableFile(kData + "valid.json").ok());
  Expected<LoadedTable> empty = loadTableFile(kData + "empty.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().message(), "the table file is empty");
  EXPECT_TRUE(loadTableFile(kData + "empty_entries.json").ok());
  EXPECT_FALSE(loadTableFile(kData + "broken.json").ok());
  EXPECT_FALSE(loadTableFile(kData + "invalid.json").ok());
  EXPECT_FALSE(loadTableFile(kData + "future_version.json").ok());
  EXPECT_FALSE(loadTableFile(kData + "broken.csv").ok());
  Expected<LoadedTable> missing = loadTableFile(kData + "no-such-table.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::NotFound);
  EXPECT_EQ(missing.status().message(), "cannot open the table file");
  EXPECT_EQ(missing.diagnostic().file, kData + "no-such-table.json");
  Expected<LoadedTable> directory = loadTableFile(kData);
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().message(), "the table path is a directory");
}

TEST(LoadTable, RefusesFilesOverTheSizeLimit) {
  std::string path = testing::TempDir() + "/tuccl_oversized_" + std::to_string(getpid()) + ".json";
  {
    std::ofstream out(path, std::ios::binary);
    out << "{\"version\": 1, \"entries\": []}";
    std::string padding(1 << 20, ' ');
    for (uint64_t written = 0; written <= kMaxTableFileBytes; written += padding.size()) out << padding;
  }
  Expected<LoadedTable> result = loadTableFile(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("more than the limit"), std::string::npos);
}

}  // namespace
}  // namespace tuccl

namespace tuccl {
namespace {

TEST(Examples, EveryExampleTableIsValid) {
  int tables = 0;
  for (const auto& file :
       std::filesystem::directory_iterator(std::string(TUCCL_SOURCE_DIR) + "/examples/tables")) {
    Expected<LoadedTable> loaded = loadTableFile(file.path().string());
    EXPECT_TRUE(loaded.ok()) << formatTableError(loaded.status());
    ++tables;
  }
  EXPECT_GE(tables, 2);
}

}  // namespace
}  // namespace tuccl

namespace tuccl {
namespace {

// A spreadsheet's UTF-8 byte order mark is not part of the first collective's name; the table's
// hash is still that of the file's bytes.
TEST(TableCsv, AByteOrderMarkIsNotPartOfTheFirstField) {
  const std::string plain = "allreduce,0,65536,ring,ll,-1,-1,-1\nallgather,0,1048576,ring,simple,-1,-1,-1\n";
  const std::string marked = "\xef\xbb\xbf" + plain;
  Expected<LoadedTable> withMark = parseTableBytes(marked, "bom.csv");
  ASSERT_TRUE(withMark.ok()) << withMark.status().message();
  Expected<LoadedTable> without = parseTableBytes(plain, "plain.csv");
  ASSERT_TRUE(without.ok());
  ASSERT_EQ(withMark->table.entries.size(), 2u);
  EXPECT_EQ(withMark->table.entries.size(), without->table.entries.size());
  EXPECT_EQ(withMark->table.entries[0].collective, Collective::AllReduce);
  EXPECT_EQ(withMark->hash, fnv1a64(marked));
}

}  // namespace
}  // namespace tuccl
