// The NCCL net plugin: ncclNetPlugin_v8 .. ncclNetPlugin_v12 (nccl-net-abi.md), the only symbols
// libnccl-net-tuccl.so exports. One implementation, the combined v12 table of net/net_select.h
// (the verbs network when it has a device, else sockets; TUCCL_NET=IB|Socket forces one); the
// older versions are thin adapters that convert properties (field layout) and sizes (int in v8)
// and supply v12's context arguments. Every entry is noexcept.
#include <climits>
#include <cstring>

#include "net/ib_protocol.h"
#include "net/net_select.h"
#include "net/socket_comm.h"
#include "tuccl/nccl_net.h"

namespace tuccl {
namespace {

static_assert(net::kMaxGroupedReceives == net::ib::kMaxRecvs, "both networks group up to the same maxRecvs");

const tucclNcclNet_v12_t& impl() { return net::selectedNetV12(); }

/// v8..v10 have no per-communicator context: both networks work without one, so they pass NULL.
ncclResult_t initWithoutContext(ncclDebugLogger_t logger) noexcept {
  return impl().init(nullptr, 0, nullptr, logger, nullptr);
}
ncclResult_t initV8(ncclDebugLogger_t logger) noexcept { return initWithoutContext(logger); }
ncclResult_t initV10(ncclDebugLogger_t logger, tucclNcclProfilerCallback_t) noexcept { return initWithoutContext(logger); }

/// The fields every version from v9 on shares, copied from v12.
template <typename Props>
void copyCommonV9(const tucclNcclNetProperties_v12_t& from, Props* to) {
  to->name = from.name;
  to->pciPath = from.pciPath;
  to->guid = from.guid;
  to->ptrSupport = from.ptrSupport;
  to->regIsGlobal = from.regIsGlobal;
  to->forceFlush = from.forceFlush;
  to->speed = from.speed;
  to->port = from.port;
  to->latency = from.latency;
  to->maxComms = from.maxComms;
  to->maxRecvs = from.maxRecvs;
  to->netDeviceType = from.netDeviceType;
  to->netDeviceVersion = from.netDeviceVersion;
  to->vProps.ndevs = from.vProps.ndevs < 4 ? from.vProps.ndevs : 4;
  for (int i = 0; i < to->vProps.ndevs; ++i) to->vProps.devs[i] = from.vProps.devs[i];
  to->maxP2pBytes = from.maxP2pBytes;
  to->maxCollBytes = from.maxCollBytes;
}

ncclResult_t getPropertiesV8(int dev, tucclNcclNetProperties_v8_t* props) noexcept {
  tucclNcclNetProperties_v12_t full;
  const ncclResult_t result = impl().getProperties(dev, &full);
  if (result != ncclSuccess) return result;
  *props = tucclNcclNetProperties_v8_t{full.name,     full.pciPath,  full.guid,          full.ptrSupport,
                                       full.regIsGlobal, full.speed, full.port,          full.latency,
                                       full.maxComms, full.maxRecvs, full.netDeviceType, full.netDeviceVersion};
  return ncclSuccess;
}

ncclResult_t getPropertiesV9(int dev, tucclNcclNetProperties_v9_t* props) noexcept {
  tucclNcclNetProperties_v12_t full;
  const ncclResult_t result = impl().getProperties(dev, &full);
  if (result != ncclSuccess) return result;
  *props = tucclNcclNetProperties_v9_t{};
  copyCommonV9(full, props);
  return ncclSuccess;
}

ncclResult_t getPropertiesV11(int dev, tucclNcclNetProperties_v11_t* props) noexcept {
  tucclNcclNetProperties_v12_t full;
  const ncclResult_t result = impl().getProperties(dev, &full);
  if (result != ncclSuccess) return result;
  *props = tucclNcclNetProperties_v11_t{};
  copyCommonV9(full, props);
  props->maxMultiRequestSize = full.maxMultiRequestSize;
  return ncclSuccess;
}

ncclResult_t listenOld(int dev, void* handle, void** listenComm) noexcept {
  return impl().listen(nullptr, dev, handle, listenComm);
}
ncclResult_t connectV8(int dev, void* handle, void** sendComm, tucclNcclNetDeviceHandle_t** devComm) noexcept {
  return impl().connect(nullptr, dev, handle, sendComm, devComm);
}
ncclResult_t connectV10(int dev, tucclNcclNetCommConfig_t*, void* handle, void** sendComm,
                        tucclNcclNetDeviceHandle_t** devComm) noexcept {
  return impl().connect(nullptr, dev, handle, sendComm, devComm);
}

/// v9..v11 name at most 4 devices per virtual device; the same request in v12's form.
ncclResult_t makeVDeviceV9(int* d, tucclNcclNetVDeviceProps_v9_t* props) noexcept {
  if (props == nullptr || impl().makeVDevice == nullptr) return ncclInvalidArgument;
  if (props->ndevs < 0 || props->ndevs > 4) return ncclInvalidArgument;
  tucclNcclNetVDeviceProps_v12_t wide{};
  wide.ndevs = props->ndevs;
  for (int i = 0; i < props->ndevs; ++i) wide.devs[i] = props->devs[i];
  return impl().makeVDevice(d, &wide);
}
decltype(tucclNcclNet_v11_t::makeVDevice) makeVDeviceOfV9() {
  return impl().makeVDevice != nullptr ? makeVDeviceV9 : nullptr;
}

ncclResult_t isendV8(void* comm, void* data, int size, int tag, void* mhandle, void** request) noexcept {
  if (size < 0) return ncclInternalError;
  return impl().isend(comm, data, static_cast<size_t>(size), tag, mhandle, nullptr, request);
}
ncclResult_t isendV9(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) noexcept {
  return impl().isend(comm, data, size, tag, mhandle, nullptr, request);
}

ncclResult_t irecvV8(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request) noexcept {
  if (n < 1 || n > net::kMaxGroupedReceives) return ncclInternalError;
  size_t wide[net::kMaxGroupedReceives];
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return ncclInternalError;
    wide[i] = static_cast<size_t>(sizes[i]);
  }
  return impl().irecv(comm, n, data, wide, tags, mhandles, nullptr, request);
}
ncclResult_t irecvV9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) noexcept {
  return impl().irecv(comm, n, data, sizes, tags, mhandles, nullptr, request);
}

}  // namespace
}  // namespace tuccl

