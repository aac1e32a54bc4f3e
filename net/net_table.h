// The ncclNet v12 table of a network (socket_net.h, ib_net.h) from its transport's own steps.
//
// What every entry does the same way for both networks lives here: it runs guarded (no exception
// crosses the ABI), an error status is logged once under the entry's label ("<prefix><entry>") and
// mapped to ncclResult_t (net_result.h), the listener, comm or request it makes is handed to NCCL
// through NCCL's pointer, test copies the done flag and the sizes, close deletes, and init keeps
// the context NCCL hands back to listen / connect (its traffic class) until finalize.
//
// A transport T gives:
//   kLabelPrefix                           what its labels start with ("IB " or "")
//   Comm, Listen, Request                  its comm, listener and request (Request::comm, Comm::test)
//   deviceCount()                          its devices (found on the first call)
//   properties(dev, props, what)           fills *props for a device, or the error (ncclResult_t)
//   listen(ctx, dev, handle)               Expected<Listen*>, the handle written
//   makeVDevice(props) (optional)          Expected<int>: a virtual device fusing props' devices
//   connect(ctx, dev, handle)              Expected<Comm*>: nullptr until the handshake is through
//   accept(Listen&)                        Expected<Comm*>: likewise
//   postSend(Comm&, data, size, tag, mhandle), postRecv(Comm&, n, data, sizes, tags, mhandles)
//                                          Expected<Request*>: nullptr while the comm is full
// Registration and flush are each network's own (NetMemoryEntries): verbs register memory
// regions, sockets move host memory and register nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "net/net_log.h"
#include "net/net_result.h"
#include "support/status.h"
#include "tuccl/nccl_net.h"

namespace tuccl::net {

/// What init hands NCCL as the context of one communicator.
struct NetContext {
  uint64_t commId;
  int trafficClass;
};

/// init's traffic class (-1: none given, or no context).
inline int trafficClassOf(void* ctx) { return ctx != nullptr ? static_cast<NetContext*>(ctx)->trafficClass : -1; }

/// Runs `make` (returning Expected<P*>) under `what`'s guard and hands the pointer to NCCL through
/// `out`; an error is reported under `what` and mapped.
template <typename Make>
ncclResult_t handOut(const char* what, void** out, Make&& make) noexcept {
  return guarded(what, [&] {
    auto made = make();
    if (!made) return report(made.status(), what);
    *out = *made;
    return ncclSuccess;
  });
}

/// The properties every TuCCL device shares: a host device of one physical port, NCCL's size
/// limits, no rail, no plane; the rest zero.
inline tucclNcclNetProperties_v12_t hostDeviceProperties(int dev) {
  tucclNcclNetProperties_v12_t props{};
  props.netDeviceType = TUCCL_NCCL_NET_DEVICE_HOST;
  props.vProps.ndevs = 1;
  props.vProps.devs[0] = dev;
  props.maxP2pBytes = TUCCL_NCCL_MAX_NET_SIZE_BYTES;
  props.maxCollBytes = TUCCL_NCCL_MAX_COLLNET_SIZE;
  props.maxMultiRequestSize = 1;
  props.railId = -1;
  props.planeId = -1;
  return props;
}

/// The entries a network writes itself.
struct NetMemoryEntries {
  decltype(tucclNcclNet_v12_t::regMr) regMr;
  decltype(tucclNcclNet_v12_t::regMrDmaBuf) regMrDmaBuf;  ///< nullptr: no dma-buf registration
  decltype(tucclNcclNet_v12_t::deregMr) deregMr;
  decltype(tucclNcclNet_v12_t::iflush) iflush;
};

/// "<T::kLabelPrefix><entry>", built at compile time.
template <typename T, size_t N>
constexpr std::array<char, T::kLabelPrefix.size() + N> labelOf(const char (&entry)[N]) {
  std::array<char, T::kLabelPrefix.size() + N> label{};
  for (size_t i = 0; i < T::kLabelPrefix.size(); ++i) label[i] = T::kLabelPrefix[i];
  for (size_t i = 0; i < N; ++i) label[T::kLabelPrefix.size() + i] = entry[i];
  return label;
}

/// The shared entries over transport T (see the top of this file).
template <typename T>
class NetEntries {
  using Comm = typename T::Comm;
  using Listen = typename T::Listen;
  using Request = typename T::Request;

 public:
  /// The table named `name`: the shared entries with `memory`'s.
  static constexpr tucclNcclNet_v12_t table(const char* name, NetMemoryEntries memory) {
    return {.name = name,
            .init = init,
            .devices = devices,
            .getProperties = getProperties,
            .listen = listen,
            .connect = connect,
            .accept = accept,
            .regMr = memory.regMr,
            .regMrDmaBuf = memory.regMrDmaBuf,
            .deregMr = memory.deregMr,
            .isend = isend,
            .irecv = irecv,
            .iflush = memory.iflush,
            .test = test,
            .closeSend = close,
            .closeRecv = close,
            .closeListen = closeListen,
            .getDeviceMr = nullptr,
            .irecvConsumed = nullptr,
            .makeVDevice = makeVDeviceEntry(),
            .finalize = finalize,
            .setNetAttr = nullptr};
  }

