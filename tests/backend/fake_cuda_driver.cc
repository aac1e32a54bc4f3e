// The recording fake of the CUDA driver (fake_cuda_driver.h). Every entry point records a Call;
// `values` per entry point are listed beside it. Arguments are checked as the driver checks them
// where a device bug would otherwise pass unnoticed (a pointer outside every allocation, an IPC
// open of an allocation of this process, an unbalanced context release).
#include "fake_cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <new>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "backend/cuda_driver.h"
#include "kernelgen/device/kernel_args.h"

using namespace tuccl::backend;  // the ABI types

namespace tuccl::fakecuda {
namespace {

constexpr int kDriverVersion = 12040;

using HostKernel = void (*)(tuccl::dev::KernelArgs);

// ---- Streams --------------------------------------------------------------------------------------

// A stream: a worker thread running enqueued operations in order.
class Stream {
 public:
  Stream() : worker_([this] { run(); }) {}
  ~Stream() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }
  void enqueue(std::function<void()> operation) {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(operation));
    wake_.notify_all();
  }
  void synchronize() {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }
  bool idle() {
    std::lock_guard lock(mutex_);
    return queue_.empty() && !busy_;
  }
  /// Whether the stream is being captured into a graph (setCapturing).
  std::atomic<bool> capturing{false};

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything ran
      std::function<void()> operation = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      operation();
      lock.lock();
      busy_ = false;
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;  // last: starts once the members above exist
};

// ---- State ----------------------------------------------------------------------------------------

struct Context {
  int ordinal = 0;
  int retains = 0;
  std::set<int> peers;
  std::unique_ptr<Stream> nullStream;
};

struct Range {
  size_t bytes = 0;
  int fd = -1;          ///< device memory: its memfd (an IPC handle names it)
  unsigned flags = 0;   ///< host memory: CU_MEMHOSTALLOC_* / CU_MEMHOSTREGISTER_*
};

struct Module {
  void* library = nullptr;  ///< the host build, for hostCubin images
  std::vector<char> image;
};

struct Function {
  Module* module = nullptr;
  std::string name;
  HostKernel kernel = nullptr;
  void (*setBlock)(unsigned) = nullptr;
};

// An event: the time its stream reached the latest record of it.
struct Event {
  std::mutex mutex;
  uint64_t recorded = 0;  ///< records enqueued
  uint64_t reached = 0;   ///< records their stream ran
  std::chrono::steady_clock::time_point at;
};

struct IpcHandle {
  char magic[8];
  int64_t pid;
  int32_t fd;
  int32_t ordinal;
  uint64_t bytes;
  uint64_t pointer;
};
static_assert(sizeof(IpcHandle) <= kCuIpcHandleBytes);
constexpr char kIpcMagic[8] = {'F', 'A', 'K', 'E', 'I', 'P', 'C', '1'};

struct State {
  std::mutex mutex;
  bool initialized = false;
  std::vector<Call> log;
  std::map<std::string, std::pair<int, int>> failures;  // symbol -> (calls to skip, result)
  std::map<uintptr_t, Range> device, host, registered, opened;
  std::set<Module*> modules;
  std::set<Function*> functions;
  std::set<Stream*> streams;
  std::map<Event*, std::shared_ptr<Event>> events;
  std::deque<Context> contexts;
  /// TUCCL_FAKE_CUDA_TRACE=1: every recorded call is also printed to stderr, with its pid.
  bool trace = [] {
    const char* value = std::getenv("TUCCL_FAKE_CUDA_TRACE");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
};

State* created = nullptr;

// A forked child has none of the parent's threads: it forgets the parent's streams (their
// workers are gone) and its lock (another thread may have held it at the fork).
void forgetParentThreads() {
  if (created == nullptr) return;
  new (&created->mutex) std::mutex;
  for (Context& context : created->contexts) static_cast<void>(context.nullStream.release());
  created->streams.clear();
}

// Never destroyed: stream workers and host functions may run while the process exits.
State& state() {
  static State* s = [] {
    created = new State;
    const char* count = std::getenv("TUCCL_FAKE_CUDA_DEVICES");
    const int devices = count != nullptr ? std::atoi(count) : 4;
    for (int i = 0; i < devices; ++i) created->contexts.push_back(Context{i, 0, {}, nullptr});
    pthread_atfork(nullptr, nullptr, forgetParentThreads);
    return created;
  }();
  return *s;
}

thread_local Context* current = nullptr;

CUresult record(const char* name, CUresult result, std::vector<uint64_t> values = {}, std::vector<char> bytes = {},
                std::string text = {}) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.trace) {
    std::string line = "fake cuda [" + std::to_string(getpid()) + "] " + name + " -> " + std::to_string(result);
    for (uint64_t value : values) line += " " + std::to_string(value);
    if (!text.empty()) line += " " + text.substr(0, 80);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  // A process that runs the fake as its driver for long (a benchmark) would grow the log without
  // bound: past kMaxLoggedCalls the older half goes (the tests read far fewer).
  constexpr size_t kMaxLoggedCalls = 1 << 18;
  if (s.log.size() >= kMaxLoggedCalls) s.log.erase(s.log.begin(), s.log.begin() + kMaxLoggedCalls / 2);
  s.log.push_back(Call{name, result, std::move(values), std::move(bytes), std::move(text)});
  return result;
}

