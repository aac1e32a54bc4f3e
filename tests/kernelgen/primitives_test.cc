// The device primitive library compiled for the host (host shim): datatype conversions,
// vectorised reductions at every alignment, chunk geometry, and the PUSH protocol of send and
// the fused receive-and-forward forms between TB threads.
#include <cmath>
#include <random>
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

TEST(DevicePrimitives, ReduceAtEveryAlignment) {
  for (int offset = 0; offset < 4; ++offset) {
    for (int64_t n : {0, 1, 3, 4, 5, 17, 64, 1001}) {
      std::vector<float> a(static_cast<size_t>(n + 8), 1.5f), b(static_cast<size_t>(n + 8));
      for (int64_t i = 0; i < n + 8; ++i) b[i] = static_cast<float>(i);
      reduceElements(kFloat32, kMax, a.data() + offset, b.data() + offset, n);
      for (int64_t i = 0; i < n + 8; ++i) {
        const bool inside = i >= offset && i < offset + n;
        ASSERT_EQ(a[i], inside ? std::max(1.5f, static_cast<float>(i)) : 1.5f) << offset << " " << n << " " << i;
      }
    }
  }
  std::vector<int32_t> x = {INT32_MAX, 2, -3}, y = {1, 3, -4};
  reduceElements(kInt32, kSum, x.data(), y.data(), 3);
  EXPECT_EQ(x, (std::vector<int32_t>{INT32_MIN, 5, -7}));  // wraps
  reduceElements(kInt32, kProd, x.data() + 1, y.data() + 1, 2);
  EXPECT_EQ(x[1], 15);
  EXPECT_EQ(x[2], 28);
}

// Two "ranks" of one TB each: rank 0 sends chunk 0; rank 1 receives it with recvCopySend and
// forwards it to rank 2, which reduces it into its own chunk.
TEST(DevicePrimitives, FusedReceiveAndForward) {
  constexpr int64_t kCount = 100;
  constexpr int kRanks = 3;
  std::vector<std::vector<float>> data(kRanks, std::vector<float>(kCount));
  for (int r = 0; r < kRanks; ++r) {
    for (int64_t i = 0; i < kCount; ++i) data[r][i] = static_cast<float>((r + 1) * 1000 + i);
  }
  int32_t abortFlag = 0;
  std::vector<uint64_t> counters(8, 0), progress(4, 0), barrier(kRanks * 2, 0);
  std::vector<std::vector<char>> staging(2, std::vector<char>(3 * 16 * 4));
  std::vector<std::vector<uint64_t>> tags(2, std::vector<uint64_t>(6));  // 3 tags, then 3 slice sizes
  RingDevice rings[2];
  for (int i = 0; i < 2; ++i) {
    rings[i] = RingDevice{staging[i].data(), tags[i].data(), &counters[i * 4], &counters[i * 4 + 1],
                          &counters[i * 4 + 2], &counters[i * 4 + 3], 16 * 4, 3, 0};
  }
  std::vector<TbReport> reports(kRanks);
  std::vector<KernelArgs> args(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    KernelArgs& a = args[r];
    a.input = a.output = data[r].data();
    a.count = kCount;
    a.sliceElems = 16;  // 7 micro-batches, the last one short
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
    a.deadlineNs = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       (std::chrono::steady_clock::now() + std::chrono::seconds(20)).time_since_epoch())
                       .count();
  }
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
    EXPECT_EQ(t.nMicroBatches, 7);
    ok[2] = true;
    for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) ok[2] = ok[2] && recvReduceCopy(t, 1, 0, kOutput, 0, 1, 12, mb);
  });
  sender.join();
  forwarder.join();
  reducer.join();
  ASSERT_TRUE(ok[0] && ok[1] && ok[2]);
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(data[1][i], 1000 + i);
    ASSERT_EQ(data[2][i], 1000 + i + 3000 + i);
  }
}

}  // namespace
}  // namespace tuccl::dev
