// The CUDA device (cuda_device.h).
#include "backend/cuda_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <thread>
#include <type_traits>
#include <vector>

#include "backend/kernel_call.h"
#include "kernelgen/device/peer.h"
#include "support/log.h"
#include "kernelgen/nvrtc.h"
#include "kernelgen/tb_report.h"
#include "transport/shm_segment.h"

namespace tuccl::backend {
namespace {

// ---- The staging blob -----------------------------------------------------------------------------

constexpr char kBlobMagic[8] = {'T', 'U', 'C', 'C', 'L', 'C', 'U', '1'};
constexpr size_t kNameBytes = 64;

// What a rank's peers need to map its staging segment; exchanged as raw bytes over the bootstrap
// between processes of one build.
struct StagingBlob {
  char magic[8];
  char host[kNameBytes];     ///< gethostname: only ranks of one host map each other's segments
  char control[kNameBytes];  ///< the shared-memory name of the rank's control page (abort word)
  uint64_t pid = 0;
  uint64_t pointer = 0;  ///< the segment's device pointer in its process
  uint64_t bytes = 0;
  int32_t ordinal = 0;
  int32_t ipcValid = 0;  ///< cuIpcGetMemHandle succeeded (other processes can open it)
  CUipcMemHandle ipc;
};
static_assert(std::is_trivially_copyable_v<StagingBlob>);

std::string hostName() {
  char name[kNameBytes] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown-host";
  return name;
}

void copyName(char (&field)[kNameBytes], const std::string& value) {
  std::memset(field, 0, kNameBytes);
  std::memcpy(field, value.data(), std::min(value.size(), kNameBytes - 1));
}

std::string encodeBlob(const StagingBlob& blob) { return std::string(reinterpret_cast<const char*>(&blob), sizeof blob); }

Expected<StagingBlob> decodeBlob(const std::string& text, size_t rank) {
  StagingBlob blob{};
  if (text.size() != sizeof blob || std::memcmp(text.data(), kBlobMagic, sizeof kBlobMagic) != 0) {
    return makeError(ErrorCode::InvalidArgument, "CUDA device: the staging blob of rank " + std::to_string(rank) +
                                                     " is not a CUDA device's (" + std::to_string(text.size()) +
                                                     " bytes): do all ranks use the CUDA device?");
  }
  std::memcpy(&blob, text.data(), sizeof blob);
  blob.host[kNameBytes - 1] = '\0';
  blob.control[kNameBytes - 1] = '\0';
  return blob;
}

// ---- Calls in flight ------------------------------------------------------------------------------

constexpr size_t kControlBytes = 4096;  // the control page: the abort word at offset 0
constexpr double kDestroyWaitSeconds = 60;

// The memory of one call: reused once the call's completion event is seen.
struct CallSlot {
  CUdeviceptr counters = 0;  ///< the two rank-barrier counters, then the progress counters
  size_t counterBytes = 0;
  /// The slot's calls so far: each call's counters are numbered by it (KernelArgs::epoch), so
  /// they are cleared once, when allocated, and never per call.
  uint64_t epoch = 0;
  dev::TbReport* reports = nullptr;  ///< host-mapped
  CUdeviceptr reportsDevice = 0;
  size_t reportCapacity = 0;
  CUdeviceptr scratch = 0;
  size_t scratchBytes = 0;
  CUevent done = nullptr;  ///< recorded after the call's last operation; created once per slot
  bool inFlight = false;
  std::shared_ptr<const CompiledPlan> plan;  ///< the call it serves (for the TB descriptions)
  int32_t rank = 0;
  int32_t nTbs = 0;
  /// A point-to-point batch instead of a plan: its transfers (for the reports), and their kernel
  /// arguments, rings and values in host-mapped memory (each TB reads its own once).
  std::optional<PeerBatch> peers;
  char* peerHost = nullptr;
  CUdeviceptr peerDevice = 0;
  size_t peerCapacity = 0;
};

// A timed call (the runtime phase): events around its work in stream order, read once the call
// finished. The events go back to the device's pool after reading.
struct CallTiming {
  CUevent start = nullptr;
  CUevent end = nullptr;
  std::function<void(double)> completed;
};

// Calls a device keeps in flight at once, each in its own slot (counters, reports, workspace):
// enough to hide the launch cost behind the kernels, few enough that a burst of calls reuses
// slots instead of allocating one per call (a slot's pinned reports and device memory cost tens of
// microseconds, far more than the call).
inline constexpr size_t kMaxCallSlots = 8;

// The device's calls: their slots, those in flight (in launch order) and the timed ones finished.
struct CallTracker {
  std::mutex mutex;
  size_t inFlight = 0;
  ErrorSink sink;
  std::vector<std::shared_ptr<CallSlot>> slots;
  std::vector<CallTiming> finished;  ///< timed calls that finished, not yet read
};

// A call in flight: found finished when its slot's event completed (CudaDevice::poll).
struct PendingCall {
  std::shared_ptr<CallSlot> slot;
  std::optional<CallTiming> timing;
};

void releaseSlot(CallTracker& tracker, CallSlot& slot) {
  std::lock_guard lock(tracker.mutex);
  slot.inFlight = false;
  --tracker.inFlight;
}

// A call whose event completed: its TB reports, read now that the kernel is done, go to the sink
// when a TB did not finish (before the slot is released, so drain() sees the error first); a
// timed call's events wait for readTimings.
void callFinished(CallTracker& tracker, PendingCall& pending) {
  CallSlot& slot = *pending.slot;
  const std::vector<dev::TbReport> reports(slot.reports, slot.reports + slot.nTbs);
  const Status status = slot.peers ? peerBatchStatus(*slot.peers, reports)
                                   : stoppedTbsStatus(stoppedTbs(slot.plan->plan, slot.plan->layout, slot.rank, reports));
  ErrorSink sink;
  {
    std::lock_guard lock(tracker.mutex);
    sink = tracker.sink;
  }
  if (!status && sink) sink(status);
  // TBs that stopped left the slot's barrier words mid-count (dev::arrive): its counters are made
  // afresh, cleared, before the slot serves another call (reserve).
  if (!status) slot.counterBytes = 0;
  if (pending.timing) {
    if (!status) pending.timing->completed = nullptr;  // a failed call is not timed; its events go back
    std::lock_guard lock(tracker.mutex);
    tracker.finished.push_back(std::move(*pending.timing));
  }
  releaseSlot(tracker, slot);
}

// TUCCL_TEST_DELAY_GROUP on the CUDA device: a host function between the kernel and the call's end
// event holds the stream, so the delay is inside the timed span as on the CPU device.
void delayStream(void* data) {
  std::unique_ptr<int64_t> micros(static_cast<int64_t*>(data));
  std::this_thread::sleep_for(std::chrono::microseconds(*micros));
}

// ---- Helpers --------------------------------------------------------------------------------------

// Makes the device's context current on the calling thread and restores the thread's own context
// afterwards: the caller's runtime state (cudaSetDevice) is left as it was.
class ScopedContext {
 public:
  ScopedContext(const CudaDriver& cu, CUcontext context) : cu_(cu) {
    result_ = cu_.cuCtxGetCurrent(&previous_);
    if (result_ == CUDA_SUCCESS && previous_ != context) {
      result_ = cu_.cuCtxSetCurrent(context);
      restore_ = result_ == CUDA_SUCCESS;
    }
  }
  ~ScopedContext() {
    if (restore_) cu_.cuCtxSetCurrent(previous_);
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  Status status() const { return cudaStatus(cu_, result_, "cuCtxSetCurrent", "the device's primary context"); }

 private:
  const CudaDriver& cu_;
  CUcontext previous_ = nullptr;
  CUresult result_ = CUDA_SUCCESS;
  bool restore_ = false;
};

template <typename T>
T* devicePointer(CUdeviceptr base, int64_t offset) {
  return base == 0 ? nullptr : reinterpret_cast<T*>(static_cast<uintptr_t>(base + static_cast<uint64_t>(offset)));
}

// Clock cycles of `seconds` at `clockKhz` (0: unbounded, as flags.h reads a spin limit of 0).
int64_t spinLimitCycles(double seconds, int clockKhz) {
  if (!(seconds > 0) || clockKhz <= 0) return 0;
  const double cycles = std::min(seconds, 86400.0 * 365) * clockKhz * 1000.0;
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(cycles, 4.0e18)));
}

// The identity of a placement (its offsets), so a plan placed twice gets two ring tables.
std::string placementSignature(const std::string& planKey, const PlanPlacement& placement) {
  std::string signature = planKey;
  for (const RingPlacement& r : placement.rings) {
    for (int64_t value : {int64_t{r.srcRank}, int64_t{r.dstRank}, r.stagingInDst, r.tagsInDst, r.postedInDst,
                          r.recvCountInDst, r.consumedInSrc, r.sendCountInSrc, r.slotBytes, int64_t{r.nSlots}}) {
      signature += ':' + std::to_string(value);
    }
  }
  return signature;
}

// ---- The device -----------------------------------------------------------------------------------

class CudaDevice final : public Device {
 public:
  CudaDevice(const CudaDriver& driver, int ordinal, CUdevice device, CUcontext context, std::string arch,
             int clockKhz, int multiprocessors)
      : cu_(driver), ordinal_(ordinal), device_(device), context_(context), arch_(std::move(arch)), clockKhz_(clockKhz),
        multiprocessors_(multiprocessors) {}
  ~CudaDevice() override;

