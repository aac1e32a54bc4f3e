// The ResCCLang printer: an algorithm in the IR written back as a ResCCLang program
// (docs/resccl-language.md) that compileResccl loads into an equivalent algorithm: the same
// collective, shape, buffers and operations (in the same order; source locations become those of
// the printed lines).
//
// In:  an Algorithm (lang/algorithm.h).
// Out: the program text, or Unsupported naming what ResCCLang cannot express (buffer sizes other
//      than NCCL's conventions, a name with control characters, ...).
#pragma once

#include <string>

#include "lang/algorithm.h"
#include "support/status.h"

namespace tuccl {

/// The program: a header with every parameter the algorithm sets (nRanks, OpType, AlgoName, Root,
/// nChunks, nScratch, GPUPerNode, NICPerNode, nChannels, nWarps, InPlace=0 for an out-of-place
/// algorithm) and one transfer() per operation,
/// with the keyword arguments (dstChunk, count, srcBuf, dstBuf) only where they differ from the
/// defaults.
Expected<std::string> printResccl(const Algorithm& algorithm);

}  // namespace tuccl
