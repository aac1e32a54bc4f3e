// The choice between the verbs and the socket network (net_select.h).
#include "net/net_select.h"

#include <strings.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

#include "net/ib_devices.h"
#include "net/ib_net.h"
#include "net/net_log.h"
#include "net/net_result.h"
#include "net/socket_net.h"
#include "support/environment.h"

namespace tuccl::net {
namespace {

bool equalsIgnoringCase(std::string_view text, const char* word) {
  return text.size() == std::char_traits<char>::length(word) && strncasecmp(text.data(), word, text.size()) == 0;
}

/// The network TUCCL_NET (else NCCL_NET) forces, and the variable that does; an error for a
/// TUCCL_NET that names none.
Expected<std::pair<std::optional<NetTransport>, const char*>> forcedNet() {
  if (std::optional<std::string> tucclText = env::text("TUCCL_NET")) {
    Expected<std::optional<NetTransport>> parsed = parseNetChoice(*tucclText, "TUCCL_NET", true);
    if (!parsed) return parsed.status();
    return std::make_pair(*parsed, "TUCCL_NET");
  }
  if (std::optional<std::string> ncclText = env::text("NCCL_NET")) {
    Expected<std::optional<NetTransport>> parsed = parseNetChoice(*ncclText, "NCCL_NET", false);
    if (!parsed) return parsed.status();
    return std::make_pair(*parsed, "NCCL_NET");
  }
  return std::make_pair(std::optional<NetTransport>(), "TUCCL_NET");
}

Expected<const tucclNcclNet_v12_t*> decide() {
  Expected<std::pair<std::optional<NetTransport>, const char*>> asked = forcedNet();
  if (!asked) return asked.status();
  const std::optional<NetTransport> forced = asked->first;
  const char* forcedBy = asked->second;
  // Sockets when forced need no look at the RDMA devices (and no libibverbs).
  const bool socketsForced = forced && *forced == NetTransport::Socket;
  const int ibCount = socketsForced ? 0 : static_cast<int>(ib::ibDevices().devices.size());
  Expected<NetTransport> chosen = chooseNet(forced, forcedBy, ibCount, socketsForced ? std::string_view() : ibUnavailableReason());
  if (!chosen) return chosen.status();
  if (*chosen == NetTransport::Ib) {
    TUCCL_NET_INFO("TuCCL net: using IB (%d device(s))%s%s", ibCount, forced ? ", as asked by " : "", forced ? forcedBy : "");
  } else if (forced) {
    TUCCL_NET_INFO("TuCCL net: using Socket, as asked by %s", forcedBy);
  } else {
    TUCCL_NET_INFO("TuCCL net: using Socket (IB: %s)", ibUnavailableReason().c_str());
  }
  return *chosen == NetTransport::Ib ? &ibNetV12() : &socketNetV12();
}

// ---- The combined table: decide, then forward --------------------------------------------------

const tucclNcclNet_v12_t* chosenOrReport(const char* what) {
  Expected<const tucclNcclNet_v12_t*> chosen = selectedNet();
  if (!chosen) {
    (void)report(chosen.status(), what);
    return nullptr;
  }
  return *chosen;
}

ncclResult_t selInit(void** ctx, uint64_t commId, tucclNcclNetCommConfig_t* config, ncclDebugLogger_t logger,
                     tucclNcclProfilerCallback_t profiler) noexcept {
  return guarded("init", [&] {
    if (logger != nullptr) setNetLogger(logger);
    const tucclNcclNet_v12_t* chosen = chosenOrReport("init");
    return chosen != nullptr ? chosen->init(ctx, commId, config, logger, profiler) : ncclInvalidUsage;
  });
}

ncclResult_t selDevices(int* ndev) noexcept {
  return guarded("devices", [&] {
    const tucclNcclNet_v12_t* chosen = chosenOrReport("devices");
    return chosen != nullptr ? chosen->devices(ndev) : ncclInvalidUsage;
  });
}

/// Every other entry: the table is chosen by the time NCCL may call it (after init).
#define TUCCL_FORWARD(entry, ...)                                          \
  const tucclNcclNet_v12_t* chosen = chosenOrReport(#entry);               \
  return chosen != nullptr ? chosen->entry(__VA_ARGS__) : ncclInternalError

ncclResult_t selGetProperties(int dev, tucclNcclNetProperties_v12_t* props) noexcept {
  return guarded("getProperties", [&] { TUCCL_FORWARD(getProperties, dev, props); });
}
ncclResult_t selListen(void* ctx, int dev, void* handle, void** listenComm) noexcept {
  return guarded("listen", [&] { TUCCL_FORWARD(listen, ctx, dev, handle, listenComm); });
}
ncclResult_t selConnect(void* ctx, int dev, void* handle, void** sendComm, tucclNcclNetDeviceHandle_t** devComm) noexcept {
  return guarded("connect", [&] { TUCCL_FORWARD(connect, ctx, dev, handle, sendComm, devComm); });
}
ncclResult_t selAccept(void* listenComm, void** recvComm, tucclNcclNetDeviceHandle_t** devComm) noexcept {
  return guarded("accept", [&] { TUCCL_FORWARD(accept, listenComm, recvComm, devComm); });
}
ncclResult_t selRegMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return guarded("regMr", [&] { TUCCL_FORWARD(regMr, comm, data, size, type, mhandle); });
}
ncclResult_t selRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                            void** mhandle) noexcept {
  return guarded("regMrDmaBuf", [&] {
    const tucclNcclNet_v12_t* chosen = chosenOrReport("regMrDmaBuf");
    if (chosen == nullptr || chosen->regMrDmaBuf == nullptr) return ncclInternalError;  // sockets: no dma-buf
    return chosen->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle);
  });
}
ncclResult_t selDeregMr(void* comm, void* mhandle) noexcept {
  return guarded("deregMr", [&] { TUCCL_FORWARD(deregMr, comm, mhandle); });
}
ncclResult_t selIsend(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) noexcept {
  return guarded("isend", [&] { TUCCL_FORWARD(isend, comm, data, size, tag, mhandle, phandle, request); });
}
ncclResult_t selIrecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                      void** request) noexcept {
  return guarded("irecv", [&] { TUCCL_FORWARD(irecv, comm, n, data, sizes, tags, mhandles, phandles, request); });
}
ncclResult_t selIflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) noexcept {
  return guarded("iflush", [&] { TUCCL_FORWARD(iflush, comm, n, data, sizes, mhandles, request); });
}
ncclResult_t selTest(void* request, int* done, int* sizes) noexcept {
  return guarded("test", [&] { TUCCL_FORWARD(test, request, done, sizes); });
}
ncclResult_t selCloseSend(void* comm) noexcept {
  return guarded("closeSend", [&] { TUCCL_FORWARD(closeSend, comm); });
}
ncclResult_t selCloseRecv(void* comm) noexcept {
  return guarded("closeRecv", [&] { TUCCL_FORWARD(closeRecv, comm); });
}
ncclResult_t selCloseListen(void* comm) noexcept {
  return guarded("closeListen", [&] { TUCCL_FORWARD(closeListen, comm); });
}
ncclResult_t selFinalize(void* ctx) noexcept {
  return guarded("finalize", [&] { TUCCL_FORWARD(finalize, ctx); });
}
ncclResult_t selMakeVDevice(int* d, tucclNcclNetVDeviceProps_v12_t* props) noexcept {
  return guarded("makeVDevice", [&] {
    const tucclNcclNet_v12_t* chosen = chosenOrReport("makeVDevice");
    if (chosen == nullptr || chosen->makeVDevice == nullptr) return ncclInternalError;
    return chosen->makeVDevice(d, props);
  });
}