// A failure injected for `name`, consumed by this call.
std::optional<CUresult> injected(const char* name) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.failures.find(name);
  if (it == s.failures.end()) return std::nullopt;
  if (it->second.first > 0) {
    --it->second.first;
    return std::nullopt;
  }
  const CUresult result = it->second.second;
  s.failures.erase(it);
  return result;
}

#define FAKE_INJECT(name, ...)                                              \
  do {                                                                      \
    if (std::optional<CUresult> failure = injected(name)) {                 \
      return record(name, *failure, __VA_ARGS__);                           \
    }                                                                       \
  } while (0)

uint64_t u(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer); }

// Whether [p, p + n) lies in one range of `ranges` (keyed by base address).
bool within(const std::map<uintptr_t, Range>& ranges, uintptr_t p, size_t n, unsigned needFlags = 0) {
  auto it = ranges.upper_bound(p);
  if (it == ranges.begin()) return false;
  --it;
  return p >= it->first && p + n <= it->first + it->second.bytes && (it->second.flags & needFlags) == needFlags;
}

// Whether the device may access [p, p + n): device memory, IPC mappings, mapped host memory.
bool deviceAccessible(uintptr_t p, size_t n) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return within(s.device, p, n) || within(s.opened, p, n) || within(s.host, p, n, CU_MEMHOSTALLOC_DEVICEMAP) ||
         within(s.registered, p, n, CU_MEMHOSTREGISTER_DEVICEMAP);
}

// The event a handle names; nullptr when invalid.
std::shared_ptr<Event> eventOf(CUevent handle) {
  std::lock_guard lock(state().mutex);
  auto it = state().events.find(reinterpret_cast<Event*>(handle));
  return it == state().events.end() ? nullptr : it->second;
}

// The stream a handle names (nullptr: the current context's NULL stream); nullptr when invalid.
Stream* streamOf(CUstream handle) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (handle == nullptr) {
    if (current == nullptr) return nullptr;
    if (!current->nullStream) current->nullStream = std::make_unique<Stream>();
    return current->nullStream.get();
  }
  auto* stream = reinterpret_cast<Stream*>(handle);
  return s.streams.count(stream) != 0 ? stream : nullptr;
}

// The bytes of a module image: a hostCubin's text and its NUL, or an ELF file up to its last table.
std::vector<char> imageBytes(const void* image) {
  const char* bytes = static_cast<const char*>(image);
  if (std::strncmp(bytes, kHostCubinMagic.data(), kHostCubinMagic.size()) == 0) {
    return std::vector<char>(bytes, bytes + std::strlen(bytes) + 1);
  }
  if (std::strncmp(bytes, kHostLibraryMagic.data(), kHostLibraryMagic.size()) == 0) {
    uint64_t size = 0;
    std::memcpy(&size, bytes + kHostLibraryMagic.size(), sizeof size);
    return std::vector<char>(bytes, bytes + kHostLibraryMagic.size() + sizeof size + size);
  }
  if (std::memcmp(bytes, ELFMAG, SELFMAG) == 0 && bytes[EI_CLASS] == ELFCLASS64) {
    Elf64_Ehdr header;
    std::memcpy(&header, bytes, sizeof header);
    const size_t end = std::max<size_t>({sizeof header, header.e_shoff + size_t{header.e_shnum} * header.e_shentsize,
                                         header.e_phoff + size_t{header.e_phnum} * header.e_phentsize});
    return std::vector<char>(bytes, bytes + end);
  }
  return {};
}

// Runs a grid of the host build: one thread per TB, the wait bound converted to a deadline.
void runGrid(const Function& function, dev::KernelArgs args, unsigned grid) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  args.deadlineNs = args.spinLimit > 0 ? now + static_cast<int64_t>(static_cast<double>(args.spinLimit) * 1e6 /
                                                                    kClockKhz)
                                       : INT64_MAX;
  std::vector<std::thread> tbs;
  for (unsigned b = 0; b < grid; ++b) {
    tbs.emplace_back([&function, args, b] {
      function.setBlock(b);
      function.kernel(args);
    });
  }
  for (std::thread& tb : tbs) tb.join();
}

}  // namespace

// ---- The test's side ------------------------------------------------------------------------------

std::vector<Call> calls() {
  std::lock_guard lock(state().mutex);
  return state().log;
}

void clearCalls() {
  std::lock_guard lock(state().mutex);
  state().log.clear();
}

std::vector<Call> callsOf(const std::string& name) {
  std::vector<Call> matching;
  for (Call& call : calls()) {
    if (call.name == name) matching.push_back(std::move(call));
  }
  return matching;
}

void failNext(const std::string& symbol, int result, int skip) {
  std::lock_guard lock(state().mutex);
  state().failures[symbol] = {skip, result};
}

void clearFailures() {
  std::lock_guard lock(state().mutex);
  state().failures.clear();
}

void setCapturing(tucclStream_t stream, bool capturing) {
  if (Stream* queue = streamOf(reinterpret_cast<CUstream>(stream))) queue->capturing.store(capturing);
}

Resources resources() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  Resources r;
  r.deviceAllocations = s.device.size();
  r.hostAllocations = s.host.size();
  r.hostRegistrations = s.registered.size();
  r.ipcMappings = s.opened.size();
  r.modules = s.modules.size();
  r.events = s.events.size();
  for (const Context& context : s.contexts) r.primaryContextRetains += context.retains;
  return r;
}

