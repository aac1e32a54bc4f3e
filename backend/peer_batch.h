// Point-to-point on a device (device.h: Device::launchPeers): a batch of sends and receives that
// run at once, one TB each, through the staging rings of their pairs of ranks
// (kernelgen/device/peer.h). What every device derives from a batch the same way lives here: each
// transfer's kernel arguments, and the error of a batch whose TBs did not all finish.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/staging_layout.h"
#include "kernelgen/device/kernel_args.h"
#include "support/status.h"

namespace tuccl::backend {

/// One send or receive of a batch.
struct PeerTransfer {
  bool send = true;
  int32_t peer = 0;
  void* buffer = nullptr;  ///< read (send) or written (receive)
  int64_t bytes = 0;
  uint32_t number = 0;  ///< the transfer's number on its pair and direction: slices are tagged with it
  int32_t ring = 0;     ///< its pair's ring among PeerBatch::placement's
};

struct PeerBatch {
  /// None with this rank itself (those are copies); those of one ring and direction next to each
  /// other, in issue order (they run as one chain: peerChains).
  std::vector<PeerTransfer> transfers;
  const PlanPlacement* placement = nullptr;  ///< the point-to-point rings (StagingAllocator::placePeerRings)
  int64_t sliceBytes = 0;  ///< payload bytes of a slice (the rings' slot size)
  int32_t rank = 0;
  double timeoutSeconds = 300;
  uint64_t sequence = 0;  ///< the communicator's call number: devices run calls in this order
};

/// The operation number a transfer's slices are tagged with (kernel_args.h sliceTag): the low 16
/// bits of its number on the pair, then 16 bits folded from its size, so a receive that meets a
/// send of another size or another send stops with a tag mismatch (but for one size in 65536).
uint32_t peerTagOp(uint32_t number, int64_t bytes);

/// The chains of a batch, one TB each (kernelgen/device/peer.h peerChain): per chain its first
/// transfer and how many, flattened ({first, count, first, count, ...}). A chain is a run of
/// transfers of one ring and direction.
std::vector<int32_t> peerChains(const PeerBatch& batch);

/// The values transfer `t`'s TB reads (kernelgen/device/peer.h: PeerValue).
std::array<int32_t, 2> peerValues(const PeerTransfer& transfer);

/// Transfer `t`'s kernel arguments but for what the device owns (rings, report, values, abort,
/// wait bound): its buffer, its bytes as uint8 elements, the slice, one chunk and one channel.
dev::KernelArgs peerKernelArgs(const PeerTransfer& transfer, int64_t sliceBytes, int32_t rank);

/// Ok when every transfer's TB finished (reports[i] is transfer i's). Otherwise the stopped ones,
/// one per line ("send of 4096 bytes to rank 3 (its transfer 2 on the pair), slice 0: timed out
/// waiting for the credit ..."): Timeout for a wait that timed out, InvalidArgument for a receive
/// that got slices of another send (the two sides' sizes or order differ), Aborted for an abort.
Status peerBatchStatus(const PeerBatch& batch, std::span<const dev::TbReport> reports);

}  // namespace tuccl::backend
