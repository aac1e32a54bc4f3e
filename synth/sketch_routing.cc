#include "synth/sketch_routing.h"

#include <CbcModel.hpp>
#include <CglGomory.hpp>
#include <CglMixedIntegerRounding2.hpp>
#include <CglProbing.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

namespace tuccl::sketch_synth {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Added to the score of a parent over the connection budget, so every rank within it goes first.
constexpr double kOverBudgetPenaltyUs = 1e12;
// Beyond this many binaries CBC rarely improves on the heuristic within a minute on one core.
constexpr size_t kMaxMilpBinaries = 40000;
constexpr int kCbcSeed = 20231123;
// Branch-and-bound nodes CBC may explore: an effort limit that, unlike the time limit, stops it at
// the same point on every run (the big-M arrival times keep the bound weak, so proving optimality
// of a broadcast tree with intra-node forwarding can take far longer than finding it).
constexpr int kCbcNodeLimit = 2000;

struct RankPlace {
  std::vector<int32_t> node;
  std::vector<int32_t> local;
  std::vector<std::vector<int32_t>> ranksOfNodes;
};

RankPlace placeRanks(const Topology& topology) {
  RankPlace place;
  place.node.assign(topology.nRanks(), 0);
  place.local.assign(topology.nRanks(), 0);
  for (int32_t n = 0; n < topology.nNodes(); ++n) {
    place.ranksOfNodes.push_back(ranksOfNode(topology, n));
    const std::vector<int32_t>& ranks = place.ranksOfNodes.back();
    for (size_t i = 0; i < ranks.size(); ++i) {
      place.node[ranks[i]] = n;
      place.local[ranks[i]] = static_cast<int32_t>(i);
    }
  }
  return place;
}

bool neighbours(int32_t a, int32_t b, int32_t size) {
  return size <= 3 || (a + 1) % size == b || (b + 1) % size == a;
}

// Whether the sketch's pair (a, b) survives the hyperedge policy.
bool keptByPolicy(const RankPlace& place, PathKind kind, int32_t a, int32_t b, int32_t nNodes,
                  HyperedgePolicy policy) {
  if (policy == HyperedgePolicy::UcMax) return true;
  if (place.node[a] != place.node[b]) return neighbours(place.node[a], place.node[b], nNodes);
  if (kind != PathKind::NVSwitch) return true;  // point-to-point links are not a hyperedge
  int32_t size = static_cast<int32_t>(place.ranksOfNodes[place.node[a]].size());
  return neighbours(place.local[a], place.local[b], size);
}

Status checkSketchFits(const Topology& topology, const Sketch& sketch) {
  int32_t n = topology.nRanks();
  auto bad = [](const std::string& what) {
    return makeError(ErrorCode::InvalidArgument, "the sketch does not belong to the topology: " + what);
  };
  if (static_cast<int32_t>(sketch.nicOfRank.size()) != n) return bad("nicOfRank has the wrong size");
  auto inRange = [n](int32_t r) { return r >= 0 && r < n; };
  for (auto [a, b] : sketch.intraNodeLinks) {
    if (!inRange(a) || !inRange(b) || topology.gpus[a].node != topology.gpus[b].node) {
      return bad("intra-node link " + std::to_string(a) + "->" + std::to_string(b));
    }
  }
  for (auto [a, b] : sketch.interNodePairs) {
    if (!inRange(a) || !inRange(b) || topology.gpus[a].node == topology.gpus[b].node) {
      return bad("inter-node pair " + std::to_string(a) + "->" + std::to_string(b));
    }
  }
  return Status();
}

}  // namespace

int32_t LogicalGraph::edgeBetween(int32_t from, int32_t to) const {
  const std::vector<int32_t>& out = outEdges[from];
  auto it = std::lower_bound(out.begin(), out.end(), to,
                             [this](int32_t e, int32_t rank) { return edges[e].to < rank; });
  return it != out.end() && edges[*it].to == to ? *it : -1;
}

