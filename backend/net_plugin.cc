// Loading and adapting net plugins for the inter-node proxy (net_plugin.h).
#include "backend/net_plugin.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "support/log.h"
#include "net/net_select.h"
#include "net/socket_net.h"
#include "support/environment.h"

namespace tuccl::backend {
namespace {

/// NCCL's logger signature, writing into libtuccl's log (net/ messages carry their own prefix).
void netLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* format, ...) {
  va_list args;
  va_start(args, format);
  logFormatV(logLevelOfNccl(level), kLogNet, format, args);
  va_end(args);
}

const char* resultName(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "success";
    case ncclUnhandledCudaError: return "unhandled CUDA error";
    case ncclSystemError: return "system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote error";
    case ncclInProgress: return "in progress";
    default: return "unknown result";
  }
}

ErrorCode codeOf(ncclResult_t result) {
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage: return ErrorCode::InvalidArgument;
    case ncclRemoteError: return ErrorCode::RemoteError;
    case ncclInternalError: return ErrorCode::Internal;
    default: return ErrorCode::SystemError;
  }
}

template <int V>
struct TableOf;
template <> struct TableOf<8> { using type = tucclNcclNet_v8_t; using props = tucclNcclNetProperties_v8_t; };
template <> struct TableOf<9> { using type = tucclNcclNet_v9_t; using props = tucclNcclNetProperties_v9_t; };
template <> struct TableOf<10> { using type = tucclNcclNet_v10_t; using props = tucclNcclNetProperties_v9_t; };
template <> struct TableOf<11> { using type = tucclNcclNet_v11_t; using props = tucclNcclNetProperties_v11_t; };
template <> struct TableOf<12> { using type = tucclNcclNet_v12_t; using props = tucclNcclNetProperties_v12_t; };

/// One adapter per ABI version: v11 and v12 take a context, v10 a config and profiler handles,
/// v9 size_t sizes, v8 int sizes.
template <int V>
class AdaptedNet final : public NetApi {
  using Table = typename TableOf<V>::type;
  using Props = typename TableOf<V>::props;

 public:
  AdaptedNet(const Table& table, std::string origin, void* library)
      : table_(table), name_(table.name != nullptr ? table.name : "unnamed"), origin_(std::move(origin)),
        library_(library) {}

  ~AdaptedNet() override {
    if constexpr (V >= 11) {
      if (initialised_ && table_.finalize != nullptr) table_.finalize(context_);
    }
    if (library_ != nullptr) dlclose(library_);
  }

  Status init(uint64_t commId) {
    ncclResult_t result;
    if constexpr (V >= 11) {
      tucclNcclNetCommConfig_t config{-1};
      result = table_.init(&context_, commId, &config, netLogger, nullptr);
    } else if constexpr (V == 10) {
      (void)commId;
      result = table_.init(netLogger, nullptr);
    } else {
      (void)commId;
      result = table_.init(netLogger);
    }
    if (result != ncclSuccess) return failed("init", result);
    initialised_ = true;
    return {};
  }

  const std::string& name() const override { return name_; }
  const std::string& origin() const override { return origin_; }

  Expected<int> devices() override {
    int n = 0;
    if (ncclResult_t r = table_.devices(&n); r != ncclSuccess) return failed("devices", r);
    return n;
  }

  Expected<NetDeviceInfo> properties(int dev) override {
    Props props{};
    if (ncclResult_t r = table_.getProperties(dev, &props); r != ncclSuccess) return failed("getProperties", r);
    NetDeviceInfo info;
    info.name = props.name != nullptr ? props.name : "";
    info.pciPath = props.pciPath != nullptr ? props.pciPath : "";
    info.speedMbps = props.speed;
    info.ptrSupport = props.ptrSupport;
    info.maxRecvs = props.maxRecvs;
    return info;
  }

  Expected<void*> listen(int dev, void* handle) override {
    void* comm = nullptr;
    ncclResult_t r;
    if constexpr (V >= 11) {
      r = table_.listen(context_, dev, handle, &comm);
    } else {
      r = table_.listen(dev, handle, &comm);
    }
    if (r != ncclSuccess) return failed("listen", r);
    return comm;
  }

