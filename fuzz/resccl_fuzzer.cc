// libFuzzer target for the ResCCLang front end (build with -DTUCCL_FUZZ=ON and clang).
//
//   build-fuzz/fuzz/resccl_fuzzer -max_total_time=300 -timeout=5 fuzz/corpus
//
// Every input must compile into a structurally valid Algorithm or throw a DiagnosticError that
// points into the file; anything else (a crash, a sanitizer report, a hang, another exception)
// is a bug. Save what it finds in tests/data/lang/crashes/ so resccl_fuzz_test replays it.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lang/algorithm.h"
#include "lang/resccl.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  tuccl::SourceText source("fuzz.resccl", std::string(reinterpret_cast<const char*>(data), size));
  tuccl::RescclOptions options;
  options.maxOperations = 100'000;  // small limits so runaway loops end quickly
  options.maxStatements = 1'000'000;
  tuccl::Expected<tuccl::Algorithm> algorithm = tuccl::compileResccl(source, options);
  if (algorithm.ok()) {
    if (!tuccl::validateStructure(*algorithm).ok()) std::abort();
    if (algorithm->ops.size() > 100'000u) std::abort();
  } else {
    const tuccl::Diagnostic& diagnostic = algorithm.diagnostic();
    if (diagnostic.loc.line > source.lineCount() + 1 || diagnostic.message.empty()) std::abort();
    (void)tuccl::formatDiagnostic(diagnostic, &source);
  }
  return 0;
}
