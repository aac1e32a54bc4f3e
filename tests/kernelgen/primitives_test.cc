// The device primitive library compiled for the host (host shim): datatype conversions,
// vectorised reductions at every alignment, chunk geometry, and the PUSH protocol of send and
// the fused receive-and-forward forms between TB threads.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernelgen/device/primitives.h"

namespace tuccl::dev {
namespace {

TEST(DeviceDatatypes, HalfMatchesTheCompilersFloat16) {
#if defined(__FLT16_MAX__)
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const Half h{static_cast<uint16_t>(bits)};
    _Float16 reference;
    std::memcpy(&reference, &bits, 2);
    const float f = toFloat(h);
    if (std::isnan(static_cast<float>(reference))) {
      EXPECT_TRUE(std::isnan(f));
      continue;
    }
    ASSERT_EQ(f, static_cast<float>(reference)) << bits;
    ASSERT_EQ(toHalf(f).bits, bits) << "round trip " << bits;
  }
  std::mt19937 random(7);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(random), static_cast<int>(random() % 40) - 30);
    const _Float16 reference = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &reference, 2);
    ASSERT_EQ(toHalf(f).bits, bits) << f;
  }
#else
  GTEST_SKIP() << "no _Float16 in this compiler";
#endif
}

TEST(DeviceDatatypes, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(toBFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(toFloat(BFloat16{0x3f80}), 1.0f);
  EXPECT_EQ(toBFloat16(bitsFloat(0x3f808000u)).bits, 0x3f80);  // tie, even stays
  EXPECT_EQ(toBFloat16(bitsFloat(0x3f818000u)).bits, 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(toBFloat16(bitsFloat(0x3f808001u)).bits, 0x3f81);
  EXPECT_TRUE(std::isnan(toFloat(toBFloat16(NAN))));
  for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
    if ((bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0) continue;  // nan payloads
    ASSERT_EQ(toBFloat16(toFloat(BFloat16{static_cast<uint16_t>(bits)})).bits, bits);
  }
}

// The fp8 code nearest to `f` found by search over every finite value (ties to the even code),
// with CUDA's __NV_SATFINITE rules: beyond the largest plus half an ulp (or infinite) the largest,
// NaN 0x7f. Independent of datatypes.h's bit manipulation.
template <typename Fp8>
uint8_t nearestFp8(float f, uint8_t largest, double halfUlpAboveLargest) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const double x = std::fabs(static_cast<double>(f));
  if (x > halfUlpAboveLargest) return sign | largest;
  uint8_t best = 0;
  double bestDistance = INFINITY;
  for (uint8_t code = 0; code <= largest; ++code) {
    const double distance = std::fabs(static_cast<double>(toFloat(Fp8{code})) - x);
    if (distance < bestDistance || (distance == bestDistance && (code & 1) == 0)) {
      best = code;
      bestDistance = distance;
    }
  }
  return sign | best;
}

TEST(DeviceDatatypes, Fp8ConvertsLikeCudasSaturatingConversion) {
  // Every code converts to float and back to itself, but NaNs (0x7f) and e5m2's infinities,
  // which saturate to the largest finite value.
  for (uint32_t code = 0; code < 256; ++code) {
    const auto c = static_cast<uint8_t>(code);
    const float e4m3 = toFloat(Fp8E4M3{c});
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(e4m3)) << code;
      EXPECT_EQ(toFp8E4M3(e4m3).bits, 0x7f);
    } else {
      ASSERT_EQ(toFp8E4M3(e4m3).bits, c) << code;
    }
    const float e5m2 = toFloat(Fp8E5M2{c});
    if ((c & 0x7c) == 0x7c && (c & 3) != 0) {
      EXPECT_TRUE(std::isnan(e5m2)) << code;
      EXPECT_EQ(toFp8E5M2(e5m2).bits, 0x7f);
    } else if ((c & 0x7f) == 0x7c) {
      EXPECT_TRUE(std::isinf(e5m2)) << code;
      EXPECT_EQ(toFp8E5M2(e5m2).bits, (c & 0x80) | 0x7b) << code;
    } else {
      ASSERT_EQ(toFp8E5M2(e5m2).bits, c) << code;
    }
  }
  // Known values: the largest, saturation, infinities, NaN, ties to even, subnormals.
  EXPECT_EQ(toFloat(Fp8E4M3{0x7e}), 448.0f);
  EXPECT_EQ(toFloat(Fp8E5M2{0x7b}), 57344.0f);
  EXPECT_EQ(toFloat(Fp8E4M3{0x01}), std::ldexp(1.0f, -9));
  EXPECT_EQ(toFloat(Fp8E5M2{0x01}), std::ldexp(1.0f, -16));
  EXPECT_EQ(toFloat(Fp8E4M3{0xb8}), -1.0f);
  EXPECT_EQ(toFp8E4M3(464.0f).bits, 0x7e);   // a tie between 448 and 480: even
  EXPECT_EQ(toFp8E4M3(465.0f).bits, 0x7e);   // saturates
  EXPECT_EQ(toFp8E4M3(INFINITY).bits, 0x7e);
  EXPECT_EQ(toFp8E4M3(-INFINITY).bits, 0xfe);
  EXPECT_EQ(toFp8E5M2(61440.0f).bits, 0x7b);  // would round to infinity
  EXPECT_EQ(toFp8E5M2(-INFINITY).bits, 0xfb);
  EXPECT_EQ(toFp8E4M3(NAN).bits, 0x7f);
  EXPECT_EQ(toFp8E5M2(-NAN).bits, 0x7f);
  EXPECT_EQ(toFp8E4M3(1.0625f).bits, 0x38);  // tie between 1 (even) and 1.125
  EXPECT_EQ(toFp8E4M3(1.1875f).bits, 0x3a);  // tie between 1.125 (odd) and 1.25
  EXPECT_EQ(toFp8E5M2(1.125f).bits, 0x3c);
  EXPECT_EQ(toFp8E5M2(1.375f).bits, 0x3e);
  EXPECT_EQ(toFp8E4M3(std::ldexp(1.0f, -10)).bits, 0x00);  // half the smallest subnormal: even
  EXPECT_EQ(toFp8E4M3(std::ldexp(1.5f, -10)).bits, 0x01);
  EXPECT_EQ(toFp8E4M3(-std::ldexp(3.0f, -10)).bits, 0x82);  // 1.5 subnormal units: even
  EXPECT_EQ(toFp8E4M3(std::ldexp(1.9999f, -7)).bits, 0x08);  // rounds up into the smallest normal
  EXPECT_EQ(toFp8E5M2(std::ldexp(1.0f, -17)).bits, 0x00);
  EXPECT_EQ(toFp8E5M2(std::ldexp(1.25f, -17)).bits, 0x01);
  EXPECT_EQ(toFp8E4M3(-0.0f).bits, 0x80);
  // Random floats over the whole range against the search.
  std::mt19937 random(11);
  for (int i = 0; i < 100000; ++i) {
    const float f = std::ldexp(std::uniform_real_distribution<float>(-2, 2)(random), static_cast<int>(random() % 44) - 26);
    ASSERT_EQ(toFp8E4M3(f).bits, nearestFp8<Fp8E4M3>(f, 0x7e, 464.0)) << f;
    ASSERT_EQ(toFp8E5M2(f).bits, nearestFp8<Fp8E5M2>(f, 0x7b, 61439.999)) << f;
  }
  // Every midpoint between neighbouring codes, and a hair either side of it.
  for (uint8_t code = 0; code < 0x7e; ++code) {
    for (bool e4m3 : {true, false}) {
      if (!e4m3 && code >= 0x7b) continue;
      const float a = e4m3 ? toFloat(Fp8E4M3{code}) : toFloat(Fp8E5M2{code});
      const float b = e4m3 ? toFloat(Fp8E4M3{static_cast<uint8_t>(code + 1)}) : toFloat(Fp8E5M2{static_cast<uint8_t>(code + 1)});
      for (float f : {(a + b) / 2, std::nextafter((a + b) / 2, 0.0f), std::nextafter((a + b) / 2, INFINITY)}) {
        const uint8_t got = e4m3 ? toFp8E4M3(f).bits : toFp8E5M2(f).bits;
        const uint8_t want = e4m3 ? nearestFp8<Fp8E4M3>(f, 0x7e, 464.0) : nearestFp8<Fp8E5M2>(f, 0x7b, 61439.999);
        ASSERT_EQ(got, want) << (e4m3 ? "e4m3 " : "e5m2 ") << f;
      }
    }
  }
}