tucclStream_t createStream() {
  auto* stream = new Stream;
  std::lock_guard lock(state().mutex);
  state().streams.insert(stream);
  return reinterpret_cast<tucclStream_t>(stream);
}

void destroyStream(tucclStream_t handle) {
  auto* stream = reinterpret_cast<Stream*>(handle);
  {
    std::lock_guard lock(state().mutex);
    if (state().streams.erase(stream) == 0) return;
  }
  delete stream;  // runs what is still enqueued first
}

void synchronize(tucclStream_t handle, int ordinal) {
  Stream* stream = nullptr;
  {
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (handle != nullptr) {
      stream = s.streams.count(reinterpret_cast<Stream*>(handle)) != 0 ? reinterpret_cast<Stream*>(handle) : nullptr;
    } else if (ordinal >= 0 && static_cast<size_t>(ordinal) < s.contexts.size()) {
      stream = s.contexts[ordinal].nullStream.get();
    }
  }
  if (stream != nullptr) stream->synchronize();
}

}  // namespace tuccl::fakecuda

// ---- The driver's entry points (cuda.h ABI names) -------------------------------------------------

using namespace tuccl::fakecuda;
using tuccl::fakecuda::u;

extern "C" {

// values: {flags}
CUresult cuInit(unsigned flags) {
  FAKE_INJECT("cuInit", {flags});
  std::lock_guard lock(state().mutex);
  state().initialized = true;
  state().log.push_back(Call{"cuInit", CUDA_SUCCESS, {flags}, {}, {}});
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  FAKE_INJECT("cuDriverGetVersion", {});
  *version = kDriverVersion;
  return record("cuDriverGetVersion", CUDA_SUCCESS, {uint64_t(kDriverVersion)});
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  static const std::map<CUresult, const char*> names = {
      {CUDA_SUCCESS, "CUDA_SUCCESS"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
      {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
      {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
      {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"},
      {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
      {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
      {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
      {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
      {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
  };
  auto it = names.find(error);
  if (it == names.end()) return CUDA_ERROR_INVALID_VALUE;
  *name = it->second;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  const char* name = nullptr;
  if (cuGetErrorName(error, &name) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  *text = "reported by the fake CUDA driver";
  return CUDA_SUCCESS;
}

// values: {count}
CUresult cuDeviceGetCount(int* count) {
  FAKE_INJECT("cuDeviceGetCount", {});
  if (!state().initialized) return record("cuDeviceGetCount", CUDA_ERROR_NOT_INITIALIZED);
  *count = static_cast<int>(state().contexts.size());
  return record("cuDeviceGetCount", CUDA_SUCCESS, {uint64_t(*count)});
}

// values: {ordinal}
CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  FAKE_INJECT("cuDeviceGet", {uint64_t(ordinal)});
  if (ordinal < 0 || static_cast<size_t>(ordinal) >= state().contexts.size()) {
    return record("cuDeviceGet", CUDA_ERROR_INVALID_DEVICE, {uint64_t(ordinal)});
  }
  *device = ordinal;
  return record("cuDeviceGet", CUDA_SUCCESS, {uint64_t(ordinal)});
}

// values: {attribute, device, value}
CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  FAKE_INJECT("cuDeviceGetAttribute", {uint64_t(attribute), uint64_t(device)});
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = kComputeMajor; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = kComputeMinor; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = kClockKhz; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = kMultiprocessors; break;
    default: return record("cuDeviceGetAttribute", CUDA_ERROR_INVALID_VALUE, {uint64_t(attribute), uint64_t(device)});
  }
  return record("cuDeviceGetAttribute", CUDA_SUCCESS, {uint64_t(attribute), uint64_t(device), uint64_t(*value)});
}

// values: {device}; text: the name
CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  FAKE_INJECT("cuDeviceGetName", {uint64_t(device)});
  if (device < 0 || static_cast<size_t>(device) >= state().contexts.size() || name == nullptr || length <= 0) {
    return record("cuDeviceGetName", CUDA_ERROR_INVALID_VALUE, {uint64_t(device)});
  }
  const std::string text = "TuCCL fake GPU " + std::to_string(device);
  std::snprintf(name, static_cast<size_t>(length), "%s", text.c_str());
  return record("cuDeviceGetName", CUDA_SUCCESS, {uint64_t(device)}, {}, text);
}

// values: {device}; text: the bus id
CUresult cuDeviceGetPCIBusId(char* busId, int length, CUdevice device) {
  FAKE_INJECT("cuDeviceGetPCIBusId", {uint64_t(device)});
  if (device < 0 || static_cast<size_t>(device) >= state().contexts.size() || busId == nullptr || length <= 0) {
    return record("cuDeviceGetPCIBusId", CUDA_ERROR_INVALID_VALUE, {uint64_t(device)});
  }
  char text[32];
  std::snprintf(text, sizeof text, "0000:%02x:00.0", 0x10 + device);
  std::snprintf(busId, static_cast<size_t>(length), "%s", text);
  return record("cuDeviceGetPCIBusId", CUDA_SUCCESS, {uint64_t(device)}, {}, text);
}

// values: {device, peer}
CUresult cuDeviceCanAccessPeer(int* canAccess, CUdevice device, CUdevice peer) {
  FAKE_INJECT("cuDeviceCanAccessPeer", {uint64_t(device), uint64_t(peer)});
  *canAccess = device != peer ? 1 : 0;
  return record("cuDeviceCanAccessPeer", CUDA_SUCCESS, {uint64_t(device), uint64_t(peer)});
}

// values: {device, context}
CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  FAKE_INJECT("cuDevicePrimaryCtxRetain", {uint64_t(device)});
  State& s = state();
  std::unique_lock lock(s.mutex);
  if (device < 0 || static_cast<size_t>(device) >= s.contexts.size()) {
    lock.unlock();
    return record("cuDevicePrimaryCtxRetain", CUDA_ERROR_INVALID_DEVICE, {uint64_t(device)});
  }
  ++s.contexts[device].retains;
  *context = reinterpret_cast<CUcontext>(&s.contexts[device]);
  lock.unlock();
  return record("cuDevicePrimaryCtxRetain", CUDA_SUCCESS, {uint64_t(device), u(*context)});
}

// values: {device}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  FAKE_INJECT("cuDevicePrimaryCtxRelease_v2", {uint64_t(device)});
  State& s = state();
  std::unique_lock lock(s.mutex);
  if (device < 0 || static_cast<size_t>(device) >= s.contexts.size() || s.contexts[device].retains == 0) {
    lock.unlock();
    return record("cuDevicePrimaryCtxRelease_v2", CUDA_ERROR_INVALID_CONTEXT, {uint64_t(device)});
  }
  --s.contexts[device].retains;
  lock.unlock();
  return record("cuDevicePrimaryCtxRelease_v2", CUDA_SUCCESS, {uint64_t(device)});
}

// values: {context}
CUresult cuCtxSetCurrent(CUcontext context) {
  FAKE_INJECT("cuCtxSetCurrent", {u(context)});
  State& s = state();
  Context* target = reinterpret_cast<Context*>(context);
  bool known = target == nullptr;
  for (Context& c : s.contexts) known = known || &c == target;
  if (!known) return record("cuCtxSetCurrent", CUDA_ERROR_INVALID_CONTEXT, {u(context)});
  current = target;
  return record("cuCtxSetCurrent", CUDA_SUCCESS, {u(context)});
}

// values: {context}
CUresult cuCtxGetCurrent(CUcontext* context) {
  FAKE_INJECT("cuCtxGetCurrent", {});
  *context = reinterpret_cast<CUcontext>(current);
  return record("cuCtxGetCurrent", CUDA_SUCCESS, {u(*context)});
}

// values: {device}
CUresult cuCtxGetDevice(CUdevice* device) {
  FAKE_INJECT("cuCtxGetDevice", {});
  if (current == nullptr) return record("cuCtxGetDevice", CUDA_ERROR_INVALID_CONTEXT);
  *device = current->ordinal;
  return record("cuCtxGetDevice", CUDA_SUCCESS, {uint64_t(*device)});
}

// values: {current device, peer device}
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
  FAKE_INJECT("cuCtxEnablePeerAccess", {});
  auto* target = reinterpret_cast<Context*>(peer);
  if (current == nullptr || target == nullptr || target == current || flags != 0) {
    return record("cuCtxEnablePeerAccess", CUDA_ERROR_INVALID_VALUE);
  }
  std::unique_lock lock(state().mutex);
  const bool fresh = current->peers.insert(target->ordinal).second;
  lock.unlock();
  return record("cuCtxEnablePeerAccess", fresh ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
                {uint64_t(current->ordinal), uint64_t(target->ordinal)});
}

// values: {module}; bytes: the image; text: the host library of a hostCubin image
CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  FAKE_INJECT("cuModuleLoadData", {});
  if (current == nullptr) return record("cuModuleLoadData", CUDA_ERROR_INVALID_CONTEXT);
  std::vector<char> bytes = imageBytes(image);
  if (bytes.empty()) return record("cuModuleLoadData", CUDA_ERROR_INVALID_IMAGE);
  auto loaded = std::make_unique<Module>();
  std::string library;
  if (std::strncmp(bytes.data(), kHostCubinMagic.data(), kHostCubinMagic.size()) == 0) {
    library = bytes.data() + kHostCubinMagic.size();
    loaded->library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (loaded->library == nullptr) return record("cuModuleLoadData", CUDA_ERROR_INVALID_IMAGE, {}, bytes, library);
  } else if (std::strncmp(bytes.data(), kHostLibraryMagic.data(), kHostLibraryMagic.size()) == 0) {
    // A host build carried in the image: loaded from a memory file, which dlopen maps.
    const size_t header = kHostLibraryMagic.size() + sizeof(uint64_t);
    const int fd = memfd_create("tuccl-fake-kernel", MFD_CLOEXEC);
    bool written = fd >= 0;
    for (size_t at = header; written && at < bytes.size();) {
      const ssize_t n = write(fd, bytes.data() + at, bytes.size() - at);
      written = n > 0;
      if (written) at += static_cast<size_t>(n);
    }
    library = "/proc/self/fd/" + std::to_string(fd);
    loaded->library = written ? dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (fd >= 0) close(fd);  // the mapping dlopen made stays
    library = "(a host build of " + std::to_string(bytes.size() - header) + " bytes in the image)";
    if (loaded->library == nullptr) return record("cuModuleLoadData", CUDA_ERROR_INVALID_IMAGE, {}, bytes, library);
  } else {
    // A real CUBIN is recorded and its launches too, but nothing runs them: say so once, with
    // what makes the kernels run here.
    static std::once_flag told;
    std::call_once(told, [] {
      std::fprintf(stderr, "fake CUDA driver [%d]: a real CUBIN was loaded; this fake records its launches but "
                           "cannot run them (preload libtuccl-fake-nvrtc.so, LD_PRELOAD, so that libtuccl's "
                           "kernels are built for the host and run)\n", static_cast<int>(getpid()));
    });
  }
  loaded->image = bytes;
  *module = reinterpret_cast<CUmodule>(loaded.get());
  {
    std::lock_guard lock(state().mutex);
    state().modules.insert(loaded.release());
  }
  return record("cuModuleLoadData", CUDA_SUCCESS, {u(*module)}, std::move(bytes), library);
}

// values: {module, function}; text: the name
CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  FAKE_INJECT("cuModuleGetFunction", {u(module)}, {}, name);
  auto* loaded = reinterpret_cast<Module*>(module);
  {
    std::lock_guard lock(state().mutex);
    if (state().modules.count(loaded) == 0) loaded = nullptr;
  }
  if (loaded == nullptr) return record("cuModuleGetFunction", CUDA_ERROR_INVALID_HANDLE, {u(module)}, {}, name);
  auto found = std::make_unique<Function>();
  found->module = loaded;
  found->name = name;
  if (loaded->library != nullptr) {
    found->kernel = reinterpret_cast<HostKernel>(dlsym(loaded->library, name));
    found->setBlock = reinterpret_cast<void (*)(unsigned)>(dlsym(loaded->library, "tuccl_host_set_block"));
    if (found->kernel == nullptr || found->setBlock == nullptr) {
      return record("cuModuleGetFunction", CUDA_ERROR_NOT_FOUND, {u(module)}, {}, name);
    }
  } else {
    // A real CUBIN: the kernel's name is in its string table.
    const std::string needle = std::string(1, '\0') + name + std::string(1, '\0');
    if (std::string_view(loaded->image.data(), loaded->image.size()).find(needle) == std::string_view::npos) {
      return record("cuModuleGetFunction", CUDA_ERROR_NOT_FOUND, {u(module)}, {}, name);
    }
  }
  *function = reinterpret_cast<CUfunction>(found.get());
  {
    std::lock_guard lock(state().mutex);
    state().functions.insert(found.release());
  }
  return record("cuModuleGetFunction", CUDA_SUCCESS, {u(module), u(*function)}, {}, name);
}

// values: {module}
CUresult cuModuleUnload(CUmodule module) {
  FAKE_INJECT("cuModuleUnload", {u(module)});
  auto* loaded = reinterpret_cast<Module*>(module);
  std::unique_lock lock(state().mutex);
  if (state().modules.erase(loaded) == 0) {
    lock.unlock();
    return record("cuModuleUnload", CUDA_ERROR_INVALID_HANDLE, {u(module)});
  }
  for (auto it = state().functions.begin(); it != state().functions.end();) {
    if ((*it)->module == loaded) {
      delete *it;
      it = state().functions.erase(it);
    } else {
      ++it;
    }
  }
  delete loaded;  // the host library stays loaded (the test process owns it)
  lock.unlock();
  return record("cuModuleUnload", CUDA_SUCCESS, {u(module)});
}

// values: {gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes, stream, function, device};
// bytes: the KernelArgs; text: the kernel's name
CUresult cuLaunchKernel(CUfunction function, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                        unsigned blockY, unsigned blockZ, unsigned sharedBytes, CUstream stream, void** params,
                        void** extra) {
  std::vector<uint64_t> values = {gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes, u(stream), u(function),
                                  uint64_t(current != nullptr ? current->ordinal : -1)};
  FAKE_INJECT("cuLaunchKernel", values);
  auto* launched = reinterpret_cast<Function*>(function);
  {
    std::lock_guard lock(state().mutex);
    if (state().functions.count(launched) == 0) launched = nullptr;
  }
  Stream* queue = streamOf(stream);
  if (launched == nullptr || queue == nullptr) return record("cuLaunchKernel", CUDA_ERROR_INVALID_HANDLE, values);
  if (params == nullptr || extra != nullptr || gridX * gridY * gridZ == 0 || blockX * blockY * blockZ == 0 ||
      blockX * blockY * blockZ > 1024) {
    return record("cuLaunchKernel", CUDA_ERROR_INVALID_VALUE, values);
  }
  tuccl::dev::KernelArgs args;
  std::memcpy(&args, params[0], sizeof args);
  std::vector<char> bytes(reinterpret_cast<const char*>(&args), reinterpret_cast<const char*>(&args) + sizeof args);
  const Function copy = *launched;
  if (copy.kernel != nullptr) queue->enqueue([copy, args, gridX] { runGrid(copy, args, gridX); });
  return record("cuLaunchKernel", CUDA_SUCCESS, std::move(values), std::move(bytes), copy.name);
}

// values: {stream}
CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* userData) {
  FAKE_INJECT("cuLaunchHostFunc", {u(stream)});
  Stream* queue = streamOf(stream);
  if (queue == nullptr || fn == nullptr) return record("cuLaunchHostFunc", CUDA_ERROR_INVALID_HANDLE, {u(stream)});
  queue->enqueue([fn, userData] { fn(userData); });
  return record("cuLaunchHostFunc", CUDA_SUCCESS, {u(stream)});
}

// Not recorded (polled).
CUresult cuStreamQuery(CUstream stream) {
  if (std::optional<CUresult> failure = injected("cuStreamQuery")) return *failure;
  Stream* queue = streamOf(stream);
  if (queue == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return queue->idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// Not recorded (polled). The status is CUstreamCaptureStatus: 1 (active) while setCapturing holds.
CUresult cuStreamIsCapturing(CUstream stream, int* captureStatus) {
  if (std::optional<CUresult> failure = injected("cuStreamIsCapturing")) return *failure;
  Stream* queue = streamOf(stream);
  if (queue == nullptr || captureStatus == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *captureStatus = queue->capturing.load() ? 1 : 0;
  return CUDA_SUCCESS;
}

// values: {stream}
CUresult cuStreamSynchronize(CUstream stream) {
  FAKE_INJECT("cuStreamSynchronize", {u(stream)});
  Stream* queue = streamOf(stream);
  if (queue == nullptr) return record("cuStreamSynchronize", CUDA_ERROR_INVALID_HANDLE, {u(stream)});
  queue->synchronize();
  return record("cuStreamSynchronize", CUDA_SUCCESS, {u(stream)});
}

// values: {bytes, pointer}
CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  FAKE_INJECT("cuMemAlloc_v2", {bytes});
  if (current == nullptr) return record("cuMemAlloc_v2", CUDA_ERROR_INVALID_CONTEXT, {bytes});
  if (bytes == 0) return record("cuMemAlloc_v2", CUDA_ERROR_INVALID_VALUE, {bytes});
  const int fd = memfd_create("tuccl-fake-cuda", MFD_CLOEXEC);
  void* data = MAP_FAILED;
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
    data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (data == MAP_FAILED) {
    if (fd >= 0) close(fd);
    return record("cuMemAlloc_v2", CUDA_ERROR_OUT_OF_MEMORY, {bytes});
  }
  std::memset(data, 0xA5, bytes);  // device memory is not zeroed
  *pointer = u(data);
  {
    std::lock_guard lock(state().mutex);
    state().device[u(data)] = Range{bytes, fd, 0};
  }
  return record("cuMemAlloc_v2", CUDA_SUCCESS, {bytes, *pointer});
}

// values: {pointer}
CUresult cuMemFree_v2(CUdeviceptr pointer) {
  FAKE_INJECT("cuMemFree_v2", {pointer});
  std::unique_lock lock(state().mutex);
  auto it = state().device.find(pointer);
  if (it == state().device.end()) {
    lock.unlock();
    return record("cuMemFree_v2", CUDA_ERROR_INVALID_VALUE, {pointer});
  }
  munmap(reinterpret_cast<void*>(pointer), it->second.bytes);
  close(it->second.fd);
  state().device.erase(it);
  lock.unlock();
  return record("cuMemFree_v2", CUDA_SUCCESS, {pointer});
}

// values: {pointer, value, bytes}
CUresult cuMemsetD8_v2(CUdeviceptr pointer, unsigned char value, size_t bytes) {
  FAKE_INJECT("cuMemsetD8_v2", {pointer, value, bytes});
  if (!deviceAccessible(pointer, bytes)) return record("cuMemsetD8_v2", CUDA_ERROR_INVALID_VALUE, {pointer, value, bytes});
  std::memset(reinterpret_cast<void*>(pointer), value, bytes);
  return record("cuMemsetD8_v2", CUDA_SUCCESS, {pointer, value, bytes});
}

// values: {pointer, value, bytes, stream}
CUresult cuMemsetD8Async(CUdeviceptr pointer, unsigned char value, size_t bytes, CUstream stream) {
  std::vector<uint64_t> values = {pointer, value, bytes, u(stream)};
  FAKE_INJECT("cuMemsetD8Async", values);
  Stream* queue = streamOf(stream);
  if (queue == nullptr) return record("cuMemsetD8Async", CUDA_ERROR_INVALID_HANDLE, values);
  if (!deviceAccessible(pointer, bytes)) return record("cuMemsetD8Async", CUDA_ERROR_INVALID_VALUE, values);
  queue->enqueue([pointer, value, bytes] { std::memset(reinterpret_cast<void*>(pointer), value, bytes); });
  return record("cuMemsetD8Async", CUDA_SUCCESS, values);
}

// values: {dst, src, bytes, stream}; device memory and the host memory tests hand out as device
// memory alike (the fake's kernels run on the host)
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  std::vector<uint64_t> values = {dst, src, bytes, u(stream)};
  FAKE_INJECT("cuMemcpyDtoDAsync_v2", values);
  Stream* queue = streamOf(stream);
  if (queue == nullptr) return record("cuMemcpyDtoDAsync_v2", CUDA_ERROR_INVALID_HANDLE, values);
  queue->enqueue([dst, src, bytes] {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  });
  return record("cuMemcpyDtoDAsync_v2", CUDA_SUCCESS, values);
}

// values: {dst, bytes}; bytes: what was copied
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  FAKE_INJECT("cuMemcpyHtoD_v2", {dst, bytes});
  if (!deviceAccessible(dst, bytes)) return record("cuMemcpyHtoD_v2", CUDA_ERROR_INVALID_VALUE, {dst, bytes});
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  const char* data = static_cast<const char*>(src);
  return record("cuMemcpyHtoD_v2", CUDA_SUCCESS, {dst, bytes}, std::vector<char>(data, data + bytes));
}

// values: {src, bytes}
CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  FAKE_INJECT("cuMemcpyDtoH_v2", {src, bytes});
  if (!deviceAccessible(src, bytes)) return record("cuMemcpyDtoH_v2", CUDA_ERROR_INVALID_VALUE, {src, bytes});
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return record("cuMemcpyDtoH_v2", CUDA_SUCCESS, {src, bytes});
}

