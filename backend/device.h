// A device runs a rank's generated kernel for the communicator (design.md "libtuccl"): the CPU
// device (TBs as threads running the host build, host memory, streams as worker queues) and the
// CUDA device (driver API loaded at run time, NVRTC CUBIN, the caller's stream).
//
// The communicator owns the bootstrap, the plan choice and the staging placement; a device owns
// memory and execution. Setup, once per communicator:
//   1. createStaging(bytes) on every rank -> an export blob (shm name / IPC handle),
//   2. the blobs are all-gathered over the bootstrap,
//   3. openStaging(blobs) maps every peer's segment (CPU: shm_open; CUDA: cuIpcOpenMemHandle),
//   4. after a bootstrap barrier, stagingShared() (the CPU device unlinks the shm name).
// With ranks on several hosts (setRemoteRanks before 1.), a remote rank's segment is a local
// shadow the proxy carries across the network, and the abort word is the host's first rank's.
// Per call: launch(call, stream) enqueues the kernel of call.rank on the stream (launchPeers a
// batch of point-to-point transfers); errors found
// while it runs (a TB that timed out or was aborted) are reported through the error sink, and
// make the communicator's async error.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/peer_batch.h"
#include "backend/staging_layout.h"
#include "kernelgen/collective_reference.h"
#include "kernelgen/compile.h"  // CompiledPlan: what the plan cache hands out
#include "kernelgen/device/kernel_args.h"
#include "plan/plan.h"
#include "support/status.h"
#include "tuccl/tuccl.h"

namespace tuccl::backend {

enum class DeviceKind { Cpu, Cuda };

/// One rank's part of one collective call.
struct KernelCall {
  std::shared_ptr<const CompiledPlan> plan;
  const PlanPlacement* placement = nullptr;  ///< the plan's rings in the staging segments
  CollectiveCall call;       ///< the call as the C API converted it: its buffers, as passed, are mapped by call_buffers.h
  int32_t rank = 0;
  int64_t sliceElems = 1;   ///< micro-batch slice: slotBytes / element size
  /// The channels the call runs (KernelArgs::channels), at most the plan's; 0: all of them.
  int32_t channels = 0;
  double timeoutSeconds = 300;
  uint64_t sequence = 0;    ///< the communicator's call number: devices run calls in this order
  /// The runtime phase (adaptive_runtime.h): the device calls it with the seconds the call ran,
  /// from its turn to its end, when it succeeded (the CPU device when the call ends; the CUDA
  /// device from events, by a later launch or drain). Empty: untimed.
  std::function<void(double)> completed;
  /// TUCCL_TEST_DELAY_GROUP: microseconds the device waits, inside the timed span, before running.
  int64_t testDelayMicros = 0;
};

using ErrorSink = std::function<void(const Status&)>;

/// The staging as the inter-node proxy sees it (backend/net_proxy.h): host memory only.
struct HostSegments {
  std::vector<char*> bases;   ///< by rank: this rank's segment, the mapped ones of its host (or none), shadows
  size_t segmentBytes = 0;
  int32_t* abortWord = nullptr;  ///< the host's abort word
};

/// The inter-node proxy's progress as the CPU device's waiting TBs run it (NetProxy::hostPoll):
/// `poll(context)` between a wait's polls (dev::KernelArgs::hostPoll), `ended(context)` after each
/// kernel. `context` keeps what they need alive; both do nothing once the proxy is gone.
struct HostPoll {
  void (*poll)(void*) = nullptr;
  void (*ended)(void*) = nullptr;
  std::shared_ptr<void> context;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const = 0;
  /// CUDA device ordinal, -1 for the CPU.
  virtual int deviceOrdinal() const = 0;
  /// The GPU's streaming multiprocessors (0: not a GPU, or unknown): a rank's kernel runs all its
  /// TBs at once, one per SM, beside those of the ranks sharing the GPU.
  virtual int multiprocessors() const { return 0; }