 private:
  /// makeVDevice where the transport fuses devices (T::makeVDevice), else NULL: NCCL then uses the
  /// physical devices only (nccl-net-abi.md).
  static constexpr decltype(tucclNcclNet_v12_t::makeVDevice) makeVDeviceEntry() {
    if constexpr (requires { T::makeVDevice(tucclNcclNetVDeviceProps_v12_t{}); }) {
      return makeVDevice;
    } else {
      return nullptr;
    }
  }

  static ncclResult_t makeVDevice(int* d, tucclNcclNetVDeviceProps_v12_t* props) noexcept {
    static constexpr auto kWhat = labelOf<T>("makeVDevice");
    return guarded(kWhat.data(), [&] {
      if (d == nullptr || props == nullptr) return ncclInvalidArgument;
      Expected<int> made = T::makeVDevice(*props);
      if (!made) return report(made.status(), kWhat.data());
      *d = *made;
      return ncclSuccess;
    });
  }

  static ncclResult_t init(void** ctx, uint64_t commId, tucclNcclNetCommConfig_t* config, ncclDebugLogger_t logger,
                           tucclNcclProfilerCallback_t) noexcept {
    static constexpr auto kWhat = labelOf<T>("init");
    return guarded(kWhat.data(), [&] {
      if (logger != nullptr) setNetLogger(logger);
      if (T::deviceCount() == 0) return ncclSystemError;  // the transport logs why
      if (ctx != nullptr) *ctx = new NetContext{commId, config != nullptr ? config->trafficClass : -1};
      return ncclSuccess;
    });
  }

  static ncclResult_t devices(int* ndev) noexcept {
    static constexpr auto kWhat = labelOf<T>("devices");
    return guarded(kWhat.data(), [&] {
      *ndev = T::deviceCount();
      return ncclSuccess;
    });
  }

  static ncclResult_t getProperties(int dev, tucclNcclNetProperties_v12_t* props) noexcept {
    static constexpr auto kWhat = labelOf<T>("getProperties");
    return guarded(kWhat.data(), [&] { return T::properties(dev, props, kWhat.data()); });
  }

  static ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) noexcept {
    static constexpr auto kWhat = labelOf<T>("listen");
    return handOut(kWhat.data(), listenComm, [&] { return T::listen(ctx, dev, handle); });
  }

  static ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm, tucclNcclNetDeviceHandle_t**) noexcept {
    static constexpr auto kWhat = labelOf<T>("connect");
    return handOut(kWhat.data(), sendComm, [&] { return T::connect(ctx, dev, handle); });
  }

  static ncclResult_t accept(void* listenComm, void** recvComm, tucclNcclNetDeviceHandle_t**) noexcept {
    static constexpr auto kWhat = labelOf<T>("accept");
    return handOut(kWhat.data(), recvComm, [&] { return T::accept(*static_cast<Listen*>(listenComm)); });
  }

  static ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void*,
                            void** request) noexcept {
    static constexpr auto kWhat = labelOf<T>("isend");
    return handOut(kWhat.data(), request,
                   [&] { return T::postSend(*static_cast<Comm*>(sendComm), data, size, tag, mhandle); });
  }

  static ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void**,
                            void** request) noexcept {
    static constexpr auto kWhat = labelOf<T>("irecv");
    return handOut(kWhat.data(), request,
                   [&] { return T::postRecv(*static_cast<Comm*>(recvComm), n, data, sizes, tags, mhandles); });
  }

  static ncclResult_t test(void* request, int* done, int* sizes) noexcept {
    static constexpr auto kWhat = labelOf<T>("test");
    return guarded(kWhat.data(), [&] {
      auto* posted = static_cast<Request*>(request);
      if (posted == nullptr) return ncclInternalError;
      auto result = posted->comm->test(posted);
      if (!result) return report(result.status(), kWhat.data());
      *done = result->done ? 1 : 0;
      if (result->done && sizes != nullptr)
        for (int i = 0; i < result->n; ++i) sizes[i] = static_cast<int>(result->sizes[i]);
      return ncclSuccess;
    });
  }

  static ncclResult_t close(void* comm) noexcept {
    static constexpr auto kWhat = labelOf<T>("close");
    return guarded(kWhat.data(), [&] {
      delete static_cast<Comm*>(comm);
      return ncclSuccess;
    });
  }

  static ncclResult_t closeListen(void* listenComm) noexcept {
    static constexpr auto kWhat = labelOf<T>("closeListen");
    return guarded(kWhat.data(), [&] {
      delete static_cast<Listen*>(listenComm);
      return ncclSuccess;
    });
  }

  static ncclResult_t finalize(void* ctx) noexcept {
    delete static_cast<NetContext*>(ctx);
    return ncclSuccess;
  }
};

}  // namespace tuccl::net
