// Point-to-point (tucclSend / tucclRecv): one TB per send or receive, through the staging ring of
// its pair of ranks (docs/kernels.md "Point-to-point"). The same primitives as the generated
// kernels move the bytes (primitives.h: PUSH, Simple protocol), so a send and its receive keep
// the rings' flag protocol, the abort word, the timeouts and the hang reports of the collectives.
//
// A transfer's KernelArgs: `count` bytes (dtype kUint8: the bytes travel whatever their type) of
// `input` (a send) or into `output` (a receive), one chunk, one channel, slices of `sliceElems`
// bytes; `rings` points at the pair's ring; `reports` at the TB's own report; `roleValues` holds
// {direction (1: send), the transfer's number on its pair}. Slice mb is tagged (number, mb): a
// send and a receive that do not match (other sizes, or a receive posted for another send) stop
// with a tag mismatch instead of mixing data.
#pragma once

#include "primitives.h"

namespace tuccl::dev {

enum PeerValue : int32_t { kPeerSending = 0, kPeerNumber = 1, kPeerValues = 2 };

/// Runs one transfer to its end, or until a wait gave up (the report says why).
TUCCL_DEVICE_INLINE void peerTransfer(const KernelArgs& args) {
  Tb t = makeTb(args, 0);
  const bool sending = args.roleValues[kPeerSending] != 0;
  const int32_t number = args.roleValues[kPeerNumber];
  for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) {
    t.at(0, mb);
    const bool ok = sending ? send(t, 0, kInput, 0, 0, 1, number, mb)
                            : receive(t, 0, -1, 0, kOutput, 0, 1, number, number, mb, false, true);
    if (!ok) {
      t.stopped();
      return;
    }
  }
  t.sync();
  if (threadIdx.x == 0) t.report->state = kTbDone;
}

}  // namespace tuccl::dev

#if defined(TUCCL_CUDA_COMPILER)
/// A batch of transfers: block b runs transfers[b].
TUCCL_KERNEL_THREADS(512) tuccl_peer_transfers(const tuccl::dev::KernelArgs* transfers) {
  tuccl::dev::peerTransfer(transfers[blockIdx.x]);
}
#endif