Expected<LogicalGraph> buildLogicalGraph(const Topology& topology, const Sketch& sketch,
                                         HyperedgePolicy policy, double chunkBytes, bool transposed,
                                         const LinkCharges& charges) {
  if (Status fits = checkSketchFits(topology, sketch); !fits.ok()) return fits;
  RankPlace place = placeRanks(topology);
  Router router(topology);
  std::vector<std::pair<int32_t, int32_t>> pairs = sketch.intraNodeLinks;
  pairs.insert(pairs.end(), sketch.interNodePairs.begin(), sketch.interNodePairs.end());
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());

  LogicalGraph graph;
  graph.nRanks = topology.nRanks();
  graph.nResources = static_cast<int32_t>(router.resources().size());
  graph.outEdges.assign(graph.nRanks, {});
  graph.nodeOf = place.node;
  graph.charges = charges;
  for (const Resource& resource : router.resources()) graph.capacityGBps.push_back(resource.bandwidthGBps);
  for (auto [a, b] : pairs) {
    Path path;
    try {
      path = router.pathBetween(a, b);
    } catch (const std::runtime_error& error) {
      return makeError(ErrorCode::InvalidArgument, std::string("sketch edge not routable: ") + error.what());
    }
    if (!keptByPolicy(place, path.kind, a, b, topology.nNodes(), policy)) continue;
    LogicalEdge edge{.from = transposed ? b : a, .to = transposed ? a : b};
    // One connection is one TB's: its rate is the path's, capped by what a TB pushes (through a
    // NIC, by what a TB pushes through one).
    double rate = path.bandwidthGBps;
    if (charges.tbGBps > 0) rate = std::min(rate, charges.tbGBps);
    if (path.kind == PathKind::Network && charges.networkTbGBps > 0) rate = std::min(rate, charges.networkTbGBps);
    edge.tbGBps = rate;
    edge.local = place.node[a] == place.node[b];
    edge.costUs = path.alphaUs + chunkBytes / (rate * 1e3);
    for (ResourceId id : path.resources) {
      edge.load.emplace_back(id, chunkBytes / (router.resources()[id].bandwidthGBps * 1e3));
    }
    graph.edges.push_back(std::move(edge));
  }
  std::sort(graph.edges.begin(), graph.edges.end(), [](const LogicalEdge& x, const LogicalEdge& y) {
    return std::make_pair(x.from, x.to) < std::make_pair(y.from, y.to);
  });
  for (size_t e = 0; e < graph.edges.size(); ++e) graph.outEdges[graph.edges[e].from].push_back(static_cast<int32_t>(e));
  // Under per-TB rates a connection is a resource of its own: one TB sends its chunks one after
  // another at its rate, so chunks sharing an edge serialise there even when the path has room.
  if (charges.tbGBps > 0 || charges.networkTbGBps > 0) {
    for (LogicalEdge& edge : graph.edges) {
      edge.load.emplace_back(graph.nResources++, chunkBytes / (edge.tbGBps * 1e3));
      graph.capacityGBps.push_back(edge.tbGBps);
    }
  }
  return graph;
}

namespace {

bool isAutomorphism(const LogicalGraph& graph, const Sketch& sketch, const RankPlace& place,
                    const std::vector<int32_t>& perm) {
  for (const LogicalEdge& edge : graph.edges) {
    int32_t image = graph.edgeBetween(perm[edge.from], perm[edge.to]);
    if (image < 0) return false;
    double other = graph.edges[image].costUs;
    if (std::abs(other - edge.costUs) > 1e-9 * std::max(1.0, edge.costUs)) return false;
  }
  for (const std::vector<int32_t>& ranks : place.ranksOfNodes) {
    for (int32_t a : ranks) {
      for (int32_t b : ranks) {
        bool share = sketch.nicOfRank[a] == sketch.nicOfRank[b];
        if (share != (sketch.nicOfRank[perm[a]] == sketch.nicOfRank[perm[b]])) return false;
      }
    }
  }
  return true;
}

std::vector<int32_t> rotation(const RankPlace& place, int32_t byNodes, int32_t byLocal) {
  int32_t nNodes = static_cast<int32_t>(place.ranksOfNodes.size());
  int32_t perNode = static_cast<int32_t>(place.ranksOfNodes[0].size());
  std::vector<int32_t> perm(place.node.size());
  for (size_t r = 0; r < perm.size(); ++r) {
    int32_t node = (place.node[r] + byNodes) % nNodes;
    perm[r] = place.ranksOfNodes[node][(place.local[r] + byLocal) % perNode];
  }
  return perm;
}

}  // namespace

Symmetry trivialSymmetry(int32_t nRanks) {
  Symmetry symmetry;
  symmetry.perms.emplace_back(nRanks);
  for (int32_t r = 0; r < nRanks; ++r) symmetry.perms[0][r] = r;
  symmetry.description = "none";
  return symmetry;
}

Symmetry findSymmetry(const Topology& topology, const Sketch& sketch, const LogicalGraph& graph) {
  RankPlace place = placeRanks(topology);
  int32_t nNodes = topology.nNodes();
  if (nNodes == 0) return trivialSymmetry(graph.nRanks);
  int32_t perNode = static_cast<int32_t>(place.ranksOfNodes[0].size());
  for (const std::vector<int32_t>& ranks : place.ranksOfNodes) {
    if (static_cast<int32_t>(ranks.size()) != perNode) return trivialSymmetry(graph.nRanks);
  }
  bool nodeTurns = nNodes > 1 && isAutomorphism(graph, sketch, place, rotation(place, 1, 0));
  int32_t offset = perNode;
  for (int32_t d = 1; d < perNode; ++d) {
    if (perNode % d == 0 && isAutomorphism(graph, sketch, place, rotation(place, 0, d))) {
      offset = d;
      break;
    }
  }
  Symmetry symmetry;
  for (int32_t a = 0; a < (nodeTurns ? nNodes : 1); ++a) {
    for (int32_t b = 0; b < perNode; b += offset) symmetry.perms.push_back(rotation(place, a, b));
  }
  symmetry.description = "rotations: " + std::string(nodeTurns ? "by node" : "no node rotation") +
                         ", local offset " + (offset < perNode ? std::to_string(offset) : "none") + " (" +
                         std::to_string(symmetry.perms.size()) + " images)";
  return symmetry;
}

