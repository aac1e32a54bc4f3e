// NCCL's double binary tree: two complementary binary trees over the nodes (NCCL trees.cc,
// ncclGetBtree / ncclGetDtree), a chain over the GPUs inside each node, each tree carrying half
// the data. AllReduce reduces up and broadcasts down; Broadcast and Reduce root both trees at the
// root's node.
#include <algorithm>

#include "synth/generate_common.h"

namespace tuccl {

namespace {

constexpr std::string_view kTree = "double-binary-tree";

// NCCL's ncclGetBtree, parent only: rank 0 is the root (with one child).
int32_t btreeParent(int32_t n, int32_t rank) {
  if (rank == 0) return -1;
  int32_t bit = 1;
  while ((bit & rank) == 0) bit <<= 1;
  const int32_t up = (rank ^ bit) | (bit << 1);
  return up >= n ? rank ^ bit : up;
}

// NCCL's ncclGetDtree second tree: the btree shifted by one (odd n) or mirrored (even n).
int32_t dtreeParent(int32_t n, int32_t rank) {
  if (n % 2 == 1) {
    const int32_t up = btreeParent(n, (rank - 1 + n) % n);
    return up < 0 ? -1 : (up + 1) % n;
  }
  const int32_t up = btreeParent(n, n - 1 - rank);
  return up < 0 ? -1 : n - 1 - up;
}

int32_t treeRootPosition(int32_t n, int32_t tree) {
  if (tree == 0 || n == 1) return 0;
  return n % 2 == 1 ? 1 : n - 1;
}

struct RankTree {
  int32_t root = -1;
  std::vector<int32_t> parent;
  std::vector<std::vector<int32_t>> children;
  std::vector<int32_t> topDown;  // ranks, parents before children
};

// The GPU of a node through which tree t of rail slot `slot` leaves and enters it: the first GPU
// bound to the NIC of rail slot mod rails among the usable ones (part q of tree t takes slot
// t + 2q, so the two trees, and the parts, spread over the NICs as NCCL's channels do), else GPU t.
int32_t treeHead(const GeneratorShape& shape, int32_t node, int32_t tree, int32_t slot) {
  const int32_t rail = shape.usableRails[static_cast<size_t>(slot) % shape.usableRails.size()];
  const std::vector<int32_t>& bound = shape.railRanks[node][rail];
  if (!bound.empty()) return bound.front();
  const std::vector<int32_t>& ranks = shape.nodeRanks[node];
  return ranks[static_cast<size_t>(tree) % ranks.size()];
}

// The node's chain for tree t: `top` first, then the head, then the other GPUs cyclically after
// the head (ascending for tree 0, descending for tree 1, so the trees use different links).
std::vector<int32_t> nodeChain(const GeneratorShape& shape, int32_t node, int32_t tree, int32_t slot, int32_t top) {
  const std::vector<int32_t>& ranks = shape.nodeRanks[node];
  const int32_t head = treeHead(shape, node, tree, slot);
  const int32_t size = static_cast<int32_t>(ranks.size());
  const int32_t at = shape.localOf[head];
  std::vector<int32_t> chain{top};
  if (head != top) chain.push_back(head);
  for (int32_t i = 1; i < size; ++i) {
    const int32_t rank = ranks[tree == 0 ? (at + i) % size : (at - i + size) % size];
    if (rank != top) chain.push_back(rank);
  }
  return chain;
}

// Tree t over ranks: node-level tree t, rooted at `rootRank`'s node when there is a root; inside
// a node a chain from its top; a node's child nodes hang from its head (of rail slot `slot`).
RankTree buildTree(const GeneratorShape& shape, int32_t tree, int32_t rootRank, int32_t slot) {
  const int32_t nodes = shape.nNodes;
  const int32_t rootNode = rootRank >= 0 ? shape.nodeOf[rootRank] : 0;
  const int32_t shift = rootRank >= 0 ? rootNode - treeRootPosition(nodes, tree) : 0;
  auto nodeAt = [&](int32_t position) { return ((position + shift) % nodes + nodes) % nodes; };
  RankTree result;
  result.parent.assign(static_cast<size_t>(shape.nRanks), -1);
  result.children.assign(static_cast<size_t>(shape.nRanks), {});
  for (int32_t x = 0; x < nodes; ++x) {
    const int32_t node = nodeAt(x);
    const int32_t up = tree == 0 ? btreeParent(nodes, x) : dtreeParent(nodes, x);
    const int32_t top = rootRank >= 0 && node == rootNode ? rootRank : treeHead(shape, node, tree, slot);
    const std::vector<int32_t> chain = nodeChain(shape, node, tree, slot, top);
    for (size_t i = 1; i < chain.size(); ++i) result.parent[chain[i]] = chain[i - 1];
    if (up < 0) {
      result.root = top;
    } else {
      result.parent[top] = treeHead(shape, nodeAt(up), tree, slot);
    }
  }
  for (int32_t rank = 0; rank < shape.nRanks; ++rank) {
    if (result.parent[rank] >= 0) result.children[result.parent[rank]].push_back(rank);
  }
  result.topDown.push_back(result.root);
  for (size_t i = 0; i < result.topDown.size(); ++i) {
    for (int32_t child : result.children[result.topDown[i]]) result.topDown.push_back(child);
  }
  return result;
}

// Reduce-up schedule: sendStep[x] is when x reduces into its parent (relative), once all its
// children have reduced into it, its children served one per step (ready first). Returns the
// step at which the root holds the full reduction.
int32_t scheduleReduceUp(const RankTree& tree, std::vector<int32_t>& sendStep) {
  std::vector<int32_t> ready(tree.parent.size(), 0);
  sendStep.assign(tree.parent.size(), -1);
  for (auto it = tree.topDown.rbegin(); it != tree.topDown.rend(); ++it) {
    std::vector<int32_t> children = tree.children[*it];
    std::sort(children.begin(), children.end(), [&](int32_t a, int32_t b) {
      return ready[a] != ready[b] ? ready[a] < ready[b] : a < b;
    });
    int32_t last = -1;
    for (int32_t child : children) {
      sendStep[child] = std::max(ready[child], last + 1);
      last = sendStep[child];
    }
    ready[*it] = last + 1;
  }
  return ready[tree.root];
}

// Copies from each parent to its children, the root at step `start`, each rank forwarding one
// step after it received. `source(rank)` is where a rank reads the value.
template <typename Source>
void broadcastDown(AlgorithmBuilder& builder, const RankTree& tree, int32_t start, int32_t chunk, Source source) {
  std::vector<int32_t> sendAt(tree.parent.size(), start);
  for (int32_t rank : tree.topDown) {
    if (rank != tree.root) sendAt[rank] = sendAt[tree.parent[rank]] + 1;
    for (int32_t child : tree.children[rank]) {
      builder.copy(sendAt[rank], rank, source(rank), chunk, child, BufferKind::Output, chunk);
    }
  }
}

// Reduces every rank's contribution up the tree into `accumulator(rank)`; leaves send straight
// from `leafSource`. Returns the step after the last reduction.
template <typename Accumulator>
int32_t reduceUp(AlgorithmBuilder& builder, const RankTree& tree, int32_t start, int32_t chunk, BufferKind leafSource,
                 Accumulator accumulator) {
  std::vector<int32_t> sendStep;
  const int32_t done = scheduleReduceUp(tree, sendStep);
  for (int32_t rank : tree.topDown) {
    if (rank == tree.root) continue;
    const BufferKind from = tree.children[rank].empty() ? leafSource : accumulator(rank);
    const int32_t parent = tree.parent[rank];
    builder.reduce(start + sendStep[rank], rank, from, chunk, parent, accumulator(parent), chunk);
  }
  return start + done;
}

Algorithm treeAllReduce(const GeneratorShape& shape) {
  const int32_t P = shape.parts();
  AlgorithmBuilder builder(std::string(kTree), Collective::AllReduce, shape, 2 * P);
  for (int32_t r = 0; r < shape.nRanks; ++r) builder.copyOwnInputToOutput(0, r);
  auto output = [](int32_t) { return BufferKind::Output; };
  for (int32_t t = 0; t < 2; ++t) {
    for (int32_t q = 0; q < P; ++q) {
      const RankTree tree = buildTree(shape, t, -1, t + 2 * q);
      const int32_t down = reduceUp(builder, tree, 1, t * P + q, BufferKind::Output, output);
      broadcastDown(builder, tree, down, t * P + q, output);
    }
  }
  return builder.take();
}

Algorithm treeBroadcast(const GeneratorShape& shape) {
  const int32_t P = shape.parts();
  const int32_t root = shape.options.root;
  AlgorithmBuilder builder(std::string(kTree), Collective::Broadcast, shape, 2 * P);
  builder.copyOwnInputToOutput(0, root);
  auto source = [root](int32_t rank) { return rank == root ? BufferKind::Input : BufferKind::Output; };
  for (int32_t t = 0; t < 2; ++t) {
    for (int32_t q = 0; q < P; ++q) broadcastDown(builder, buildTree(shape, t, root, t + 2 * q), 0, t * P + q, source);
  }
  return builder.take();
}

// Partial sums wait in scratch, the root's in its output.
Algorithm treeReduce(const GeneratorShape& shape) {
  const int32_t P = shape.parts();
  const int32_t root = shape.options.root;
  AlgorithmBuilder builder(std::string(kTree), Collective::Reduce, shape, 2 * P, 2 * P);
  builder.copyOwnInputToOutput(0, root);
  for (int32_t r = 0; r < shape.nRanks; ++r) {
    if (r != root) builder.copy(0, r, BufferKind::Input, 0, r, BufferKind::Scratch, 0, 2 * P);
  }
  auto accumulator = [root](int32_t rank) { return rank == root ? BufferKind::Output : BufferKind::Scratch; };
  for (int32_t t = 0; t < 2; ++t) {
    for (int32_t q = 0; q < P; ++q)
      reduceUp(builder, buildTree(shape, t, root, t + 2 * q), 1, t * P + q, BufferKind::Input, accumulator);
  }
  return builder.take();
}

}  // namespace

Expected<Algorithm> generateDoubleBinaryTree(Collective collective, const GeneratorShape& shape) {
  switch (collective) {
    case Collective::AllReduce:
      return treeAllReduce(shape);
    case Collective::Broadcast:
      return treeBroadcast(shape);
    case Collective::Reduce:
      return treeReduce(shape);
    default:
      break;
  }
  return unsupported(kTree, collective, "only AllReduce, Broadcast and Reduce");
}

}  // namespace tuccl