// values: {bytes, flags, pointer}
CUresult cuMemHostAlloc(void** pointer, size_t bytes, unsigned flags) {
  FAKE_INJECT("cuMemHostAlloc", {bytes, flags});
  if (bytes == 0) return record("cuMemHostAlloc", CUDA_ERROR_INVALID_VALUE, {bytes, flags});
  *pointer = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  std::memset(*pointer, 0xA5, bytes);
  {
    std::lock_guard lock(state().mutex);
    state().host[u(*pointer)] = Range{bytes, -1, flags};
  }
  return record("cuMemHostAlloc", CUDA_SUCCESS, {bytes, flags, u(*pointer)});
}

// values: {pointer}
CUresult cuMemFreeHost(void* pointer) {
  FAKE_INJECT("cuMemFreeHost", {u(pointer)});
  std::unique_lock lock(state().mutex);
  if (state().host.erase(u(pointer)) == 0) {
    lock.unlock();
    return record("cuMemFreeHost", CUDA_ERROR_INVALID_VALUE, {u(pointer)});
  }
  lock.unlock();
  std::free(pointer);
  return record("cuMemFreeHost", CUDA_SUCCESS, {u(pointer)});
}

// values: {pointer, bytes, flags}
CUresult cuMemHostRegister_v2(void* pointer, size_t bytes, unsigned flags) {
  std::vector<uint64_t> values = {u(pointer), bytes, flags};
  FAKE_INJECT("cuMemHostRegister_v2", values);
  std::unique_lock lock(state().mutex);
  if (within(state().registered, u(pointer), 1) || within(state().host, u(pointer), 1)) {
    lock.unlock();
    return record("cuMemHostRegister_v2", 712, values);  // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
  }
  state().registered[u(pointer)] = Range{bytes, -1, flags};
  lock.unlock();
  return record("cuMemHostRegister_v2", CUDA_SUCCESS, values);
}