  DeviceKind kind() const override { return DeviceKind::Cuda; }
  int deviceOrdinal() const override { return ordinal_; }
  int multiprocessors() const override { return multiprocessors_; }
  /// Rings to and from ranks of other hosts run through host memory the inter-node proxy reaches
  /// (openStaging makes the views, ringDevice maps them into the kernels' reach).
  Status setRemoteRanks(const std::vector<bool>& remote) override {
    remote_ = remote;
    return {};
  }
  HostSegments hostSegments() const override;
  Expected<std::string> createStaging(size_t bytes) override;
  Status openStaging(const std::vector<std::string>& blobs) override;
  void stagingShared() override { control_.unlinkName(); }
  Status resetStaging() override;
  Status checkStream(tucclStream_t) const override { return {}; }  // any CUDA stream of the context
  Status copy(void* dst, const void* src, size_t bytes, tucclStream_t stream) override;
  Status launch(const KernelCall& call, tucclStream_t stream) override;
  Status launchPeers(const PeerBatch& batch, tucclStream_t stream) override;
  Status drain(double timeoutSeconds) override;
  void abort() override;
  void setErrorSink(ErrorSink sink) override {
    std::lock_guard lock(tracker_->mutex);
    tracker_->sink = std::move(sink);
  }
  void poll() override {
    ScopedContext scope(cu_, context_);
    if (!scope.status()) return;
    static_cast<void>(finishCalls());  // a driver error shows at the next launch or drain
    readTimings();
  }

 private:
  struct Module {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
  };

  Status check(CUresult result, std::string_view call, std::string_view what = {}) const {
    return cudaStatus(cu_, result, call, what);
  }
  Status refuseCapture(tucclStream_t stream) const;
  Status mapSegment(size_t rank, const StagingBlob& blob);
  Status enablePeerAccess(int peerOrdinal);
  Status mapAbortWord(const std::vector<StagingBlob>& blobs);
  Status checkRingsOfRank(const PlanPlacement& placement, int32_t rank) const;
  Expected<CUfunction> kernelFunction(const CompiledPlan& plan, int32_t rank);
  Expected<CUdeviceptr> ringTable(const CompiledPlan& plan, const PlanPlacement& placement);
  Expected<CUdeviceptr> valueTable(const CompiledPlan& plan, int32_t rank);
  Expected<std::shared_ptr<CallSlot>> takeSlot(double timeoutSeconds);
  Expected<std::shared_ptr<CallSlot>> acquireSlot(const KernelCall& call);
  Expected<CUfunction> peerFunction();
  Status reservePeers(CallSlot& slot, size_t bytes);
  Status enqueuePeers(const PeerBatch& batch, CUstream stream, CUfunction function,
                      const std::shared_ptr<CallSlot>& slot);
  Status reserve(CallSlot& slot, size_t counterBytes, size_t nTbs, size_t scratchBytes);
  Status enqueue(const KernelCall& call, CUstream stream, CUfunction function, CUdeviceptr rings, CUdeviceptr values,
                 const std::shared_ptr<CallSlot>& slot);
  void freeSlot(CallSlot& slot);
  Expected<CUevent> takeEvent();
  Status finishCalls();
  void readTimings();

  const CudaDriver& cu_;
  const int ordinal_;
  const CUdevice device_;
  const CUcontext context_;
  const std::string arch_;
  const int clockKhz_;
  const int multiprocessors_;  ///< 0: the driver did not say

  // Staging: this rank's segment, every rank's as mapped here (0: another host), and what to undo.
  CUdeviceptr staging_ = 0;
  size_t stagingBytes_ = 0;
  std::string ownBlob_;
  transport::SharedSegment control_;       ///< this rank's control page, while it may be used
  transport::SharedSegment abortSegment_;  ///< the host's lowest rank's page, when not this rank's
  void* registered_ = nullptr;             ///< the page registered with the driver
  std::atomic<int32_t*> abortWord_{nullptr};
  std::atomic<bool> abortRequested_{false};
  CUdeviceptr abortDevice_ = 0;
  std::vector<CUdeviceptr> segments_;
  std::vector<uint64_t> segmentBytes_;
  int32_t self_ = -1;  ///< this rank: the index of its own blob
  // Rings joining this rank to another host's: their fields lie in host views the inter-node proxy
  // reads and writes (net_proxy.h), at the placement's offsets: this rank's own view (what the
  // proxy receives into, and the credits it returns) and a shadow of each remote rank's segment
  // (what this rank's kernel sends). A view is anonymous memory of a segment's size, committed as
  // it is touched; its blocks are registered with the driver (pinned, mapped for the kernels) as
  // the rings placed in them are first used, once each.
  struct HostView {
    char* base = nullptr;
    size_t bytes = 0;
    std::map<size_t, std::pair<void*, CUdeviceptr>> blocks;  ///< block index -> registered host and device address
  };
  static constexpr size_t kViewBlockBytes = 2 << 20;
  std::vector<bool> remote_;     ///< by rank: on another host (empty: one host)
  std::vector<HostView> views_;  ///< by rank: this rank's own view and the remote ranks' shadows
  mutable std::mutex viewMutex_;
  Status openHostViews();
  Expected<CUdeviceptr> viewPointer(int32_t owner, int64_t offset, int64_t bytes);
  Expected<dev::RingDevice> ringDevice(const RingPlacement& r);
  bool crossesHosts(const RingPlacement& r) const {
    return !views_.empty() && (r.srcRank == self_ || r.dstRank == self_) &&
           (remote_[static_cast<size_t>(r.srcRank)] || remote_[static_cast<size_t>(r.dstRank)]);
  }
  std::vector<CUdeviceptr> ipcOpened_;
  std::set<int> peersEnabled_;
  std::vector<CUdevice> retainedPeers_;

  std::mutex cacheMutex_;  ///< modules and ring tables (never taken by a host function)
  std::map<std::string, Module> modules_;
  std::map<std::string, CUdeviceptr> ringTables_;
  std::map<std::string, CUdeviceptr> valueTables_;  ///< per plan and rank: its kernel's value table
  std::shared_ptr<CallTracker> tracker_ = std::make_shared<CallTracker>();
  std::mutex pendingMutex_;
  std::vector<PendingCall> pending_;  ///< the calls in flight, in launch order

  std::mutex eventMutex_;             ///< the events of timed calls
  std::vector<CUevent> events_;       ///< every event created (destroyed with the device)
  std::vector<CUevent> freeEvents_;   ///< those no call holds
  std::atomic<bool> timingFailureLogged_{false};  ///< a failed read is logged once