// int8, uint32, uint64 and fp8 through the data loops: integer sums and products wrap, min and
// max compare in the type (unsigned for the unsigned types), fp8 rounds once per operation; avg's
// division truncates toward zero, in the promoted type (int8 by 200 ranks); PreMulSum's scaling.
TEST(DevicePrimitives, NewDatatypesReduceScaleAndDivide) {
  std::vector<int8_t> a8 = {100, -100, 16, -128}, b8 = {100, -100, 16, 127};
  reduceFromShared(kInt8, kSum, a8.data(), b8.data(), 4);
  EXPECT_EQ(a8, (std::vector<int8_t>{-56, 56, 32, -1}));
  reduceFromShared(kInt8, kProd, a8.data(), b8.data(), 4);
  EXPECT_EQ(a8, (std::vector<int8_t>{32, 32, 0, -127}));  // -5600, -5600, 512, -127 mod 256
  reduceFromShared(kInt8, kMin, a8.data(), b8.data(), 4);
  EXPECT_EQ(a8, (std::vector<int8_t>{32, -100, 0, -127}));
  std::vector<uint32_t> a32 = {0xffffffffu, 3, 0x80000000u}, b32 = {2, 0xfffffffeu, 2};
  reduceFromShared(kUint32, kSum, a32.data(), b32.data(), 3);
  EXPECT_EQ(a32, (std::vector<uint32_t>{1, 1, 0x80000002u}));
  reduceFromShared(kUint32, kMax, a32.data(), b32.data(), 3);
  EXPECT_EQ(a32, (std::vector<uint32_t>{2, 0xfffffffeu, 0x80000002u}));
  std::vector<uint64_t> a64 = {~0ull, 1ull << 63}, b64 = {2, 3};
  reduceFromShared(kUint64, kProd, a64.data(), b64.data(), 2);
  EXPECT_EQ(a64, (std::vector<uint64_t>{~0ull - 1, 1ull << 63}));
  reduceFromShared(kUint64, kMin, a64.data(), b64.data(), 2);
  EXPECT_EQ(a64, (std::vector<uint64_t>{2, 3}));
  std::vector<uint8_t> f8 = {toFp8E4M3(1.0f).bits, toFp8E4M3(400.0f).bits}, g8 = {toFp8E4M3(0.0625f).bits, toFp8E4M3(100.0f).bits};
  reduceFromShared(kFloat8E4M3, kSum, f8.data(), g8.data(), 2);
  EXPECT_EQ(toFloat(Fp8E4M3{f8[0]}), 1.0f);    // 1.0625 ties to 1
  EXPECT_EQ(toFloat(Fp8E4M3{f8[1]}), 448.0f);  // 384 + 96 saturates
  std::vector<uint8_t> e5 = {toFp8E5M2(3.0f).bits}, e5b = {toFp8E5M2(5.0f).bits};
  reduceFromShared(kFloat8E5M2, kProd, e5.data(), e5b.data(), 1);
  EXPECT_EQ(toFloat(Fp8E5M2{e5[0]}), 16.0f);  // 15 rounds to 16 (a tie: 12, 16; even)

  std::vector<int8_t> sums = {-100, 100, 127};
  divideElements(kInt8, sums.data(), 3, 200);
  EXPECT_EQ(sums, (std::vector<int8_t>{0, 0, 0}));
  sums = {-101, 101, -128};
  divideElements(kInt8, sums.data(), 3, 2);
  EXPECT_EQ(sums, (std::vector<int8_t>{-50, 50, -64}));
  std::vector<uint64_t> big = {~0ull};
  divideElements(kUint64, big.data(), 1, 3);
  EXPECT_EQ(big[0], ~0ull / 3);
  std::vector<uint8_t> fp8Avg = {toFp8E5M2(7.0f).bits};
  divideElements(kFloat8E5M2, fp8Avg.data(), 1, 2);
  EXPECT_EQ(toFloat(Fp8E5M2{fp8Avg[0]}), 3.5f);

  std::vector<int32_t> in = {INT32_MAX, -2, 3}, out(3);
  const int32_t factor = 3;
  scaleElements(kInt32, out.data(), in.data(), 3, &factor);
  EXPECT_EQ(out, (std::vector<int32_t>{INT32_MAX - 2, -6, 9}));  // 3 * (2^31 - 1) wraps
  std::vector<float> floats = {1.5f, -2}, scaled(2);
  const float third = 1.0f / 3;
  scaleElements(kFloat32, scaled.data(), floats.data(), 2, &third);
  EXPECT_EQ(scaled, (std::vector<float>{1.5f * third, -2 * third}));
  std::vector<Half> halves = {toHalf(3.0f)};
  const Half halfScale = toHalf(0.1f);
  scaleElements(kFloat16, halves.data(), halves.data(), 1, &halfScale);  // in place
  EXPECT_EQ(halves[0].bits, toHalf(3.0f * toFloat(halfScale)).bits);
  std::vector<uint8_t> fp8In = {toFp8E4M3(3.0f).bits};
  const uint8_t fp8Scale = toFp8E4M3(-0.75f).bits;
  scaleElements(kFloat8E4M3, fp8In.data(), fp8In.data(), 1, &fp8Scale);
  EXPECT_EQ(toFloat(Fp8E4M3{fp8In[0]}), -2.25f);
}

