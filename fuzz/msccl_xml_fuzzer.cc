// libFuzzer target for the MSCCL XML front end (build with -DTUCCL_FUZZ=ON and clang).
//
//   build-fuzz/fuzz/msccl_xml_fuzzer -max_total_time=300 -timeout=5 fuzz/corpus_msccl
//
// Every input must import into a structurally valid Algorithm whose schedule names only its own
// operations, or fail with a Status whose diagnostic points into the file; anything else (a crash,
// a sanitizer report, a hang, an escaping exception) is a bug. The semantic checker runs on what
// imports, as tuccl-compile does.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lang/msccl_xml.h"
#include "lang/semantic_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;
  tuccl::SourceText source("fuzz.xml", std::string(reinterpret_cast<const char*>(data), size));
  tuccl::MscclImportOptions options;
  options.maxChunkWork = 1 << 16;  // small, so every input ends quickly
  tuccl::Expected<tuccl::ImportedMscclAlgorithm> imported = tuccl::importMscclXml(source, options);
  if (!imported.ok()) {
    const tuccl::Diagnostic& diagnostic = imported.diagnostic();
    if (diagnostic.loc.line > source.lineCount() + 1 || diagnostic.message.empty()) std::abort();
    (void)tuccl::formatDiagnostic(diagnostic, &source);
    return 0;
  }
  const tuccl::Algorithm& algorithm = imported->algorithm;
  if (!tuccl::validateStructure(algorithm).ok()) std::abort();
  for (const auto& rank : imported->schedule.ranks) {
    for (const tuccl::MscclThreadBlock& tb : rank) {
      for (const tuccl::MscclScheduleStep& step : tb.steps) {
        for (int i = 0; i < step.nOps; ++i) {
          if (step.ops[i] < 0 || static_cast<size_t>(step.ops[i]) >= algorithm.ops.size()) std::abort();
        }
      }
    }
  }
  if (static_cast<int64_t>(algorithm.nRanks) * (algorithm.chunks(tuccl::BufferKind::Input) +
                                                algorithm.chunks(tuccl::BufferKind::Output) +
                                                algorithm.chunks(tuccl::BufferKind::Scratch)) < (1 << 20)) {
    (void)tuccl::checkAlgorithm(algorithm);
  }
  return 0;
}
