// libFuzzer target for the cost-model JSON reader (the class files, tuccl-sim --cost, what
// tuccl-calibrate writes; build with -DTUCCL_FUZZ=ON and clang).
//
//   build-fuzz/fuzz/cost_model_fuzzer -max_total_time=300 -timeout=5 fuzz/corpus_cost
//
// Every input must read into a model that writes back to text reading into the same JSON, whose
// rates and factors stay in their ranges (the memory-hierarchy factor at any size too), or fail
// with a Status naming the file; anything else (a crash, a sanitizer report, a hang, an escaping
// exception) is a bug.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "sim/cost_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  tuccl::SourceText source("fuzz.json", std::string(reinterpret_cast<const char*>(data), size));
  tuccl::Expected<tuccl::CostModel> model = tuccl::readCostModelJson(source);
  if (!model.ok()) {
    const tuccl::Diagnostic& diagnostic = model.diagnostic();
    if (diagnostic.file != "fuzz.json" || diagnostic.message.empty()) std::abort();
    return 0;
  }
  if (!(model->perThreadGBps > 0) || model->cacheSpeedup < 1 || model->cacheBytes < 0) std::abort();
  for (int64_t bytes : {int64_t{0}, int64_t{1} << 20, int64_t{1} << 40}) {
    const tuccl::CostModel at = tuccl::costModelForMessage(*model, bytes);
    if (!std::isfinite(at.perThreadGBps) || at.perThreadGBps < model->perThreadGBps) std::abort();
  }
  const std::string text = tuccl::writeCostModelJson(*model);
  tuccl::Expected<tuccl::CostModel> back = tuccl::readCostModelJson(tuccl::SourceText("again.json", text));
  if (!back.ok() || tuccl::costModelToJson(*back) != tuccl::costModelToJson(*model)) std::abort();
  return 0;
}