TEST(DevicePrimitives, ReduceAtEveryAlignment) {
  for (int offset = 0; offset < 4; ++offset) {
    for (int64_t n : {0, 1, 3, 4, 5, 17, 64, 1001}) {
      std::vector<float> a(static_cast<size_t>(n + 8), 1.5f), b(static_cast<size_t>(n + 8));
      for (int64_t i = 0; i < n + 8; ++i) b[i] = static_cast<float>(i);
      reduceFromShared(kFloat32, kMax, a.data() + offset, b.data() + offset, n);
      for (int64_t i = 0; i < n + 8; ++i) {
        const bool inside = i >= offset && i < offset + n;
        ASSERT_EQ(a[i], inside ? std::max(1.5f, static_cast<float>(i)) : 1.5f) << offset << " " << n << " " << i;
      }
    }
  }
  std::vector<int32_t> x = {INT32_MAX, 2, -3}, y = {1, 3, -4};
  reduceFromShared(kInt32, kSum, x.data(), y.data(), 3);
  EXPECT_EQ(x, (std::vector<int32_t>{INT32_MIN, 5, -7}));  // wraps
  reduceFromShared(kInt32, kProd, x.data() + 1, y.data() + 1, 2);
  EXPECT_EQ(x[1], 15);
  EXPECT_EQ(x[2], 28);
}