#undef TUCCL_FORWARD

const tucclNcclNet_v12_t selectedNet12 = {
    "TuCCL",        selInit,        selDevices, selGetProperties, selListen, selConnect,  selAccept, selRegMr,
    selRegMrDmaBuf, selDeregMr,     selIsend,   selIrecv,         selIflush, selTest,     selCloseSend,
    selCloseRecv,   selCloseListen, nullptr,    nullptr,          nullptr,   selFinalize, nullptr,
};

}  // namespace

Expected<std::optional<NetTransport>> parseNetChoice(std::string_view text, const char* variable, bool strict) {
  if (equalsIgnoringCase(text, "IB")) return std::optional<NetTransport>(NetTransport::Ib);
  if (equalsIgnoringCase(text, "Socket")) return std::optional<NetTransport>(NetTransport::Socket);
  if (!strict) return std::optional<NetTransport>();
  return makeError(ErrorCode::InvalidArgument,
                   std::string(variable) + "='" + std::string(text) + "' names no network TuCCL has (IB or Socket)");
}

Expected<NetTransport> chooseNet(std::optional<NetTransport> forced, std::string_view forcedBy, int ibDevices,
                                 std::string_view ibReason) {
  if (forced) {
    if (*forced == NetTransport::Ib && ibDevices == 0)
      return makeError(ErrorCode::InvalidInput, std::string(forcedBy) + "=IB, but the IB network has no device: " +
                                                    std::string(ibReason));
    return *forced;
  }
  return ibDevices > 0 ? NetTransport::Ib : NetTransport::Socket;
}

Expected<const tucclNcclNet_v12_t*> selectedNet() {
  static std::once_flag once;
  static std::optional<Expected<const tucclNcclNet_v12_t*>> decision;
  std::call_once(once, [] { decision.emplace(decide()); });
  return *decision;
}

// NIC fusion: the socket network fuses devices, the verbs network does not, and NCCL asks a
// non-NULL makeVDevice to merge the ports of every multi-port NIC (nccl-net-abi.md), which must
// not fail where verbs is chosen. The entry is there when the environment the plugin is loaded
// in forces sockets (TUCCL_NET or NCCL_NET = Socket), before the choice is otherwise made.
const tucclNcclNet_v12_t& selectedNetV12() {
  static const tucclNcclNet_v12_t table = [] {
    tucclNcclNet_v12_t combined = selectedNet12;
    Expected<std::pair<std::optional<NetTransport>, const char*>> asked = forcedNet();
    if (asked && asked->first == NetTransport::Socket) combined.makeVDevice = selMakeVDevice;
    return combined;
  }();
  return table;
}

}  // namespace tuccl::net
