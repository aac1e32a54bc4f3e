// What the generator families share: the shape of the cluster as a generator sees it (nodes,
// local indices, NIC rails from the sketch) and a builder that emits operations in the IR.
//
// In:  a Topology, its Sketch and the GeneratorOptions (synth/generators.h).
// Out: a GeneratorShape, and per family a function from (collective, shape) to an unchecked
//      Algorithm or Unsupported; generators.cc checks the sketch edges and proves the result.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lang/algorithm.h"
#include "support/status.h"
#include "synth/generators.h"
#include "topo/sketch.h"
#include "topo/topology.h"

namespace tuccl {

/// The cluster as the generators see it.
struct GeneratorShape {
  const Topology* topology = nullptr;
  const Sketch* sketch = nullptr;  ///< null when no sketch was given
  GeneratorOptions options;
  int32_t nRanks = 0;
  int32_t nNodes = 0;
  int32_t gpusPerNode = 0;  ///< 0 when nodes differ in GPU count
  int32_t nicsPerNode = 0;  ///< the most NICs of one node
  int32_t rails = 1;        ///< sketch NIC groups (stage 2), at least 1
  std::vector<std::vector<int32_t>> nodeRanks;  ///< ranks of each node, ascending
  std::vector<int32_t> nodeOf;                  ///< node of each rank
  std::vector<int32_t> localOf;                 ///< position of each rank within its node
  /// railRanks[node][rail]: ranks of the node bound (sketch stage 1) to its NIC of that rail,
  /// ascending; empty when the node has no NIC of the rail or no sketch was given.
  std::vector<std::vector<std::vector<int32_t>>> railRanks;
  /// The rails with a bound GPU on every node (all rails when none has), in rail order: ring c
  /// and tree t prefer usableRails[c mod size].
  std::vector<int32_t> usableRails;

  int32_t rankAt(int32_t node, int32_t local) const { return nodeRanks[node][local]; }
  /// The parts option, or `fallback` when it is 0.
  int32_t parts(int32_t fallback = 1) const { return options.parts > 0 ? options.parts : fallback; }
};

GeneratorShape makeGeneratorShape(const Topology& topology, const Sketch* sketch, const GeneratorOptions& options);

/// Emits operations into an algorithm under construction. Copies whose source and destination
/// are the same storage slot in an in-place call (NCCL's in-place layout) are dropped, so a family
/// writes its local "input to output" copies once for both layouts.
class AlgorithmBuilder {
 public:
  /// An empty algorithm of `collective` with chunk unit k and `scratch` scratch chunks per rank.
  AlgorithmBuilder(std::string name, Collective collective, const GeneratorShape& shape, int32_t k,
                   int32_t scratch = 0);

  void copy(int32_t step, int32_t srcRank, BufferKind srcBuffer, int32_t srcIndex, int32_t dstRank,
            BufferKind dstBuffer, int32_t dstIndex, int32_t count = 1);
  void reduce(int32_t step, int32_t srcRank, BufferKind srcBuffer, int32_t srcIndex, int32_t dstRank,
              BufferKind dstBuffer, int32_t dstIndex, int32_t count = 1);
  /// Every rank (or one) copies its input into its output where the conventions give them the
  /// same chunks: the whole buffer for AllReduce, Broadcast, Reduce and AllToAll's own block,
  /// block `rank` of AllGather's output, block `rank` of ReduceScatter's input.
  void copyOwnInputToOutput(int32_t step, int32_t rank);

  int32_t k() const { return algorithm_.chunksPerRank(); }
  const Algorithm& algorithm() const { return algorithm_; }
  Algorithm take() { return std::move(algorithm_); }

 private:
  void add(OpKind kind, int32_t step, int32_t srcRank, BufferKind srcBuffer, int32_t srcIndex, int32_t dstRank,
           BufferKind dstBuffer, int32_t dstIndex, int32_t count);

  Algorithm algorithm_;
};

/// Unsupported with "<generator> <collective>: <reason>".
Status unsupported(std::string_view generator, Collective collective, const std::string& reason);
/// Unsupported unless every node has the same number of GPUs.
Status requireEqualNodes(std::string_view generator, Collective collective, const GeneratorShape& shape);
/// Unsupported unless the rank count is a power of two.
Status requirePowerOfTwoRanks(std::string_view generator, Collective collective, const GeneratorShape& shape);

// The families. Each returns an algorithm not yet checked against the sketch nor proved.
Expected<Algorithm> generateRing(Collective collective, const GeneratorShape& shape);
Expected<Algorithm> generateHm(Collective collective, const GeneratorShape& shape);
Expected<Algorithm> generateHierarchical(Collective collective, const GeneratorShape& shape);
Expected<Algorithm> generateHmLeaders(Collective collective, const GeneratorShape& shape);
Expected<Algorithm> generateDirect(Collective collective, const GeneratorShape& shape);
Expected<Algorithm> generatePairwise(Collective collective, const GeneratorShape& shape);
Expected<Algorithm> generateRecursiveDoubling(Collective collective, const GeneratorShape& shape);
Expected<Algorithm> generateRecursiveHalving(Collective collective, const GeneratorShape& shape);
Expected<Algorithm> generateDoubleBinaryTree(Collective collective, const GeneratorShape& shape);

/// The rings of the ring generator, each a permutation of the ranks that visits every node's GPUs
/// contiguously; ring c enters and leaves nodes through NICs of rail c mod rails where the sketch
/// binds two GPUs to that NIC, and alternates with the next rails where it binds one.
std::vector<std::vector<int32_t>> buildRings(const GeneratorShape& shape, int32_t nRings);

}  // namespace tuccl