std::vector<int32_t> hopLevels(const LogicalGraph& graph, int32_t source) {
  std::vector<int32_t> level(graph.nRanks, -1);
  std::deque<int32_t> queue{source};
  level[source] = 0;
  while (!queue.empty()) {
    int32_t u = queue.front();
    queue.pop_front();
    for (int32_t e : graph.outEdges[u]) {
      int32_t v = graph.edges[e].to;
      if (level[v] < 0) {
        level[v] = level[u] + 1;
        queue.push_back(v);
      }
    }
  }
  return level;
}

std::vector<int32_t> treeOrder(const Route& parent, int32_t source) {
  std::vector<std::vector<int32_t>> children(parent.size());
  for (size_t v = 0; v < parent.size(); ++v) {
    if (parent[v] >= 0) children[parent[v]].push_back(static_cast<int32_t>(v));
  }
  std::vector<int32_t> order{source};
  for (size_t i = 0; i < order.size(); ++i) {
    for (int32_t child : children[order[i]]) order.push_back(child);
  }
  return order;
}

namespace {

// Whether edge e of the graph may carry a broadcast from `source` as a relay off the hop-shortest
// DAG: into a node other than the source's, either inside that node (the network reached it once
// and its GPUs share the chunk over local links) or from a GPU of the source's node (a leader
// sending the chunk across on the source's behalf, so fewer connections share the NIC).
// With `sameLevel`, only between two ranks of one hop level.
bool relayEdge(const LogicalGraph& graph, const LogicalEdge& edge, const std::vector<int32_t>& level,
               int32_t source, bool sameLevel) {
  const int32_t home = graph.nodeOf[source];
  if (level[edge.from] < 0 || level[edge.to] < 0 || graph.nodeOf[edge.to] == home) return false;
  if (sameLevel && level[edge.from] != level[edge.to]) return false;
  return (edge.local && level[edge.from] == level[edge.to]) || graph.nodeOf[edge.from] == home;
}
bool dagEdge(const LogicalEdge& edge, const std::vector<int32_t>& level) {
  return level[edge.from] >= 0 && level[edge.from] + 1 == level[edge.to];
}

// ResCCL Eq. 1 as the engine applies it (sim/cost_model.h contentionFactor): a resource whose
// connections' TB rates sum to z times its capacity keeps 1 / (1 + gamma (z - 1)) of it.
double contentionFactor(const LinkCharges& charges, double z) {
  if (z <= 1 || charges.contentionGamma <= 0) return 1;
  return std::max(charges.contentionFloor, 1 / (1 + charges.contentionGamma * (z - 1)));
}

// Every representative edge's resource load summed over all its symmetric images, cached.
class SymmetricLoads {
 public:
  explicit SymmetricLoads(const RoutingProblem& problem)
      : problem_(problem), cache_(problem.graph->edges.size()) {}

  const std::vector<std::pair<ResourceId, double>>& of(int32_t edge) {
    std::optional<std::vector<std::pair<ResourceId, double>>>& slot = cache_[edge];
    if (slot) return *slot;
    const LogicalGraph& graph = *problem_.graph;
    std::map<ResourceId, double> total;
    for (const std::vector<int32_t>& perm : problem_.symmetry->perms) {
      int32_t image = graph.edgeBetween(perm[graph.edges[edge].from], perm[graph.edges[edge].to]);
      for (auto [id, us] : graph.edges[image].load) total[id] += us;
    }
    slot.emplace(total.begin(), total.end());
    return *slot;
  }

 private:
  const RoutingProblem& problem_;
  std::vector<std::optional<std::vector<std::pair<ResourceId, double>>>> cache_;
};

// What the routes so far put on every resource: the time it serialises their chunks (loads over
// its capacity) and the TB rates of the connections (distinct edges, every symmetric image) that
// share it, whose sum over the capacity is Eq. 1's z. A resource's time is its load over the
// capacity contention leaves.
class ResourceClock {
 public:
  explicit ResourceClock(const RoutingProblem& problem)
      : problem_(problem), graph_(*problem.graph), loads_(problem), load_(graph_.nResources, 0.0),
        rates_(graph_.nResources, 0.0), used_(graph_.edges.size(), false) {}

