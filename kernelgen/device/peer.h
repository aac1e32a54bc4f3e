// Point-to-point (tucclSend / tucclRecv): one TB per ring and direction of a batch, running its
// sends (or receives) one after the other, through the staging ring of their pair of ranks (docs/kernels.md "Point-to-point"). The same primitives as the generated
// kernels move the bytes (primitives.h: PUSH, Simple protocol), so a send and its receive keep
// the rings' flag protocol, the abort word, the timeouts and the hang reports of the collectives.
//
// A transfer's KernelArgs: `count` bytes (dtype kUint8: the bytes travel whatever their type) of
// `input` (a send) or into `output` (a receive), one chunk, one channel, slices of `sliceElems`
// bytes; `rings` points at the pair's ring; `reports` at the TB's own report; `roleValues` holds
// {direction (1: send), the transfer's tag operation (backend/peer_batch.h peerTagOp: its number
// on the pair and its size)}. Slice mb is tagged (operation, mb): a send and a receive that do
// not match (other sizes, or a receive posted for another send) stop with a tag mismatch instead
// of mixing data.
#pragma once

#include "primitives.h"

namespace tuccl::dev {

enum PeerValue : int32_t { kPeerSending = 0, kPeerNumber = 1, kPeerValues = 2 };

/// Threads of a transfer's TB on a GPU: like the collectives' kernels, enough loads in flight to
/// stream a slice at the SM's copy rate.
constexpr int32_t kPeerThreads = 512;

/// Runs one transfer to its end, or until a wait gave up (the report says why): whether it finished.
TUCCL_DEVICE_INLINE bool peerTransfer(const KernelArgs& args) {
  Tb t = makeTb(args, 0);
  const bool sending = args.roleValues[kPeerSending] != 0;
  const int32_t number = args.roleValues[kPeerNumber];
  for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) {
    t.at(0, mb);
    const bool ok = sending ? send(t, 0, kInput, 0, 0, 1, number, mb)
                            : receive(t, 0, -1, 0, kOutput, 0, 1, number, number, mb, false, true);
    if (!ok) {
      t.stopped();
      return false;
    }
  }
  t.sync();
  if (threadIdx.x == 0) t.report->state = kTbDone;
  return true;
}

/// Block `block` of a batch launch: its chain of transfers, one after the other — those of one ring
/// and direction, in issue order, so two transfers never share a ring at once.
/// `launch.roleValues` holds per block {first transfer, transfers}; `launch.scratch` the
/// transfers' KernelArgs, each with its ring and values (host-mapped memory on a GPU, read once
/// per transfer into shared memory by thread 0); the launch's abort word and wait bound
/// (spinLimit, or deadlineNs on the host) hold for all.
TUCCL_DEVICE_INLINE void peerChain(const KernelArgs& launch, int32_t block) {
#if defined(TUCCL_DEVICE_COMPILE)
  // Raw storage: a __shared__ variable may not have a constructor.
  __shared__ alignas(16) unsigned char argsBytes[sizeof(KernelArgs)];
  __shared__ alignas(16) unsigned char ringBytes[sizeof(RingDevice)];
  __shared__ int32_t values[kPeerValues];
  KernelArgs& args = *reinterpret_cast<KernelArgs*>(argsBytes);
  RingDevice& ring = *reinterpret_cast<RingDevice*>(ringBytes);
#else
  KernelArgs args;
  RingDevice ring;
  int32_t values[kPeerValues];
#endif
  const int32_t first = launch.roleValues[2 * block];
  const int32_t count = launch.roleValues[2 * block + 1];
  for (int32_t k = 0; k < count; ++k) {
    if (threadIdx.x == 0) {
      args = static_cast<const KernelArgs*>(launch.scratch)[first + k];
      ring = *args.rings;
      for (int32_t i = 0; i < kPeerValues; ++i) values[i] = args.roleValues[i];
      args.rings = &ring;
      args.roleValues = values;
      args.abort = launch.abort;
      args.spinLimit = launch.spinLimit;
      args.deadlineNs = launch.deadlineNs;
    }
    tbSync();
    if (!peerTransfer(args)) return;  // the chain's later transfers never start: they report so
    tbSync();                         // every thread is done with this transfer's copy
  }
}

}  // namespace tuccl::dev

#if defined(TUCCL_CUDA_COMPILER) || defined(TUCCL_PEER_HOST_KERNEL)
/// A batch as one launch (backend/cuda_device.cc): block b runs chain b (peerChain). The host
/// build (TUCCL_PEER_HOST_KERNEL) is what the fake driver of the tests runs.
TUCCL_KERNEL_THREADS(tuccl::dev::kPeerThreads) tuccl_peer_transfers(tuccl::dev::KernelArgs launch) {
  tuccl::dev::peerChain(launch, static_cast<tuccl::dev::int32_t>(blockIdx.x));
}
#endif
