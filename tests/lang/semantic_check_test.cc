#include "lang/semantic_check.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace tuccl {
namespace {

// ---- Algorithm builders ---------------------------------------------------------------------------

Algorithm makeAlgorithm(Collective kind, int32_t n, int32_t k, bool inPlace, int32_t scratch = 0,
                        int32_t root = -1) {
  Algorithm algorithm;
  algorithm.name = "test";
  algorithm.sourceName = "test.algo";
  algorithm.collective = kind;
  algorithm.nRanks = n;
  algorithm.inPlace = inPlace;
  algorithm.root = root;
  algorithm.bufferChunks = conventionalBufferChunks(kind, n, k, scratch);
  return algorithm;
}

// Adds an operation; its source line is its index + 1, so diagnostics can be checked.
void add(Algorithm& algorithm, int32_t srcRank, BufferKind srcBuffer, int32_t srcIndex, int32_t dstRank,
         BufferKind dstBuffer, int32_t dstIndex, int32_t step, OpKind kind = OpKind::Copy,
         int32_t count = 1) {
  Operation op;
  op.srcRank = srcRank;
  op.srcBuffer = srcBuffer;
  op.srcIndex = srcIndex;
  op.dstRank = dstRank;
  op.dstBuffer = dstBuffer;
  op.dstIndex = dstIndex;
  op.step = step;
  op.kind = kind;
  op.count = count;
  op.loc = SourceLoc{static_cast<uint32_t>(algorithm.ops.size() + 1), 5};
  algorithm.ops.push_back(op);
}

constexpr BufferKind kIn = BufferKind::Input;
constexpr BufferKind kOut = BufferKind::Output;
constexpr BufferKind kScratch = BufferKind::Scratch;
constexpr OpKind kReduce = OpKind::Reduce;

int32_t mod(int32_t a, int32_t n) { return ((a % n) + n) % n; }

// Ring AllGather with k chunks per rank. Out of place, step 0 also copies the rank's own block.
Algorithm ringAllGather(int32_t n, int32_t k, bool inPlace) {
  Algorithm a = makeAlgorithm(Collective::AllGather, n, k, inPlace);
  for (int32_t s = 0; s < n - 1; ++s) {
    for (int32_t r = 0; r < n; ++r) {
      const int32_t block = mod(r - s, n);
      if (s == 0 && !inPlace) {
        add(a, r, kIn, 0, r, kOut, r * k, 0, OpKind::Copy, k);
        add(a, r, kIn, 0, (r + 1) % n, kOut, r * k, 0, OpKind::Copy, k);
      } else {
        add(a, r, kOut, block * k, (r + 1) % n, kOut, block * k, s, OpKind::Copy, k);
      }
    }
  }
  return a;
}

// Direct AllGather: every rank sends its block to every rank (itself included) in step 0.
Algorithm directAllGather(int32_t n) {
  Algorithm a = makeAlgorithm(Collective::AllGather, n, 1, false);
  for (int32_t r = 0; r < n; ++r) {
    for (int32_t q = 0; q < n; ++q) add(a, r, kIn, 0, q, kOut, r, 0);
  }
  return a;
}

// Ring AllReduce over C = n chunks: n-1 reduce (rrc) steps, then n-1 copy (recv) steps. Out of
// place, a local copy of the input comes first.
Algorithm ringAllReduce(int32_t n, bool inPlace) {
  Algorithm a = makeAlgorithm(Collective::AllReduce, n, n, inPlace);
  const int32_t first = inPlace ? 0 : 1;
  if (!inPlace) {
    for (int32_t r = 0; r < n; ++r) add(a, r, kIn, 0, r, kOut, 0, 0, OpKind::Copy, n);
  }
  for (int32_t s = 0; s < n - 1; ++s) {
    for (int32_t r = 0; r < n; ++r) {
      const int32_t chunk = mod(r - s, n);
      add(a, r, kOut, chunk, (r + 1) % n, kOut, chunk, first + s, kReduce);
    }
  }
  for (int32_t s = 0; s < n - 1; ++s) {
    for (int32_t r = 0; r < n; ++r) {
      const int32_t chunk = mod(r + 1 - s, n);
      add(a, r, kOut, chunk, (r + 1) % n, kOut, chunk, first + n - 1 + s);
    }
  }
  return a;
}

// The index of the ring AllReduce operation of rank r at reduce step s (in place).
size_t ringReduceOp(int32_t n, int32_t s, int32_t r) { return static_cast<size_t>(s * n + r); }
size_t ringCopyOp(int32_t n, int32_t s, int32_t r) { return static_cast<size_t>((n - 1 + s) * n + r); }

// The hierarchical-mesh AllReduce of ResCCL's examples, generated from its ResCCLang logic:
// intra-node reduce, inter-node ring reduce, inter-node ring copy, intra-node copy.
Algorithm hmAllReduce(int32_t nodes, int32_t gpus) {
  const int32_t N = nodes, G = gpus, n = N * G, C = n;
  Algorithm a = makeAlgorithm(Collective::AllReduce, n, C, true);
  a.ranksPerNode = G;
  a.ops.reserve(static_cast<size_t>(2 * N * G * N * (G - 1) + 2 * N * G * (N - 1)));
  auto transfer = [&](int32_t src, int32_t dst, int32_t step, int32_t chunk, OpKind kind) {
    a.ops.push_back(Operation{src, chunk, dst, chunk, 1, step, {}, kOut, kOut, kind});
  };
  for (int32_t node = 0; node < N; ++node)
    for (int32_t r = 0; r < G; ++r)
      for (int32_t b = 0; b < N; ++b)
        for (int32_t off = 0; off < G - 1; ++off) {
          const int32_t src = G * node + r, dst = (r + off + 1) % G + G * node;
          transfer(src, dst, b * (G - 1) + off, (dst % G + b * G) % C, kReduce);
        }
  for (int32_t node = 0; node < N; ++node)
    for (int32_t r = 0; r < G; ++r)
      for (int32_t b = 0; b < N - 1; ++b) {
        const int32_t src = G * node + r, dst = (src + G) % C;
        transfer(src, dst, N * (G - 1) + b, mod(src - b * G, C), kReduce);
      }
  for (int32_t node = 0; node < N; ++node)
    for (int32_t r = 0; r < G; ++r)
      for (int32_t b = 0; b < N - 1; ++b) {
        const int32_t src = G * node + r, dst = (src + G) % C;
        transfer(src, dst, N * (G - 1) + N - 1 + b, mod(src - (b + N - 1) * G, C), OpKind::Copy);
      }
  for (int32_t node = 0; node < N; ++node)
    for (int32_t r = 0; r < G; ++r)
      for (int32_t b = 0; b < N; ++b)
        for (int32_t off = 0; off < G - 1; ++off) {
          const int32_t src = G * node + r, dst = (r + off + 1) % G + G * node;
          transfer(src, dst, N * (G - 1) + 2 * N - 2 + b, (src + b * G) % C, OpKind::Copy);
        }
  return a;
}

// Ring ReduceScatter in place (storage: the input); the last step writes through the output view.
Algorithm ringReduceScatterInPlace(int32_t n) {
  Algorithm a = makeAlgorithm(Collective::ReduceScatter, n, 1, true);
  for (int32_t s = 0; s < n - 1; ++s) {
    for (int32_t r = 0; r < n; ++r) {
      const int32_t chunk = mod(r - 1 - s, n);
      const int32_t dst = (r + 1) % n;
      if (s == n - 2) {
        add(a, r, kIn, chunk, dst, kOut, 0, s, kReduce);  // chunk == dst: its own output block
      } else {
        add(a, r, kIn, chunk, dst, kIn, chunk, s, kReduce);
      }
    }
  }
  return a;
}

// Ring ReduceScatter out of place through scratch.
Algorithm ringReduceScatterScratch(int32_t n) {
  Algorithm a = makeAlgorithm(Collective::ReduceScatter, n, 1, false, n);
  for (int32_t r = 0; r < n; ++r) {
    add(a, r, kIn, 0, r, kScratch, 0, 0, OpKind::Copy, n);
    add(a, r, kIn, r, r, kOut, 0, 0);
  }
  for (int32_t s = 0; s < n - 1; ++s) {
    for (int32_t r = 0; r < n; ++r) {
      const int32_t chunk = mod(r - 1 - s, n);
      const int32_t dst = (r + 1) % n;
      if (s == n - 2) {
        add(a, r, kScratch, chunk, dst, kOut, 0, 1 + s, kReduce);
      } else {
        add(a, r, kScratch, chunk, dst, kScratch, chunk, 1 + s, kReduce);
      }
    }
  }
  return a;
}

// Broadcast along a chain root, root+1, ...; k chunks.
Algorithm chainBroadcast(int32_t n, int32_t k, int32_t root, bool inPlace) {
  Algorithm a = makeAlgorithm(Collective::Broadcast, n, k, inPlace, 0, root);
  if (!inPlace) add(a, root, kIn, 0, root, kOut, 0, 0, OpKind::Copy, k);
  for (int32_t s = 0; s < n - 1; ++s) {
    const int32_t from = (root + s) % n;
    add(a, from, s == 0 ? kIn : kOut, 0, (from + 1) % n, kOut, 0, s, OpKind::Copy, k);
  }
  return a;
}

// Binomial-tree Broadcast: at step s, relative ranks below 2^s send to relative rank + 2^s.
Algorithm treeBroadcast(int32_t n, int32_t root, bool inPlace) {
  Algorithm a = makeAlgorithm(Collective::Broadcast, n, 2, inPlace, 0, root);
  if (!inPlace) add(a, root, kIn, 0, root, kOut, 0, 0, OpKind::Copy, 2);
  for (int32_t s = 0, span = 1; span < n; ++s, span *= 2) {
    for (int32_t rel = 0; rel < span && rel + span < n; ++rel) {
      const int32_t from = (root + rel) % n;
      add(a, from, kIn, 0, (root + rel + span) % n, kOut, 0, s + 1, OpKind::Copy, 2);
      if (rel != 0 || !inPlace) a.ops.back().srcBuffer = kOut;
    }
  }
  return a;
}

// Reduce to root along a chain ending at the root; in place.
Algorithm chainReduce(int32_t n, int32_t root) {
  Algorithm a = makeAlgorithm(Collective::Reduce, n, 3, true, 0, root);
  for (int32_t s = 0; s < n - 1; ++s) {
    const int32_t from = (root + n - 1 - s) % n;
    add(a, from, kOut, 0, (from + n - 1) % n, kOut, 0, s, kReduce, 3);
  }
  return a;
}

// Direct AllToAll out of place: rank i sends block j to rank j's block i.
Algorithm directAllToAll(int32_t n, int32_t k) {
  Algorithm a = makeAlgorithm(Collective::AllToAll, n, k, false);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t j = 0; j < n; ++j) add(a, i, kIn, j * k, j, kOut, i * k, 0, OpKind::Copy, k);
  }
  return a;
}