int64_t deadlineIn(int seconds) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             (std::chrono::steady_clock::now() + std::chrono::seconds(seconds)).time_since_epoch())
      .count();
}

struct FusedCase {
  int32_t protocol;
  int64_t count;
  int64_t sliceElems;
};

std::string fusedCaseName(const ::testing::TestParamInfo<FusedCase>& info) {
  const char* names[] = {"LL", "LL128", "Simple"};
  return std::string(names[info.param.protocol]) + "_" + std::to_string(info.param.count) + "_by_" +
         std::to_string(info.param.sliceElems);
}

class FusedReceiveAndForward : public ::testing::TestWithParam<FusedCase> {};

// Two "ranks" of one TB each: rank 0 sends chunk 0; rank 1 receives it with recvCopySend and
// forwards it to rank 2, which reduces it into its own chunk. Every protocol, with a short last
// micro-batch, and slices larger than an LL / LL128 receiver's reduce buffer.
TEST_P(FusedReceiveAndForward, EveryProtocol) {
  const FusedCase c = GetParam();
  constexpr int kRanks = 3;
  constexpr int32_t kSlots = 3;
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(static_cast<size_t>(c.count)));
  for (int r = 0; r < kRanks; ++r) {
    for (int64_t i = 0; i < c.count; ++i) data[r][i] = static_cast<float>((r + 1) * 100000 + i);
  }
  int32_t abortFlag = 0;
  std::vector<uint64_t> counters(8, 0), progress(4, 0), barrier(kRanks * 2, 0);
  const int64_t slotBytes = stagingSlotBytes(c.protocol, c.sliceElems * 4);
  std::vector<std::vector<uint64_t>> staging(2, std::vector<uint64_t>(static_cast<size_t>(kSlots * slotBytes / 8)));
  std::vector<std::vector<uint64_t>> tags(2, std::vector<uint64_t>(2 * kSlots));  // tags, then slice sizes
  RingDevice rings[2];
  for (int i = 0; i < 2; ++i) {
    rings[i] = RingDevice{reinterpret_cast<char*>(staging[i].data()), tags[i].data(), &counters[i * 4], &counters[i * 4 + 1],
                          &counters[i * 4 + 2], &counters[i * 4 + 3], slotBytes, kSlots, 0};
  }
  std::vector<TbReport> reports(kRanks);
  std::vector<KernelArgs> args(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    KernelArgs& a = args[r];
    a.input = a.output = data[r].data();
    a.count = c.count;
    a.sliceElems = c.sliceElems;
    a.dtype = kFloat32;
    a.op = kSum;
    a.rank = r;
    a.nRanks = kRanks;
    a.chunksPerUnit = 1;
    a.rings = rings;
    a.progress = progress.data();
    a.barrier = &barrier[r * 2];
    a.reports = &reports[r];
    a.abort = &abortFlag;
    a.deadlineNs = deadlineIn(20);
    a.protocol = c.protocol;
  }
  const int64_t microBatches = (c.count + c.sliceElems - 1) / c.sliceElems;
  bool ok[kRanks] = {false, false, false};
  std::thread sender([&] {
    Tb t = makeTb(args[0], 0);
    ok[0] = true;
    for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) ok[0] = ok[0] && send(t, 0, kOutput, 0, 0, 1, 11, mb);
  });
  std::thread forwarder([&] {
    Tb t = makeTb(args[1], 0);
    ok[1] = true;
    for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) ok[1] = ok[1] && recvCopySend(t, 0, 1, 0, kOutput, 0, 1, 11, 12, mb);
  });
  std::thread reducer([&] {
    Tb t = makeTb(args[2], 0);
    EXPECT_EQ(t.nMicroBatches, microBatches);
    ok[2] = true;
    for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) ok[2] = ok[2] && recvReduceCopy(t, 1, 0, kOutput, 0, 1, 12, mb);
  });
  sender.join();
  forwarder.join();
  reducer.join();
  ASSERT_TRUE(ok[0] && ok[1] && ok[2]) << reports[1].state << " " << reports[2].state;
  for (int64_t i = 0; i < c.count; ++i) {
    ASSERT_EQ(data[1][i], 100000 + i);
    ASSERT_EQ(data[2][i], 100000 + i + 300000 + i);
  }
  // Both rings passed every slice and returned every credit.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(counters[i * 4], static_cast<uint64_t>(microBatches));
    EXPECT_EQ(counters[i * 4 + 1], static_cast<uint64_t>(microBatches));
  }
}

