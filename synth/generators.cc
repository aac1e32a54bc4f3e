#include "synth/generators.h"

#include <algorithm>
#include <array>
#include <utility>

#include "synth/generate_common.h"
#include "synth/proved.h"

namespace tuccl {

namespace {

using Family = Expected<Algorithm> (*)(Collective, const GeneratorShape&);

struct GeneratorEntry {
  std::string_view name;
  Family generate;
  std::array<bool, kCollectives> makes;  // indexed by Collective
};

constexpr bool B = true;   // makes it
constexpr bool o = false;  // does not

// Columns in Collective order: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce, AllToAll.
const std::array<GeneratorEntry, 9>& registry() {
  static const std::array<GeneratorEntry, 9> entries{{
      {"ring", &generateRing, {B, B, B, B, B, o}},
      {"hm", &generateHm, {o, o, B, B, B, o}},
      {"hm-leaders", &generateHmLeaders, {o, o, o, o, B, o}},
      {"direct", &generateDirect, {B, B, B, B, B, B}},
      {"recursive-doubling", &generateRecursiveDoubling, {o, o, B, o, B, o}},
      {"recursive-halving", &generateRecursiveHalving, {o, o, o, B, B, o}},
      {"double-binary-tree", &generateDoubleBinaryTree, {B, B, o, o, B, o}},
      {"pairwise", &generatePairwise, {o, o, o, o, o, B}},
      {"hierarchical", &generateHierarchical, {B, B, o, B, o, B}},
  }};
  return entries;
}

const GeneratorEntry* findGenerator(std::string_view name) {
  for (const GeneratorEntry& entry : registry()) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

std::string joinedNames() {
  std::string text;
  for (const std::string& name : generatorNames()) {
    if (!text.empty()) text += ", ";
    text += name;
  }
  return text;
}

std::string collectivesMadeBy(const GeneratorEntry& entry) {
  std::string text;
  for (int c = 0; c < kCollectives; ++c) {
    if (!entry.makes[c]) continue;
    if (!text.empty()) text += ", ";
    text += collectiveName(static_cast<Collective>(c));
  }
  return text;
}

std::string rankName(const Topology& topology, int32_t rank) {
  return "rank " + std::to_string(rank) + " (" + deviceName(topology, gpuRef(rank)) + ")";
}

// Every inter-node operation must be a sketch edge; the first that is not is named.
Status checkSketchEdges(const Algorithm& algorithm, const GeneratorShape& shape, std::string_view generator) {
  if (shape.sketch == nullptr) return {};
  const std::vector<std::pair<int32_t, int32_t>>& pairs = shape.sketch->interNodePairs;
  for (const Operation& op : algorithm.ops) {
    if (shape.nodeOf[op.srcRank] == shape.nodeOf[op.dstRank]) continue;
    if (std::binary_search(pairs.begin(), pairs.end(), std::make_pair(op.srcRank, op.dstRank))) continue;
    return unsupported(generator, algorithm.collective,
                       "needs the inter-node pair " + rankName(*shape.topology, op.srcRank) + " -> " +
                           rankName(*shape.topology, op.dstRank) + ", which the " +
                           std::string(sketchVariantName(shape.sketch->variant)) + " sketch does not allow");
  }
  return {};
}

Status checkInputs(Collective collective, const Topology& topology, const Sketch& sketch,
                   const GeneratorOptions& options) {
  if (topology.empty()) return makeError(ErrorCode::InvalidArgument, "the topology has no GPUs");
  const int32_t n = topology.nRanks();
  if (hasRoot(collective) && (options.root < 0 || options.root >= n)) {
    return makeError(ErrorCode::InvalidArgument, std::string(collectiveName(collective)) + " root " +
                                                     std::to_string(options.root) + " out of range [0, " +
                                                     std::to_string(n) + ")");
  }
  if (options.leaders < 0) {
    return makeError(ErrorCode::InvalidArgument, "leaders " + std::to_string(options.leaders) + " is negative");
  }
  if (options.parts < 0) {
    return makeError(ErrorCode::InvalidArgument, "parts " + std::to_string(options.parts) + " is negative");
  }
  if (!sketch.nicOfRank.empty() && static_cast<int32_t>(sketch.nicOfRank.size()) != n) {
    return makeError(ErrorCode::InvalidArgument, "the sketch binds " + std::to_string(sketch.nicOfRank.size()) +
                                                     " ranks but the topology has " + std::to_string(n));
  }
  return {};
}

}  // namespace

const std::vector<std::string>& generatorNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> result;
    for (const GeneratorEntry& entry : registry()) result.emplace_back(entry.name);
    return result;
  }();
  return names;
}

bool generatorSupports(std::string_view generator, Collective collective) {
  const GeneratorEntry* entry = findGenerator(generator);
  return entry != nullptr && entry->makes[static_cast<int>(collective)];
}

Expected<Algorithm> generateAlgorithm(std::string_view generator, Collective collective, const Topology& topology,
                                      const Sketch& sketch, const GeneratorOptions& options) {
  const GeneratorEntry* entry = findGenerator(generator);
  if (entry == nullptr) {
    return makeError(ErrorCode::NotFound,
                     "unknown generator '" + std::string(generator) + "' (generators: " + joinedNames() + ")");
  }
  if (!entry->makes[static_cast<int>(collective)]) {
    return unsupported(generator, collective, "not made by this generator (it makes " + collectivesMadeBy(*entry) + ")");
  }
  if (Status bad = checkInputs(collective, topology, sketch, options); !bad.ok()) return bad;
  const GeneratorShape shape = makeGeneratorShape(topology, sketch.nicOfRank.empty() ? nullptr : &sketch, options);
  Expected<Algorithm> algorithm = entry->generate(collective, shape);
  if (!algorithm.ok()) return algorithm.status();
  if (Status forbidden = checkSketchEdges(*algorithm, shape, generator); !forbidden.ok()) return forbidden;
  return proveGenerated(std::move(*algorithm), generator);
}

std::vector<GeneratedAlgorithm> generateAll(Collective collective, const Topology& topology, const Sketch& sketch,
                                            const GeneratorOptions& options, std::vector<std::string>* notes) {
  std::vector<GeneratedAlgorithm> result;
  for (const std::string& name : generatorNames()) {
    if (!generatorSupports(name, collective)) continue;
    Expected<Algorithm> algorithm = generateAlgorithm(name, collective, topology, sketch, options);
    if (algorithm.ok()) {
      result.push_back({name, std::move(*algorithm)});
    } else if (notes != nullptr) {
      const std::string why = algorithm.status().message();
      notes->push_back(why.starts_with(name + " ") ? why : name + ": " + why);
    }
  }
  return result;
}

}  // namespace tuccl
