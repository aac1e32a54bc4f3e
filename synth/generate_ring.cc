// The ring family: NCCL-style multi-ring algorithms, one ring per NIC rail (NCCL's channels).
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "synth/generate_common.h"
#include "topo/paths.h"

namespace tuccl {

namespace {

constexpr std::string_view kRing = "ring";

// Where ring c enters and leaves a node: the first GPU bound to the NIC of the entry rail and the
// last GPU bound to the NIC of the exit rail (the Relay sketch's receiver and sender of a NIC).
struct NodeRails {
  const GeneratorShape& shape;

  int32_t entry(int32_t node, int32_t rail) const {
    const std::vector<int32_t>& ranks = shape.railRanks[node][rail];
    return ranks.empty() ? -1 : ranks.front();
  }
  int32_t exit(int32_t node, int32_t rail) const {
    const std::vector<int32_t>& ranks = shape.railRanks[node][rail];
    return ranks.empty() ? -1 : ranks.back();
  }
  // Whether a ring can enter the node on rail `in` and leave it on rail `out`, visiting every GPU
  // of the node once in between.
  bool passable(int32_t node, int32_t in, int32_t out) const {
    const int32_t a = entry(node, in);
    const int32_t b = exit(node, out);
    if (a < 0 || b < 0) return false;
    return a != b || shape.nodeRanks[node].size() == 1;
  }
};

// The rail each node is entered on, for the ring preferring rail `rail`: a cycle a_0 .. a_{N-1}
// where node i is entered on a_i and left on a_{i+1} (the next node is entered on the same rail,
// so every inter-node hop stays on one rail). Rails cost their distance after `rail`, so a rail
// whose NIC serves two GPUs is used throughout and a rail whose NIC serves one alternates with the
// next; every ring then shifts the same pattern and rings use distinct NICs. Empty when no cycle
// exists (a node without a NIC on some rail).
std::vector<int32_t> entryRails(const GeneratorShape& shape, int32_t rail) {
  const NodeRails rails{shape};
  const int32_t nodes = shape.nNodes;
  const int32_t nRails = shape.rails;
  constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;
  // Rails are counted from `rail` (x = 0 is `rail` itself, costing 0), so ties break the same way
  // for every ring.
  auto actual = [&](int32_t x) { return (rail + x) % nRails; };
  std::vector<int32_t> best;
  int64_t bestCost = kInfinite;
  for (int32_t first = 0; first < nRails; ++first) {
    // total[i][x]: cheapest a_0 .. a_i with a_0 = first and a_i = x.
    std::vector<std::vector<int64_t>> total(nodes, std::vector<int64_t>(nRails, kInfinite));
    std::vector<std::vector<int32_t>> from(nodes, std::vector<int32_t>(nRails, -1));
    total[0][first] = first;
    for (int32_t i = 1; i < nodes; ++i) {
      for (int32_t x = 0; x < nRails; ++x) {
        if (total[i - 1][x] >= kInfinite) continue;
        for (int32_t y = 0; y < nRails; ++y) {
          if (!rails.passable(i - 1, actual(x), actual(y))) continue;
          if (total[i - 1][x] + y < total[i][y]) {
            total[i][y] = total[i - 1][x] + y;
            from[i][y] = x;
          }
        }
      }
    }
    for (int32_t x = 0; x < nRails; ++x) {
      if (total[nodes - 1][x] >= bestCost || !rails.passable(nodes - 1, actual(x), actual(first))) continue;
      bestCost = total[nodes - 1][x];
      best.assign(static_cast<size_t>(nodes), 0);
      int32_t at = x;
      for (int32_t i = nodes - 1; i >= 0; --i) {
        best[i] = actual(at);
        at = from[i][at];
      }
    }
  }
  return best;
}

// Which ordered pairs of a node's GPUs a ring hop joins over the GPU fabric alone (NVLink,
// NVSwitch, xGMI): the hops NCCL's ring search keeps, where a PCIe hop would slow the whole ring.
class FabricHops {
 public:
  explicit FabricHops(const Topology& topology) : router_(topology) {}