// A rank barrier's word serves barrier after barrier (and call after call) without a reset: 6 TBs
// pass 200 barriers on one word; after each, every TB sees every other's write of that round, and
// the word ends at generation 200 with no arrivals.
TEST(DevicePrimitives, RankBarrierWordNeedsNoReset) {
  constexpr int kTbs = 6;
  constexpr int kRounds = 200;
  int32_t abortFlag = 0;
  uint64_t barrier[2] = {0, 0};
  std::vector<TbReport> reports(kTbs);
  std::vector<KernelArgs> args(kTbs);
  std::vector<std::atomic<int>> round(kTbs);
  for (std::atomic<int>& r : round) r = -1;
  std::vector<int> passed(kTbs, 0);
  std::vector<std::thread> threads;
  for (int tb = 0; tb < kTbs; ++tb) {
    KernelArgs& a = args[tb];
    a.barrier = barrier;
    a.reports = reports.data();
    a.abort = &abortFlag;
    a.deadlineNs = deadlineIn(20);
    a.count = 1;
    a.dtype = kFloat32;
    threads.emplace_back([&, tb] {
      Tb t = makeTb(args[tb], tb);
      for (int i = 0; i < kRounds; ++i) {
        round[tb].store(i, std::memory_order_relaxed);
        if (!rankBarrier(t, 0, kTbs)) return;
        for (int other = 0; other < kTbs; ++other) {
          if (round[other].load(std::memory_order_relaxed) < i) return;
        }
        // Nobody writes round i + 1 before everyone read round i: the next barrier's arrivals
        // need every TB, so hold the write behind a second barrier on the other word.
        if (!rankBarrier(t, 1, kTbs)) return;
        ++passed[tb];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int tb = 0; tb < kTbs; ++tb) EXPECT_EQ(passed[tb], kRounds) << "TB " << tb << " state " << reports[tb].state;
  EXPECT_EQ(barrier[0], uint64_t{kRounds} << 32);
  EXPECT_EQ(barrier[1], uint64_t{kRounds} << 32);
  EXPECT_EQ(abortFlag, 0);
}

INSTANTIATE_TEST_SUITE_P(Protocols, FusedReceiveAndForward,
                         ::testing::Values(FusedCase{kProtoSimple, 100, 16}, FusedCase{kProtoLL, 100, 16},
                                           FusedCase{kProtoLL128, 100, 16}, FusedCase{kProtoLL, 2500, 1100},
                                           FusedCase{kProtoLL128, 2500, 1100}, FusedCase{kProtoLL, 3, 2},
                                           FusedCase{kProtoLL128, 3, 2}),
                         fusedCaseName);

TEST(DeviceProtocols, SlotBytesPerProtocol) {
  EXPECT_EQ(stagingSlotBytes(kProtoSimple, 0), 0);
  EXPECT_EQ(stagingSlotBytes(kProtoSimple, 100), 112);
  EXPECT_EQ(stagingSlotBytes(kProtoLL, 0), 32);     // one line pair even when empty
  EXPECT_EQ(stagingSlotBytes(kProtoLL, 100), 224);  // twice the payload rounded to 16
  EXPECT_EQ(stagingSlotBytes(kProtoLL128, 0), 128);
  EXPECT_EQ(stagingSlotBytes(kProtoLL128, 120), 128);
  EXPECT_EQ(stagingSlotBytes(kProtoLL128, 121), 256);
  EXPECT_EQ(stagingSlotBytes(kProtoLL128, 1 << 20), (((1 << 20) + 119) / 120) * 128);
  for (int64_t bytes : {0, 1, 7, 8, 9, 100, 119, 120, 121, 4096, 65537}) {
    for (int32_t protocol : {kProtoLL, kProtoLL128, kProtoSimple}) {
      EXPECT_LE(stagedBytes(protocol, bytes), stagingSlotBytes(protocol, bytes)) << protocol << " " << bytes;
      EXPECT_EQ(stagingSlotBytes(protocol, bytes) % 16, 0);
    }
  }
}

// The bytes a sender leaves in a slot: LL words {4 data bytes, flag k + 1}; LL128 lines of 120
// data bytes and an 8-byte flag k + 1. From an unaligned source of an odd length.
TEST(DeviceProtocols, LineLayoutInTheSlot) {
  std::vector<char> source(400);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<char>(i * 7 + 3);
  const char* src = source.data() + 3;
  const int64_t bytes = 251;
  // One spare word past the slot, to see that nothing is written beyond the slice's lines.
  std::vector<uint64_t> slot(static_cast<size_t>(stagingSlotBytes(kProtoLL, bytes) / 8) + 1, 0);
  writeLLSlice(reinterpret_cast<char*>(slot.data()), src, bytes, 41);
  for (int64_t line = 0; line < llPairs(bytes) * 2; ++line) {
    ASSERT_EQ(slot[line] >> 32, 42u) << line;
    for (int64_t b = 0; b < 4 && line * 4 + b < bytes; ++b) {
      ASSERT_EQ(static_cast<char>((slot[line] >> (8 * b)) & 0xff), src[line * 4 + b]) << line << " " << b;
    }
  }
  EXPECT_EQ(slot[static_cast<size_t>(llPairs(bytes) * 2)], 0u);  // nothing past the slice's lines

  std::vector<uint64_t> lines(static_cast<size_t>(stagingSlotBytes(kProtoLL128, bytes) / 8), 0);
  writeLL128Slice(reinterpret_cast<char*>(lines.data()), src, bytes, 6);
  const char* raw = reinterpret_cast<const char*>(lines.data());
  for (int64_t line = 0; line < ll128Lines(bytes); ++line) {
    ASSERT_EQ(lines[static_cast<size_t>(line * 16 + 15)], 7u) << line;
    for (int64_t b = 0; b < 120 && line * 120 + b < bytes; ++b) ASSERT_EQ(raw[line * 128 + b], src[line * 120 + b]);
  }

  // Read back into an unaligned destination, whole and in pieces.
  KernelArgs args;
  TbReport report;
  int32_t abortFlag = 0;
  args.abort = &abortFlag;
  args.deadlineNs = deadlineIn(10);
  std::vector<char> out(300, 0);
  ASSERT_TRUE(readLLPiece(args, report, 0, reinterpret_cast<char*>(slot.data()), 41, bytes, 0, bytes, out.data() + 1));
  EXPECT_EQ(std::memcmp(out.data() + 1, src, bytes), 0);
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(readLL128Piece(args, report, 0, raw, 6, bytes, 120, bytes - 120, out.data() + 5));
  EXPECT_EQ(std::memcmp(out.data() + 5, src + 120, bytes - 120), 0);
  EXPECT_EQ(report.state, kTbRunning);
}

// A stale line (the flag of an earlier slice) is never taken for the slice waited for: the
// bounded wait gives up and names the line's flag.
TEST(DeviceProtocols, StaleLinesAreWaitedForNotRead) {
  for (int32_t protocol : {kProtoLL, kProtoLL128}) {
    std::vector<uint64_t> slot(static_cast<size_t>(stagingSlotBytes(protocol, 64) / 8), 0);
    std::vector<char> src(64, 9), out(64, 0);
    char* at = reinterpret_cast<char*>(slot.data());
    if (protocol == kProtoLL) {
      writeLLSlice(at, src.data(), 64, 4);  // slice 4's lines; slice 4 + nSlots is awaited
    } else {
      writeLL128Slice(at, src.data(), 64, 4);
    }
    KernelArgs args;
    TbReport report;
    int32_t abortFlag = 0;
    args.abort = &abortFlag;
    args.deadlineNs = deadlineIn(0);
    const bool ok = protocol == kProtoLL ? readLLPiece(args, report, 3, at, 6, 64, 0, 64, out.data())
                                         : readLL128Piece(args, report, 3, at, 6, 64, 0, 64, out.data());
    EXPECT_FALSE(ok);
    EXPECT_EQ(report.state, kTbTimedOut);
    EXPECT_EQ(report.wait, kWaitLine);
    EXPECT_EQ(report.ring, 3);
    EXPECT_EQ(report.expected, 7u);
    EXPECT_EQ(report.seen, 5u);
    EXPECT_EQ(abortFlag, 1);
    EXPECT_EQ(out, std::vector<char>(64, 0));
  }
}

}  // namespace
}  // namespace tuccl::dev
