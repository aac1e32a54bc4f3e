#include "backend/builtin_algorithms.h"

#include <stdexcept>
#include <vector>

#include "kernelgen/device_headers.h"  // EmbeddedFile
#include "support/text_values.h"

namespace tuccl {
// cmake/EmbedFiles.cmake from backend/CMakeLists.txt: the programs, by file name.
extern const EmbeddedFile kBuiltinAlgorithmFiles[];
extern const std::size_t kBuiltinAlgorithmFilesCount;
}  // namespace tuccl

namespace tuccl::backend {
namespace {

struct Registration {
  std::string_view family;
  Collective collective;
  std::string_view fileName;
  int32_t scratchRankPower = 0;
};

constexpr Registration kRegistry[] = {
    {"ring", Collective::AllReduce, "ring_allreduce.resccl"},
    {"ring", Collective::AllGather, "ring_allgather.resccl"},
    {"ring", Collective::ReduceScatter, "ring_reducescatter.resccl"},
    {"chain", Collective::Broadcast, "chain_broadcast.resccl"},
    {"chain", Collective::Reduce, "chain_reduce.resccl"},
    {"binomial", Collective::Broadcast, "binomial_broadcast.resccl"},
    {"binomial", Collective::Reduce, "binomial_reduce.resccl"},
    {"direct", Collective::AllGather, "direct_allgather.resccl"},
    {"direct", Collective::AllToAll, "direct_alltoall.resccl", 1},
    {"direct", Collective::AllReduce, "direct_allreduce.resccl", 2},
    {"hm", Collective::AllReduce, "hm_allreduce.resccl"},
    {"hm", Collective::AllGather, "hm_allgather.resccl"},
};

std::string_view embeddedText(std::string_view fileName) {
  for (size_t i = 0; i < kBuiltinAlgorithmFilesCount; ++i) {
    if (kBuiltinAlgorithmFiles[i].name == fileName) return kBuiltinAlgorithmFiles[i].text;
  }
  throw std::logic_error("built-in algorithm " + std::string(fileName) + " is not embedded (backend/CMakeLists.txt)");
}

std::vector<BuiltinAlgorithm> makeAlgorithms() {
  std::vector<BuiltinAlgorithm> algorithms;
  for (const Registration& r : kRegistry) {
    algorithms.push_back({r.family, r.collective, r.fileName, embeddedText(r.fileName), r.scratchRankPower});
  }
  return algorithms;
}

}  // namespace

std::span<const BuiltinAlgorithm> builtinAlgorithms() {
  static const std::vector<BuiltinAlgorithm> algorithms = makeAlgorithms();
  return algorithms;
}

const BuiltinAlgorithm* findBuiltinAlgorithm(std::string_view family, Collective collective) {
  for (const BuiltinAlgorithm& algorithm : builtinAlgorithms()) {
    if (algorithm.collective == collective && equalsIgnoreCase(algorithm.family, family)) return &algorithm;
  }
  return nullptr;
}

bool isBuiltinFamily(std::string_view name) {
  for (const Registration& r : kRegistry) {
    if (equalsIgnoreCase(r.family, name)) return true;
  }
  return false;
}

std::string_view defaultAlgorithmFamily(Collective collective) {
  switch (collective) {
    case Collective::Broadcast:
    case Collective::Reduce: return "chain";
    case Collective::AllToAll: return "direct";
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllReduce: return "ring";
  }
  throw std::logic_error("defaultAlgorithmFamily: unknown collective");
}

std::string builtinFamiliesOf(Collective collective) {
  std::string families;
  for (const Registration& r : kRegistry) {
    if (r.collective != collective) continue;
    if (!families.empty()) families += ", ";
    families += r.family;
  }
  return families;
}

RescclParameters algorithmParameters(Collective collective, const AlgorithmShape& shape, int32_t scratchRankPower) {
  RescclParameters parameters = {{"nRanks", shape.nRanks}};
  const bool evenNodes = shape.nNodes > 0 && shape.nRanks % shape.nNodes == 0;
  parameters.emplace_back("GPUPerNode", evenNodes ? shape.nRanks / shape.nNodes : 1);
  if (hasRoot(collective)) parameters.emplace_back("Root", shape.root);
  parameters.emplace_back("nChannels", shape.nChannels);
  if (scratchRankPower == 1) parameters.emplace_back("nScratch", shape.nRanks);
  if (scratchRankPower == 2) parameters.emplace_back("nScratch", shape.nRanks * shape.nRanks);
  return parameters;
}

}  // namespace tuccl::backend
