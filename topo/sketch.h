// Communication sketches: which rank pairs an algorithm may use (TuCCL §III-B, TACCL sketches).
//
// In:  a Topology and a variant.   Out: a Sketch — the logical topology handed to synthesis — and
//      its TACCL sketch JSON.
//
// TuCCL's three-stage pruning:
//   stage 1  bind each GPU to the NIC sharing its PCIe switch or root complex (binding.h);
//   stage 2  group NICs across nodes by matched bandwidth, never two NICs of one node in a group:
//            nodes are visited in order; each NIC (fastest first) joins the group, still without a
//            NIC of its node, whose mean bandwidth is closest to its own (lowest group on ties), or
//            opens a new group — so identical nodes pair NIC k with NIC k everywhere and the
//            bandwidth variance inside each group is as small as the greedy choice allows;
//   stage 3  inside each group, every GPU bound to one NIC may send to every GPU bound to another
//            NIC of the group: NIC links become GPU-to-GPU all-to-all edges.
// Variants: FullMesh (no pruning: every inter-node pair), Pruned (the three stages), Relay (per
// NIC one sender GPU, the last bound, talks to one receiver GPU, the first bound, of each grouped
// NIC; the other GPUs forward through them — fewer inter-node connections per node).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "topo/topology.h"

namespace tuccl {

enum class SketchVariant : uint8_t { FullMesh, Pruned, Relay };
/// "full-mesh", "pruned", "relay".
std::string_view sketchVariantName(SketchVariant variant);
std::optional<SketchVariant> parseSketchVariant(std::string_view name);

struct Sketch {
  SketchVariant variant = SketchVariant::Pruned;
  int32_t nNodes = 0;
  std::vector<int32_t> nicOfRank;            ///< stage 1; -1 for a GPU on a node without NICs
  std::vector<std::vector<int32_t>> groups;  ///< stage 2: NIC indices, at most one per node
  /// Ordered rank pairs of one node joined without an intermediate GPU (NVLink, NVSwitch, PCIe).
  std::vector<std::pair<int32_t, int32_t>> intraNodeLinks;
  /// Ordered rank pairs of different nodes allowed to communicate (sorted).
  std::vector<std::pair<int32_t, int32_t>> interNodePairs;
  /// Relay: for each sender rank, the ranks of its node whose inter-node data it sends; other
  /// variants: each rank sends its own.
  std::vector<std::vector<int32_t>> forwardedBy;

  /// Inter-node peers a rank may send to.
  std::vector<int32_t> interNodePeersOf(int32_t rank) const;
};

/// Stage 2 on its own: groups of NIC indices (nic_groups.cc).
std::vector<std::vector<int32_t>> groupNics(const Topology& topology);
/// The rail of every NIC: the index of its stage-2 group, so NICs that share a rail across nodes
/// are the ones the sketch lets talk. On one node every NIC is a group of its own, numbered
/// fastest first (the lower NIC index first among equals); -1 for a NIC of a node that is not
/// in the topology's node list.
std::vector<int32_t> railOfNics(const Topology& topology);

Sketch buildSketch(const Topology& topology, SketchVariant variant);

struct TacclSketchOptions {
  int32_t inputChunkup = 1;                       ///< TACCL hyperparameter: chunks per input buffer
  std::string_view hyperedgeStrategy = "uc-min";  ///< "uc-min" (bandwidth) or "uc-max" (latency)
};

/// The sketch in TACCL's JSON format (formats.md): nnodes, intranode_sketch, internode_sketch
/// (relay strategy with explicit internode_conn and gpus_to_sender_rev_map, in local GPU indices),
/// symmetry_offsets (rotations that preserve links, NIC sharing and connections), hyperparameters.
/// Throws std::invalid_argument when nodes differ in GPU count (TACCL assumes identical nodes).
nlohmann::json tacclSketchJson(const Topology& topology, const Sketch& sketch,
                               const TacclSketchOptions& options = {});

}  // namespace tuccl