  /// One chunk over representative edge `edge` and over each of its images; the edges whose
  /// connection this opened (the edge or its images, each once) are appended to `opened`.
  void charge(int32_t edge, std::vector<int32_t>* opened = nullptr) {
    for (auto [id, us] : loads_.of(edge)) load_[id] += us;
    if (used_[edge]) return;
    for (const std::vector<int32_t>& perm : problem_.symmetry->perms) {
      int32_t image = graph_.edgeBetween(perm[graph_.edges[edge].from], perm[graph_.edges[edge].to]);
      if (used_[image]) continue;
      used_[image] = true;
      if (opened != nullptr) opened->push_back(image);
      for (auto [id, us] : graph_.edges[image].load) rates_[id] += graph_.edges[image].tbGBps;
    }
  }
  /// Whether `edge` (or an image of it) already carries chunks: its connection is open.
  bool open(int32_t edge) const { return used_[edge]; }
  /// The busiest resource of `edge`'s path and the sum of their times, counting the connection
  /// `edge` would open: the sum tells two edges apart whose busiest resource is shared (the NIC
  /// every path of a node crosses).
  struct Pressure {
    double busiest = 0;
    double total = 0;
  };
  Pressure pressure(int32_t edge) const {
    const LogicalEdge& e = graph_.edges[edge];
    Pressure p;
    for (auto [id, us] : e.load) {
      const double time = timeOf(id, used_[edge] ? 0 : e.tbGBps);
      p.busiest = std::max(p.busiest, time);
      p.total += time;
    }
    return p;
  }
  double busiest() const {
    double most = 0;
    for (int32_t id = 0; id < graph_.nResources; ++id) most = std::max(most, timeOf(id, 0));
    return most;
  }

 private:
  double timeOf(int32_t id, double extraRate) const {
    if (load_[id] == 0) return 0;
    double capacity = graph_.capacityGBps[id];
    double z = capacity > 0 ? (rates_[id] + extraRate) / capacity : 0;
    return load_[id] / contentionFactor(graph_.charges, z);
  }

  const RoutingProblem& problem_;
  const LogicalGraph& graph_;
  SymmetricLoads loads_;
  std::vector<double> load_;
  std::vector<double> rates_;
  std::vector<bool> used_;
};

std::vector<std::vector<int32_t>> inEdgesOf(const LogicalGraph& graph) {
  std::vector<std::vector<int32_t>> in(graph.nRanks);
  for (size_t e = 0; e < graph.edges.size(); ++e) in[graph.edges[e].to].push_back(static_cast<int32_t>(e));
  return in;
}

// Ranks by (hop level, rank), the source first; unreachable ranks left out.
std::vector<int32_t> levelOrder(const std::vector<int32_t>& level) {
  std::vector<int32_t> order;
  for (int32_t r = 0; r < static_cast<int32_t>(level.size()); ++r) {
    if (level[r] >= 0) order.push_back(r);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return level[a] < level[b]; });
  return order;
}

// Edges of the hop-shortest DAG from the commodity's source (a unicast: only those on a path to
// its destination), and the in-level relays `seed` (a route of the commodity, or null) uses, in
// edge order. (Offering a broadcast every in-level relay makes CBC's big-M model too weak to
// finish within a minute on 16-rank topologies; the heuristic's relays keep its routing a
// solution.)
std::vector<int32_t> candidateEdges(const LogicalGraph& graph, const std::vector<std::vector<int32_t>>& in,
                                    const Commodity& commodity, const std::vector<int32_t>& level,
                                    const Route* seed = nullptr) {
  std::vector<bool> useful(graph.nRanks, commodity.dest < 0);
  if (commodity.dest >= 0) {
    std::deque<int32_t> queue{commodity.dest};
    useful[commodity.dest] = true;
    while (!queue.empty()) {
      int32_t v = queue.front();
      queue.pop_front();
      for (int32_t e : in[v]) {
        int32_t u = graph.edges[e].from;
        if (level[u] >= 0 && level[u] + 1 == level[v] && !useful[u]) {
          useful[u] = true;
          queue.push_back(u);
        }
      }
    }
  }
  std::vector<int32_t> edges;
  for (size_t e = 0; e < graph.edges.size(); ++e) {
    const LogicalEdge& edge = graph.edges[e];
    bool seeded = commodity.dest < 0 && seed != nullptr && (*seed)[edge.to] == edge.from &&
                  relayEdge(graph, edge, level, commodity.source, false);
    if ((dagEdge(edge, level) && useful[edge.from] && useful[edge.to]) || seeded) {
      edges.push_back(static_cast<int32_t>(e));
    }
  }
  return edges;
}

class HeuristicRouter {
 public:
  explicit HeuristicRouter(const RoutingProblem& problem)
      : graph_(*problem.graph), in_(inEdgesOf(graph_)), clock_(problem),
        budget_(problem.maxNetworkConnections), sameLevel_(problem.sameLevelRelays),
        opened_(graph_.nodeOf.empty() ? 0 : *std::max_element(graph_.nodeOf.begin(), graph_.nodeOf.end()) + 1, 0) {}

  Route route(const Commodity& commodity) {
    std::vector<int32_t> level = hopLevels(graph_, commodity.source);
    return commodity.dest < 0 ? growTree(commodity, level) : cheapestPath(commodity, level);
  }