// AllToAll in place: send blocks to the peers' scratch, then copy them into place.
Algorithm scratchAllToAllInPlace(int32_t n, int32_t k) {
  Algorithm a = makeAlgorithm(Collective::AllToAll, n, k, true, n * k);
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t j = 0; j < n; ++j) {
      if (i != j) add(a, i, kIn, j * k, j, kScratch, i * k, 0, OpKind::Copy, k);
    }
  }
  for (int32_t j = 0; j < n; ++j) {
    for (int32_t i = 0; i < n; ++i) {
      if (i != j) add(a, j, kScratch, i * k, j, kOut, i * k, 1, OpKind::Copy, k);
    }
  }
  return a;
}

// ---- Assertions -----------------------------------------------------------------------------------

void expectOk(const Algorithm& algorithm) {
  const CheckReport report = checkAlgorithm(algorithm);
  EXPECT_TRUE(report.ok()) << violationName(report.violation->kind) << " at operation "
                           << report.violation->opIndex << ": " << report.violation->message;
}

Violation expectViolation(const Algorithm& algorithm, ViolationKind kind, int64_t opIndex) {
  const CheckReport report = checkAlgorithm(algorithm);
  EXPECT_FALSE(report.ok());
  if (report.ok()) return {};
  const Violation& v = *report.violation;
  EXPECT_EQ(violationName(v.kind), violationName(kind)) << v.message;
  EXPECT_EQ(v.opIndex, opIndex) << v.message;
  if (opIndex >= 0 && v.opIndex == opIndex) {
    EXPECT_EQ(v.loc, algorithm.ops[static_cast<size_t>(opIndex)].loc);
  }
  return v;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- Correct algorithms ---------------------------------------------------------------------------

TEST(SemanticCheck, RingAllGather) {
  for (int32_t n : {2, 3, 8}) {
    for (int32_t k : {1, 3}) {
      expectOk(ringAllGather(n, k, false));
      expectOk(ringAllGather(n, k, true));
    }
  }
}

TEST(SemanticCheck, DirectAllGather) { expectOk(directAllGather(6)); }

TEST(SemanticCheck, RingAllReduce) {
  for (int32_t n : {2, 3, 8}) {
    expectOk(ringAllReduce(n, true));
    expectOk(ringAllReduce(n, false));
  }
}

TEST(SemanticCheck, HierarchicalMeshAllReduce) {
  for (auto [nodes, gpus] : {std::pair{2, 4}, {2, 8}, {4, 4}, {4, 8}}) {
    SCOPED_TRACE(std::to_string(nodes) + "x" + std::to_string(gpus));
    expectOk(hmAllReduce(nodes, gpus));
  }
}

TEST(SemanticCheck, ReduceScatter) {
  for (int32_t n : {2, 5, 8}) {
    expectOk(ringReduceScatterInPlace(n));
    expectOk(ringReduceScatterScratch(n));
  }
}

TEST(SemanticCheck, Broadcast) {
  for (int32_t root : {0, 3}) {
    expectOk(chainBroadcast(5, 2, root, false));
    expectOk(chainBroadcast(5, 2, root, true));
    expectOk(treeBroadcast(7, root, false));
    expectOk(treeBroadcast(7, root, true));
  }
}

TEST(SemanticCheck, ReduceToRoot) {
  expectOk(chainReduce(6, 0));
  expectOk(chainReduce(6, 4));
}

TEST(SemanticCheck, AllToAll) {
  expectOk(directAllToAll(5, 1));
  expectOk(directAllToAll(4, 2));
  expectOk(scratchAllToAllInPlace(5, 1));
  expectOk(scratchAllToAllInPlace(4, 3));
}

// ---- Broken algorithms ----------------------------------------------------------------------------

TEST(SemanticCheck, DroppedTransferBreaksTheChain) {
  // Rank 2 never receives block 1 at step 0, then forwards it at step 1.
  const int32_t n = 5;
  Algorithm a = ringAllGather(n, 1, true);
  a.ops.erase(a.ops.begin() + 1);  // step 0, rank 1 -> 2, block 1
  // The forward of block 1 by rank 2 at step 1 was operation n + 2, now n + 1.
  const Violation v = expectViolation(a, ViolationKind::UnwrittenRead, n + 1);
  EXPECT_EQ(v.message, "reads rank 2 output chunk 1, which holds no data at step 1");
}

TEST(SemanticCheck, DroppedLastTransferFailsThePostcondition) {
  const int32_t n = 4;
  Algorithm a = ringAllReduce(n, true);
  // The last copy of rank 1 would have brought chunk (1 + 1 - (n - 2)) mod n = 0 to rank 2.
  a.ops.erase(a.ops.begin() + static_cast<int64_t>(ringCopyOp(n, n - 2, 1)));
  // Rank 2's chunk 0 keeps its partial from the reduce-scatter: the reduce of rank 1 at step 1.
  const Violation v = expectViolation(a, ViolationKind::Postcondition, ringReduceOp(n, 1, 1));
  EXPECT_EQ(v.message,
            "postcondition unmet: rank 2 output chunk 0 misses the contributions of ranks {3} to chunk 0 "
            "(holds {0, 1, 2})");
  EXPECT_EQ(v.otherOpIndex, -1);
}

TEST(SemanticCheck, NeverWrittenOutputFailsThePostcondition) {
  Algorithm a = directAllGather(3);
  a.ops.erase(a.ops.begin() + 5);  // rank 1 -> rank 2
  const Violation v = expectViolation(a, ViolationKind::Postcondition, -1);
  EXPECT_EQ(v.message, "postcondition unmet: rank 2 output chunk 1 holds no data");
}

TEST(SemanticCheck, DuplicatedReduceIsCountedTwice) {
  const int32_t n = 4;
  Algorithm a = ringAllReduce(n, true);
  // Repeat rank 1's reduce of step 1 alone in a new step 2, shifting the rest.
  for (Operation& op : a.ops) {
    if (op.step >= 2) ++op.step;
  }
  Operation duplicate = a.ops[ringReduceOp(n, 1, 1)];
  duplicate.step = 2;
  duplicate.loc = SourceLoc{99, 1};
  a.ops.push_back(duplicate);
  const Violation v = expectViolation(a, ViolationKind::DoubleCount, static_cast<int64_t>(a.ops.size() - 1));
  EXPECT_TRUE(contains(v.message, "would be counted twice on rank 2")) << v.message;
  EXPECT_EQ(v.otherOpIndex, static_cast<int64_t>(ringReduceOp(n, 1, 1)));
}

TEST(SemanticCheck, ReduceOfWrongChunkMixesChunks) {
  const int32_t n = 4;
  Algorithm a = ringAllReduce(n, true);
  // Rank 0 sends chunk 0 at step 0; point it at rank 1's chunk 2 instead.
  a.ops[ringReduceOp(n, 0, 0)].dstIndex = 2;
  const Violation v = expectViolation(a, ViolationKind::MixedChunks, ringReduceOp(n, 0, 0));
  EXPECT_EQ(v.message, "reduces chunk 0 into rank 1 output chunk 2, which holds chunk 2");
}

TEST(SemanticCheck, CopyToWrongChunkFailsThePostcondition) {
  const int32_t n = 4;
  Algorithm a = ringAllGather(n, 1, false);
  // The last forward of rank 0 (block 2 to rank 1) lands in block 0, over data it already has.
  const size_t last = a.ops.size() - n;
  ASSERT_EQ(a.ops[last].srcRank, 0);
  ASSERT_EQ(a.ops[last].dstIndex, 2);
  a.ops[last].dstIndex = 0;
  const Violation v = expectViolation(a, ViolationKind::Postcondition, static_cast<int64_t>(last));
  EXPECT_EQ(
      v.message,
      "postcondition unmet: rank 1 output chunk 0 holds chunk 0 of rank 2 instead of chunk 0 of rank 0");
}

TEST(SemanticCheck, SameStepRace) {
  const int32_t n = 4;
  Algorithm a = ringAllReduce(n, true);
  // Move rank 2's reduce of step 1 (reads its chunk 1) into step 0, where rank 1 writes that chunk.
  const size_t moved = ringReduceOp(n, 1, 2);
  a.ops[moved].step = 0;
  const Violation v = expectViolation(a, ViolationKind::Race, moved);
  EXPECT_EQ(v.otherOpIndex, static_cast<int64_t>(ringReduceOp(n, 0, 1)));
  EXPECT_EQ(v.message,
            "operations of step 0 race on rank 2 output chunk 1: this one reads it while another (line 2) "
            "writes it");
  const std::vector<Diagnostic> diagnostics = violationDiagnostics(a, v);
  ASSERT_EQ(diagnostics.size(), 2u);
  EXPECT_EQ(diagnostics[0].severity, Severity::Error);
  EXPECT_EQ(diagnostics[0].file, "test.algo");
  EXPECT_EQ(diagnostics[0].loc, a.ops[moved].loc);
  EXPECT_EQ(diagnostics[1].severity, Severity::Note);
  EXPECT_EQ(diagnostics[1].loc, (SourceLoc{2, 5}));
  EXPECT_EQ(diagnostics[1].message, "the other operation is here");
}

TEST(SemanticCheck, RaceKinds) {
  // Write then read, read then write, and two writes, of one slot in one step.
  Algorithm writeRead = makeAlgorithm(Collective::AllGather, 3, 1, false);
  add(writeRead, 0, kIn, 0, 1, kOut, 0, 0);
  add(writeRead, 1, kOut, 0, 2, kOut, 0, 0);
  EXPECT_TRUE(contains(expectViolation(writeRead, ViolationKind::Race, 1).message, "reads it while another"));

  Algorithm readWrite = makeAlgorithm(Collective::AllGather, 3, 1, false);
  add(readWrite, 0, kIn, 0, 0, kOut, 0, 0);
  add(readWrite, 0, kOut, 0, 2, kOut, 0, 1);
  add(readWrite, 1, kIn, 0, 0, kOut, 0, 1);
  const Violation v = expectViolation(readWrite, ViolationKind::Race, 2);
  EXPECT_EQ(v.otherOpIndex, 1);
  EXPECT_TRUE(contains(v.message, "this one writes it while another (line 2) reads it")) << v.message;

  Algorithm writeWrite = makeAlgorithm(Collective::AllGather, 3, 1, false);
  add(writeWrite, 0, kIn, 0, 2, kOut, 0, 4);
  add(writeWrite, 1, kIn, 0, 2, kOut, 0, 4);
  EXPECT_EQ(expectViolation(writeWrite, ViolationKind::Race, 1).otherOpIndex, 0);

  // A reduce reads its destination too: a second reader of it in the step races with it, even
  // when the reduce itself also read the slot as a source earlier.
  Algorithm reduceRead = makeAlgorithm(Collective::AllReduce, 3, 2, true);
  add(reduceRead, 0, kOut, 0, 1, kOut, 0, 0);           // reads rank 0 chunk 0
  add(reduceRead, 0, kOut, 0, 2, kOut, 1, 0, kReduce);  // reads rank 0 chunk 0 (chunk mismatch aside)
  add(reduceRead, 1, kOut, 1, 0, kOut, 0, 0, kReduce);  // writes rank 0 chunk 0
  EXPECT_EQ(expectViolation(reduceRead, ViolationKind::Race, 2).otherOpIndex, 0);
}

TEST(SemanticCheck, OperationOntoItself) {
  Algorithm self = makeAlgorithm(Collective::AllGather, 2, 1, true);
  add(self, 0, kIn, 0, 0, kOut, 0, 0);  // in place, input 0 of rank 0 is output 0
  EXPECT_EQ(expectViolation(self, ViolationKind::Race, 0).message,
            "copies rank 0 output chunk 0 onto itself");

  Algorithm overlap = makeAlgorithm(Collective::AllReduce, 2, 4, true);
  add(overlap, 0, kOut, 1, 0, kOut, 0, 0, OpKind::Copy, 2);
  EXPECT_EQ(expectViolation(overlap, ViolationKind::Race, 0).message,
            "the operation's source and destination overlap at rank 0 output chunk 1");
}

TEST(SemanticCheck, CopyOverUnreadInputLosesIt) {
  const int32_t n = 4;
  Algorithm a = ringAllReduce(n, true);
  // Rank 1 receives chunk 0 with a copy (recv) instead of a reduce (rrc): its own chunk 0 is lost.
  a.ops[ringReduceOp(n, 0, 0)].kind = OpKind::Copy;
  const Violation v = expectViolation(a, ViolationKind::LostContribution, ringReduceOp(n, 0, 0));
  EXPECT_EQ(v.message,
            "overwrites rank 1 output chunk 0 holding the contributions of ranks {1} to chunk 0, "
            "which nothing has read");
  EXPECT_EQ(v.otherOpIndex, -1);
}

TEST(SemanticCheck, CopyOverUnreadPartialLosesIt) {
  // HM 2x4: make the first inter-node reduce of rank 0 a copy. Rank 4's chunk 0 holds node 1's
  // intra-node reduction, which rank 4 has not sent yet.
  const int32_t N = 2, G = 4;
  Algorithm a = hmAllReduce(N, G);
  const size_t phase2 = static_cast<size_t>(N * G * N * (G - 1));
  ASSERT_EQ(a.ops[phase2].srcRank, 0);
  ASSERT_EQ(a.ops[phase2].dstRank, 4);
  a.ops[phase2].kind = OpKind::Copy;
  const Violation v = expectViolation(a, ViolationKind::LostContribution, phase2);
  EXPECT_EQ(v.message,
            "overwrites rank 4 output chunk 0 holding the contributions of ranks {4, 5, 6, 7} to "
            "chunk 0, which nothing has read");
  ASSERT_GE(v.otherOpIndex, 0);
  const Operation& writer = a.ops[static_cast<size_t>(v.otherOpIndex)];
  EXPECT_EQ(writer.dstRank, 4);
  EXPECT_EQ(writer.dstIndex, 0);
  EXPECT_EQ(writer.kind, kReduce);
  const std::vector<Diagnostic> diagnostics = violationDiagnostics(a, v);
  ASSERT_EQ(diagnostics.size(), 2u);
  EXPECT_EQ(diagnostics[1].message, "the overwritten value was last written here");
}

TEST(SemanticCheck, ReadOfUnwrittenScratch) {
  const int32_t n = 4;
  Algorithm a = scratchAllToAllInPlace(n, 1);
  // Drop rank 3's send to rank 0's scratch block 3. (Rank 3 then overwrites its unread input
  // chunk 0 at step 1, but rank 0's read of the empty scratch comes first.)
  const size_t dropped = 3 * (n - 1);
  ASSERT_EQ(a.ops[dropped].srcRank, 3);
  ASSERT_EQ(a.ops[dropped].dstRank, 0);
  a.ops.erase(a.ops.begin() + static_cast<int64_t>(dropped));
  // Rank 0's copies of its scratch blocks 1, 2, 3 are the first operations of step 1.
  const int64_t reader = (n * (n - 1) - 1) + 2;
  ASSERT_EQ(a.ops[static_cast<size_t>(reader)].srcRank, 0);
  ASSERT_EQ(a.ops[static_cast<size_t>(reader)].srcIndex, 3);
  EXPECT_EQ(expectViolation(a, ViolationKind::UnwrittenRead, reader).message,
            "reads rank 0 scratch chunk 3, which holds no data at step 1");
}

TEST(SemanticCheck, ReduceIntoEmptySlot) {
  Algorithm a = makeAlgorithm(Collective::AllReduce, 2, 1, false);
  add(a, 0, kIn, 0, 1, kOut, 0, 0, kReduce);
  EXPECT_EQ(expectViolation(a, ViolationKind::UnwrittenRead, 0).message,
            "reduces into rank 1 output chunk 0, which holds no data at step 0");
}

TEST(SemanticCheck, ReduceInAllGather) {
  Algorithm mixed = makeAlgorithm(Collective::AllGather, 2, 1, true);
  add(mixed, 0, kOut, 0, 1, kOut, 1, 0, kReduce);
  EXPECT_EQ(
      expectViolation(mixed, ViolationKind::MixedChunks, 0).message,
      "reduces chunk 0 of rank 0 into rank 1 output chunk 1, which holds chunk 0 of rank 1, but AllGather "
      "combines no data");

  Algorithm twice = makeAlgorithm(Collective::AllGather, 2, 1, true);
  add(twice, 0, kOut, 0, 1, kOut, 0, 0);
  add(twice, 0, kOut, 0, 1, kOut, 0, 1, kReduce);
  expectViolation(twice, ViolationKind::DoubleCount, 1);
}

TEST(SemanticCheck, ReduceNonRootOutputsAreFree) {
  // Only the root's output is constrained: intermediate partials may stay on the others.
  Algorithm a = chainReduce(5, 2);
  expectOk(a);
  a.ops.pop_back();  // the last hop into the root
  const Violation v = expectViolation(a, ViolationKind::Postcondition, -1);
  EXPECT_TRUE(contains(v.message, "rank 2 output chunk 0 misses the contributions of ranks {0, 1, 3, 4}"))
      << v.message;
}

TEST(SemanticCheck, BroadcastOverwritesNonRootInputsFreely) {
  // In place, the non-root inputs are not part of the collective: overwriting them unread is fine,
  // but leaving one in place is not.
  Algorithm a = chainBroadcast(4, 1, 1, true);
  a.ops.pop_back();
  const Violation v = expectViolation(a, ViolationKind::Postcondition, -1);
  EXPECT_EQ(
      v.message,
      "postcondition unmet: rank 0 output chunk 0 holds chunk 0 of rank 0 instead of chunk 0 of rank 1");
}

TEST(SemanticCheck, LongRankListsAreShortened) {
  Algorithm a = ringAllReduce(12, true);
  a.ops.resize(static_cast<size_t>(12 * 11));  // the reduce-scatter only
  const Violation v = expectViolation(a, ViolationKind::Postcondition, -1);
  EXPECT_EQ(v.message,
            "postcondition unmet: rank 0 output chunk 0 misses the contributions of ranks "
            "{1, 2, 3, 4, 5, 6, 7, 8, ... (3 more)} to chunk 0 (holds {0})");
}

TEST(SemanticCheck, StructureProblemsComeFirst) {
  Algorithm a = ringAllGather(4, 1, false);
  a.ops[3].dstRank = 9;
  const Violation v = expectViolation(a, ViolationKind::Structure, -1);
  EXPECT_TRUE(contains(v.message, "destination rank 9 out of range")) << v.message;
  EXPECT_EQ(v.loc, a.ops[3].loc);
  const std::vector<Diagnostic> diagnostics = violationDiagnostics(a, v);
  ASSERT_EQ(diagnostics.size(), 1u);
  EXPECT_EQ(diagnostics[0].message, v.message);
}

TEST(SemanticCheck, RefusesStateTooLargeToHold) {
  // 2^20 ranks of AllGather: 2^40 slots of 2^20-bit sets. Refused before allocating anything.
  Algorithm a = makeAlgorithm(Collective::AllGather, 1 << 20, 1, false);
  const Violation v = expectViolation(a, ViolationKind::Structure, -1);
  EXPECT_TRUE(contains(v.message, "too large to check")) << v.message;
}

TEST(SemanticCheck, SparseStepsUseTheFallbackSort) {
  Algorithm a = ringAllReduce(4, true);
  for (Operation& op : a.ops) op.step = op.step * 100'000'000 + 7;
  expectOk(a);
}

TEST(SemanticCheck, Names) {
  EXPECT_EQ(violationName(ViolationKind::LostContribution), "LostContribution");
  EXPECT_EQ(violationName(ViolationKind::UnwrittenRead), "UnwrittenRead");
  EXPECT_EQ(violationName(ViolationKind::Race), "Race");
  EXPECT_EQ(violationName(ViolationKind::Postcondition), "Postcondition");
}

// ---- Scale ----------------------------------------------------------------------------------------

TEST(SemanticCheck, HierarchicalMeshAllReduceAt1024Ranks) {
  const Algorithm a = hmAllReduce(128, 8);
  const auto start = std::chrono::steady_clock::now();
  const CheckReport report = checkAlgorithm(a);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(report.ok()) << report.violation->message;
  std::printf("HM AllReduce 128x8 (%d ranks, %zu operations) checked in %.3f s\n", a.nRanks, a.ops.size(),
              seconds);
}

}  // namespace
}  // namespace tuccl
