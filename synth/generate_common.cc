#include "synth/generate_common.h"

#include <algorithm>
#include <utility>

namespace tuccl {

namespace {

// railRanks for every node: the ranks bound to each of the node's NICs, by the NIC's rail.
std::vector<std::vector<std::vector<int32_t>>> ranksByRail(const Topology& topology, const Sketch& sketch,
                                                           int32_t rails) {
  std::vector<int32_t> railOfNic(topology.nics.size(), -1);
  for (size_t g = 0; g < sketch.groups.size(); ++g) {
    for (int32_t nic : sketch.groups[g]) {
      if (nic >= 0 && static_cast<size_t>(nic) < railOfNic.size()) railOfNic[nic] = static_cast<int32_t>(g);
    }
  }
  std::vector<std::vector<std::vector<int32_t>>> result(
      static_cast<size_t>(topology.nNodes()), std::vector<std::vector<int32_t>>(static_cast<size_t>(rails)));
  for (int32_t rank = 0; rank < topology.nRanks(); ++rank) {
    const int32_t nic = rank < static_cast<int32_t>(sketch.nicOfRank.size()) ? sketch.nicOfRank[rank] : -1;
    if (nic < 0 || static_cast<size_t>(nic) >= railOfNic.size() || railOfNic[nic] < 0) continue;
    result[topology.gpus[rank].node][railOfNic[nic]].push_back(rank);
  }
  return result;
}

}  // namespace

GeneratorShape makeGeneratorShape(const Topology& topology, const Sketch* sketch, const GeneratorOptions& options) {
  GeneratorShape shape;
  shape.topology = &topology;
  shape.sketch = sketch;
  shape.options = options;
  shape.nRanks = topology.nRanks();
  shape.nNodes = topology.nNodes();
  shape.nodeOf.resize(static_cast<size_t>(shape.nRanks));
  shape.localOf.resize(static_cast<size_t>(shape.nRanks));
  for (int32_t node = 0; node < shape.nNodes; ++node) {
    shape.nodeRanks.push_back(ranksOfNode(topology, node));
    const std::vector<int32_t>& ranks = shape.nodeRanks.back();
    for (size_t i = 0; i < ranks.size(); ++i) {
      shape.nodeOf[ranks[i]] = node;
      shape.localOf[ranks[i]] = static_cast<int32_t>(i);
    }
    shape.nicsPerNode = std::max(shape.nicsPerNode, static_cast<int32_t>(nicsOfNode(topology, node).size()));
  }
  shape.gpusPerNode = shape.nNodes > 0 ? static_cast<int32_t>(shape.nodeRanks[0].size()) : 0;
  for (const std::vector<int32_t>& ranks : shape.nodeRanks) {
    if (static_cast<int32_t>(ranks.size()) != shape.gpusPerNode) shape.gpusPerNode = 0;
  }
  shape.rails = sketch != nullptr ? std::max<int32_t>(1, static_cast<int32_t>(sketch->groups.size())) : 1;
  if (sketch != nullptr) {
    shape.railRanks = ranksByRail(topology, *sketch, shape.rails);
  } else {
    shape.railRanks.assign(static_cast<size_t>(shape.nNodes), std::vector<std::vector<int32_t>>(1));
  }
  for (int32_t rail = 0; rail < shape.rails; ++rail) {
    const bool everywhere = std::all_of(shape.railRanks.begin(), shape.railRanks.end(),
                                        [&](const auto& byRail) { return !byRail[rail].empty(); });
    if (everywhere) shape.usableRails.push_back(rail);
  }
  if (shape.usableRails.empty()) {
    for (int32_t rail = 0; rail < shape.rails; ++rail) shape.usableRails.push_back(rail);
  }
  return shape;
}

AlgorithmBuilder::AlgorithmBuilder(std::string name, Collective collective, const GeneratorShape& shape, int32_t k,
                                   int32_t scratch) {
  algorithm_.name = std::move(name);
  algorithm_.collective = collective;
  algorithm_.nRanks = shape.nRanks;
  algorithm_.ranksPerNode = shape.gpusPerNode;
  algorithm_.nicsPerNode = shape.nicsPerNode;
  algorithm_.root = hasRoot(collective) ? shape.options.root : -1;
  algorithm_.inPlace = shape.options.inPlace;
  algorithm_.bufferChunks = conventionalBufferChunks(collective, shape.nRanks, k, scratch);
}

void AlgorithmBuilder::copy(int32_t step, int32_t srcRank, BufferKind srcBuffer, int32_t srcIndex, int32_t dstRank,
                            BufferKind dstBuffer, int32_t dstIndex, int32_t count) {
  add(OpKind::Copy, step, srcRank, srcBuffer, srcIndex, dstRank, dstBuffer, dstIndex, count);
}

void AlgorithmBuilder::reduce(int32_t step, int32_t srcRank, BufferKind srcBuffer, int32_t srcIndex,
                              int32_t dstRank, BufferKind dstBuffer, int32_t dstIndex, int32_t count) {
  add(OpKind::Reduce, step, srcRank, srcBuffer, srcIndex, dstRank, dstBuffer, dstIndex, count);
}

void AlgorithmBuilder::copyOwnInputToOutput(int32_t step, int32_t rank) {
  const int32_t unit = k();
  switch (algorithm_.collective) {
    case Collective::AllGather:
      copy(step, rank, BufferKind::Input, 0, rank, BufferKind::Output, rank * unit, unit);
      return;
    case Collective::ReduceScatter:
      copy(step, rank, BufferKind::Input, rank * unit, rank, BufferKind::Output, 0, unit);
      return;
    case Collective::AllToAll:
      copy(step, rank, BufferKind::Input, rank * unit, rank, BufferKind::Output, rank * unit, unit);
      return;
    default:
      copy(step, rank, BufferKind::Input, 0, rank, BufferKind::Output, 0, unit);
      return;
  }
}

void AlgorithmBuilder::add(OpKind kind, int32_t step, int32_t srcRank, BufferKind srcBuffer, int32_t srcIndex,
                           int32_t dstRank, BufferKind dstBuffer, int32_t dstIndex, int32_t count) {
  if (kind == OpKind::Copy && srcRank == dstRank) {
    const StorageSlot from = inPlaceStorage(algorithm_, srcRank, srcBuffer, srcIndex);
    const StorageSlot to = inPlaceStorage(algorithm_, dstRank, dstBuffer, dstIndex);
    if (from.buffer == to.buffer && from.index == to.index) return;  // the same chunks in place
  }
  Operation op;
  op.kind = kind;
  op.step = step;
  op.srcRank = srcRank;
  op.srcBuffer = srcBuffer;
  op.srcIndex = srcIndex;
  op.dstRank = dstRank;
  op.dstBuffer = dstBuffer;
  op.dstIndex = dstIndex;
  op.count = count;
  algorithm_.ops.push_back(op);
}

Status unsupported(std::string_view generator, Collective collective, const std::string& reason) {
  return makeError(ErrorCode::Unsupported,
                   std::string(generator) + " " + std::string(collectiveName(collective)) + ": " + reason);
}

Status requireEqualNodes(std::string_view generator, Collective collective, const GeneratorShape& shape) {
  if (shape.gpusPerNode > 0) return {};
  return unsupported(generator, collective, "needs the same number of GPUs on every node");
}

Status requirePowerOfTwoRanks(std::string_view generator, Collective collective, const GeneratorShape& shape) {
  const int32_t n = shape.nRanks;
  if (n > 0 && (n & (n - 1)) == 0) return {};
  return unsupported(generator, collective, "needs a power-of-two number of ranks, not " + std::to_string(n));
}

}  // namespace tuccl