 private:
  double busiest(int32_t edge) const { return clock_.pressure(edge).busiest; }
  void charge(int32_t edge) {
    openedNow_.clear();
    clock_.charge(edge, &openedNow_);
    for (int32_t image : openedNow_) {
      if (!graph_.edges[image].local) ++opened_[graph_.nodeOf[graph_.edges[image].from]];
    }
  }
  // Whether the connection budget leaves `edge` out: a new inter-node connection out of a node
  // that opened its share.
  bool overBudget(int32_t edge) const {
    const LogicalEdge& e = graph_.edges[edge];
    return budget_ > 0 && !e.local && !clock_.open(edge) && opened_[graph_.nodeOf[e.from]] >= budget_;
  }

  // An edge's score: arrival plus busiest resource, then (ties) its resources' summed time.
  using Score = std::pair<double, double>;
  static bool better(const Score& a, const Score& b) {
    double tolerance = 1e-9 * std::max(1.0, std::abs(b.first));
    if (a.first < b.first - tolerance) return true;
    return a.first <= b.first + tolerance && a.second < b.second - 1e-9 * std::max(1.0, std::abs(b.second));
  }

  // The best edge into v from the tree within the connection budget, else beyond it (first in
  // edge order on ties); {-1, inf} when none.
  std::pair<int32_t, Score> bestParent(int32_t v, int32_t source, const std::vector<int32_t>& level,
                                       const std::vector<double>& arrival, const std::vector<bool>& onTree) const {
    int32_t best = -1;
    Score bestScore{kInf, kInf};
    bool bestOver = true;
    for (int32_t e : in_[v]) {
      const LogicalEdge& edge = graph_.edges[e];
      if (!onTree[edge.from]) continue;
      if (!dagEdge(edge, level) && !relayEdge(graph_, edge, level, source, sameLevel_)) continue;
      bool over = overBudget(e);
      if (over && !bestOver) continue;
      const ResourceClock::Pressure p = clock_.pressure(e);
      Score score{arrival[edge.from] + edge.costUs + p.busiest, p.total};
      if (best < 0 || (bestOver && !over) || better(score, bestScore)) {
        bestScore = score;
        best = e;
        bestOver = over;
      }
    }
    // Over the budget only for want of anything else: rank it after every choice within it.
    if (best >= 0 && bestOver && budget_ > 0) bestScore.first += kOverBudgetPenaltyUs;
    return {best, bestScore};
  }

  // The source's node level by level in rank order, then the other ranks best first (with any
  // rank of the source's node that found no parent yet); with same-level relays, level by level.
  Route growTree(const Commodity& commodity, const std::vector<int32_t>& level) {
    Route parent(graph_.nRanks, -1);
    std::vector<double> arrival(graph_.nRanks, 0.0);
    std::vector<bool> onTree(graph_.nRanks, false);
    onTree[commodity.source] = true;
    auto attach = [&](int32_t v, int32_t e) {
      parent[v] = graph_.edges[e].from;
      arrival[v] = arrival[parent[v]] + graph_.edges[e].costUs;
      onTree[v] = true;
      charge(e);
    };
    const int32_t home = graph_.nodeOf[commodity.source];
    const std::vector<int32_t> order = levelOrder(level);
    std::vector<int32_t> pool;
    for (size_t begin = 0; begin < order.size();) {
      size_t end = begin + 1;
      while (end < order.size() && (!sameLevel_ || level[order[end]] == level[order[begin]])) ++end;
      for (size_t i = begin; i < end; ++i) {
        int32_t v = order[i];
        if (v == commodity.source) continue;
        int32_t e = graph_.nodeOf[v] == home ? bestParent(v, commodity.source, level, arrival, onTree).first : -1;
        if (e >= 0) {
          attach(v, e);
        } else {
          pool.push_back(v);
        }
      }
      attachBestFirst(commodity.source, level, pool, arrival, onTree, attach);
      begin = end;
    }
    return parent;
  }

