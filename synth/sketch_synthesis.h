// Sketch-guided synthesis (TACCL, NSDI'23 §4-5): a collective algorithm routed over a sketch's
// logical topology, ordered on every link, and proved by the checker.
//
// In:  a collective, a Topology, its Sketch (topo/sketch.h) and options.
// Out: an Algorithm in the IR, which method routed it (the MILP or the heuristic), the modelled
//      time of its routing and notes on what happened (time limit, symmetry, model size).
//
// Pipeline (synth/sketch_routing.h, synth/sketch_schedule.h):
//   1. logical graph   the sketch's intra-node links and inter-node pairs, thinned by the switch
//                      hyperedge policy, each edge costed alpha + chunkBytes/rate from its path
//                      (topo/paths.h; the rate is the path's bandwidth capped by what one TB
//                      reaches, LinkCharges) and charged to the path's resources, whose time
//                      grows with the contention of the connections sharing them;
//   2. symmetry        rotations by whole nodes and of local indices that map the graph (with its
//                      costs and NIC sharing) onto itself; only one source per orbit is routed;
//   3. routing         a MILP on COIN-OR CBC (TACCL's routing with relaxed bandwidth) or a greedy
//                      least-loaded shortest-path heuristic; either is replicated over the orbits;
//                      a broadcast that crossed the network may relay inside the node it reached
//                      (one NIC crossing feeds the node's other GPUs over their local links);
//                      with a judge, both routings are simulated and the faster kept;
//   4. ordering        list scheduling, each link sends its most urgent chunk first (longest
//                      remaining path), contiguous chunks of one link and step become one
//                      operation (TACCL's chunk contiguity);
//   5. lowering        AllGather, AllToAll and Broadcast directly; ReduceScatter and Reduce as the
//                      reversed AllGather and Broadcast (copies become reduces); AllReduce as
//                      ReduceScatter then AllGather.
//
// Switch hyperedges (TACCL's "uc-min"/"uc-max"): over an NVSwitch a GPU may send to every GPU of
// its switch (UcMax: many connections, latency) or only to its two neighbours in local-index order
// (UcMin: a bidirectional ring, few connections, bandwidth); over the network a GPU may send to
// every sketch peer (UcMax) or only to its sketch peers on the previous and next node (UcMin).
// Point-to-point links (NVLink meshes, PCIe) are never thinned.
//
// Deterministic: CBC runs single-threaded with a fixed seed; the only timing-dependent choice is
// what happens when the time limit hits (the heuristic, or CBC's incumbent), and a note says so.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lang/algorithm.h"
#include "support/status.h"
#include "support/vocabulary.h"
#include "topo/sketch.h"
#include "topo/topology.h"

namespace tuccl {

enum class SketchSynthesisMethod : uint8_t { Milp, Heuristic };
/// "milp", "heuristic".
std::string_view sketchSynthesisMethodName(SketchSynthesisMethod method);

/// How many peers a GPU talks to over a switch hyperedge (TACCL's switch_hyperedge_strategy).
enum class HyperedgePolicy : uint8_t { UcMin, UcMax };
/// "uc-min", "uc-max".
std::string_view hyperedgePolicyName(HyperedgePolicy policy);
std::optional<HyperedgePolicy> parseHyperedgePolicy(std::string_view name);

/// What the simulator charges a transfer beyond the alpha-beta of its path (sim/cost_model.h), so
/// that the routing models it: the rate one thread block reaches (every transfer of a connection
/// is one TB's), through a NIC at most networkTbGBps, and ResCCL Eq. 1's contention, a resource
/// whose connections' TB rates sum to z times its capacity keeping 1 / (1 + gamma (z - 1)) of it
/// (never below floor). Zeros: the path's bandwidth alone, no contention.
struct LinkCharges {
  double tbGBps = 0;
  double networkTbGBps = 0;
  double contentionGamma = 0;
  double contentionFloor = 0;
};

struct SketchSynthesisOptions {
  int32_t root = 0;
  int32_t chunksPerRank = 1;        ///< TACCL's input chunkup
  bool inPlace = false;
  bool heuristicOnly = false;       ///< skip the MILP
  double timeLimitSeconds = 60;     ///< whole synthesis; the MILP gets what remains after setup
  std::function<void(const std::string&)> progress;  ///< may be empty
  HyperedgePolicy hyperedgePolicy = HyperedgePolicy::UcMin;  ///< TACCL's default (tacclSketchJson)
  double chunkBytes = 1 << 20;      ///< chunk size the alpha-beta model assumes
  LinkCharges charges;              ///< per-TB rates and contention the routing models
  /// Inter-node connections the heuristic may open out of a node (0: any; sketch_routing.h).
  /// With a judge, the heuristic also runs under budgets of 1, 2 and 4 and every routing is judged.
  int32_t maxNetworkConnections = 0;
  /// The heuristic relays only between ranks of one hop level (sketch_routing.h); with a judge,
  /// both ways are tried.
  bool sameLevelRelays = false;
  /// The simulated time (µs) of a synthesised algorithm, or nullopt when it cannot be simulated.
  /// When set, the MILP's result, the heuristic's and the heuristic's under connection budgets are
  /// all made and the fastest simulated is kept (a note says their times): the modelled objective
  /// is checked against the engine.
  std::function<std::optional<double>(const Algorithm&)> judge;
};

struct SketchSynthesisResult {
  Algorithm algorithm;
  SketchSynthesisMethod method = SketchSynthesisMethod::Heuristic;
  double seconds = 0;
  /// The routing's modelled completion time (µs): the latest arrival along the routes or the
  /// busiest resource's serialised transfer time, whichever is larger (TACCL's relaxed model).
  double modelTimeUs = 0;
  std::vector<std::string> notes;
};

/// Synthesises `collective` over `sketch` on `topology`. InvalidArgument for a root out of range,
/// chunksPerRank < 1, a non-positive time limit or chunk size, in-place AllToAll, or a sketch that
/// does not belong to the topology or does not connect every rank pair the collective needs.
Expected<SketchSynthesisResult> synthesizeFromSketch(Collective collective, const Topology& topology,
                                                     const Sketch& sketch,
                                                     const SketchSynthesisOptions& options = {});

}  // namespace tuccl