// values: {pointer}
CUresult cuMemHostUnregister(void* pointer) {
  FAKE_INJECT("cuMemHostUnregister", {u(pointer)});
  std::unique_lock lock(state().mutex);
  if (state().registered.erase(u(pointer)) == 0) {
    lock.unlock();
    return record("cuMemHostUnregister", 713, {u(pointer)});  // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
  }
  lock.unlock();
  return record("cuMemHostUnregister", CUDA_SUCCESS, {u(pointer)});
}

// values: {host pointer, flags, device pointer}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* device, void* host, unsigned flags) {
  FAKE_INJECT("cuMemHostGetDevicePointer_v2", {u(host), flags});
  bool mapped = false;
  {
    std::lock_guard lock(state().mutex);
    mapped = within(state().host, u(host), 1, CU_MEMHOSTALLOC_DEVICEMAP) ||
             within(state().registered, u(host), 1, CU_MEMHOSTREGISTER_DEVICEMAP);
  }
  if (!mapped || flags != 0) return record("cuMemHostGetDevicePointer_v2", CUDA_ERROR_INVALID_VALUE, {u(host), flags});
  *device = u(host);
  return record("cuMemHostGetDevicePointer_v2", CUDA_SUCCESS, {u(host), flags, *device});
}

// values: {pointer}; bytes: the handle
CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr pointer) {
  FAKE_INJECT("cuIpcGetMemHandle", {pointer});
  IpcHandle encoded{};
  {
    std::lock_guard lock(state().mutex);
    auto it = state().device.find(pointer);
    if (it == state().device.end()) {
      state().log.push_back(Call{"cuIpcGetMemHandle", CUDA_ERROR_INVALID_VALUE, {pointer}, {}, {}});
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::memcpy(encoded.magic, kIpcMagic, sizeof kIpcMagic);
    encoded.pid = getpid();
    encoded.fd = it->second.fd;
    encoded.ordinal = current != nullptr ? current->ordinal : 0;
    encoded.bytes = it->second.bytes;
    encoded.pointer = pointer;
  }
  std::memset(handle, 0, sizeof *handle);
  std::memcpy(handle->reserved, &encoded, sizeof encoded);
  return record("cuIpcGetMemHandle", CUDA_SUCCESS, {pointer},
                std::vector<char>(handle->reserved, handle->reserved + kCuIpcHandleBytes));
}

// values: {handle's pid, handle's pointer, flags, opened pointer}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pointer, CUipcMemHandle handle, unsigned flags) {
  IpcHandle encoded{};
  std::memcpy(&encoded, handle.reserved, sizeof encoded);
  std::vector<uint64_t> values = {uint64_t(encoded.pid), encoded.pointer, flags};
  FAKE_INJECT("cuIpcOpenMemHandle_v2", values);
  if (std::memcmp(encoded.magic, kIpcMagic, sizeof kIpcMagic) != 0 || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
    return record("cuIpcOpenMemHandle_v2", CUDA_ERROR_INVALID_VALUE, values);
  }
  // CUDA refuses to open an allocation of the calling process.
  if (encoded.pid == getpid()) return record("cuIpcOpenMemHandle_v2", CUDA_ERROR_INVALID_CONTEXT, values);
  const std::string path = "/proc/" + std::to_string(encoded.pid) + "/fd/" + std::to_string(encoded.fd);
  const int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) return record("cuIpcOpenMemHandle_v2", CUDA_ERROR_INVALID_HANDLE, values);
  void* data = mmap(nullptr, encoded.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (data == MAP_FAILED) return record("cuIpcOpenMemHandle_v2", CUDA_ERROR_INVALID_HANDLE, values);
  *pointer = u(data);
  {
    std::lock_guard lock(state().mutex);
    state().opened[u(data)] = Range{encoded.bytes, -1, 0};
  }
  values.push_back(*pointer);
  return record("cuIpcOpenMemHandle_v2", CUDA_SUCCESS, values);
}