  template <typename Attach>
  void attachBestFirst(int32_t source, const std::vector<int32_t>& level, std::vector<int32_t>& pool,
                       const std::vector<double>& arrival, const std::vector<bool>& onTree, Attach& attach) {
    while (!pool.empty()) {
      size_t pick = 0;
      int32_t pickEdge = -1;
      Score pickScore{kInf, kInf};
      for (size_t i = 0; i < pool.size(); ++i) {
        auto [e, score] = bestParent(pool[i], source, level, arrival, onTree);
        if (e >= 0 && (pickEdge < 0 || better(score, pickScore))) {
          pick = i;
          pickEdge = e;
          pickScore = score;
        }
      }
      // Every rank has a hop-shortest parent one level up, so some rank always attaches.
      if (pickEdge < 0) throw std::logic_error("sketch routing: a broadcast tree cannot grow");
      attach(pool[pick], pickEdge);
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(pick));
    }
  }

  Route cheapestPath(const Commodity& commodity, const std::vector<int32_t>& level) {
    std::vector<double> distance(graph_.nRanks, kInf);
    std::vector<int32_t> via(graph_.nRanks, -1);
    distance[commodity.source] = 0;
    for (int32_t u : levelOrder(level)) {
      if (distance[u] == kInf || level[u] >= level[commodity.dest]) continue;
      for (int32_t e : graph_.outEdges[u]) {
        int32_t v = graph_.edges[e].to;
        if (level[v] != level[u] + 1) continue;
        double d = distance[u] + graph_.edges[e].costUs + busiest(e);
        if (d < distance[v]) {
          distance[v] = d;
          via[v] = e;
        }
      }
    }
    Route parent(graph_.nRanks, -1);
    for (int32_t v = commodity.dest; v != commodity.source; v = graph_.edges[via[v]].from) {
      parent[v] = graph_.edges[via[v]].from;
      charge(via[v]);
    }
    return parent;
  }

  const LogicalGraph& graph_;
  std::vector<std::vector<int32_t>> in_;
  ResourceClock clock_;
  int32_t budget_;
  bool sameLevel_;
  std::vector<int32_t> opened_;     // per node: inter-node connections opened out of it
  std::vector<int32_t> openedNow_;  // scratch of charge()
};

}  // namespace

double modelTime(const RoutingProblem& problem, const std::vector<Route>& routes) {
  const LogicalGraph& graph = *problem.graph;
  ResourceClock clock(problem);
  double latest = 0;
  for (size_t c = 0; c < routes.size(); ++c) {
    const Commodity& commodity = problem.representatives[c];
    const Route& parent = routes[c];
    std::vector<double> arrival(graph.nRanks, 0.0);
    for (int32_t v : treeOrder(parent, commodity.source)) {
      if (parent[v] < 0) continue;
      int32_t e = graph.edgeBetween(parent[v], v);
      arrival[v] = arrival[parent[v]] + graph.edges[e].costUs;
      clock.charge(e);
      if (commodity.dest < 0 || commodity.dest == v) latest = std::max(latest, arrival[v]);
    }
  }
  return std::max(latest, clock.busiest());
}

RoutingOutcome routeHeuristic(const RoutingProblem& problem) {
  RoutingOutcome outcome;
  HeuristicRouter router(problem);
  for (const Commodity& commodity : problem.representatives) outcome.routes.push_back(router.route(commodity));
  outcome.method = SketchSynthesisMethod::Heuristic;
  outcome.modelTimeUs = modelTime(problem, outcome.routes);
  return outcome;
}

namespace {

// The MILP, TACCL §5.1 with relaxed bandwidth (one representative per orbit of commodities):
//   columns  x[c,e] in {0,1}   commodity c travels candidate edge e (candidateEdges)
//            t[c,v] >= 0       when a broadcast commodity c reaches rank v
//            T                 the modelled completion time, minimised
//   rows     broadcast c:  sum_{e into v} x[c,e] = 1 for every rank v but the source;
//                          t[c,v] >= t[c,u] + cost(e) - M_e (1 - x[c,e]) for e = (u,v);  T >= t[c,v]
//            unicast c:    flow conservation from source to destination; T >= sum_e cost(e) x[c,e]
//            resource r:   sum_{c,e} load_r(e) x[c,e] <= T, where load_r(e) sums the time one chunk
//                          holds r over every symmetric image of e (the relaxed bandwidth constraint:
//                          each link serialises what it carries, ignoring when; contention is
//                          not linear, so the MILP's routing and the heuristic's are compared by
//                          modelTime, which applies it)
//   M_e = UB + cost(e), and t, T <= UB, where UB is the heuristic's modelled time: it cuts off
//   nothing better than the heuristic, whose routing is CBC's starting incumbent.
class MilpModel {
 public:
  MilpModel(const RoutingProblem& problem, double upperBound, const std::vector<Route>& seed)
      : problem_(problem), graph_(*problem.graph), in_(inEdgesOf(graph_)), loads_(problem),
        upperBound_(upperBound) {
    tColumn_ = addColumn(0, upperBound_, 1.0, false);
    for (size_t c = 0; c < problem.representatives.size(); ++c) addCommodity(problem.representatives[c], &seed[c]);
    addResourceRows();
  }

  size_t binaries() const { return binaries_; }
  size_t columns() const { return lower_.size(); }
  size_t rows() const { return rowLower_.size(); }

  std::vector<double> startingSolution(const std::vector<Route>& routes) const {
    std::vector<double> x(columns(), 0.0);
    x[tColumn_] = upperBound_;
    for (size_t c = 0; c < routes.size(); ++c) {
      const Commodity& commodity = problem_.representatives[c];
      std::vector<double> arrival(graph_.nRanks, 0.0);
      for (int32_t v : treeOrder(routes[c], commodity.source)) {
        if (routes[c][v] < 0) continue;
        int32_t e = graph_.edgeBetween(routes[c][v], v);
        arrival[v] = arrival[routes[c][v]] + graph_.edges[e].costUs;
        x[edgeColumn_[c].at(e)] = 1.0;
        if (arrivalColumn_[c][v] >= 0) x[arrivalColumn_[c][v]] = std::min(arrival[v], upperBound_);
      }
    }
    return x;
  }

