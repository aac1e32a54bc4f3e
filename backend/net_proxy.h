// The inter-node proxy of one rank (design.md "libtuccl"): a thread that carries the staging rings
// between this rank and the ranks of other hosts through a net plugin (net_plugin.h), so the
// generated kernels run unchanged whether a peer is on this host or another.
//
// A ring a -> b with b on another host: a's kernel writes slices, tags, sizes and `posted` into
// a's private shadow of b's segment (transport/staging_transport.h); a's proxy sees `posted`
// rise and sends each new slice to b's proxy, which writes it into b's real segment (slot, tag)
// and raises `posted` there. b's kernel consumes it and raises `consumed` in b's shadow of a's
// segment; b's proxy sends that credit back and a's proxy raises `consumed` in a's real segment.
// The credits keep both ends' slots free exactly as within a host: a slice is written (in a's
// shadow or b's segment) only after its slot's previous slice was consumed.
//
// Wire: one send and one receive connection per remote peer, both FIFO (every message tag 0).
// A message is a frame of records (a 16-byte header, then records of 48 bytes): a slice of at
// most kInlineSliceBytes travels inside its record; a larger one goes as the next message on its
// own, straight from the shadow slot into the peer's slot (no copy). Records carry the offsets
// in the receiver's segment (the placement is the same on every rank), so a proxy needs no
// knowledge of the peer's plans. An abort record (a TB failed, or tucclCommAbort) makes the peer
// raise its host's abort word; a network error raises this host's and is reported.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/bootstrap.h"
#include "backend/device.h"
#include "backend/net_plugin.h"
#include "backend/staging_layout.h"
#include "support/status.h"
#include "support/vocabulary.h"

namespace tuccl::backend {

inline constexpr size_t kInlineSliceBytes = 8 << 10;  // slices up to this travel inside a frame
inline constexpr size_t kFrameBytes = 64 << 10;        // one frame message, at most
// The proxy thread's polling (NetProxy::kick). NCCL's proxy progresses its posted operations
// without sleeping and waits on a condition variable when it has none (proxy.cc); TuCCL's does
// not see the calls' operations, only their launches and the rings' words, so it keeps polling a
// while after the last activity: a few calls' worth at small sizes, far below a compute phase.
inline constexpr std::chrono::microseconds kSpinIdle{5000};
inline constexpr std::chrono::microseconds kIdleWait{1000};
// TBs that polled within this long are progressing the proxy: its thread stays off the cores.
inline constexpr std::chrono::microseconds kTbPollRecent{200};

struct NetProxyOptions {
  int32_t rank = 0;
  std::vector<int32_t> hostOf;  ///< by rank: the host (node) index
  HostSegments staging;
  double timeoutSeconds = 300;  ///< connection setup
};

class NetProxy {
 public:
  /// Listens, exchanges the handles over `bootstrap` (collective: every rank calls it), connects
  /// to and accepts from every rank of another host, then starts the thread. `onError` gets the
  /// first network failure (from the proxy's thread).
  /// `net` may be the error of loading the plugin: every rank then fails together.
  static Expected<std::unique_ptr<NetProxy>> start(Expected<std::unique_ptr<NetApi>> net, const NetProxyOptions& options,
                                                   Bootstrap& bootstrap, std::function<void(const Status&)> onError);
  ~NetProxy();  ///< stops the thread, closes the connections
  NetProxy(const NetProxy&) = delete;
  NetProxy& operator=(const NetProxy&) = delete;

  /// Stops the thread (idempotent): after every rank finished its calls, so that peers closing
  /// their connections at teardown are not reported as failures.
  void stop();
  /// Watches the rings of `placement` that join this rank to another host's (call before a
  /// kernel using them runs; thread-safe). `protocol`: how the plan's kernels fill the slots; an
  /// LL / LL128 slice travels as pieces of whole lines that the receiving proxy stores as the
  /// kernels read them (8-byte LL lines whole, LL128 flags last).
  void addRings(const PlanPlacement& placement, Protocol protocol = Protocol::Simple);
  /// A call is being launched: wakes the thread if it waits. It busy-polls (yielding its core)
  /// while slices or credits move and for kSpinIdle after the last of them or of the kicks; then
  /// it waits for the next kick, looking at the network every kIdleWait (a peer's abort, a late
  /// kernel's slices). Cheap when the thread is awake: an atomic store and a futex check.
  void kick();
  /// The proxy's progress for the CPU device's TBs (Device::setHostPoll): a TB that waits runs a
  /// round of it when no other thread does (so the frame it waits for moves without a switch to
  /// the proxy's thread), and while TBs do, the thread waits for kicks instead of polling beside
  /// them for a core. `ended` runs a last round and wakes the thread, which carries on what the
  /// kernel left in flight. Stays valid after the proxy is destroyed (it then does nothing).
  HostPoll hostPoll() const;
  /// "net plugin TuCCL-Socket (built into libtuccl), device 0 eth0 10000 Mbps, 2 peers on 1 other host"
  const std::string& description() const;
  /// What it did so far: "S slices in F frames (C carrying credits alone); T of R rounds run by
  /// waiting TBs" (a frame carries slices and the credits due then; one goes with credits alone
  /// only when the sender may be waiting for them).
  std::string summary() const;

 private:
  NetProxy();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tuccl::backend