// values: {pointer}
CUresult cuIpcCloseMemHandle(CUdeviceptr pointer) {
  FAKE_INJECT("cuIpcCloseMemHandle", {pointer});
  std::unique_lock lock(state().mutex);
  auto it = state().opened.find(pointer);
  if (it == state().opened.end()) {
    lock.unlock();
    return record("cuIpcCloseMemHandle", CUDA_ERROR_INVALID_VALUE, {pointer});
  }
  munmap(reinterpret_cast<void*>(pointer), it->second.bytes);
  state().opened.erase(it);
  lock.unlock();
  return record("cuIpcCloseMemHandle", CUDA_SUCCESS, {pointer});
}

// values: {flags, event}
CUresult cuEventCreate(CUevent* event, unsigned flags) {
  FAKE_INJECT("cuEventCreate", {flags});
  if (event == nullptr) return record("cuEventCreate", CUDA_ERROR_INVALID_VALUE, {flags});
  auto made = std::make_shared<Event>();
  {
    std::lock_guard lock(state().mutex);
    state().events.emplace(made.get(), made);
  }
  *event = reinterpret_cast<CUevent>(made.get());
  return record("cuEventCreate", CUDA_SUCCESS, {flags, u(*event)});
}

// values: {event, stream}
CUresult cuEventRecord(CUevent event, CUstream stream) {
  FAKE_INJECT("cuEventRecord", {u(event), u(stream)});
  std::shared_ptr<Event> target = eventOf(event);
  Stream* queue = streamOf(stream);
  if (target == nullptr || queue == nullptr) {
    return record("cuEventRecord", CUDA_ERROR_INVALID_HANDLE, {u(event), u(stream)});
  }
  uint64_t generation = 0;
  {
    std::lock_guard lock(target->mutex);
    generation = ++target->recorded;
  }
  queue->enqueue([target, generation] {
    std::lock_guard lock(target->mutex);
    target->reached = std::max(target->reached, generation);
    if (generation == target->recorded) target->at = std::chrono::steady_clock::now();
  });
  return record("cuEventRecord", CUDA_SUCCESS, {u(event), u(stream)});
}

