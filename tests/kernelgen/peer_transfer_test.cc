// The point-to-point transfer of kernelgen/device/peer.h between two TB threads (the host build):
// the bytes arrive for sizes of one slice, many slices with a short last one, and more slices
// than the ring has slots; and what a transfer costs, counted (docs/runtime.md "Point-to-point"):
// the sender reads S and writes S into the ring, the receiver reads S and writes S, one slice
// per micro-batch, two TB barriers and one fence a slice on each side (the sender's release, the
// receiver's acquire), and a wait for a credit only once the ring's slots are all in use.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernelgen/device/peer.h"

namespace tuccl::dev {
namespace {

int64_t deadlineIn(int seconds) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             (std::chrono::steady_clock::now() + std::chrono::seconds(seconds)).time_since_epoch())
      .count();
}

struct Transfer {
  std::vector<uint8_t> sent, received;
  PrimitiveCounters senderCounts, receiverCounts;
  TbReport senderReport, receiverReport;
};

// One transfer of `bytes` through a ring of `slots` slots of `sliceBytes`, tagged `sendTag` on the
// sender and `receiveTag` on the receiver, the receiver expecting `receiveBytes`.
Transfer runTransfer(int64_t bytes, int64_t sliceBytes, int32_t slots, int32_t sendTag, int32_t receiveTag,
                     int64_t receiveBytes) {
  Transfer t;
  t.sent.resize(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < bytes; ++i) t.sent[i] = static_cast<uint8_t>(i * 131 + 7);
  t.received.assign(static_cast<size_t>(receiveBytes), 0);
  std::vector<uint64_t> staging(static_cast<size_t>(slots * sliceBytes / 8)), tags(2 * slots), flags(4, 0);
  RingDevice ring{reinterpret_cast<char*>(staging.data()), tags.data(), &flags[0], &flags[1], &flags[2], &flags[3],
                  sliceBytes, slots, 0};
  int32_t abortFlag = 0;
  int32_t sendValues[kPeerValues] = {1, sendTag}, receiveValues[kPeerValues] = {0, receiveTag};
  KernelArgs sender, receiver;
  for (KernelArgs* a : {&sender, &receiver}) {
    a->sliceElems = sliceBytes;
    a->dtype = kUint8;
    a->chunksPerUnit = 1;
    a->rings = &ring;
    a->abort = &abortFlag;
    a->deadlineNs = deadlineIn(20);
  }
  sender.input = t.sent.data();
  sender.count = bytes;
  sender.roleValues = sendValues;
  sender.reports = &t.senderReport;
  sender.counters = &t.senderCounts;
  receiver.output = t.received.data();
  receiver.count = receiveBytes;
  receiver.roleValues = receiveValues;
  receiver.reports = &t.receiverReport;
  receiver.counters = &t.receiverCounts;
  std::thread a([&] { peerTransfer(sender); });
  std::thread b([&] { peerTransfer(receiver); });
  a.join();
  b.join();
  return t;
}

class PeerTransferSizes : public ::testing::TestWithParam<int64_t> {};

TEST_P(PeerTransferSizes, TheBytesArriveAndTheCostIsCounted) {
  constexpr int64_t kSlice = 1024;
  const int64_t bytes = GetParam();
  const Transfer t = runTransfer(bytes, kSlice, 2, 77, 77, bytes);
  ASSERT_EQ(t.senderReport.state, kTbDone);
  ASSERT_EQ(t.receiverReport.state, kTbDone);
  EXPECT_EQ(t.received, t.sent);
  const auto slices = static_cast<uint64_t>((bytes + kSlice - 1) / kSlice);
  const auto s = static_cast<uint64_t>(bytes);
  for (const PrimitiveCounters* c : {&t.senderCounts, &t.receiverCounts}) {
    EXPECT_EQ(c->bytesRead, s);
    EXPECT_EQ(c->bytesWritten, s);
    EXPECT_EQ(c->slices, slices);
    EXPECT_EQ(c->barriers, 2 * slices + 1) << "two a slice, and the end";
  }
  EXPECT_EQ(t.senderCounts.fences, slices) << "the sender releases each slice once";
  EXPECT_EQ(t.receiverCounts.fences, slices) << "the receiver acquires each slice once";
  EXPECT_EQ(t.senderCounts.creditWaits, slices > 2 ? slices - 2 : 0) << "the ring's 2 slots start free";
  EXPECT_EQ(t.receiverCounts.dataWaits, slices);
}

INSTANTIATE_TEST_SUITE_P(OneSliceManySlicesShortLast, PeerTransferSizes,
                         ::testing::Values(int64_t{1}, int64_t{1000}, int64_t{1024}, int64_t{10 * 1024 + 3}));

// A receive posted for fewer bytes than the send stops with a tag mismatch and delivers nothing
// beyond its buffer; so does one tagged for another transfer.
TEST(PeerTransfer, AReceiveThatMeetsAnotherSendStopsWithATagMismatch) {
  const Transfer sizes = runTransfer(3000, 1024, 4, 5, 6, 2000);
  EXPECT_EQ(sizes.receiverReport.state, kTbTagMismatch);
  EXPECT_EQ(sizes.receiverReport.expected >> 32, 6u);
  EXPECT_EQ(sizes.receiverReport.seen >> 32, 5u);
}

}  // namespace
}  // namespace tuccl::dev