 public:
  /// setCudaPeerKernelImage: the image loaded for point-to-point instead of NVRTC's.
  std::vector<char> peerImage_;
};

CudaDevice::~CudaDevice() {
  if (!drain(kDestroyWaitSeconds)) {
    abort();  // a kernel still running past its own bound: stop it before its memory goes
    static_cast<void>(drain(kDestroyWaitSeconds));
  }
  {
    // A call still in flight reports to nobody: its sink may belong to a communicator that goes.
    std::lock_guard lock(tracker_->mutex);
    tracker_->sink = nullptr;
  }
  ScopedContext scope(cu_, context_);
  readTimings();
  for (CUevent event : events_) cu_.cuEventDestroy(event);
  for (auto& [key, module] : modules_) cu_.cuModuleUnload(module.module);
  for (auto& [key, table] : ringTables_) cu_.cuMemFree(table);
  for (auto& [key, table] : valueTables_) cu_.cuMemFree(table);
  std::vector<std::shared_ptr<CallSlot>> idle;
  {
    std::lock_guard lock(tracker_->mutex);
    for (const std::shared_ptr<CallSlot>& slot : tracker_->slots) {
      if (!slot->inFlight) idle.push_back(slot);  // a slot still in flight keeps its memory: a kernel may use it
    }
  }
  for (const std::shared_ptr<CallSlot>& slot : idle) freeSlot(*slot);
  for (HostView& view : views_) {
    for (auto& [index, block] : view.blocks) cu_.cuMemHostUnregister(block.first);
    if (view.base != nullptr) munmap(view.base, view.bytes);
  }
  if (registered_ != nullptr) cu_.cuMemHostUnregister(registered_);
  for (CUdeviceptr opened : ipcOpened_) cu_.cuIpcCloseMemHandle(opened);
  if (staging_ != 0) cu_.cuMemFree(staging_);
  for (CUdevice peer : retainedPeers_) cu_.cuDevicePrimaryCtxRelease(peer);
  cu_.cuDevicePrimaryCtxRelease(device_);
}

void CudaDevice::freeSlot(CallSlot& slot) {
  if (slot.done != nullptr) cu_.cuEventDestroy(slot.done);
  if (slot.counters != 0) cu_.cuMemFree(slot.counters);
  if (slot.reports != nullptr) cu_.cuMemFreeHost(slot.reports);
  if (slot.scratch != 0) cu_.cuMemFree(slot.scratch);
  if (slot.peerHost != nullptr) cu_.cuMemFreeHost(slot.peerHost);
  slot = CallSlot{};
}

Expected<std::string> CudaDevice::createStaging(size_t bytes) {
  if (staging_ != 0) return makeError(ErrorCode::InvalidArgument, "CUDA device: createStaging called twice");
  if (bytes == 0) return makeError(ErrorCode::InvalidArgument, "CUDA device: a staging segment of 0 bytes");
  ScopedContext scope(cu_, context_);
  if (Status status = scope.status(); !status) return status;
  const std::string what = "staging of " + std::to_string(bytes) + " bytes on GPU " + std::to_string(ordinal_);
  if (Status status = check(cu_.cuMemAlloc(&staging_, bytes), "cuMemAlloc", what); !status) return status;
  if (Status status = check(cu_.cuMemsetD8(staging_, 0, bytes), "cuMemsetD8", what); !status) return status;
  stagingBytes_ = bytes;
  Expected<transport::SharedSegment> control = transport::SharedSegment::create(kControlBytes);
  if (!control) return control.status();
  control_ = std::move(*control);

  StagingBlob blob{};
  std::memcpy(blob.magic, kBlobMagic, sizeof kBlobMagic);
  copyName(blob.host, hostName());
  copyName(blob.control, control_.name());
  blob.pid = static_cast<uint64_t>(getpid());
  blob.pointer = staging_;
  blob.bytes = bytes;
  blob.ordinal = ordinal_;
  // Without an IPC handle (a platform without CUDA IPC) ranks of this process still share it.
  blob.ipcValid = cu_.cuIpcGetMemHandle(&blob.ipc, staging_) == CUDA_SUCCESS ? 1 : 0;
  ownBlob_ = encodeBlob(blob);
  return ownBlob_;
}

Status CudaDevice::enablePeerAccess(int peerOrdinal) {
  if (peersEnabled_.count(peerOrdinal) != 0) return {};
  CUdevice peer = 0;
  const std::string what = "GPU " + std::to_string(ordinal_) + " -> GPU " + std::to_string(peerOrdinal);
  if (Status status = check(cu_.cuDeviceGet(&peer, peerOrdinal), "cuDeviceGet", what); !status) return status;
  int canAccess = 0;
  if (Status status = check(cu_.cuDeviceCanAccessPeer(&canAccess, device_, peer), "cuDeviceCanAccessPeer", what);
      !status) {
    return status;
  }
  if (canAccess == 0) {
    return makeError(ErrorCode::Unsupported, "CUDA device: GPU " + std::to_string(ordinal_) + " cannot access GPU " +
                                                 std::to_string(peerOrdinal) +
                                                 "'s memory (no peer-to-peer path), so their ranks cannot share "
                                                 "staging rings");
  }
  CUcontext peerContext = nullptr;
  if (Status status = check(cu_.cuDevicePrimaryCtxRetain(&peerContext, peer), "cuDevicePrimaryCtxRetain", what);
      !status) {
    return status;
  }
  retainedPeers_.push_back(peer);
  const CUresult result = cu_.cuCtxEnablePeerAccess(peerContext, 0);
  if (result != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
    if (Status status = check(result, "cuCtxEnablePeerAccess", what); !status) return status;
  }
  peersEnabled_.insert(peerOrdinal);
  return {};
}

Status CudaDevice::mapSegment(size_t rank, const StagingBlob& blob) {
  segmentBytes_[rank] = blob.bytes;
  if (std::string(blob.host) != hostName()) return {};  // another node: reached through a proxy, not mapped
  if (blob.pid == static_cast<uint64_t>(getpid())) {
    // CUDA refuses to IPC-open an allocation of its own process; the pointer is valid here (UVA).
    segments_[rank] = blob.pointer;
    return blob.ordinal == ordinal_ ? Status{} : enablePeerAccess(blob.ordinal);
  }
  const std::string what = "the staging of rank " + std::to_string(rank) + " (process " + std::to_string(blob.pid) +
                           ", GPU " + std::to_string(blob.ordinal) + ")";
  if (blob.ipcValid == 0) {
    return makeError(ErrorCode::Unsupported, "CUDA device: " + what +
                                                 " has no IPC handle (cuIpcGetMemHandle failed in its process)");
  }
  CUdeviceptr pointer = 0;
  if (Status status = check(cu_.cuIpcOpenMemHandle(&pointer, blob.ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                            "cuIpcOpenMemHandle", what);
      !status) {
    return status;
  }
  ipcOpened_.push_back(pointer);
  segments_[rank] = pointer;
  return {};
}

// The abort word: in the control page of the lowest rank of this host, so an abort on any rank of
// the host stops every kernel of the host.
Status CudaDevice::mapAbortWord(const std::vector<StagingBlob>& blobs) {
  const std::string host = hostName();
  size_t lowest = 0;
  while (std::string(blobs[lowest].host) != host) ++lowest;  // this rank's own blob is one of them
  char* page = nullptr;
  size_t pageBytes = 0;
  if (std::string(blobs[lowest].control) == control_.name()) {
    page = control_.data();
    pageBytes = control_.size();
  } else {
    control_ = transport::SharedSegment();  // nobody maps this rank's page
    Expected<transport::SharedSegment> opened = transport::SharedSegment::open(blobs[lowest].control);
    if (!opened) return opened.status();
    abortSegment_ = std::move(*opened);
    page = abortSegment_.data();
    pageBytes = abortSegment_.size();
  }
  const std::string what = "the abort word of rank " + std::to_string(lowest);
  if (Status status = check(cu_.cuMemHostRegister(page, pageBytes, CU_MEMHOSTREGISTER_PORTABLE |
                                                                       CU_MEMHOSTREGISTER_DEVICEMAP),
                            "cuMemHostRegister", what);
      !status) {
    return status;
  }
  registered_ = page;
  if (Status status = check(cu_.cuMemHostGetDevicePointer(&abortDevice_, page, 0), "cuMemHostGetDevicePointer", what);
      !status) {
    return status;
  }
  abortWord_.store(reinterpret_cast<int32_t*>(page));
  if (abortRequested_.load()) abort();
  return {};
}

Status CudaDevice::openStaging(const std::vector<std::string>& blobs) {
  if (ownBlob_.empty()) return makeError(ErrorCode::InvalidArgument, "CUDA device: openStaging before createStaging");
  if (!segments_.empty()) return makeError(ErrorCode::InvalidArgument, "CUDA device: openStaging called twice");
  std::vector<StagingBlob> decoded;
  for (size_t r = 0; r < blobs.size(); ++r) {
    Expected<StagingBlob> blob = decodeBlob(blobs[r], r);
    if (!blob) return blob.status();
    decoded.push_back(*blob);
  }
  if (std::find(blobs.begin(), blobs.end(), ownBlob_) == blobs.end()) {
    return makeError(ErrorCode::InvalidArgument, "CUDA device: this device's staging blob is not among the " +
                                                     std::to_string(blobs.size()) + " blobs");
  }
  ScopedContext scope(cu_, context_);
  if (Status status = scope.status(); !status) return status;
  segments_.assign(blobs.size(), 0);
  segmentBytes_.assign(blobs.size(), 0);
  self_ = static_cast<int32_t>(std::find(blobs.begin(), blobs.end(), ownBlob_) - blobs.begin());
  for (size_t r = 0; r < blobs.size(); ++r) {
    if (Status status = mapSegment(r, decoded[r]); !status) return status;
  }
  if (Status status = openHostViews(); !status) return status;
  return mapAbortWord(decoded);
}

Status CudaDevice::openHostViews() {
  if (std::find(remote_.begin(), remote_.end(), true) == remote_.end()) return {};
  if (remote_.size() != segments_.size()) {
    return makeError(ErrorCode::Internal, "CUDA device: " + std::to_string(remote_.size()) +
                                              " ranks marked remote or not, for " + std::to_string(segments_.size()) +
                                              " staging segments");
  }
  views_.assign(segments_.size(), HostView{});
  for (size_t r = 0; r < segments_.size(); ++r) {
    if (static_cast<int32_t>(r) != self_ && !remote_[r]) continue;
    const size_t bytes = static_cast<int32_t>(r) == self_ ? stagingBytes_ : segmentBytes_[r];
    void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (data == MAP_FAILED) {
      return makeError(ErrorCode::SystemError, "CUDA device: cannot reserve " + std::to_string(bytes) +
                                                   " bytes of host memory for the rings of rank " + std::to_string(r) +
                                                   ": " + std::strerror(errno));
    }
    views_[r].base = static_cast<char*>(data);
    views_[r].bytes = bytes;
  }
  return {};
}

HostSegments CudaDevice::hostSegments() const {
  HostSegments segments;
  segments.segmentBytes = stagingBytes_;
  segments.abortWord = abortWord_.load();
  for (const HostView& view : views_) segments.bases.push_back(view.base);
  return segments;
}

// The device address of bytes [offset, offset + bytes) of rank `owner`'s host view, registering
// the blocks they lie in that are not yet. The blocks of one range must be contiguous for the
// device too, as they are where the driver maps registered memory at its host address (UVA).
Expected<CUdeviceptr> CudaDevice::viewPointer(int32_t owner, int64_t offset, int64_t bytes) {
  std::lock_guard lock(viewMutex_);
  HostView& view = views_[static_cast<size_t>(owner)];
  if (view.base == nullptr || offset < 0 || bytes < 0 || static_cast<uint64_t>(offset + bytes) > view.bytes) {
    return makeError(ErrorCode::InvalidArgument, "CUDA device: bytes " + std::to_string(offset) + ".." +
                                                     std::to_string(offset + bytes) + " of rank " +
                                                     std::to_string(owner) + "'s host view are not in it");
  }
  const size_t first = static_cast<size_t>(offset) / kViewBlockBytes;
  const size_t last = static_cast<size_t>(offset + std::max<int64_t>(bytes, 1) - 1) / kViewBlockBytes;
  for (size_t b = first; b <= last; ++b) {
    if (view.blocks.count(b) != 0) continue;
    char* host = view.base + b * kViewBlockBytes;
    const size_t blockBytes = std::min(kViewBlockBytes, view.bytes - b * kViewBlockBytes);
    const std::string what = "block " + std::to_string(b) + " of rank " + std::to_string(owner) +
                             "'s rings to another host (" + std::to_string(blockBytes) + " bytes of host memory)";
    if (Status status = check(cu_.cuMemHostRegister(host, blockBytes, CU_MEMHOSTREGISTER_PORTABLE |
                                                                          CU_MEMHOSTREGISTER_DEVICEMAP),
                              "cuMemHostRegister", what);
        !status) {
      return status;
    }
    CUdeviceptr device = 0;
    if (Status status = check(cu_.cuMemHostGetDevicePointer(&device, host, 0), "cuMemHostGetDevicePointer", what);
        !status) {
      cu_.cuMemHostUnregister(host);
      return status;
    }
    view.blocks.emplace(b, std::make_pair(static_cast<void*>(host), device));
  }
  const CUdeviceptr start = view.blocks.at(first).second;
  for (size_t b = first + 1; b <= last; ++b) {
    if (view.blocks.at(b).second != start + (b - first) * kViewBlockBytes) {
      return makeError(ErrorCode::Unsupported, "CUDA device: the driver maps consecutive blocks of registered host "
                                                   "memory apart, so a ring to another host cannot span them");
    }
  }
  return start + (static_cast<size_t>(offset) - first * kViewBlockBytes);
}

// Ring `r`'s fields as the kernels reach them: in the segments of this host, or, for a ring joining
// this rank to another host, in the host views the inter-node proxy moves.
Expected<dev::RingDevice> CudaDevice::ringDevice(const RingPlacement& r) {
  dev::RingDevice ring;
  ring.slotBytes = r.slotBytes;
  ring.nSlots = r.nSlots;
  if (!crossesHosts(r)) {
    const CUdeviceptr dst = segments_[r.dstRank], src = segments_[r.srcRank];
    ring.staging = devicePointer<char>(dst, r.stagingInDst);
    ring.tags = devicePointer<uint64_t>(dst, r.tagsInDst);
    ring.posted = devicePointer<uint64_t>(dst, r.postedInDst);
    ring.recvCount = devicePointer<uint64_t>(dst, r.recvCountInDst);
    ring.consumed = devicePointer<uint64_t>(src, r.consumedInSrc);
    ring.sendCount = devicePointer<uint64_t>(src, r.sendCountInSrc);
    return ring;
  }
  struct Field {
    int32_t owner;
    int64_t offset, bytes;
    CUdeviceptr* at;
  };
  CUdeviceptr staging = 0, tags = 0, posted = 0, recvCount = 0, consumed = 0, sendCount = 0;
  for (const Field& field : {Field{r.dstRank, r.stagingInDst, r.slotBytes * r.nSlots, &staging},
                             Field{r.dstRank, r.tagsInDst, 16 * int64_t{r.nSlots}, &tags},
                             Field{r.dstRank, r.postedInDst, 8, &posted},
                             Field{r.dstRank, r.recvCountInDst, 8, &recvCount},
                             Field{r.srcRank, r.consumedInSrc, 8, &consumed},
                             Field{r.srcRank, r.sendCountInSrc, 8, &sendCount}}) {
    Expected<CUdeviceptr> pointer = viewPointer(field.owner, field.offset, field.bytes);
    if (!pointer) return pointer.status();
    *field.at = *pointer;
  }
  ring.staging = devicePointer<char>(staging, 0);
  ring.tags = devicePointer<uint64_t>(tags, 0);
  ring.posted = devicePointer<uint64_t>(posted, 0);
  ring.recvCount = devicePointer<uint64_t>(recvCount, 0);
  ring.consumed = devicePointer<uint64_t>(consumed, 0);
  ring.sendCount = devicePointer<uint64_t>(sendCount, 0);
  return ring;
}

// Ring tables stay cached: they are keyed by the plan and its offsets, which a new placement
// either repeats (the same table) or changes (another key).
Status CudaDevice::resetStaging() {
  if (staging_ == 0) return makeError(ErrorCode::Internal, "CUDA device: staging reset before it was created");
  ScopedContext scope(cu_, context_);
  if (Status status = scope.status(); !status) return status;
  const auto header = static_cast<size_t>(kSegmentHeaderBytes);
  {
    // The host views start afresh too: registered blocks are cleared, the rest returned to the
    // system (zero when next touched).
    std::lock_guard lock(viewMutex_);
    for (HostView& view : views_) {
      if (view.base == nullptr) continue;
      for (size_t b = 0; b * kViewBlockBytes < view.bytes; ++b) {
        char* block = view.base + b * kViewBlockBytes;
        const size_t bytes = std::min(kViewBlockBytes, view.bytes - b * kViewBlockBytes);
        if (view.blocks.count(b) != 0) {
          std::memset(block, 0, bytes);
        } else {
          madvise(block, bytes, MADV_DONTNEED);
        }
      }
    }
  }
  return check(cu_.cuMemsetD8(staging_ + header, 0, stagingBytes_ - header), "cuMemsetD8",
               "staging reset on GPU " + std::to_string(ordinal_));
}

void CudaDevice::abort() {
  abortRequested_.store(true);
  if (int32_t* word = abortWord_.load(); word != nullptr) std::atomic_ref<int32_t>(*word).store(1);
}

// Every ring the rank pushes into or reads from connects two mapped segments, within their bounds.
Status CudaDevice::checkRingsOfRank(const PlanPlacement& placement, int32_t rank) const {
  auto fits = [&](size_t ring, int32_t owner, int64_t offset, int64_t bytes) -> Status {
    if (owner < 0 || static_cast<size_t>(owner) >= segments_.size()) {
      return makeError(ErrorCode::InvalidArgument, "CUDA device: ring " + std::to_string(ring) + " names rank " +
                                                       std::to_string(owner) + " of a " +
                                                       std::to_string(segments_.size()) + "-rank communicator");
    }
    if (segments_[owner] == 0 && !(static_cast<size_t>(owner) < views_.size() && views_[owner].base != nullptr)) {
      return makeError(ErrorCode::Unsupported, "CUDA device: ring " + std::to_string(ring) + " of rank " +
                                                   std::to_string(rank) + " reaches rank " + std::to_string(owner) +
                                                   " on another host, which the CUDA device does not map");
    }
    if (offset < 0 || static_cast<uint64_t>(offset + bytes) > segmentBytes_[owner]) {
      return makeError(ErrorCode::InvalidArgument,
                       "CUDA device: ring " + std::to_string(ring) + " ends at byte " + std::to_string(offset + bytes) +
                           " of rank " + std::to_string(owner) + "'s staging of " +
                           std::to_string(segmentBytes_[owner]) + " bytes");
    }
    return {};
  };
  for (size_t i = 0; i < placement.rings.size(); ++i) {
    const RingPlacement& r = placement.rings[i];
    if (r.srcRank != rank && r.dstRank != rank) continue;
    for (Status status : {fits(i, r.dstRank, r.stagingInDst, r.slotBytes * r.nSlots),
                          fits(i, r.dstRank, r.tagsInDst, 16 * int64_t{r.nSlots}), fits(i, r.dstRank, r.postedInDst, 8),
                          fits(i, r.dstRank, r.recvCountInDst, 8), fits(i, r.srcRank, r.consumedInSrc, 8),
                          fits(i, r.srcRank, r.sendCountInSrc, 8)}) {
      if (!status) return status;
    }
  }
  return {};
}

Expected<CUfunction> CudaDevice::kernelFunction(const CompiledPlan& plan, int32_t rank) {
  const GeneratedKernel& kernel = plan.kernels.kernelOf(rank);
  const std::string key = (plan.key.empty() ? std::to_string(std::hash<std::string>{}(kernel.source)) : plan.key) +
                          "#" + kernel.kernelName;
  std::lock_guard lock(cacheMutex_);
  if (auto it = modules_.find(key); it != modules_.end()) return it->second.function;
  std::vector<char> compiled;
  const std::vector<char>* cubin = nullptr;
  if (static_cast<size_t>(kernel.id) < plan.cubins.size() && !plan.cubins[kernel.id].empty()) {
    cubin = &plan.cubins[kernel.id];
  } else if (!nvrtcAvailable()) {
    return makeError(ErrorCode::Unsupported, "CUDA device: the plan has no CUBIN for rank " + std::to_string(rank) +
                                                 "'s kernel and this TuCCL was built without NVRTC to compile " +
                                                 kernel.fileName + " for " + arch_);
  } else {
    Expected<NvrtcOutput> result = compileWithNvrtc(kernel, arch_);
    if (!result) return makeError(ErrorCode::Internal, "CUDA device: " + result.status().message());
    compiled = std::move(result->cubin);
    cubin = &compiled;
  }
  const std::string what = kernel.fileName + " (" + std::to_string(cubin->size()) + " bytes) on GPU " +
                           std::to_string(ordinal_) + " (" + arch_ + ")";
  Module module;
  if (Status status = check(cu_.cuModuleLoadData(&module.module, cubin->data()), "cuModuleLoadData", what); !status) {
    return status;
  }
  if (Status status = check(cu_.cuModuleGetFunction(&module.function, module.module, kernel.kernelName.c_str()),
                            "cuModuleGetFunction", kernel.kernelName + " in " + what);
      !status) {
    cu_.cuModuleUnload(module.module);
    return status;
  }
  modules_.emplace(key, module);
  return module.function;
}

Expected<CUdeviceptr> CudaDevice::ringTable(const CompiledPlan& plan, const PlanPlacement& placement) {
  const std::string key = placementSignature(plan.key, placement);
  std::lock_guard lock(cacheMutex_);
  if (auto it = ringTables_.find(key); it != ringTables_.end()) return it->second;
  std::vector<dev::RingDevice> rings;
  for (const RingPlacement& r : placement.rings) {
    Expected<dev::RingDevice> ring = ringDevice(r);
    if (!ring) return ring.status();
    rings.push_back(*ring);
  }
  CUdeviceptr table = 0;
  if (!rings.empty()) {
    const size_t bytes = rings.size() * sizeof(dev::RingDevice);
    const std::string what = "the " + std::to_string(rings.size()) + " rings of a plan";
    if (Status status = check(cu_.cuMemAlloc(&table, bytes), "cuMemAlloc", what); !status) return status;
    if (Status status = check(cu_.cuMemcpyHtoD(table, rings.data(), bytes), "cuMemcpyHtoD", what); !status) {
      cu_.cuMemFree(table);
      return status;
    }
  }
  ringTables_.emplace(key, table);
  return table;
}

// The rank's value table (KernelArgs::roleValues) in device memory, copied once per plan; 0 when
// its kernel reads no table.
Expected<CUdeviceptr> CudaDevice::valueTable(const CompiledPlan& plan, int32_t rank) {
  const std::vector<int32_t>& values = plan.kernels.ranks[rank].values;
  if (values.empty()) return CUdeviceptr{0};
  // Keyed by content: ranks (and plans) with equal tables share one copy.
  const std::string key(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int32_t));
  std::lock_guard lock(cacheMutex_);
  if (auto it = valueTables_.find(key); it != valueTables_.end()) return it->second;
  const size_t bytes = values.size() * sizeof(int32_t);
  const std::string what = "the " + std::to_string(values.size()) + " values of rank " + std::to_string(rank) +
                           "'s kernel";
  CUdeviceptr table = 0;
  if (Status status = check(cu_.cuMemAlloc(&table, bytes), "cuMemAlloc", what); !status) return status;
  if (Status status = check(cu_.cuMemcpyHtoD(table, values.data(), bytes), "cuMemcpyHtoD", what); !status) {
    cu_.cuMemFree(table);
    return status;
  }
  valueTables_.emplace(key, table);
  return table;
}

Status CudaDevice::reserve(CallSlot& slot, size_t counterBytes, size_t nTbs, size_t scratchBytes) {
  if (slot.done == nullptr) {
    if (Status status = check(cu_.cuEventCreate(&slot.done, CU_EVENT_DISABLE_TIMING), "cuEventCreate",
                              "the completion event of a call slot");
        !status) {
      slot.done = nullptr;
      return status;
    }
  }
  if (slot.counterBytes < counterBytes) {
    if (slot.counters != 0) cu_.cuMemFree(slot.counters);
    slot.counters = 0;
    slot.counterBytes = 0;
    const size_t bytes = std::max<size_t>(counterBytes, 1024);
    if (Status status = check(cu_.cuMemAlloc(&slot.counters, bytes), "cuMemAlloc", "progress counters"); !status) {
      return status;
    }
    // Cleared once: the calls number their values (KernelArgs::epoch), the slot's first is 1.
    if (Status status = check(cu_.cuMemsetD8(slot.counters, 0, bytes), "cuMemsetD8", "progress counters"); !status) {
      cu_.cuMemFree(slot.counters);
      slot.counters = 0;
      return status;
    }
    slot.counterBytes = bytes;
    slot.epoch = 0;
  }
  if (slot.reportCapacity < nTbs) {
    if (slot.reports != nullptr) cu_.cuMemFreeHost(slot.reports);
    slot.reports = nullptr;
    slot.reportCapacity = 0;
    const size_t capacity = std::max<size_t>(nTbs, 64);
    void* host = nullptr;
    if (Status status = check(cu_.cuMemHostAlloc(&host, capacity * sizeof(dev::TbReport),
                                                 CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
                              "cuMemHostAlloc", "TB reports");
        !status) {
      return status;
    }
    slot.reports = static_cast<dev::TbReport*>(host);
    if (Status status = check(cu_.cuMemHostGetDevicePointer(&slot.reportsDevice, host, 0), "cuMemHostGetDevicePointer",
                              "TB reports");
        !status) {
      return status;
    }
    slot.reportCapacity = capacity;
  }
  if (slot.scratchBytes < scratchBytes) {
    if (slot.scratch != 0) cu_.cuMemFree(slot.scratch);
    slot.scratch = 0;
    slot.scratchBytes = 0;
    if (Status status = check(cu_.cuMemAlloc(&slot.scratch, scratchBytes), "cuMemAlloc",
                              "scratch of " + std::to_string(scratchBytes) + " bytes");
        !status) {
      return status;
    }
    slot.scratchBytes = scratchBytes;
  }
  return {};
}

// A free slot, marked in flight: a new one while there are fewer than kMaxCallSlots, else the
// first whose call ended.
Expected<std::shared_ptr<CallSlot>> CudaDevice::takeSlot(double timeoutSeconds) {
  std::shared_ptr<CallSlot> slot;
  // Every slot in flight: the oldest call ends within its kernels' bounded waits; a launch waits
  // for it (polling its event, no sleep) rather than allocating a slot per call.
  std::optional<std::chrono::steady_clock::time_point> deadline;  // set when a launch first waits
  for (;;) {
    {
      std::lock_guard lock(tracker_->mutex);
      for (const std::shared_ptr<CallSlot>& candidate : tracker_->slots) {
        if (!candidate->inFlight) {
          slot = candidate;
          break;
        }
      }
      if (!slot && tracker_->slots.size() < kMaxCallSlots) slot = tracker_->slots.emplace_back(std::make_shared<CallSlot>());
      if (slot) {
        slot->inFlight = true;
        ++tracker_->inFlight;
        break;
      }
    }
    if (Status status = finishCalls(); !status) return status;
    const auto now = std::chrono::steady_clock::now();
    if (!deadline) {
      deadline = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(2 * std::clamp(timeoutSeconds, 1.0, 86400.0)));
    }
    if (now >= *deadline) {
      return makeError(ErrorCode::Timeout, "CUDA device: " + std::to_string(kMaxCallSlots) + " calls on GPU " +
                                               std::to_string(ordinal_) + " still in flight after " +
                                               std::to_string(2 * timeoutSeconds) + " s; no slot for the next");
    }
    std::this_thread::yield();
  }
  slot->peers.reset();
  return slot;
}

Expected<std::shared_ptr<CallSlot>> CudaDevice::acquireSlot(const KernelCall& call) {
  Expected<std::shared_ptr<CallSlot>> taken = takeSlot(call.timeoutSeconds);
  if (!taken) return taken.status();
  std::shared_ptr<CallSlot> slot = std::move(*taken);
  const CompiledPlan& plan = *call.plan;
  const size_t progress = static_cast<size_t>(std::max(1, plan.layout.progressCounters[call.rank]));
  const int32_t nTbs = plan.layout.blocksOf(plan.plan, call.rank);
  if (Status status = reserve(*slot, (progress + 2) * sizeof(uint64_t), static_cast<size_t>(nTbs),
                              workspaceLayout(call).total);
      !status) {
    releaseSlot(*tracker_, *slot);
    return status;
  }
  slot->plan = call.plan;
  slot->rank = call.rank;
  slot->nTbs = nTbs;
  return slot;
}

Status CudaDevice::enqueue(const KernelCall& call, CUstream stream, CUfunction function, CUdeviceptr rings,
                           CUdeviceptr values, const std::shared_ptr<CallSlot>& slot) {
  const CompiledPlan& plan = *call.plan;
  // The slot is this call's alone until its host function ran: its reports are written here; its
  // counters are not cleared, the call numbers its values instead (a previous call of the stream
  // may still run, and its values are all below this call's).
  std::fill(slot->reports, slot->reports + slot->nTbs, dev::TbReport{});
  std::optional<CallTiming> timing;
  if (call.completed) {
    // The call's span in stream order: from its first operation to its last, as the CPU device
    // times it from its turn to its end.
    Expected<CUevent> start = takeEvent();
    Expected<CUevent> end = start ? takeEvent() : Expected<CUevent>(start.status());
    if (!end) {
      if (start) {
        std::lock_guard lock(eventMutex_);
        freeEvents_.push_back(*start);
      }
      return end.status();
    }
    timing = CallTiming{*start, *end, call.completed};
    if (Status status = check(cu_.cuEventRecord(timing->start, stream), "cuEventRecord", "the call's start");
        !status) {
      return status;
    }
  }
  // The slot's scratch memory is the call's workspace (call_buffers.h): scratch and relocated storage.
  const CallBuffers buffers =
      resolveCallBuffers(call, slot->scratchBytes > 0 ? reinterpret_cast<char*>(slot->scratch) : nullptr);
  if (buffers.before.bytes > 0) {
    if (Status status = check(cu_.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(buffers.before.dst),
                                                    reinterpret_cast<CUdeviceptr>(buffers.before.src),
                                                    buffers.before.bytes, stream),
                              "cuMemcpyDtoDAsync", "the input into the workspace");
        !status) {
      return status;
    }
  }
  dev::KernelArgs args = callKernelArgs(call, buffers);
  args.rings = devicePointer<dev::RingDevice>(rings, 0);
  // The two rank-barrier words come first, at the same place for every plan: the slot serves calls
  // of different plans, and a barrier word must never have held another plan's progress value
  // (its low half counts arrivals). The progress counters follow; their values are epoch-numbered,
  // so what another plan left there is below anything this call waits for.
  args.barrier = devicePointer<uint64_t>(slot->counters, 0);
  args.progress = devicePointer<uint64_t>(slot->counters, 2 * static_cast<int64_t>(sizeof(uint64_t)));
  args.reports = devicePointer<dev::TbReport>(slot->reportsDevice, 0);
  args.abort = devicePointer<int32_t>(abortDevice_, 0);
  args.spinLimit = spinLimitCycles(call.timeoutSeconds, clockKhz_);
  args.epoch = ++slot->epoch;
  args.roleValues = devicePointer<int32_t>(values, 0);
  void* params[] = {&args};
  const GeneratedKernel& kernel = plan.kernels.kernelOf(call.rank);
  // The TBs of every channel the call runs: a small call runs fewer than the plan's (the slot's
  // reports are sized for all of them; only the launched blocks' are read).
  const int32_t blocks = plan.layout.blocksOf(plan.plan, call.rank, args.channels);
  slot->nTbs = blocks;
  const std::string what = kernel.kernelName + " <<<" + std::to_string(blocks) + ", " +
                           std::to_string(plan.plan.config.nThreads) + ">>>";
  if (Status status = check(cu_.cuLaunchKernel(function, static_cast<unsigned>(blocks), 1, 1,
                                               static_cast<unsigned>(plan.plan.config.nThreads), 1, 1, 0, stream,
                                               params, nullptr),
                            "cuLaunchKernel", what);
      !status) {
    return status;
  }
  if (call.testDelayMicros > 0) {
    auto micros = std::make_unique<int64_t>(call.testDelayMicros);
    if (Status status = check(cu_.cuLaunchHostFunc(stream, &delayStream, micros.get()), "cuLaunchHostFunc",
                              "the test delay (TUCCL_TEST_DELAY_GROUP)");
        !status) {
      return status;
    }
    static_cast<void>(micros.release());  // delayStream owns it
  }
  if (buffers.after.bytes > 0) {
    if (Status status = check(cu_.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(buffers.after.dst),
                                                    reinterpret_cast<CUdeviceptr>(buffers.after.src),
                                                    buffers.after.bytes, stream),
                              "cuMemcpyDtoDAsync", "the result out of the workspace");
        !status) {
      return status;
    }
  }
  if (timing) {
    if (Status status = check(cu_.cuEventRecord(timing->end, stream), "cuEventRecord", "the call's end"); !status) {
      return status;
    }
  }
  // The call's end: an event, found completed by finishCalls (no host function holds the stream).
  if (Status status = check(cu_.cuEventRecord(slot->done, stream), "cuEventRecord", "the end of " + what); !status) {
    return status;
  }
  std::lock_guard lock(pendingMutex_);
  pending_.push_back(PendingCall{slot, std::move(timing)});
  return {};
}