// Not recorded (polled).
CUresult cuEventQuery(CUevent event) {
  if (std::optional<CUresult> failure = injected("cuEventQuery")) return *failure;
  std::shared_ptr<Event> target = eventOf(event);
  if (target == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard lock(target->mutex);
  return target->reached == target->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// values: {start, end}
CUresult cuEventElapsedTime(float* milliseconds, CUevent start, CUevent end) {
  FAKE_INJECT("cuEventElapsedTime", {u(start), u(end)});
  std::shared_ptr<Event> first = eventOf(start), last = eventOf(end);
  if (first == nullptr || last == nullptr || milliseconds == nullptr) {
    return record("cuEventElapsedTime", CUDA_ERROR_INVALID_HANDLE, {u(start), u(end)});
  }
  std::chrono::steady_clock::time_point from, to;
  for (const auto& [event, at] : {std::pair{first, &from}, std::pair{last, &to}}) {
    std::lock_guard lock(event->mutex);
    if (event->recorded == 0) return record("cuEventElapsedTime", CUDA_ERROR_INVALID_HANDLE, {u(start), u(end)});
    if (event->reached != event->recorded) return record("cuEventElapsedTime", CUDA_ERROR_NOT_READY, {u(start), u(end)});
    *at = event->at;
  }
  *milliseconds = std::chrono::duration<float, std::milli>(to - from).count();
  return record("cuEventElapsedTime", CUDA_SUCCESS, {u(start), u(end)});
}

// values: {event}
CUresult cuEventDestroy_v2(CUevent event) {
  FAKE_INJECT("cuEventDestroy_v2", {u(event)});
  size_t erased = 0;
  {
    std::lock_guard lock(state().mutex);
    erased = state().events.erase(reinterpret_cast<Event*>(event));
  }
  return record("cuEventDestroy_v2", erased == 0 ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS, {u(event)});
}

// The runtime's stream creation, for programs that use the fake as their only driver.
CUresult cuStreamCreate(CUstream* stream, unsigned) {
  *stream = createStream();
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  destroyStream(stream);
  return CUDA_SUCCESS;
}

}  // extern "C"
