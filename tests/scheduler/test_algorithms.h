// Algorithms built directly in C++ for the scheduler tests, so they do not depend on the
// ResCCLang front end. The HM builders mirror examples/algorithms/hm_*.resccl line by line.
#pragma once

#include <cstdint>

#include "lang/algorithm.h"

namespace tuccl::testing {

// Python's %, as ResCCLang has it: never negative.
inline int32_t pmod(int64_t x, int64_t n) { return static_cast<int32_t>(((x % n) + n) % n); }

inline void addTransfer(Algorithm& algorithm, int32_t src, int32_t dst, int32_t step, int32_t chunk, OpKind kind) {
  Operation op;
  op.srcRank = src;
  op.dstRank = dst;
  op.srcBuffer = op.dstBuffer = BufferKind::Output;
  op.srcIndex = op.dstIndex = chunk;
  op.step = step;
  op.kind = kind;
  algorithm.ops.push_back(op);
}

inline Algorithm emptyAlgorithm(Collective kind, int32_t nNodes, int32_t gpusPerNode, int32_t k) {
  Algorithm algorithm;
  algorithm.name = "HM";
  algorithm.collective = kind;
  algorithm.nRanks = nNodes * gpusPerNode;
  algorithm.ranksPerNode = gpusPerNode;
  algorithm.inPlace = true;
  algorithm.bufferChunks = conventionalBufferChunks(kind, algorithm.nRanks, k);
  return algorithm;
}

// examples/algorithms/ring_allreduce.resccl: a ring ReduceScatter then a ring AllGather.
inline Algorithm ringAllReduce(int32_t n) {
  Algorithm a = emptyAlgorithm(Collective::AllReduce, 1, n, n);
  a.name = "Ring";
  for (int32_t r = 0; r < n; ++r) {
    for (int32_t s = 0; s < n - 1; ++s) addTransfer(a, r, (r + 1) % n, s, pmod(r - s, n), OpKind::Reduce);
    for (int32_t s = 0; s < n - 1; ++s) addTransfer(a, r, (r + 1) % n, n - 1 + s, pmod(r + 1 - s, n), OpKind::Copy);
  }
  return a;
}

// examples/algorithms/hm_allreduce.resccl
inline Algorithm hmAllReduce(int32_t nNodes, int32_t G) {
  const int32_t n = nNodes * G;
  Algorithm a = emptyAlgorithm(Collective::AllReduce, nNodes, G, n);
  a.ops.reserve(static_cast<size_t>(n) * (2 * nNodes * (G - 1) + 2 * (nNodes - 1)));
  for (int32_t node = 0; node < nNodes; ++node)
    for (int32_t r = 0; r < G; ++r)
      for (int32_t base = 0; base < nNodes; ++base)
        for (int32_t offset = 0; offset < G - 1; ++offset) {
          const int32_t src = G * node + r;
          const int32_t dst = (r + offset + 1) % G + G * node;
          addTransfer(a, src, dst, base * (G - 1) + offset, pmod(dst % G + base * G, n), OpKind::Reduce);
        }
  for (int32_t node = 0; node < nNodes; ++node)
    for (int32_t r = 0; r < G; ++r)
      for (int32_t base = 0; base < nNodes - 1; ++base) {
        const int32_t src = G * node + r;
        addTransfer(a, src, (src + G) % n, nNodes * (G - 1) + base, pmod(src + n - base * G, n), OpKind::Reduce);
      }
  for (int32_t node = 0; node < nNodes; ++node)
    for (int32_t r = 0; r < G; ++r)
      for (int32_t base = 0; base < nNodes - 1; ++base) {
        const int32_t src = G * node + r;
        addTransfer(a, src, (src + G) % n, nNodes * (G - 1) + nNodes - 1 + base,
                    pmod(src + n - (base + nNodes - 1) * G, n), OpKind::Copy);
      }
  for (int32_t node = 0; node < nNodes; ++node)
    for (int32_t r = 0; r < G; ++r)
      for (int32_t base = 0; base < nNodes; ++base)
        for (int32_t offset = 0; offset < G - 1; ++offset) {
          const int32_t src = G * node + r;
          const int32_t dst = (r + offset + 1) % G + G * node;
          addTransfer(a, src, dst, nNodes * (G - 1) + 2 * nNodes - 2 + base, pmod(src + base * G, n), OpKind::Copy);
        }
  return a;
}

// examples/algorithms/hm_allgather.resccl
inline Algorithm hmAllGather(int32_t nNodes, int32_t G) {
  const int32_t n = nNodes * G;
  Algorithm a = emptyAlgorithm(Collective::AllGather, nNodes, G, 1);
  for (int32_t node = 0; node < nNodes; ++node)
    for (int32_t r = 0; r < G; ++r) {
      const int32_t src = G * node + r;
      for (int32_t offset = 1; offset < G; ++offset) addTransfer(a, src, G * node + (r + offset) % G, 0, src, OpKind::Copy);
      for (int32_t hop = 0; hop < nNodes - 1; ++hop) addTransfer(a, src, (src + G) % n, hop, pmod(src - hop * G + n, n), OpKind::Copy);
      for (int32_t hop = 1; hop < nNodes; ++hop)
        for (int32_t offset = 1; offset < G; ++offset)
          addTransfer(a, src, G * node + (r + offset) % G, hop, pmod(src - hop * G + n, n), OpKind::Copy);
    }
  return a;
}

// A ring AllReduce that stages every received chunk in scratch and reduces it locally, so the
// plan has local reduce/copy entries, a scratch buffer and count > 1 (two chunks per transfer).
inline Algorithm stagedRingAllReduce(int32_t n) {
  Algorithm a;
  a.name = "staged-ring";
  a.collective = Collective::AllReduce;
  a.nRanks = n;
  a.inPlace = false;
  a.bufferChunks = conventionalBufferChunks(Collective::AllReduce, n, 2 * n, 2);
  auto op = [&](int32_t src, BufferKind sb, int32_t si, int32_t dst, BufferKind db, int32_t di, int32_t step, OpKind kind) {
    Operation o;
    o.srcRank = src;
    o.srcBuffer = sb;
    o.srcIndex = si;
    o.dstRank = dst;
    o.dstBuffer = db;
    o.dstIndex = di;
    o.count = 2;
    o.step = step;
    o.kind = kind;
    a.ops.push_back(o);
  };
  // Step 0: every rank copies its input to its output.
  for (int32_t r = 0; r < n; ++r)
    for (int32_t c = 0; c < n; ++c) op(r, BufferKind::Input, 2 * c, r, BufferKind::Output, 2 * c, 0, OpKind::Copy);
  int32_t step = 1;
  // Reduce-scatter: at round s rank r sends chunk (r - s) to r + 1 into scratch, which reduces it.
  for (int32_t s = 0; s + 1 < n; ++s, step += 2)
    for (int32_t r = 0; r < n; ++r) {
      const int32_t c = ((r - s) % n + n) % n;
      op(r, BufferKind::Output, 2 * c, (r + 1) % n, BufferKind::Scratch, 0, step, OpKind::Copy);
      op((r + 1) % n, BufferKind::Scratch, 0, (r + 1) % n, BufferKind::Output, 2 * c, step + 1, OpKind::Reduce);
    }
  // All-gather: rank r forwards the fully reduced chunk (r + 1 - s).
  for (int32_t s = 0; s + 1 < n; ++s, ++step)
    for (int32_t r = 0; r < n; ++r) {
      const int32_t c = ((r + 1 - s) % n + n) % n;
      op(r, BufferKind::Output, 2 * c, (r + 1) % n, BufferKind::Output, 2 * c, step, OpKind::Copy);
    }
  return a;
}

}  // namespace tuccl::testing
