// The ResCCLang front end (ResCCL paper, §4.2 and Appendix B, Figure 14 grammar).
//
// In:  the text of a ResCCLang program.
// Out: an Algorithm (lang/algorithm.h) whose operations carry the source location of the
//      transfer() call that produced them, or a Status naming the first problem.
//
// The language and its extensions are documented in docs/resccl-language.md.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lang/algorithm.h"
#include "support/source_text.h"
#include "support/status.h"

namespace tuccl {

/// Header parameters of a ResCCLang program to override, by name, in order: nRanks, GPUPerNode,
/// Root, nChannels, nChunks, nScratch ...
using RescclParameters = std::vector<std::pair<std::string, int64_t>>;

struct RescclOptions {
  /// Header parameters to override, e.g. {"nRanks", 16}, {"GPUPerNode", 4}: one program file
  /// serves every shape. Overriding a parameter the header does not name is an error.
  RescclParameters parameterOverrides;
  /// Documented limits that turn a runaway program into an error instead of a hang.
  int64_t maxOperations = 16'000'000;    ///< transfer() calls
  int64_t maxStatements = 500'000'000;   ///< statements executed
};

/// Parses and runs a ResCCLang program: the Algorithm, or an InvalidInput status whose diagnostic
/// names file:line:col of the first syntax or evaluation error. Never crashes or hangs on any input.
Expected<Algorithm> compileResccl(const SourceText& source, const RescclOptions& options = {});

}  // namespace tuccl