// The calls whose completion events fired: their reports are read and their slots released
// (callFinished). Needs the device's context current. A driver error other than "not ready" (a
// failed kernel's sticky error) is returned; those calls stay in flight.
Status CudaDevice::finishCalls() {
  std::vector<PendingCall> done;
  CUresult failure = CUDA_SUCCESS;
  {
    std::lock_guard lock(pendingMutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      const CUresult result = cu_.cuEventQuery(it->slot->done);
      if (result == CUDA_SUCCESS) {
        done.push_back(std::move(*it));
        it = pending_.erase(it);
        continue;
      }
      if (result != CUDA_ERROR_NOT_READY && failure == CUDA_SUCCESS) failure = result;
      ++it;
    }
  }
  for (PendingCall& call : done) callFinished(*tracker_, call);
  if (failure == CUDA_SUCCESS) return {};
  return check(failure, "cuEventQuery", "a call's end on GPU " + std::to_string(ordinal_));
}

// A call may not be captured into a CUDA graph: a replay would run it again with the rings'
// counts, the slot's epoch and the completion event of the capture, which the calls after it have
// moved on from. Refused before anything is enqueued, so the capture itself stays valid. Called
// with the device's context current.
Status CudaDevice::refuseCapture(tucclStream_t stream) const {
  int capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (Status status = check(cu_.cuStreamIsCapturing(reinterpret_cast<CUstream>(stream), &capture),
                            "cuStreamIsCapturing", "the call's stream");
      !status) {
    return status;
  }
  if (capture == CU_STREAM_CAPTURE_STATUS_NONE) return {};
  return makeError(ErrorCode::Unsupported,
                   "CUDA device: the stream is being captured into a CUDA graph, and TuCCL's calls cannot be replayed "
                   "from one (each call advances the rings' counters); make the call outside the capture");
}