  bool direct(int32_t a, int32_t b) {
    const uint64_t key = (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
    auto [it, fresh] = known_.emplace(key, false);
    if (fresh) {
      const PathKind kind = router_.pathBetween(a, b).kind;
      it->second = kind == PathKind::NVLink || kind == PathKind::NVSwitch || kind == PathKind::Xgmi;
    }
    return it->second;
  }

 private:
  Router router_;
  std::unordered_map<uint64_t, bool> known_;
};

// Bound on the depth-first search of one node's order (NCCL bounds its own search likewise).
constexpr int64_t kOrderSearchSteps = 200'000;

// A Hamiltonian path of the node's GPUs from `in` to `out` over fabric hops (a cycle back to
// `in` when in == out), trying the GPUs in index order after the last one first, as NCCL's search
// does; empty when there is none within the search bound.
std::vector<int32_t> fabricPath(const std::vector<int32_t>& ranks, int32_t in, int32_t out, FabricHops& hops) {
  const size_t g = ranks.size();
  std::vector<int32_t> path{in};
  std::vector<bool> used(g, false);
  used[static_cast<size_t>(std::find(ranks.begin(), ranks.end(), in) - ranks.begin())] = true;
  int64_t steps = 0;
  auto extend = [&](auto&& self) -> bool {
    if (++steps > kOrderSearchSteps) return false;
    const int32_t last = path.back();
    if (path.size() == g) return in == out ? hops.direct(last, in) : last == out;
    const size_t at = static_cast<size_t>(std::find(ranks.begin(), ranks.end(), last) - ranks.begin());
    for (size_t k = 1; k < g; ++k) {
      const size_t next = (at + k) % g;
      const int32_t rank = ranks[next];
      // `out` (when it differs from `in`) closes the path: not before every other GPU.
      if (used[next] || (rank == out && out != in && path.size() + 1 < g) || !hops.direct(last, rank)) continue;
      used[next] = true;
      path.push_back(rank);
      if (self(self)) return true;
      path.pop_back();
      used[next] = false;
    }
    return false;
  };
  if (g <= 1) return path;
  return extend(extend) ? path : std::vector<int32_t>{};
}

// The node's GPUs from `in` to `out`: a path over fabric hops where one exists, else `in`, the
// others in ascending order cyclically after it, then `out`.
void appendNode(const std::vector<int32_t>& ranks, int32_t in, int32_t out, FabricHops& hops,
                std::vector<int32_t>& ring) {
  if (std::vector<int32_t> path = fabricPath(ranks, in, out, hops); !path.empty()) {
    ring.insert(ring.end(), path.begin(), path.end());
    return;
  }
  const auto start = std::find(ranks.begin(), ranks.end(), in) - ranks.begin();
  ring.push_back(in);
  for (size_t i = 1; i < ranks.size(); ++i) {
    const int32_t rank = ranks[(static_cast<size_t>(start) + i) % ranks.size()];
    if (rank != out) ring.push_back(rank);
  }
  if (out != in) ring.push_back(out);
}

std::vector<int32_t> buildRing(const GeneratorShape& shape, int32_t c, FabricHops& hops) {
  const int32_t rail = shape.usableRails[static_cast<size_t>(c) % shape.usableRails.size()];
  const NodeRails rails{shape};
  std::vector<int32_t> ring;
  ring.reserve(static_cast<size_t>(shape.nRanks));
  if (shape.nNodes == 1) {
    // No inter-node hop: start each ring on its rail's GPU (or rotate) so rings differ.
    const std::vector<int32_t>& ranks = shape.nodeRanks[0];
    int32_t start = rails.entry(0, rail);
    if (start < 0) start = ranks[static_cast<size_t>(c) % ranks.size()];
    appendNode(ranks, start, start, hops, ring);
    return ring;
  }
  const std::vector<int32_t> entry = entryRails(shape, rail);
  for (int32_t node = 0; node < shape.nNodes; ++node) {
    const std::vector<int32_t>& ranks = shape.nodeRanks[node];
    if (entry.empty()) {
      // No rail cycle: plain node order; the sketch check says whether its hops are allowed.
      appendNode(ranks, ranks.front(), ranks.back(), hops, ring);
      continue;
    }
    const int32_t in = rails.entry(node, entry[node]);
    const int32_t out = rails.exit(node, entry[(node + 1) % shape.nNodes]);
    appendNode(ranks, in, out, hops, ring);
  }
  return ring;
}

// Position of every rank in a ring.
std::vector<int32_t> positions(const std::vector<int32_t>& ring) {
  std::vector<int32_t> position(ring.size());
  for (size_t p = 0; p < ring.size(); ++p) position[ring[p]] = static_cast<int32_t>(p);
  return position;
}

// Ring c moves chunk c of every rank's input: step s, position p forwards the chunk of the rank
// s positions behind it.
Algorithm ringAllGather(const GeneratorShape& shape, const std::vector<std::vector<int32_t>>& rings) {
  const int32_t n = shape.nRanks;
  const int32_t k = static_cast<int32_t>(rings.size());
  AlgorithmBuilder builder(std::string(kRing), Collective::AllGather, shape, k);
  for (int32_t r = 0; r < n; ++r) builder.copyOwnInputToOutput(0, r);
  for (int32_t c = 0; c < k; ++c) {
    const std::vector<int32_t>& ring = rings[c];
    for (int32_t s = 0; s + 1 < n; ++s) {
      for (int32_t p = 0; p < n; ++p) {
        const int32_t owner = ring[(p - s + n) % n];
        const BufferKind from = s == 0 ? BufferKind::Input : BufferKind::Output;
        builder.copy(s, ring[p], from, s == 0 ? c : owner * k + c, ring[(p + 1) % n], BufferKind::Output,
                     owner * k + c);
      }
    }
  }
  return builder.take();
}

// Partial sums travel in scratch (the input is never written); the owner's own contribution
// waits in its output, where the last hop reduces into.
Algorithm ringReduceScatter(const GeneratorShape& shape, const std::vector<std::vector<int32_t>>& rings) {
  const int32_t n = shape.nRanks;
  const int32_t k = static_cast<int32_t>(rings.size());
  AlgorithmBuilder builder(std::string(kRing), Collective::ReduceScatter, shape, k, n * k);
  for (int32_t r = 0; r < n; ++r) {
    builder.copy(0, r, BufferKind::Input, 0, r, BufferKind::Scratch, 0, n * k);
    builder.copyOwnInputToOutput(0, r);
  }
  for (int32_t c = 0; c < k; ++c) {
    const std::vector<int32_t>& ring = rings[c];
    for (int32_t s = 0; s + 1 < n; ++s) {
      for (int32_t p = 0; p < n; ++p) {
        const int32_t owner = ring[(p - s - 1 + n) % n];
        const int32_t next = ring[(p + 1) % n];
        if (next == owner) {
          builder.reduce(s + 1, ring[p], BufferKind::Scratch, owner * k + c, next, BufferKind::Output, c);
        } else {
          builder.reduce(s + 1, ring[p], BufferKind::Scratch, owner * k + c, next, BufferKind::Scratch,
                         owner * k + c);
        }
      }
    }
  }
  return builder.take();
}

// Ring c reduces and gathers chunks c·n .. c·n + n - 1; block j ends reduced on position j.
Algorithm ringAllReduce(const GeneratorShape& shape, const std::vector<std::vector<int32_t>>& rings) {
  const int32_t n = shape.nRanks;
  const int32_t nRings = static_cast<int32_t>(rings.size());
  AlgorithmBuilder builder(std::string(kRing), Collective::AllReduce, shape, nRings * n);
  for (int32_t r = 0; r < n; ++r) builder.copyOwnInputToOutput(0, r);
  for (int32_t c = 0; c < nRings; ++c) {
    const std::vector<int32_t>& ring = rings[c];
    for (int32_t s = 0; s + 1 < n; ++s) {
      for (int32_t p = 0; p < n; ++p) {
        const int32_t reduced = c * n + (p - s - 1 + n) % n;
        builder.reduce(1 + s, ring[p], BufferKind::Output, reduced, ring[(p + 1) % n], BufferKind::Output, reduced);
        const int32_t gathered = c * n + (p - s + n) % n;
        builder.copy(n + s, ring[p], BufferKind::Output, gathered, ring[(p + 1) % n], BufferKind::Output, gathered);
      }
    }
  }
  return builder.take();
}

// A chain from the root along ring c carries chunk c.
Algorithm ringBroadcast(const GeneratorShape& shape, const std::vector<std::vector<int32_t>>& rings) {
  const int32_t n = shape.nRanks;
  const int32_t k = static_cast<int32_t>(rings.size());
  const int32_t root = shape.options.root;
  AlgorithmBuilder builder(std::string(kRing), Collective::Broadcast, shape, k);
  builder.copyOwnInputToOutput(0, root);
  for (int32_t c = 0; c < k; ++c) {
    const std::vector<int32_t>& ring = rings[c];
    const int32_t start = positions(ring)[root];
    for (int32_t d = 0; d + 1 < n; ++d) {
      const int32_t from = ring[(start + d) % n];
      builder.copy(d, from, d == 0 ? BufferKind::Input : BufferKind::Output, c, ring[(start + d + 1) % n],
                   BufferKind::Output, c);
    }
  }
  return builder.take();
}

// A chain along ring c from the root's successor to the root reduces chunk c; partial sums wait
// in scratch on the way.
Algorithm ringReduce(const GeneratorShape& shape, const std::vector<std::vector<int32_t>>& rings) {
  const int32_t n = shape.nRanks;
  const int32_t k = static_cast<int32_t>(rings.size());
  const int32_t root = shape.options.root;
  AlgorithmBuilder builder(std::string(kRing), Collective::Reduce, shape, k, k);
  for (int32_t r = 0; r < n; ++r) {
    if (r == root) {
      builder.copyOwnInputToOutput(0, r);
    } else {
      builder.copy(0, r, BufferKind::Input, 0, r, BufferKind::Scratch, 0, k);
    }
  }
  for (int32_t c = 0; c < k; ++c) {
    const std::vector<int32_t>& ring = rings[c];
    const int32_t start = positions(ring)[root];
    for (int32_t d = 1; d < n; ++d) {
      const int32_t from = ring[(start + d) % n];
      const int32_t to = ring[(start + d + 1) % n];
      builder.reduce(d, from, d == 1 ? BufferKind::Input : BufferKind::Scratch, c, to,
                     to == root ? BufferKind::Output : BufferKind::Scratch, c);
    }
  }
  return builder.take();
}

}  // namespace

std::vector<std::vector<int32_t>> buildRings(const GeneratorShape& shape, int32_t nRings) {
  std::vector<std::vector<int32_t>> rings;
  FabricHops hops(*shape.topology);
  for (int32_t c = 0; c < nRings; ++c) rings.push_back(buildRing(shape, c, hops));
  return rings;
}

Expected<Algorithm> generateRing(Collective collective, const GeneratorShape& shape) {
  const std::vector<std::vector<int32_t>>& given = shape.options.rings;
  if (!given.empty()) {
    const int32_t nGiven = static_cast<int32_t>(given.size());
    if (shape.options.parts != 0 && shape.options.parts != nGiven)
      return unsupported(kRing, collective, "parts=" + std::to_string(shape.options.parts) + " with " +
                                                std::to_string(nGiven) + " given rings");
    for (int32_t c = 0; c < nGiven; ++c) {
      std::vector<int32_t> sorted = given[c];
      std::sort(sorted.begin(), sorted.end());
      bool permutation = static_cast<int32_t>(sorted.size()) == shape.nRanks;
      for (int32_t r = 0; permutation && r < shape.nRanks; ++r) permutation = sorted[r] == r;
      if (!permutation)
        return unsupported(kRing, collective, "given ring " + std::to_string(c) + " is not a permutation of the " +
                                                  std::to_string(shape.nRanks) + " ranks");
    }
  }
  const int32_t nRings = shape.parts(static_cast<int32_t>(shape.usableRails.size()));
  const std::vector<std::vector<int32_t>> rings = given.empty() ? buildRings(shape, nRings) : given;
  switch (collective) {
    case Collective::AllGather:
      return ringAllGather(shape, rings);
    case Collective::ReduceScatter:
      return ringReduceScatter(shape, rings);
    case Collective::AllReduce:
      return ringAllReduce(shape, rings);
    case Collective::Broadcast:
      return ringBroadcast(shape, rings);
    case Collective::Reduce:
      return ringReduce(shape, rings);
    case Collective::AllToAll:
      break;
  }
  return unsupported(kRing, collective, "not a ring collective");
}

}  // namespace tuccl