  /// Marks the ranks of other hosts, before createStaging: their rings run through the
  /// inter-node proxy, which reaches them in hostSegments().
  virtual Status setRemoteRanks(const std::vector<bool>& remote) = 0;
  /// After openStaging: in host memory, this rank's segment and a shadow of each remote rank's,
  /// where the rings joining this rank to other hosts lie (see HostSegments; the CUDA device's are
  /// host views beside its GPU segment).
  virtual HostSegments hostSegments() const = 0;
  /// Creates this rank's staging segment (zero-filled) and returns its export blob.
  virtual Expected<std::string> createStaging(size_t bytes) = 0;
  /// Maps every rank's segment (blobs by rank; this rank's own blob included).
  virtual Status openStaging(const std::vector<std::string>& blobs) = 0;
  /// Every peer mapped every segment: names may go.
  virtual void stagingShared() = 0;
  /// Starts the rings afresh: zero-fills this rank's segment after its header and forgets what
  /// the device keeps per placement. Only when every call of every rank finished (the
  /// communicator drains and meets the other ranks first) and before any is placed again.
  virtual Status resetStaging() = 0;

  /// Whether `stream` is one this device can enqueue on (InvalidArgument naming why not).
  virtual Status checkStream(tucclStream_t stream) const = 0;
  /// Enqueues `call` on `stream` (nullptr: the NULL stream). A CPU call on the NULL stream runs
  /// before this returns and its error comes back here; other errors go to the error sink.
  virtual Status launch(const KernelCall& call, tucclStream_t stream) = 0;
  /// Enqueues a batch of sends and receives on `stream`, all running at once (one TB each); like
  /// launch, in sequence order with the calls, and on the CPU device's NULL stream done (or
  /// failed) when this returns.
  virtual Status launchPeers(const PeerBatch& batch, tucclStream_t stream) = 0;
  /// Copies `bytes` of device memory on `stream`, ordered with the calls enqueued there (a
  /// one-rank communicator's collectives are copies). On the CPU device's NULL stream it is done
  /// when this returns.
  virtual Status copy(void* dst, const void* src, size_t bytes, tucclStream_t stream) = 0;
  /// dst[i] = src[i] * scalar for `elems` elements of `type` on `stream` (a one-rank
  /// communicator's PreMulSum); the scalar is `*scalarAddress` read when it runs, or the low bytes
  /// of `scalarBits` when that is null. Like copy, done on the CPU device's NULL stream when this
  /// returns. Unsupported by default (the CUDA device: the generated kernels scale the input of
  /// calls of several ranks, no kernel scales one rank's).
  virtual Status scale(void* dst, const void* src, int64_t elems, DataType type, uint64_t scalarBits,
                       const void* scalarAddress, tucclStream_t stream) {
    (void)dst, (void)src, (void)elems, (void)type, (void)scalarBits, (void)scalarAddress, (void)stream;
    return makeError(ErrorCode::Unsupported, "a PreMulSum operator on a one-rank communicator is not supported on "
                                             "this device");
  }
  /// Waits until everything this device enqueued for the communicator finished (destroy).
  virtual Status drain(double timeoutSeconds) = 0;
  /// Raises the abort word every TB of every rank watches; running kernels stop at their next
  /// wait. Callable from any thread.
  virtual void abort() = 0;
  virtual void setErrorSink(ErrorSink sink) = 0;
  /// What this device's kernels call while they wait, where they run on the host (the CPU
  /// device); an empty HostPoll stops it. Devices whose kernels run elsewhere ignore it.
  virtual void setHostPoll(HostPoll poll) { (void)poll; }
  /// Looks at the calls in flight: those that finished hand their errors to the sink. The CUDA
  /// device learns of its calls' ends from events, read here, at each launch and in drain (no
  /// host function per call); a device whose calls report as they end does nothing.
  virtual void poll() {}
};

}  // namespace tuccl::backend