Status CudaDevice::copy(void* dst, const void* src, size_t bytes, tucclStream_t stream) {
  if (bytes == 0 || dst == src) return {};
  ScopedContext scope(cu_, context_);
  if (Status status = scope.status(); !status) return status;
  if (Status status = refuseCapture(stream); !status) return status;
  return check(cu_.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes,
                                     reinterpret_cast<CUstream>(stream)),
               "cuMemcpyDtoDAsync", "a one-rank collective");
}

Status CudaDevice::launch(const KernelCall& call, tucclStream_t stream) {
  if (Status status = checkKernelCall(call); !status) return status;
  if (segments_.empty() || static_cast<int32_t>(segments_.size()) != call.plan->plan.nRanks) {
    return makeError(ErrorCode::InvalidArgument, "CUDA device: launch of a " + std::to_string(call.plan->plan.nRanks) +
                                                     "-rank plan on staging opened for " +
                                                     std::to_string(segments_.size()) + " ranks");
  }
  if (call.plan->kernels.kernelOf(call.rank).nTbs < 1) return {};  // the rank has no work in this plan
  if (Status status = checkRingsOfRank(*call.placement, call.rank); !status) return status;
  ScopedContext scope(cu_, context_);
  if (Status status = scope.status(); !status) return status;
  if (Status status = refuseCapture(stream); !status) return status;
  static_cast<void>(finishCalls());  // the calls that finished since the last launch free their slots
  readTimings();
  Expected<CUfunction> function = kernelFunction(*call.plan, call.rank);
  if (!function) return function.status();
  Expected<CUdeviceptr> rings = ringTable(*call.plan, *call.placement);
  if (!rings) return rings.status();
  Expected<CUdeviceptr> values = valueTable(*call.plan, call.rank);
  if (!values) return values.status();
  Expected<std::shared_ptr<CallSlot>> slot = acquireSlot(call);
  if (!slot) return slot.status();
  Status status = enqueue(call, stream, *function, *rings, *values, *slot);
  if (!status) {
    // What was enqueued before the failure may still touch the slot: let it pass (bounded by the
    // waits of the kernels before it) before another call takes the slot.
    cu_.cuStreamSynchronize(stream);
    releaseSlot(*tracker_, **slot);
  }
  return status;
}