extern "C" {

// Initialised at load time from the v12 table's entries (function pointers of this library).
extern __attribute__((visibility("default"))) const tucclNcclNet_v12_t ncclNetPlugin_v12 = tuccl::net::selectedNetV12();

extern __attribute__((visibility("default"))) const tucclNcclNet_v11_t ncclNetPlugin_v11 = {
    ncclNetPlugin_v12.name,        ncclNetPlugin_v12.init,        ncclNetPlugin_v12.devices,
    tuccl::getPropertiesV11,       ncclNetPlugin_v12.listen,      ncclNetPlugin_v12.connect,
    ncclNetPlugin_v12.accept,      ncclNetPlugin_v12.regMr,       ncclNetPlugin_v12.regMrDmaBuf,
    ncclNetPlugin_v12.deregMr,     ncclNetPlugin_v12.isend,       ncclNetPlugin_v12.irecv,
    ncclNetPlugin_v12.iflush,      ncclNetPlugin_v12.test,        ncclNetPlugin_v12.closeSend,
    ncclNetPlugin_v12.closeRecv,   ncclNetPlugin_v12.closeListen, nullptr,
    nullptr,                       tuccl::makeVDeviceOfV9(),      ncclNetPlugin_v12.finalize,
    nullptr};

extern __attribute__((visibility("default"))) const tucclNcclNet_v10_t ncclNetPlugin_v10 = {
    ncclNetPlugin_v12.name,      tuccl::initV10,            ncclNetPlugin_v12.devices,  tuccl::getPropertiesV9,
    tuccl::listenOld,            tuccl::connectV10,         ncclNetPlugin_v12.accept,   ncclNetPlugin_v12.regMr,
    ncclNetPlugin_v12.regMrDmaBuf, ncclNetPlugin_v12.deregMr, ncclNetPlugin_v12.isend,  ncclNetPlugin_v12.irecv,
    ncclNetPlugin_v12.iflush,    ncclNetPlugin_v12.test,    ncclNetPlugin_v12.closeSend, ncclNetPlugin_v12.closeRecv,
    ncclNetPlugin_v12.closeListen, nullptr,                 nullptr,                    tuccl::makeVDeviceOfV9()};

extern __attribute__((visibility("default"))) const tucclNcclNet_v9_t ncclNetPlugin_v9 = {
    ncclNetPlugin_v12.name,      tuccl::initV8,             ncclNetPlugin_v12.devices,  tuccl::getPropertiesV9,
    tuccl::listenOld,            tuccl::connectV8,          ncclNetPlugin_v12.accept,   ncclNetPlugin_v12.regMr,
    ncclNetPlugin_v12.regMrDmaBuf, ncclNetPlugin_v12.deregMr, tuccl::isendV9,           tuccl::irecvV9,
    ncclNetPlugin_v12.iflush,    ncclNetPlugin_v12.test,    ncclNetPlugin_v12.closeSend, ncclNetPlugin_v12.closeRecv,
    ncclNetPlugin_v12.closeListen, nullptr,                 nullptr,                    tuccl::makeVDeviceOfV9()};

extern __attribute__((visibility("default"))) const tucclNcclNet_v8_t ncclNetPlugin_v8 = {
    ncclNetPlugin_v12.name,      tuccl::initV8,             ncclNetPlugin_v12.devices,  tuccl::getPropertiesV8,
    tuccl::listenOld,            tuccl::connectV8,          ncclNetPlugin_v12.accept,   ncclNetPlugin_v12.regMr,
    ncclNetPlugin_v12.regMrDmaBuf, ncclNetPlugin_v12.deregMr, tuccl::isendV8,           tuccl::irecvV8,
    ncclNetPlugin_v12.iflush,    ncclNetPlugin_v12.test,    ncclNetPlugin_v12.closeSend, ncclNetPlugin_v12.closeRecv,
    ncclNetPlugin_v12.closeListen, nullptr,                 nullptr};

}  // extern "C"
