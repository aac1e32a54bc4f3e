// The two-level family over nodes of G GPUs: hierarchical mesh (ResCCL Appendix A: intra-node
// full mesh, inter-node rings of equal local index) and hierarchical (intra-node phase,
// inter-node phase between GPUs of equal local index, final intra-node phase).
//
// Rank (m, l) is GPU l of node m. Blocks are the collective's per-rank blocks of P chunks.
#include <algorithm>
#include <limits>
#include <utility>

#include "synth/generate_common.h"
#include "topo/binding.h"

namespace tuccl {

namespace {

constexpr std::string_view kHm = "hm";
constexpr std::string_view kHierarchical = "hierarchical";
constexpr std::string_view kHmLeaders = "hm-leaders";

struct Grid {
  const GeneratorShape& shape;
  int32_t nodes() const { return shape.nNodes; }
  int32_t gpus() const { return shape.gpusPerNode; }
  int32_t rank(int32_t node, int32_t local) const { return shape.rankAt(node, local); }
  // Blocks are numbered like ranks in node-major order, so block b belongs to rank b's position.
  int32_t block(int32_t node, int32_t local) const { return node * gpus() + local; }
};

// Where rank (m, l) keeps its partial sum of block (j, l) during a two-level ReduceScatter:
// its own block in its output, the others in scratch at j·P.
struct RsAccumulator {
  BufferKind buffer;
  int32_t index;
};
RsAccumulator rsAccumulator(int32_t node, int32_t blockNode, int32_t parts, int32_t q) {
  if (blockNode == node) return {BufferKind::Output, q};
  return {BufferKind::Scratch, blockNode * parts + q};
}

// Intra-node full-mesh ReduceScatter by local index: at offset o (step first + o - 1), GPU l'
// reduces into GPU (l' + o) mod G its contributions to the blocks (j, l' + o) of every node j,
// read straight from its input at `inputBlock(j, l)`. One reduction per slot per step.
template <typename InputIndex, typename Destination>
void intraNodeReduceScatter(AlgorithmBuilder& builder, const Grid& grid, int32_t parts, int32_t first,
                            InputIndex inputIndex, Destination destination) {
  for (int32_t o = 1; o < grid.gpus(); ++o) {
    for (int32_t m = 0; m < grid.nodes(); ++m) {
      for (int32_t from = 0; from < grid.gpus(); ++from) {
        const int32_t l = (from + o) % grid.gpus();
        for (int32_t j = 0; j < grid.nodes(); ++j) {
          for (int32_t q = 0; q < parts; ++q) {
            const auto [buffer, index] = destination(m, j, l, q);
            builder.reduce(first + o - 1, grid.rank(m, from), BufferKind::Input, inputIndex(j, l, q), grid.rank(m, l),
                           buffer, index);
          }
        }
      }
    }
  }
}

// ---- hm -----------------------------------------------------------------------------------------

// Four phases (ResCCL Figure 16): intra-node full-mesh RS, inter-node ring RS and AG among equal
// local indices, intra-node full-mesh AG. Block (j, l) ends reduced on rank (j, l).
Algorithm hmAllReduce(const GeneratorShape& shape) {
  const Grid grid{shape};
  const int32_t N = grid.nodes();
  const int32_t G = grid.gpus();
  const int32_t P = shape.parts();
  AlgorithmBuilder builder(std::string(kHm), Collective::AllReduce, shape, shape.nRanks * P);
  for (int32_t r = 0; r < shape.nRanks; ++r) builder.copyOwnInputToOutput(0, r);
  auto chunk = [&](int32_t j, int32_t l, int32_t q) { return grid.block(j, l) * P + q; };
  intraNodeReduceScatter(builder, grid, P, 1, chunk, [&](int32_t, int32_t j, int32_t l, int32_t q) {
    return RsAccumulator{BufferKind::Output, chunk(j, l, q)};
  });
  const int32_t ringStart = G;
  for (int32_t s = 0; s + 1 < N; ++s) {
    for (int32_t m = 0; m < N; ++m) {
      for (int32_t l = 0; l < G; ++l) {
        const int32_t to = grid.rank((m + 1) % N, l);
        const int32_t reduced = (m - s - 1 + N) % N;
        const int32_t gathered = (m - s + N) % N;
        for (int32_t q = 0; q < P; ++q) {
          builder.reduce(ringStart + s, grid.rank(m, l), BufferKind::Output, chunk(reduced, l, q), to,
                         BufferKind::Output, chunk(reduced, l, q));
          builder.copy(ringStart + N - 1 + s, grid.rank(m, l), BufferKind::Output, chunk(gathered, l, q), to,
                       BufferKind::Output, chunk(gathered, l, q));
        }
      }
    }
  }
  const int32_t meshStep = ringStart + 2 * (N - 1);
  for (int32_t m = 0; m < N; ++m) {
    for (int32_t l = 0; l < G; ++l) {
      for (int32_t to = 0; to < G; ++to) {
        if (to == l) continue;
        for (int32_t j = 0; j < N; ++j) {
          for (int32_t q = 0; q < P; ++q) {
            builder.copy(meshStep, grid.rank(m, l), BufferKind::Output, chunk(j, l, q), grid.rank(m, to),
                         BufferKind::Output, chunk(j, l, q));
          }
        }
      }
    }
  }
  return builder.take();
}

// Every GPU sends its block to its node's GPUs and along the ring of its local index; what
// arrives over the ring at step s - 1 goes to the node's GPUs at step s.
Algorithm hmAllGather(const GeneratorShape& shape) {
  const Grid grid{shape};
  const int32_t N = grid.nodes();
  const int32_t G = grid.gpus();
  const int32_t P = shape.parts();
  AlgorithmBuilder builder(std::string(kHm), Collective::AllGather, shape, P);
  for (int32_t r = 0; r < shape.nRanks; ++r) builder.copyOwnInputToOutput(0, r);
  for (int32_t m = 0; m < N; ++m) {
    for (int32_t l = 0; l < G; ++l) {
      const int32_t self = grid.rank(m, l);
      for (int32_t s = 0; s < N; ++s) {
        const int32_t owner = grid.block((m - s + N) % N, l);
        const BufferKind from = s == 0 ? BufferKind::Input : BufferKind::Output;
        for (int32_t q = 0; q < P; ++q) {
          const int32_t src = s == 0 ? q : owner * P + q;
          if (s + 1 < N) builder.copy(s, self, from, src, grid.rank((m + 1) % N, l), BufferKind::Output, owner * P + q);
          for (int32_t to = 0; to < G; ++to) {
            if (to != l) builder.copy(s, self, from, src, grid.rank(m, to), BufferKind::Output, owner * P + q);
          }
        }
      }
    }
  }
  return builder.take();
}

// The intra-node phase both two-level ReduceScatters share: every GPU keeps its own block in the
// output and the other nodes' blocks of its local index in scratch (step 0), then the node's GPUs
// reduce-scatter them by local index into those accumulators (steps 1 .. G-1).
void reduceScatterWithinNodes(AlgorithmBuilder& builder, const Grid& grid, int32_t P) {
  const int32_t N = grid.nodes();
  const int32_t G = grid.gpus();
  for (int32_t m = 0; m < N; ++m) {
    for (int32_t l = 0; l < G; ++l) {
      builder.copyOwnInputToOutput(0, grid.rank(m, l));
      for (int32_t j = 0; j < N; ++j) {
        if (j != m) builder.copy(0, grid.rank(m, l), BufferKind::Input, grid.block(j, l) * P, grid.rank(m, l),
                                 BufferKind::Scratch, j * P, P);
      }
    }
  }
  auto chunk = [&](int32_t j, int32_t l, int32_t q) { return grid.block(j, l) * P + q; };
  intraNodeReduceScatter(builder, grid, P, 1, chunk, [&](int32_t m, int32_t j, int32_t, int32_t q) {
    return rsAccumulator(m, j, P, q);
  });
}

// Intra-node full-mesh RS, then the inter-node ring RS of equal local indices; partial sums wait
// in scratch, the own block in the output.
Algorithm hmReduceScatter(const GeneratorShape& shape) {
  const Grid grid{shape};
  const int32_t N = grid.nodes();
  const int32_t G = grid.gpus();
  const int32_t P = shape.parts();
  AlgorithmBuilder builder(std::string(kHm), Collective::ReduceScatter, shape, P, N * P);
  reduceScatterWithinNodes(builder, grid, P);
  for (int32_t s = 0; s + 1 < N; ++s) {
    for (int32_t m = 0; m < N; ++m) {
      const int32_t next = (m + 1) % N;
      const int32_t j = (m - s - 1 + N) % N;
      for (int32_t l = 0; l < G; ++l) {
        for (int32_t q = 0; q < P; ++q) {
          const RsAccumulator from = rsAccumulator(m, j, P, q);
          const RsAccumulator to = rsAccumulator(next, j, P, q);
          builder.reduce(G + s, grid.rank(m, l), from.buffer, from.index, grid.rank(next, l), to.buffer, to.index);
        }
      }
    }
  }
  return builder.take();
}

// ---- hm-leaders ---------------------------------------------------------------------------------

// The leaders of a node by local index, and the leader that owns each local index. Per NIC of
// node 0 (nodes are equal), the `perNic` GPUs bound to it that sit closest to it in the host
// fabric (lowest local index on ties) lead; every other GPU bound to the NIC is owned by its
// leaders in turn, so its data stays under its own NIC. GPUs bound to no NIC go to the leaders
// of the first NIC in turn.
struct Leaders {
  std::vector<int32_t> locals;   ///< local indices of the leaders
  std::vector<int32_t> ownerOf;  ///< local index -> local index of its leader
};
Leaders chooseLeaders(const GeneratorShape& shape, int32_t perNic) {
  const Topology& topology = *shape.topology;
  const std::vector<int32_t>& ranks = shape.nodeRanks[0];
  const std::vector<int32_t> nicOfRank = shape.sketch != nullptr ? shape.sketch->nicOfRank : bindGpusToNics(topology);
  Leaders leaders;
  leaders.ownerOf.assign(ranks.size(), -1);
  std::vector<int32_t> unbound;
  for (int32_t nic : nicsOfNode(topology, 0)) {
    std::vector<int32_t> bound;  // local indices
    for (size_t l = 0; l < ranks.size(); ++l) {
      if (nicOfRank[ranks[l]] == nic) bound.push_back(static_cast<int32_t>(l));
    }
    if (bound.empty()) continue;
    const std::vector<int32_t> distance = hostFabricDistances(topology, nicRef(nic));
    auto hops = [&](int32_t l) {
      const int32_t d = distance[ranks[l]];  // GPUs come first in the flat device order
      return d < 0 ? std::numeric_limits<int32_t>::max() : d;
    };
    std::stable_sort(bound.begin(), bound.end(), [&](int32_t a, int32_t b) { return hops(a) < hops(b); });
    const size_t lead = std::min(bound.size(), static_cast<size_t>(perNic));
    for (size_t i = 0; i < bound.size(); ++i) {
      const int32_t l = bound[i];
      if (i < lead) leaders.locals.push_back(l);
      leaders.ownerOf[l] = bound[i % lead];
    }
  }
  if (leaders.locals.empty()) return leaders;  // no NIC: the caller refuses
  size_t turn = 0;
  for (size_t l = 0; l < ranks.size(); ++l) {
    if (leaders.ownerOf[l] < 0) leaders.ownerOf[l] = leaders.locals[turn++ % leaders.locals.size()];
  }
  std::sort(leaders.locals.begin(), leaders.locals.end());
  return leaders;
}

// Hierarchical mesh whose inter-node phase runs on a few leader GPUs per NIC: every GPU reduces
// its contributions to the blocks a leader owns straight into that leader (offset o = distance
// in local index, so each leader slot takes one reduction per step), the leaders of equal local
// index run the ring ReduceScatter and AllGather across nodes, and each leader sends its blocks
// to the node's other GPUs. The NIC carries the same bytes as hm, from fewer concurrent senders;
// on nodes with one NIC for many GPUs fewer, longer flows keep it busier (ResCCL Figure 4: a few
// TBs fill a NIC, more contend).
Expected<Algorithm> hmLeadersAllReduce(const GeneratorShape& shape) {
  const Grid grid{shape};
  const int32_t N = grid.nodes();
  const int32_t G = grid.gpus();
  const int32_t P = shape.parts();
  const int32_t perNic = shape.options.leaders > 0 ? shape.options.leaders : kDefaultLeadersPerNic;
  const Leaders leaders = chooseLeaders(shape, perNic);
  if (leaders.locals.empty()) return unsupported(kHmLeaders, Collective::AllReduce, "the nodes have no NIC");
  if (static_cast<int32_t>(leaders.locals.size()) == G) {
    return unsupported(kHmLeaders, Collective::AllReduce,
                       "with " + std::to_string(perNic) + " leader(s) per NIC every GPU leads, which is hm");
  }
  AlgorithmBuilder builder(std::string(kHmLeaders), Collective::AllReduce, shape, shape.nRanks * P);
  for (int32_t r = 0; r < shape.nRanks; ++r) builder.copyOwnInputToOutput(0, r);
  auto chunk = [&](int32_t j, int32_t l, int32_t q) { return grid.block(j, l) * P + q; };
  for (int32_t m = 0; m < N; ++m) {
    for (int32_t l = 0; l < G; ++l) {
      const int32_t owner = leaders.ownerOf[l];
      for (int32_t from = 0; from < G; ++from) {
        if (from == owner) continue;
        const int32_t offset = (from - owner + G) % G;
        for (int32_t j = 0; j < N; ++j) {
          for (int32_t q = 0; q < P; ++q) {
            builder.reduce(offset, grid.rank(m, from), BufferKind::Input, chunk(j, l, q), grid.rank(m, owner),
                           BufferKind::Output, chunk(j, l, q));
          }
        }
      }
    }
  }
  const int32_t ringStart = G;
  for (int32_t s = 0; s + 1 < N; ++s) {
    for (int32_t m = 0; m < N; ++m) {
      for (int32_t l = 0; l < G; ++l) {
        const int32_t owner = leaders.ownerOf[l];
        const int32_t from = grid.rank(m, owner);
        const int32_t to = grid.rank((m + 1) % N, owner);
        const int32_t reduced = (m - s - 1 + N) % N;
        const int32_t gathered = (m - s + N) % N;
        for (int32_t q = 0; q < P; ++q) {
          builder.reduce(ringStart + s, from, BufferKind::Output, chunk(reduced, l, q), to, BufferKind::Output,
                         chunk(reduced, l, q));
          builder.copy(ringStart + N - 1 + s, from, BufferKind::Output, chunk(gathered, l, q), to, BufferKind::Output,
                       chunk(gathered, l, q));
        }
      }
    }
  }
  const int32_t spreadStep = ringStart + 2 * (N - 1);
  for (int32_t m = 0; m < N; ++m) {
    for (int32_t l = 0; l < G; ++l) {
      const int32_t owner = leaders.ownerOf[l];
      for (int32_t to = 0; to < G; ++to) {
        if (to == owner) continue;
        for (int32_t j = 0; j < N; ++j) {
          for (int32_t q = 0; q < P; ++q) {
            builder.copy(spreadStep, grid.rank(m, owner), BufferKind::Output, chunk(j, l, q), grid.rank(m, to),
                         BufferKind::Output, chunk(j, l, q));
          }
        }
      }
    }
  }
  return builder.take();
}

// ---- hierarchical -------------------------------------------------------------------------------

// Intra-node RS by local index, then a direct inter-node RS among equal local indices: at step
// s, node m reduces block (m + s, l) into its owner.
Algorithm hierarchicalReduceScatter(const GeneratorShape& shape) {
  const Grid grid{shape};
  const int32_t N = grid.nodes();
  const int32_t G = grid.gpus();
  const int32_t P = shape.parts();
  AlgorithmBuilder builder(std::string(kHierarchical), Collective::ReduceScatter, shape, P, N * P);
  reduceScatterWithinNodes(builder, grid, P);
  for (int32_t s = 1; s < N; ++s) {
    for (int32_t m = 0; m < N; ++m) {
      const int32_t owner = (m + s) % N;
      for (int32_t l = 0; l < G; ++l) {
        for (int32_t q = 0; q < P; ++q) {
          builder.reduce(G - 1 + s, grid.rank(m, l), BufferKind::Scratch, owner * P + q, grid.rank(owner, l),
                         BufferKind::Output, q);
        }
      }
    }
  }
  return builder.take();
}

// Piece l (chunks l·P ..) travels through GPU l of every node: the root scatters the pieces in
// its node, GPU l of the root's node sends piece l to GPU l of every node, and every GPU l gives
// piece l to its node's GPUs.
Algorithm hierarchicalBroadcast(const GeneratorShape& shape) {
  const Grid grid{shape};
  const int32_t N = grid.nodes();
  const int32_t G = grid.gpus();
  const int32_t P = shape.parts();
  const int32_t root = shape.options.root;
  const int32_t rootNode = shape.nodeOf[root];
  const int32_t rootLocal = shape.localOf[root];
  AlgorithmBuilder builder(std::string(kHierarchical), Collective::Broadcast, shape, G * P);
  builder.copyOwnInputToOutput(0, root);
  auto source = [&](int32_t rank) { return rank == root ? BufferKind::Input : BufferKind::Output; };
  for (int32_t l = 0; l < G; ++l) {
    for (int32_t q = 0; q < P; ++q) {
      const int32_t c = l * P + q;
      if (l != rootLocal) builder.copy(0, root, BufferKind::Input, c, grid.rank(rootNode, l), BufferKind::Output, c);
      for (int32_t m = 0; m < N; ++m) {
        if (m != rootNode) {
          builder.copy(1, grid.rank(rootNode, l), source(grid.rank(rootNode, l)), c, grid.rank(m, l),
                       BufferKind::Output, c);
        }
        for (int32_t to = 0; to < G; ++to) {
          const int32_t from = grid.rank(m, l);
          if (to == l || grid.rank(m, to) == root) continue;
          builder.copy(2, from, source(from), c, grid.rank(m, to), BufferKind::Output, c);
        }
      }
    }
  }
  return builder.take();
}

// Every node reduce-scatters the pieces over its GPUs, GPU l of every node reduces piece l into
// GPU l of the root's node (one node per step), and those GPUs give the pieces to the root.
// Partial sums wait in scratch except on the root, whose output is the accumulator.
Algorithm hierarchicalReduce(const GeneratorShape& shape) {
  const Grid grid{shape};
  const int32_t N = grid.nodes();
  const int32_t G = grid.gpus();
  const int32_t P = shape.parts();
  const int32_t root = shape.options.root;
  const int32_t rootNode = shape.nodeOf[root];
  const int32_t rootLocal = shape.localOf[root];
  AlgorithmBuilder builder(std::string(kHierarchical), Collective::Reduce, shape, G * P, G * P);
  auto accumulator = [&](int32_t rank) { return rank == root ? BufferKind::Output : BufferKind::Scratch; };
  for (int32_t m = 0; m < N; ++m) {
    for (int32_t l = 0; l < G; ++l) {
      const int32_t rank = grid.rank(m, l);
      if (rank == root) {
        builder.copyOwnInputToOutput(0, rank);
      } else {
        builder.copy(0, rank, BufferKind::Input, l * P, rank, BufferKind::Scratch, l * P, P);
      }
    }
  }
  for (int32_t o = 1; o < G; ++o) {
    for (int32_t m = 0; m < N; ++m) {
      for (int32_t from = 0; from < G; ++from) {
        const int32_t l = (from + o) % G;
        for (int32_t q = 0; q < P; ++q) {
          builder.reduce(o, grid.rank(m, from), BufferKind::Input, l * P + q, grid.rank(m, l),
                         accumulator(grid.rank(m, l)), l * P + q);
        }
      }
    }
  }
  for (int32_t s = 1; s < N; ++s) {
    const int32_t m = (rootNode + s) % N;
    for (int32_t l = 0; l < G; ++l) {
      const int32_t to = grid.rank(rootNode, l);
      for (int32_t q = 0; q < P; ++q) {
        builder.reduce(G - 1 + s, grid.rank(m, l), BufferKind::Scratch, l * P + q, to, accumulator(to), l * P + q);
      }
    }
  }
  for (int32_t l = 0; l < G; ++l) {
    if (l == rootLocal) continue;
    for (int32_t q = 0; q < P; ++q) {
      builder.copy(G + N - 1, grid.rank(rootNode, l), BufferKind::Scratch, l * P + q, root, BufferKind::Output,
                   l * P + q);
    }
  }
  return builder.take();
}

// GPU l hands GPU l' of its node every block bound for local index l' (blocks for the node itself
// land in the output; the others wait in scratch at (j, l)), then GPU l' sends node j's G blocks to
// GPU l' of node j. In place the input is first staged in scratch after the relay area.
Algorithm hierarchicalAllToAll(const GeneratorShape& shape) {
  const Grid grid{shape};
  const int32_t N = grid.nodes();
  const int32_t G = grid.gpus();
  const int32_t P = shape.parts();
  const int32_t n = shape.nRanks;
  const bool inPlace = shape.options.inPlace;
  AlgorithmBuilder builder(std::string(kHierarchical), Collective::AllToAll, shape, P, (inPlace ? 2 : 1) * n * P);
  for (int32_t r = 0; r < n; ++r) {
    if (inPlace) {
      builder.copy(0, r, BufferKind::Input, 0, r, BufferKind::Scratch, n * P, n * P);
    } else {
      builder.copyOwnInputToOutput(0, r);
    }
  }
  // Where rank r reads its own block for destination block `dst`.
  auto input = [&](int32_t dst, int32_t q) {
    return inPlace ? std::pair{BufferKind::Scratch, n * P + dst * P + q} : std::pair{BufferKind::Input, dst * P + q};
  };
  for (int32_t m = 0; m < N; ++m) {
    for (int32_t l = 0; l < G; ++l) {
      const int32_t self = grid.rank(m, l);
      for (int32_t to = 0; to < G; ++to) {
        if (to == l) continue;
        for (int32_t j = 0; j < N; ++j) {
          for (int32_t q = 0; q < P; ++q) {
            const auto [buffer, index] = input(grid.block(j, to), q);
            if (j == m) {
              builder.copy(1, self, buffer, index, grid.rank(m, to), BufferKind::Output, grid.block(m, l) * P + q);
            } else {
              builder.copy(1, self, buffer, index, grid.rank(m, to), BufferKind::Scratch, grid.block(j, l) * P + q);
            }
          }
        }
      }
      for (int32_t j = 0; j < N; ++j) {
        if (j == m) continue;
        for (int32_t from = 0; from < G; ++from) {
          for (int32_t q = 0; q < P; ++q) {
            const auto [buffer, index] =
                from == l ? input(grid.block(j, l), q) : std::pair{BufferKind::Scratch, grid.block(j, from) * P + q};
            builder.copy(2, self, buffer, index, grid.rank(j, l), BufferKind::Output, grid.block(m, from) * P + q);
          }
        }
      }
    }
  }
  return builder.take();
}

}  // namespace

Expected<Algorithm> generateHm(Collective collective, const GeneratorShape& shape) {
  if (Status bad = requireEqualNodes(kHm, collective, shape); !bad.ok()) return bad;
  switch (collective) {
    case Collective::AllReduce:
      return hmAllReduce(shape);
    case Collective::AllGather:
      return hmAllGather(shape);
    case Collective::ReduceScatter:
      return hmReduceScatter(shape);
    default:
      break;
  }
  return unsupported(kHm, collective, "only AllReduce, AllGather and ReduceScatter");
}

Expected<Algorithm> generateHmLeaders(Collective collective, const GeneratorShape& shape) {
  if (Status bad = requireEqualNodes(kHmLeaders, collective, shape); !bad.ok()) return bad;
  if (collective == Collective::AllReduce) return hmLeadersAllReduce(shape);
  return unsupported(kHmLeaders, collective, "only AllReduce");
}

Expected<Algorithm> generateHierarchical(Collective collective, const GeneratorShape& shape) {
  if (Status bad = requireEqualNodes(kHierarchical, collective, shape); !bad.ok()) return bad;
  switch (collective) {
    case Collective::ReduceScatter:
      return hierarchicalReduceScatter(shape);
    case Collective::Broadcast:
      return hierarchicalBroadcast(shape);
    case Collective::Reduce:
      return hierarchicalReduce(shape);
    case Collective::AllToAll:
      return hierarchicalAllToAll(shape);
    default:
      break;
  }
  return unsupported(kHierarchical, collective, "only ReduceScatter, Broadcast, Reduce and AllToAll");
}

}  // namespace tuccl