// The point-to-point kernel (kernelgen/device/peer.h), compiled once per device by NVRTC (through
// kernelgen's cache), unless an image was given (setCudaPeerKernelImage).
Expected<CUfunction> CudaDevice::peerFunction() {
  static constexpr const char* kName = "tuccl_peer_transfers";
  std::lock_guard lock(cacheMutex_);
  if (auto it = modules_.find(kName); it != modules_.end()) return it->second.function;
  std::vector<char> image = peerImage_;
  if (image.empty()) {
    if (!nvrtcAvailable()) {
      return makeError(ErrorCode::Unsupported, "CUDA device: point-to-point needs NVRTC to compile its kernel for " +
                                                   arch_ + ", and this TuCCL was built without it");
    }
    GeneratedKernel kernel;
    kernel.fileName = "tuccl_peer_transfers.cu";
    kernel.kernelName = kName;
    kernel.source = "#include \"peer.h\"\n";
    Expected<NvrtcOutput> compiled = compileWithNvrtcCached(kernel, arch_);
    if (!compiled) return makeError(ErrorCode::Internal, "CUDA device: " + compiled.status().message());
    image = std::move(compiled->cubin);
  }
  const std::string what = std::string(kName) + " (" + std::to_string(image.size()) + " bytes) on GPU " +
                           std::to_string(ordinal_);
  Module module;
  if (Status status = check(cu_.cuModuleLoadData(&module.module, image.data()), "cuModuleLoadData", what); !status) {
    return status;
  }
  if (Status status = check(cu_.cuModuleGetFunction(&module.function, module.module, kName), "cuModuleGetFunction",
                            what);
      !status) {
    cu_.cuModuleUnload(module.module);
    return status;
  }
  modules_.emplace(kName, module);
  return module.function;
}

