// Point-to-point batches (peer_batch.h).
#include "backend/peer_batch.h"

#include <string>

namespace tuccl::backend {
namespace {

// "send of 4096 bytes to rank 3 (transfer 2 of the pair)"
std::string transferText(const PeerTransfer& transfer) {
  return std::string(transfer.send ? "send of " : "receive of ") + std::to_string(transfer.bytes) + " bytes " +
         (transfer.send ? "to" : "from") + " rank " + std::to_string(transfer.peer) + " (transfer " +
         std::to_string(transfer.number) + " " + (transfer.send ? "to" : "from") + " that rank)";
}

// What the TB waited for when it stopped.
std::string stopText(const dev::TbReport& report) {
  switch (report.state) {
    case dev::kTbTagMismatch:
      return std::string(((report.seen ^ report.expected) >> 48) == 0
                             ? "got a slice of a send of another size"
                             : "got a slice of another transfer (" + std::to_string(report.seen >> 48) +
                                   " where it expected " + std::to_string(report.expected >> 48) + ")") +
             ": the send and the receive disagree on the size, or the two ranks issued their transfers in "
             "another order";
    case dev::kTbTimedOut:
      return report.wait == dev::kWaitCredit
                 ? "timed out waiting for the peer to take earlier slices (did it post the receive?)"
                 : "timed out waiting for data (did the peer post the send?)";
    case dev::kTbAborted: return "stopped by an abort (tucclCommAbort, or a TB that gave up)";
    default: return "never finished";
  }
}

}  // namespace

uint32_t peerTagOp(uint32_t number, int64_t bytes) {
  auto folded = static_cast<uint64_t>(bytes);
  folded ^= folded >> 32;
  folded ^= folded >> 16;
  return ((number & 0xffffu) << 16) | static_cast<uint32_t>(folded & 0xffffu);
}

std::vector<int32_t> peerChains(const PeerBatch& batch) {
  std::vector<int32_t> chains;
  for (size_t i = 0; i < batch.transfers.size(); ++i) {
    const PeerTransfer& t = batch.transfers[i];
    const bool continues = i > 0 && batch.transfers[i - 1].ring == t.ring && batch.transfers[i - 1].send == t.send;
    if (continues) {
      ++chains.back();
    } else {
      chains.push_back(static_cast<int32_t>(i));
      chains.push_back(1);
    }
  }
  return chains;
}

std::array<int32_t, 2> peerValues(const PeerTransfer& transfer) {
  return {transfer.send ? 1 : 0, static_cast<int32_t>(peerTagOp(transfer.number, transfer.bytes))};
}

dev::KernelArgs peerKernelArgs(const PeerTransfer& transfer, int64_t sliceBytes, int32_t rank) {
  dev::KernelArgs args;
  args.input = transfer.send ? transfer.buffer : nullptr;
  args.output = transfer.send ? nullptr : transfer.buffer;
  args.count = transfer.bytes;
  args.sliceElems = sliceBytes;
  args.dtype = dev::kUint8;
  args.op = dev::kSum;
  args.rank = rank;
  args.nRanks = 2;
  args.chunksPerUnit = 1;
  args.inPlaceCall = 1;
  args.protocol = dev::kProtoSimple;
  args.channels = 1;
  args.ringsPerChannel = 1;
  return args;
}

Status peerBatchStatus(const PeerBatch& batch, std::span<const dev::TbReport> reports) {
  std::string lines;
  bool timedOut = false, mismatch = false;
  for (size_t i = 0; i < reports.size() && i < batch.transfers.size(); ++i) {
    const dev::TbReport& report = reports[i];
    if (report.state == dev::kTbDone) continue;
    timedOut = timedOut || report.state == dev::kTbTimedOut;
    mismatch = mismatch || report.state == dev::kTbTagMismatch;
    lines += "\n  rank " + std::to_string(batch.rank) + ": " + transferText(batch.transfers[i]) + ", slice " +
             std::to_string(report.microBatch) + ": " + stopText(report);
  }
  if (lines.empty()) return {};
  const ErrorCode code = mismatch ? ErrorCode::InvalidArgument : timedOut ? ErrorCode::Timeout : ErrorCode::Aborted;
  return makeError(code, "point-to-point transfers did not finish:" + lines);
}

}  // namespace tuccl::backend