  Expected<void*> connect(int dev, void* handle) override {
    void* comm = nullptr;
    tucclNcclNetDeviceHandle_t* deviceHandle = nullptr;
    ncclResult_t r;
    if constexpr (V >= 11) {
      r = table_.connect(context_, dev, handle, &comm, &deviceHandle);
    } else if constexpr (V == 10) {
      tucclNcclNetCommConfig_t config{-1};
      r = table_.connect(dev, &config, handle, &comm, &deviceHandle);
    } else {
      r = table_.connect(dev, handle, &comm, &deviceHandle);
    }
    if (r != ncclSuccess) return failed("connect", r);
    return comm;
  }

  Expected<void*> accept(void* listenComm) override {
    void* comm = nullptr;
    tucclNcclNetDeviceHandle_t* deviceHandle = nullptr;
    if (ncclResult_t r = table_.accept(listenComm, &comm, &deviceHandle); r != ncclSuccess) return failed("accept", r);
    return comm;
  }

  Expected<void*> regMr(void* comm, void* data, size_t size) override {
    void* mhandle = nullptr;
    if (ncclResult_t r = table_.regMr(comm, data, size, TUCCL_NCCL_PTR_HOST, &mhandle); r != ncclSuccess) {
      return failed("regMr", r);
    }
    return mhandle;
  }

  Status deregMr(void* comm, void* mhandle) override {
    if (ncclResult_t r = table_.deregMr(comm, mhandle); r != ncclSuccess) return failed("deregMr", r);
    return {};
  }

  Expected<void*> isend(void* sendComm, void* data, size_t size, int tag, void* mhandle) override {
    void* request = nullptr;
    ncclResult_t r;
    if constexpr (V >= 10) {
      r = table_.isend(sendComm, data, size, tag, mhandle, nullptr, &request);
    } else if constexpr (V == 9) {
      r = table_.isend(sendComm, data, size, tag, mhandle, &request);
    } else {
      if (size > static_cast<size_t>(INT32_MAX)) return tooLarge("isend", size);
      r = table_.isend(sendComm, data, static_cast<int>(size), tag, mhandle, &request);
    }
    if (r != ncclSuccess) return failed("isend", r);
    return request;
  }

  Expected<void*> irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle) override {
    void* request = nullptr;
    void* buffers[1] = {data};
    int tags[1] = {tag};
    void* mhandles[1] = {mhandle};
    ncclResult_t r;
    if constexpr (V >= 9) {
      size_t sizes[1] = {size};
      if constexpr (V >= 10) {
        void* phandles[1] = {nullptr};
        r = table_.irecv(recvComm, 1, buffers, sizes, tags, mhandles, phandles, &request);
      } else {
        r = table_.irecv(recvComm, 1, buffers, sizes, tags, mhandles, &request);
      }
    } else {
      if (size > static_cast<size_t>(INT32_MAX)) return tooLarge("irecv", size);
      int sizes[1] = {static_cast<int>(size)};
      r = table_.irecv(recvComm, 1, buffers, sizes, tags, mhandles, &request);
    }
    if (r != ncclSuccess) return failed("irecv", r);
    return request;
  }

  Expected<bool> test(void* request, size_t* size) override {
    int done = 0;
    int sizes[1] = {0};
    if (ncclResult_t r = table_.test(request, &done, sizes); r != ncclSuccess) return failed("test", r);
    if (done != 0 && size != nullptr) *size = static_cast<size_t>(sizes[0]);
    return done != 0;
  }

  Status closeSend(void* comm) override { return closed("closeSend", table_.closeSend(comm)); }
  Status closeRecv(void* comm) override { return closed("closeRecv", table_.closeRecv(comm)); }
  Status closeListen(void* comm) override { return closed("closeListen", table_.closeListen(comm)); }

 private:
  Status failed(const char* call, ncclResult_t result) const {
    return makeError(codeOf(result), "net plugin " + name_ + " (" + origin_ + "): " + call + " returned " +
                                         resultName(result) + " (" + std::to_string(static_cast<int>(result)) + ")");
  }
  Status tooLarge(const char* call, size_t size) const {
    return makeError(ErrorCode::InvalidArgument, "net plugin " + name_ + " (" + origin_ + "): " + call + " of " +
                                                     std::to_string(size) + " bytes exceeds the v8 ABI's int sizes");
  }
  Status closed(const char* call, ncclResult_t result) const {
    return result == ncclSuccess ? Status() : failed(call, result);
  }

  Table table_;
  std::string name_;
  std::string origin_;
  void* library_;
  void* context_ = nullptr;
  bool initialised_ = false;
};