// Host-mapped memory for a batch's kernel arguments, rings and values.
Status CudaDevice::reservePeers(CallSlot& slot, size_t bytes) {
  if (slot.peerCapacity >= bytes) return {};
  if (slot.peerHost != nullptr) cu_.cuMemFreeHost(slot.peerHost);
  slot.peerHost = nullptr;
  slot.peerCapacity = 0;
  const size_t capacity = std::max<size_t>(bytes, 16 << 10);
  void* host = nullptr;
  if (Status status = check(cu_.cuMemHostAlloc(&host, capacity, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
                            "cuMemHostAlloc", "point-to-point arguments");
      !status) {
    return status;
  }
  slot.peerHost = static_cast<char*>(host);
  if (Status status = check(cu_.cuMemHostGetDevicePointer(&slot.peerDevice, host, 0), "cuMemHostGetDevicePointer",
                            "point-to-point arguments");
      !status) {
    return status;
  }
  slot.peerCapacity = capacity;
  return {};
}

// One launch of the batch: block b runs chain b (peer_batch.h peerChains), reading its transfers'
// KernelArgs (KernelArgs::scratch of the launch's arguments), rings and values, and the chains
// (its roleValues), all in the slot's host-mapped memory.
Status CudaDevice::enqueuePeers(const PeerBatch& batch, CUstream stream, CUfunction function,
                                const std::shared_ptr<CallSlot>& slot) {
  const size_t n = batch.transfers.size();
  const size_t argsBytes = n * sizeof(dev::KernelArgs), ringsBytes = n * sizeof(dev::RingDevice);
  auto* args = reinterpret_cast<dev::KernelArgs*>(slot->peerHost);
  auto* rings = reinterpret_cast<dev::RingDevice*>(slot->peerHost + argsBytes);
  auto* values = reinterpret_cast<int32_t*>(slot->peerHost + argsBytes + ringsBytes);
  const CUdeviceptr ringsDevice = slot->peerDevice + argsBytes;
  const CUdeviceptr valuesDevice = ringsDevice + ringsBytes;
  const std::vector<int32_t> chains = peerChains(batch);
  std::copy(chains.begin(), chains.end(), values + 2 * n);
  const auto blocks = static_cast<unsigned>(chains.size() / 2);
  std::fill(slot->reports, slot->reports + n, dev::TbReport{});
  for (size_t i = 0; i < n; ++i) {
    const PeerTransfer& transfer = batch.transfers[i];
    Expected<dev::RingDevice> ring = ringDevice(batch.placement->rings[transfer.ring]);
    if (!ring) return ring.status();
    rings[i] = *ring;
    const std::array<int32_t, 2> own = peerValues(transfer);
    std::copy(own.begin(), own.end(), values + 2 * i);
    args[i] = peerKernelArgs(transfer, batch.sliceBytes, batch.rank);
    args[i].rings = devicePointer<dev::RingDevice>(ringsDevice, static_cast<int64_t>(i * sizeof(dev::RingDevice)));
    args[i].roleValues = devicePointer<int32_t>(valuesDevice, static_cast<int64_t>(2 * i * sizeof(int32_t)));
    args[i].reports = devicePointer<dev::TbReport>(slot->reportsDevice, static_cast<int64_t>(i * sizeof(dev::TbReport)));
    args[i].abort = devicePointer<int32_t>(abortDevice_, 0);
    args[i].spinLimit = spinLimitCycles(batch.timeoutSeconds, clockKhz_);
  }
  dev::KernelArgs launch;
  launch.scratch = devicePointer<char>(slot->peerDevice, 0);
  launch.roleValues = devicePointer<int32_t>(valuesDevice, static_cast<int64_t>(2 * n * sizeof(int32_t)));
  launch.count = static_cast<int64_t>(n);
  launch.abort = devicePointer<int32_t>(abortDevice_, 0);
  launch.spinLimit = spinLimitCycles(batch.timeoutSeconds, clockKhz_);
  void* params[] = {&launch};
  const std::string what =
      "tuccl_peer_transfers <<<" + std::to_string(blocks) + ", " + std::to_string(dev::kPeerThreads) + ">>>";
  if (Status status = check(cu_.cuLaunchKernel(function, blocks, 1, 1, dev::kPeerThreads, 1, 1, 0,
                                               stream, params, nullptr),
                            "cuLaunchKernel", what);
      !status) {
    return status;
  }
  if (Status status = check(cu_.cuEventRecord(slot->done, stream), "cuEventRecord", "the end of " + what); !status) {
    return status;
  }
  std::lock_guard lock(pendingMutex_);
  pending_.push_back(PendingCall{slot, std::nullopt});
  return {};
}

Status CudaDevice::launchPeers(const PeerBatch& batch, tucclStream_t stream) {
  if (batch.transfers.empty()) return {};
  if (batch.placement == nullptr) return makeError(ErrorCode::Internal, "CUDA device: a batch without its rings");
  const size_t chains = peerChains(batch).size() / 2;
  if (multiprocessors_ > 0 && chains > static_cast<size_t>(multiprocessors_)) {
    // Every chain's TB must be resident at once (each waits on its peer's), one per SM.
    return makeError(ErrorCode::InvalidArgument,
                     "CUDA device: a group sending to or receiving from " + std::to_string(chains) +
                         " ranks on one communicator needs more TBs than GPU " + std::to_string(ordinal_) +
                         " runs at once (" + std::to_string(multiprocessors_) + " SMs); split the group");
  }
  if (Status status = checkRingsOfRank(*batch.placement, batch.rank); !status) return status;
  ScopedContext scope(cu_, context_);
  if (Status status = scope.status(); !status) return status;
  if (Status status = refuseCapture(stream); !status) return status;
  static_cast<void>(finishCalls());
  readTimings();
  Expected<CUfunction> function = peerFunction();
  if (!function) return function.status();
  Expected<std::shared_ptr<CallSlot>> taken = takeSlot(batch.timeoutSeconds);
  if (!taken) return taken.status();
  std::shared_ptr<CallSlot> slot = std::move(*taken);
  const size_t n = batch.transfers.size();
  Status status = reserve(*slot, 2 * sizeof(uint64_t), n, 0);
  if (status) {
    // The transfers' arguments, rings and values, then the chains (two values each, at most n).
    status = reservePeers(*slot, n * (sizeof(dev::KernelArgs) + sizeof(dev::RingDevice) + 4 * sizeof(int32_t)));
  }
  if (status) {
    slot->peers = batch;
    slot->plan = nullptr;
    slot->rank = batch.rank;
    slot->nTbs = static_cast<int32_t>(n);
    status = enqueuePeers(batch, reinterpret_cast<CUstream>(stream), *function, slot);
  }
  if (!status) {
    cu_.cuStreamSynchronize(reinterpret_cast<CUstream>(stream));
    releaseSlot(*tracker_, *slot);
  }
  return status;
}

Status CudaDevice::drain(double timeoutSeconds) {
  ScopedContext scope(cu_, context_);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(std::clamp(timeoutSeconds, 0.0, 86400.0)));
  if (Status status = scope.status(); !status) return status;
  for (;;) {
    // A failed kernel leaves a sticky error, and its event never fires: report it.
    if (Status status = finishCalls(); !status) return status;
    {
      std::lock_guard lock(tracker_->mutex);
      if (tracker_->inFlight == 0) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        return makeError(ErrorCode::Timeout, "CUDA device: " + std::to_string(tracker_->inFlight) +
                                                 " calls on GPU " + std::to_string(ordinal_) + " still running after " +
                                                 std::to_string(timeoutSeconds) + " s");
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  readTimings();
  return {};
}

// An event for a timed call: a free one of the pool, else a new one.
Expected<CUevent> CudaDevice::takeEvent() {
  std::lock_guard lock(eventMutex_);
  if (!freeEvents_.empty()) {
    CUevent event = freeEvents_.back();
    freeEvents_.pop_back();
    return event;
  }
  CUevent event = nullptr;
  if (Status status = check(cu_.cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate", "to time a call");
      !status) {
    return status;
  }
  events_.push_back(event);
  return event;
}

// Hands the times of the finished timed calls to the runtime phase and returns their events to
// the pool. Runs on a thread with the device's context current (never in a host function, which
// may not call the driver). A time that cannot be read leaves that call untimed (logged once).
void CudaDevice::readTimings() {
  std::vector<CallTiming> finished;
  {
    std::lock_guard lock(tracker_->mutex);
    finished.swap(tracker_->finished);
  }
  for (CallTiming& timing : finished) {
    float milliseconds = 0;
    const CUresult result =
        timing.completed ? cu_.cuEventElapsedTime(&milliseconds, timing.start, timing.end) : CUDA_ERROR_INVALID_VALUE;
    if (result == CUDA_SUCCESS) {
      timing.completed(static_cast<double>(milliseconds) * 1e-3);
    } else if (timing.completed && !timingFailureLogged_.exchange(true)) {
      logLine(LogLevel::Warn, -1,
              "TuCCL adapt: a call on GPU " + std::to_string(ordinal_) + " could not be timed (" +
                  cudaResultName(cu_, result) + "); such calls are left out of the runtime phase");
    }
    std::lock_guard lock(eventMutex_);
    freeEvents_.push_back(timing.start);
    freeEvents_.push_back(timing.end);
  }
}

}  // namespace

void setCudaPeerKernelImage(Device& device, std::vector<char> image) {
  if (auto* cuda = dynamic_cast<CudaDevice*>(&device)) cuda->peerImage_ = std::move(image);
}

Expected<std::unique_ptr<Device>> createCudaDevice(const CudaDriver& driver, int ordinal) {
  if (ordinal < 0 || ordinal >= driver.deviceCount) {
    return makeError(ErrorCode::InvalidArgument, "CUDA device: GPU " + std::to_string(ordinal) + " does not exist (" +
                                                     std::to_string(driver.deviceCount) + " GPUs)");
  }
  const std::string what = "GPU " + std::to_string(ordinal);
  CUdevice device = 0;
  if (Status status = cudaStatus(driver, driver.cuDeviceGet(&device, ordinal), "cuDeviceGet", what); !status) {
    return status;
  }
  Expected<std::string> arch = cudaArchitecture(driver, ordinal);
  if (!arch) return arch.status();
  int clockKhz = 0;
  if (Status status = cudaStatus(driver, driver.cuDeviceGetAttribute(&clockKhz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device),
                                 "cuDeviceGetAttribute", what + " clock rate");
      !status) {
    return status;
  }
  // The SMs bound how many TBs may wait on each other at once (PlanCacheOptions::maxBlocksPerRank);
  // a driver that does not say leaves them unbounded.
  int multiprocessors = 0;
  if (driver.cuDeviceGetAttribute(&multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device) != CUDA_SUCCESS) {
    multiprocessors = 0;
  }
  CUcontext context = nullptr;
  if (Status status = cudaStatus(driver, driver.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain",
                                 what);
      !status) {
    return status;
  }
  return std::unique_ptr<Device>(new CudaDevice(driver, ordinal, device, context, *arch, clockKhz, multiprocessors));
}

Expected<int> currentCudaOrdinal(const CudaDriver& driver) {
  CUcontext context = nullptr;
  if (Status status = cudaStatus(driver, driver.cuCtxGetCurrent(&context), "cuCtxGetCurrent"); !status) return status;
  if (context == nullptr) return 0;
  CUdevice device = 0;
  if (Status status = cudaStatus(driver, driver.cuCtxGetDevice(&device), "cuCtxGetDevice"); !status) return status;
  return static_cast<int>(device);
}

Expected<std::string> cudaArchitecture(const CudaDriver& driver, int ordinal) {
  const std::string what = "GPU " + std::to_string(ordinal);
  CUdevice device = 0;
  if (Status status = cudaStatus(driver, driver.cuDeviceGet(&device, ordinal), "cuDeviceGet", what); !status) {
    return status;
  }
  int major = 0, minor = 0;
  if (Status status = cudaStatus(
          driver, driver.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
          "cuDeviceGetAttribute", what + " compute capability");
      !status) {
    return status;
  }
  if (Status status = cudaStatus(
          driver, driver.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
          "cuDeviceGetAttribute", what + " compute capability");
      !status) {
    return status;
  }
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

}  // namespace tuccl::backend