  std::vector<Route> routesOf(const double* solution) const {
    std::vector<Route> routes;
    for (size_t c = 0; c < problem_.representatives.size(); ++c) {
      Route parent(graph_.nRanks, -1);
      for (auto [e, column] : edgeColumn_[c]) {
        if (solution[column] > 0.5) parent[graph_.edges[e].to] = graph_.edges[e].from;
      }
      routes.push_back(std::move(parent));
    }
    return routes;
  }

  OsiClpSolverInterface solver() const {
    CoinPackedMatrix matrix(false, 0, 0);
    matrix.setDimensions(0, static_cast<int>(columns()));
    for (const auto& row : rowEntries_) {
      std::vector<int> index;
      std::vector<double> value;
      for (auto [column, coefficient] : row) {
        index.push_back(column);
        value.push_back(coefficient);
      }
      matrix.appendRow(static_cast<int>(index.size()), index.data(), value.data());
    }
    OsiClpSolverInterface solver;
    solver.loadProblem(matrix, lower_.data(), upper_.data(), objective_.data(), rowLower_.data(),
                       rowUpper_.data());
    for (size_t column = 0; column < columns(); ++column) {
      if (integer_[column]) solver.setInteger(static_cast<int>(column));
    }
    solver.messageHandler()->setLogLevel(0);
    return solver;
  }

 private:
  int addColumn(double lower, double upper, double objective, bool integer) {
    lower_.push_back(lower);
    upper_.push_back(upper);
    objective_.push_back(objective);
    integer_.push_back(integer);
    binaries_ += integer ? 1 : 0;
    return static_cast<int>(lower_.size() - 1);
  }
  void addRow(std::vector<std::pair<int, double>> entries, double lower, double upper) {
    rowEntries_.push_back(std::move(entries));
    rowLower_.push_back(lower);
    rowUpper_.push_back(upper);
  }

  void addCommodity(const Commodity& commodity, const Route* seed) {
    std::vector<int32_t> level = hopLevels(graph_, commodity.source);
    std::map<int32_t, int> columns;
    for (int32_t e : candidateEdges(graph_, in_, commodity, level, seed)) columns[e] = addColumn(0, 1, 0, true);
    std::vector<int> arrival(graph_.nRanks, -1);
    if (commodity.dest < 0) {
      addBroadcastRows(commodity, columns, arrival);
    } else {
      addUnicastRows(commodity, columns);
    }
    edgeColumn_.push_back(std::move(columns));
    arrivalColumn_.push_back(std::move(arrival));
  }

  void addBroadcastRows(const Commodity& commodity, const std::map<int32_t, int>& columns,
                        std::vector<int>& arrival) {
    for (int32_t v = 0; v < graph_.nRanks; ++v) {
      if (v != commodity.source) arrival[v] = addColumn(0, upperBound_, 0, false);
    }
    std::vector<std::vector<std::pair<int, double>>> into(graph_.nRanks);
    for (auto [e, column] : columns) {
      const LogicalEdge& edge = graph_.edges[e];
      into[edge.to].emplace_back(column, 1.0);
      double bigM = upperBound_ + edge.costUs;
      std::vector<std::pair<int, double>> timing{{arrival[edge.to], 1.0}, {column, -bigM}};
      if (edge.from != commodity.source) timing.emplace_back(arrival[edge.from], -1.0);
      addRow(std::move(timing), edge.costUs - bigM, kInf);
    }
    for (int32_t v = 0; v < graph_.nRanks; ++v) {
      if (v == commodity.source) continue;
      addRow(std::move(into[v]), 1, 1);
      addRow({{tColumn_, 1.0}, {arrival[v], -1.0}}, 0, kInf);
    }
  }

  void addUnicastRows(const Commodity& commodity, const std::map<int32_t, int>& columns) {
    std::map<int32_t, std::vector<std::pair<int, double>>> balance;
    std::vector<std::pair<int, double>> length{{tColumn_, 1.0}};
    for (auto [e, column] : columns) {
      balance[graph_.edges[e].to].emplace_back(column, 1.0);
      balance[graph_.edges[e].from].emplace_back(column, -1.0);
      length.emplace_back(column, -graph_.edges[e].costUs);
    }
    for (auto& [rank, entries] : balance) {
      double net = rank == commodity.dest ? 1 : rank == commodity.source ? -1 : 0;
      addRow(std::move(entries), net, net);
    }
    addRow(std::move(length), 0, kInf);
  }

