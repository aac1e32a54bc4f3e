// Routing for sketch-guided synthesis: the logical graph of a sketch, its rotational symmetry, and
// the choice of links for every chunk, by a MILP on COIN-OR CBC or by a greedy heuristic
// (TACCL §5.1, "routing" with relaxed bandwidth constraints).
//
// In:  a Topology, its Sketch, the hyperedge policy, the chunks to route (commodities).
// Out: for every commodity a tree (unicast: a path) of logical edges, and its modelled time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "synth/sketch_synthesis.h"
#include "topo/paths.h"

namespace tuccl::sketch_synth {

/// One directed logical edge, costed by the alpha-beta model.
struct LogicalEdge {
  int32_t from = 0;
  int32_t to = 0;
  double costUs = 0;  ///< alpha + chunkBytes / the rate one TB reaches on the edge's path
  double tbGBps = 0;  ///< that rate: the path's bandwidth, capped by LinkCharges
  bool local = false; ///< inside one node (a relay candidate after a network hop)
  /// The path's resources and the time (µs) one chunk occupies each.
  std::vector<std::pair<ResourceId, double>> load;
};

struct LogicalGraph {
  int32_t nRanks = 0;
  std::vector<LogicalEdge> edges;             ///< sorted by (from, to)
  std::vector<std::vector<int32_t>> outEdges;  ///< rank -> edge indices, by destination
  int32_t nResources = 0;
  std::vector<double> capacityGBps;  ///< per resource
  std::vector<int32_t> nodeOf;       ///< per rank
  LinkCharges charges;
  int32_t edgeBetween(int32_t from, int32_t to) const;  ///< -1 when absent
};

/// The sketch's edges, thinned by the hyperedge policy (sketch_synthesis.h), costed per chunk.
/// Transposed: every edge points back along its sketch pair (cost and resources still those of the
/// pair's direction), so trees grown from a root describe how data flows into it (the reductions).
Expected<LogicalGraph> buildLogicalGraph(const Topology& topology, const Sketch& sketch,
                                         HyperedgePolicy policy, double chunkBytes, bool transposed = false,
                                         const LinkCharges& charges = {});

/// A group of rank permutations that map the graph onto itself; perms[0] is the identity.
struct Symmetry {
  std::vector<std::vector<int32_t>> perms;
  std::string description;
};

/// Rotations by whole nodes and by the smallest local offset that preserve edges, their costs and
/// NIC sharing (TACCL's symmetry_offsets); the identity alone when nodes differ or nothing holds.
Symmetry findSymmetry(const Topology& topology, const Sketch& sketch, const LogicalGraph& graph);
/// The identity alone.
Symmetry trivialSymmetry(int32_t nRanks);

/// A chunk to route: its source rank, its part, and its destination (-1: every rank).
struct Commodity {
  int32_t source = 0;
  int32_t part = 0;
  int32_t dest = -1;
  friend bool operator==(const Commodity&, const Commodity&) = default;
};

/// parent[r] is the rank r receives the commodity from, -1 for the source and ranks off the route.
using Route = std::vector<int32_t>;

struct RoutingProblem {
  const LogicalGraph* graph = nullptr;
  const Symmetry* symmetry = nullptr;
  std::vector<Commodity> representatives;  ///< one per orbit of commodities under the symmetry
  /// The heuristic opens at most this many inter-node connections out of a node (0: any); a
  /// rank it could not reach otherwise opens one anyway. Fewer connections share a NIC with less
  /// contention, each carrying more chunks.
  int32_t maxNetworkConnections = 0;
  /// The heuristic relays only between ranks of one hop level and grows a tree level by level;
  /// without, a leader of the source's node may send to a rank of any level, after the source's
  /// node is on the tree.
  bool sameLevelRelays = false;
};

struct RoutingOutcome {
  std::vector<Route> routes;  ///< per representative
  SketchSynthesisMethod method = SketchSynthesisMethod::Heuristic;
  double modelTimeUs = 0;
  std::vector<std::string> notes;
};

/// Candidate edges of a commodity: those of the hop-shortest DAG from its source, and for a
/// broadcast the local edges between two ranks of one level on a node other than the source's
/// (a chunk that crossed the network once relays to the node's other GPUs instead of crossing it
/// once per GPU). Elsewhere the sketch's pruning decides relaying, the routing which relay and
/// which path.
///
/// Greedy least-loaded routing: commodities in order; a broadcast tree grows level by level, each
/// rank taking the candidate parent already on the tree that minimises its arrival time plus the
/// busiest resource on the edge — the source's node in rank order, then the other nodes' ranks
/// best first (the rank and edge of the smallest score, so each node's entry GPU is the one its
/// links favour and the rest relay from it where that is faster); a unicast takes the cheapest
/// hop-shortest path with each edge weighted by its cost plus its busiest resource. A resource's
/// time is its load over its capacity after contention (LinkCharges); loads and contention count
/// every symmetric image.
RoutingOutcome routeHeuristic(const RoutingProblem& problem);

/// The MILP (sketch_routing.cc says exactly what it models), seeded with the heuristic's routing;
/// returns the heuristic's outcome with a note when the model is too big, the deadline leaves no
/// time, or CBC does not improve on it.
RoutingOutcome routeMilp(const RoutingProblem& problem, std::chrono::steady_clock::time_point deadline,
                         const std::function<void(const std::string&)>& progress);

/// The modelled time of routes: max(latest arrival, busiest resource), loads and contention over
/// all images.
double modelTime(const RoutingProblem& problem, const std::vector<Route>& routes);

/// Hop distance of every rank from `source` (BFS level), -1 where unreachable.
std::vector<int32_t> hopLevels(const LogicalGraph& graph, int32_t source);
/// The ranks of a route, every parent before its children (breadth first from the source).
std::vector<int32_t> treeOrder(const Route& parent, int32_t source);

}  // namespace tuccl::sketch_synth
