// Algorithm generators: the classic collective algorithms, parameterised by the topology and its
// communication sketch, each emitted in the IR and proved by the semantic checker.
//
// In:  a generator name, a collective, a Topology and its Sketch (topo/sketch.h), options (root,
//      chunking, in place or not).
// Out: an Algorithm (lang/algorithm.h) the checker has proved, following NCCL's buffer
//      conventions (conventionalBufferChunks), with name = the generator, ranksPerNode (0 when
//      nodes differ in GPU count) and nicsPerNode set; or why the generator cannot make it.
//
// Every inter-node operation of a generated algorithm is an edge of the sketch
// (Sketch::interNodePairs); intra-node pairs are always allowed. A generator whose pattern needs
// a pair the sketch forbids returns Unsupported naming the pair. A default-constructed Sketch
// (no nicOfRank) means "no sketch": every pair is allowed.
//
// The generators (chunk unit k of the collective in brackets, P = GeneratorOptions::parts):
//   ring                NCCL-style multi-ring, by default one ring per NIC rail (sketch stage-2
//                       group) with a GPU bound on every node, ring c carrying part c and
//                       entering and leaving every node through NICs of rail c mod rails (where
//                       such a NIC serves one GPU, through it and the next rail's, alternating
//                       node by node), inside a node over GPU-fabric hops where a path has them
//                       (else in index order); or the given rings (GeneratorOptions::rings):
//                       AllGather, ReduceScatter [P], AllReduce (RS then AG) [P·n],
//                       Broadcast, Reduce (pipelined chain from / to the root) [P].
//   hm                  hierarchical mesh (ResCCL Appendix A): intra-node full mesh, inter-node
//                       rings of equal local index: AllReduce [P·n], AllGather, ReduceScatter [P].
//   hm-leaders          hm whose inter-node rings run on `leaders` GPUs per NIC (the bound GPUs
//                       closest to it); the others reduce into and receive from their leader:
//                       AllReduce [P·n]. For nodes with fewer NICs than GPUs.
//   direct              all pairs in one round (reductions into one slot serialised over steps):
//                       AllGather, ReduceScatter, AllToAll, Broadcast, Reduce [P], AllReduce [P·n].
//   recursive-doubling  AllGather, AllReduce [P]; power-of-two rank counts.
//   recursive-halving   ReduceScatter [P], AllReduce (Rabenseifner: halving RS, doubling AG)
//                       [P·n]; power-of-two rank counts.
//   double-binary-tree  NCCL's two complementary binary trees over nodes, a chain inside each node,
//                       each tree carrying half the data, part q of tree t through the NIC of
//                       rail t + 2q: AllReduce (reduce up, broadcast down), Broadcast, Reduce [2·P].
//   pairwise            AllToAll in n-1 steps, step s: rank r sends to (r+s) mod n [P].
//   hierarchical        two levels over equal-sized nodes, the inter-node phase between GPUs of
//                       equal local index: ReduceScatter [P] (intra-node RS, inter-node direct RS),
//                       Broadcast and Reduce [G·P] (scatter / reduce-scatter inside the root's or
//                       every node, inter-node per piece, gather / all-gather inside the node),
//                       AllToAll [P] (intra-node aggregation by destination GPU, inter-node exchange).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lang/algorithm.h"
#include "support/status.h"
#include "support/vocabulary.h"
#include "topo/sketch.h"
#include "topo/topology.h"

namespace tuccl {

struct GeneratorOptions {
  int32_t root = 0;   ///< Broadcast and Reduce
  /// Chunking: the ring's number of rings, the others' chunks per block (P above); 0: the
  /// generator's default (ring: one ring per rail; the others: 1).
  int32_t parts = 0;
  bool inPlace = false;
  /// hm-leaders: GPUs per NIC that carry the node's inter-node traffic; 0: kDefaultLeadersPerNic.
  int32_t leaders = 0;
  /// ring: the rings to run, each a permutation of the ranks, ring c carrying part c (NCCL's
  /// rings from its graph search, sim/nccl_model.h); empty: the generator's own. With rings,
  /// `parts` must be 0 or their number.
  std::vector<std::vector<int32_t>> rings;
};

/// hm-leaders' default: two GPUs per NIC (on NDv2's one NIC for eight GPUs, two leaders beat one
/// and four in the simulator; `tuccl-tune` tries 1, 2 and 4).
inline constexpr int32_t kDefaultLeadersPerNic = 2;

/// The generator names, in a fixed order: ring, hm, hm-leaders, direct, recursive-doubling, recursive-halving,
/// double-binary-tree, pairwise, hierarchical.
const std::vector<std::string>& generatorNames();

/// Whether `generator` makes `collective` at all (independent of topology).
bool generatorSupports(std::string_view generator, Collective collective);

/// One algorithm: NotFound for an unknown generator name (listing the names), InvalidArgument for
/// options or a sketch that do not fit the topology, Unsupported with the reason when the
/// generator cannot make this collective on this shape/sketch, Internal if the checker refutes it.
Expected<Algorithm> generateAlgorithm(std::string_view generator, Collective collective, const Topology& topology,
                                      const Sketch& sketch, const GeneratorOptions& options = {});

struct GeneratedAlgorithm {
  std::string generator;
  Algorithm algorithm;
};

/// Every generator that can make `collective` here, in generatorNames() order; the others'
/// reasons go to `notes` ("hm: ..."), one line each.
std::vector<GeneratedAlgorithm> generateAll(Collective collective, const Topology& topology, const Sketch& sketch,
                                            const GeneratorOptions& options = {},
                                            std::vector<std::string>* notes = nullptr);

}  // namespace tuccl