  void addResourceRows() {
    std::vector<std::map<int, double>> perResource(graph_.nResources);
    for (const std::map<int32_t, int>& columns : edgeColumn_) {
      for (auto [e, column] : columns) {
        for (auto [id, us] : loads_.of(e)) perResource[id][column] += us;
      }
    }
    std::set<std::vector<std::pair<int, double>>> seen;  // symmetric resources give equal rows
    for (const std::map<int, double>& entries : perResource) {
      if (entries.empty()) continue;
      std::vector<std::pair<int, double>> row(entries.begin(), entries.end());
      if (!seen.insert(row).second) continue;
      row.emplace_back(tColumn_, -1.0);
      addRow(std::move(row), -kInf, 0);
    }
  }

  const RoutingProblem& problem_;
  const LogicalGraph& graph_;
  std::vector<std::vector<int32_t>> in_;
  SymmetricLoads loads_;
  double upperBound_;
  int tColumn_ = 0;
  size_t binaries_ = 0;
  std::vector<double> lower_, upper_, objective_;
  std::vector<bool> integer_;
  std::vector<std::vector<std::pair<int, double>>> rowEntries_;
  std::vector<double> rowLower_, rowUpper_;
  std::vector<std::map<int32_t, int>> edgeColumn_;  // per commodity: edge -> x column
  std::vector<std::vector<int>> arrivalColumn_;      // per commodity: rank -> t column, -1 none
};

std::string fixed(double value, int digits = 2) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

}  // namespace

RoutingOutcome routeMilp(const RoutingProblem& problem, std::chrono::steady_clock::time_point deadline,
                         const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  RoutingOutcome heuristic = routeHeuristic(problem);
  say("heuristic routing: modelled " + fixed(heuristic.modelTimeUs) + " us");
  double upperBound = heuristic.modelTimeUs * (1 + 1e-9) + 1e-9;
  MilpModel model(problem, upperBound, heuristic.routes);
  say("MILP: " + std::to_string(model.binaries()) + " binaries, " + std::to_string(model.columns()) +
      " columns, " + std::to_string(model.rows()) + " rows");
  if (model.binaries() > kMaxMilpBinaries) {
    heuristic.notes.push_back("MILP skipped: " + std::to_string(model.binaries()) + " binaries exceed " +
                              std::to_string(kMaxMilpBinaries) + "; heuristic routing used");
    return heuristic;
  }
  double seconds = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
  if (seconds <= 0.01) {
    heuristic.notes.push_back("time limit reached before the MILP could run; heuristic routing used");
    return heuristic;
  }
  OsiClpSolverInterface solver = model.solver();
  CbcModel cbc(solver);
  cbc.setLogLevel(0);
  cbc.messageHandler()->setLogLevel(0);
  cbc.solver()->messageHandler()->setLogLevel(0);
  cbc.setRandomSeed(kCbcSeed);
  cbc.setNumberThreads(0);
  cbc.setUseElapsedTime(true);
  cbc.setMaximumSeconds(seconds);
  cbc.setMaximumNodes(kCbcNodeLimit);
  CglProbing probing;
  CglGomory gomory;
  CglMixedIntegerRounding2 rounding;
  cbc.addCutGenerator(&probing, -1, "probing");
  cbc.addCutGenerator(&gomory, -1, "gomory");
  cbc.addCutGenerator(&rounding, -1, "mir");
  std::vector<double> start = model.startingSolution(heuristic.routes);
  cbc.setBestSolution(start.data(), static_cast<int>(start.size()), upperBound, false);
  cbc.branchAndBound();

  bool optimal = cbc.isProvenOptimal();
  bool timedOut = cbc.isSecondsLimitReached();
  bool nodeLimited = !optimal && !timedOut && cbc.isNodeLimitReached();
  const double* best = cbc.bestSolution();
  RoutingOutcome outcome;
  if (best != nullptr) {
    outcome.routes = model.routesOf(best);
    outcome.modelTimeUs = modelTime(problem, outcome.routes);
  }
  bool improved = best != nullptr && outcome.modelTimeUs < heuristic.modelTimeUs * (1 - 1e-9);
  if (!improved && !optimal) {
    heuristic.notes.push_back(std::string(timedOut      ? "CBC reached the time limit"
                                          : nodeLimited ? "CBC reached its node limit"
                                                        : "CBC stopped") +
                              " without improving on the heuristic; heuristic routing used");
    return heuristic;
  }
  if (!improved) outcome = heuristic;  // proven optimal: the heuristic's routing is as good
  outcome.method = SketchSynthesisMethod::Milp;
  say("CBC: " + std::string(optimal ? "optimal" : timedOut ? "time limit" : "node limit") + ", modelled " + fixed(outcome.modelTimeUs) +
      " us (heuristic " + fixed(heuristic.modelTimeUs) + " us)");
  if (nodeLimited) {
    outcome.notes.push_back("CBC reached its node limit (" + std::to_string(kCbcNodeLimit) +
                            "); its best routing is used, not proven optimal");
  } else if (!optimal) {
    outcome.notes.push_back("CBC reached the time limit; its best routing so far is used (not proven "
                            "optimal, so the result depends on timing)");
  }
  return outcome;
}

}  // namespace tuccl::sketch_synth