template <int V>
Expected<std::unique_ptr<NetApi>> adapt(const void* table, std::string origin, void* library, uint64_t commId) {
  auto net = std::make_unique<AdaptedNet<V>>(*static_cast<const typename TableOf<V>::type*>(table), std::move(origin),
                                            library);
  if (Status status = net->init(commId); !status) return status;
  return std::unique_ptr<NetApi>(std::move(net));
}

/// The variable that names the plugin, and its value; ("", "") when neither is set.
std::pair<std::string, std::string> pluginVariable() {
  if (auto named = env::firstOf({"TUCCL_NET_PLUGIN", "NCCL_NET_PLUGIN"})) return {named->first, named->second};
  return {"", ""};
}

}  // namespace

Expected<std::unique_ptr<NetApi>> adaptNetTable(const void* table, int version, std::string origin, void* keepAlive,
                                                uint64_t commId) {
  switch (version) {
    case 8: return adapt<8>(table, std::move(origin), keepAlive, commId);
    case 9: return adapt<9>(table, std::move(origin), keepAlive, commId);
    case 10: return adapt<10>(table, std::move(origin), keepAlive, commId);
    case 11: return adapt<11>(table, std::move(origin), keepAlive, commId);
    case 12: return adapt<12>(table, std::move(origin), keepAlive, commId);
    default:
      if (keepAlive != nullptr) dlclose(keepAlive);
      return makeError(ErrorCode::Unsupported, "net plugin ABI v" + std::to_string(version) + " (v8 .. v12 are)");
  }
}

Expected<std::unique_ptr<NetApi>> loadNetPlugin(uint64_t commId) {
  const auto [variable, value] = pluginVariable();
  if (value.empty() || value == "tuccl" || value == "builtin") {
    // TuCCL's network: verbs when an RDMA device is up, else sockets (TUCCL_NET forces one).
    Expected<const tucclNcclNet_v12_t*> chosen = net::selectedNet();
    std::string origin = "built into libtuccl";
    if (chosen) origin += *chosen == &net::socketNetV12() ? ", sockets" : ", verbs";
    return adaptNetTable(&net::selectedNetV12(), 12, origin, nullptr, commId);
  }
  if (value == "none") {
    return makeError(ErrorCode::Unsupported, variable + "=none: no net plugin, so ranks on different hosts cannot talk");
  }
  std::vector<std::string> candidates;
  if (value.find('/') != std::string::npos) {
    candidates.push_back(value);
  } else {
    candidates.push_back("libnccl-net-" + value + ".so");
    candidates.push_back(value);
  }
  std::string tried;
  for (const std::string& file : candidates) {
    void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = dlerror();
      tried += (tried.empty() ? "" : "; ") + (why != nullptr ? std::string(why) : file + ": not found");
      continue;
    }
    for (int version = 12; version >= 8; --version) {
      const std::string symbol = "ncclNetPlugin_v" + std::to_string(version);
      const void* table = dlsym(library, symbol.c_str());
      if (table == nullptr) continue;
      Expected<std::unique_ptr<NetApi>> adapted =
          adaptNetTable(table, version, file + ", " + symbol, library, commId);
      if (!adapted) return makeError(adapted.status().code(), variable + "=" + value + ": " + adapted.status().message());
      return adapted;
    }
    dlclose(library);
    return makeError(ErrorCode::NotFound,
                     variable + "=" + value + ": " + file + " exports none of ncclNetPlugin_v12 .. ncclNetPlugin_v8");
  }
  return makeError(ErrorCode::NotFound, variable + "=" + value + ": cannot load the net plugin (" + tried + ")");
}

}  // namespace tuccl::backend
