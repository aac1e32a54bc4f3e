// The algorithms libtuccl carries (plan_cache.h): ResCCLang programs of examples/algorithms,
// embedded at build time, named by family and collective.
//
// In:  a family ("ring", "chain", "binomial", "direct") and a collective; a communicator's shape.
// Out: the program (its file name and text) and the header parameters that shape it.
//
//   ring      AllReduce, AllGather, ReduceScatter (NCCL's ring)
//   chain     Broadcast, Reduce (NCCL's ring Broadcast / Reduce: a pipelined chain from the root)
//   binomial  Broadcast, Reduce (binomial trees: ceil(log2 n) rounds)
//   direct    AllGather, AllToAll (every pair at once; AllToAll through one scratch block per rank),
//             AllReduce (every pair at once, through a chunk per rank pair)
//   hm        AllReduce, AllGather (hierarchical mesh, ResCCL Appendix A: full mesh inside each node,
//             a ring across the nodes among the ranks of one local index; GPUPerNode shapes it)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "scheduler/plan_builder.h"
#include "support/vocabulary.h"

namespace tuccl::backend {

struct BuiltinAlgorithm {
  std::string_view family;    ///< "ring"
  Collective collective = Collective::AllReduce;
  std::string_view fileName;  ///< "ring_allreduce.resccl"
  std::string_view text;      ///< the program
  /// The scratch buffer follows the rank count: nScratch = nRanks ^ scratchRankPower chunks (0: the
  /// program's own; 1: a block per rank, direct AllToAll; 2: a chunk per rank pair, direct
  /// AllReduce).
  int32_t scratchRankPower = 0;
};

/// Every built-in algorithm, in family order.
std::span<const BuiltinAlgorithm> builtinAlgorithms();

/// The built-in `family` (case-insensitive) of `collective`; nullptr when there is none.
const BuiltinAlgorithm* findBuiltinAlgorithm(std::string_view family, Collective collective);

/// Whether `name` is a built-in family for some collective ("ring", "chain", "binomial", "direct").
bool isBuiltinFamily(std::string_view name);

/// The family used when nothing else decides, on one node: ring AllReduce / AllGather /
/// ReduceScatter, chain Broadcast / Reduce, direct AllToAll (plan_selection.h refines it by size
/// and node count).
std::string_view defaultAlgorithmFamily(Collective collective);

/// "chain, binomial": the families that have `collective`, for messages.
std::string builtinFamiliesOf(Collective collective);

/// The communicator a program is shaped for.
struct AlgorithmShape {
  int32_t nRanks = 2;
  int32_t nNodes = 1;
  int32_t root = -1;  ///< Broadcast and Reduce
  int32_t nChannels = 1;
};

/// The header parameters that give a program the shape: nRanks, GPUPerNode (nRanks / nNodes when
/// the nodes are even, else 1), Root for Broadcast and Reduce, nChannels; nScratch = nRanks for a
/// program that keeps a scratch block per rank.
RescclParameters algorithmParameters(Collective collective, const AlgorithmShape& shape,
                                     int32_t scratchRankPower);

}  // namespace tuccl::backend
