// The verbs network's handle, handshake and its side of the v12 table (ib_net.h; the shared entries: net_table.h).
#include "net/ib_net.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "net/ib_comm.h"
#include "net/handshake_socket.h"
#include "net/ib_devices.h"
#include "net/interface_choice.h"
#include "net/net_env.h"
#include "net/net_log.h"
#include "net/net_result.h"
#include "net/net_table.h"
#include "support/environment.h"

namespace tuccl::net {
namespace {

using ib::ConnectionInfo;
using ib::IbComm;
using ib::IbRequest;
using ib::MemoryRegion;
using transport::Socket;
using transport::SocketAddress;

constexpr uint64_t kHandleMagic = 0x54754343'4c496248ULL;  // "TuCCLIbH"
constexpr uint64_t kInfoMagic = 0x54754343'4c496249ULL;    // "TuCCLIbI"
constexpr uint8_t kReady = 0x52;                            // 'R': the sender's QPs are ready

struct ConnectState;

/// What listen writes into NCCL's 128-byte handle; the sender keeps its connect progress in the tail.
struct ListenHandle {
  uint64_t magic;
  uint64_t token;
  uint32_t addressLength;
  uint8_t address[sizeof(sockaddr_in6)];
  ConnectState* state;
};
static_assert(sizeof(ListenHandle) <= TUCCL_NCCL_NET_HANDLE_MAXSIZE);

Expected<const ib::VerbsApi*> verbs() { return ib::loadVerbs(); }

Expected<const ib::IbDevice*> deviceAt(int dev) {
  const ib::IbDeviceList& list = ib::ibDevices();
  if (dev < 0 || dev >= static_cast<int>(list.devices.size()))
    return makeError(ErrorCode::InvalidArgument, "IB device " + std::to_string(dev) + " does not exist (" +
                                                     std::to_string(list.devices.size()) + " found)");
  return &list.devices[static_cast<size_t>(dev)];
}

/// The address the handshake listens on: the socket transport's first interface choice.
Expected<SocketAddress> handshakeAddress() {
  const std::optional<std::string> specText = envFirst("TUCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME");
  const InterfaceSpec spec = parseInterfaceSpec(specText.value_or(""));
  const std::vector<NetInterface> chosen =
      chooseInterfaces(transport::upInterfaceAddresses(), specText ? &spec : nullptr,
                       parseSocketFamily(env::text("NCCL_SOCKET_FAMILY").value_or("")), 1);
  if (chosen.empty())
    return makeError(ErrorCode::NotFound,
                     "no network interface for the IB handshake (" + specText.value_or("default choice") + ")");
  return chosen.front().address;
}

/// Non-blocking: moves what the socket takes now; true once all `bytes` are through.
Expected<bool> exchange(const Socket& socket, bool sending, void* data, size_t bytes, size_t& done) {
  while (done < bytes) {
    char* at = static_cast<char*>(data) + done;
    const ssize_t moved = sending ? ::send(socket.fd(), at, bytes - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                                  : ::recv(socket.fd(), at, bytes - done, MSG_DONTWAIT);
    if (moved < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (moved == 0 && !sending) return makeError(ErrorCode::RemoteError, "the peer closed the handshake");
    if (moved <= 0) return systemError("handshake I/O failed");
    done += static_cast<size_t>(moved);
  }
  return true;
}

bool infoValid(const ConnectionInfo& info, uint64_t token) {
  return info.magic == kInfoMagic && info.token == token && info.nQps >= 1 &&
         info.nQps <= static_cast<uint32_t>(ib::kMaxQpsPerConnection);
}

// ---- Sender: connect -------------------------------------------------------------------------------

struct ConnectState {
  enum class Stage { Connecting, SendInfo, ReceiveInfo, SendReady } stage = Stage::Connecting;
  SocketAddress peer;
  Socket socket;
  std::unique_ptr<IbComm> comm;
  ConnectionInfo out{};
  ConnectionInfo in{};
  size_t done = 0;
  uint8_t ready = kReady;
};

Expected<ConnectState*> startConnect(const ListenHandle& handle, int dev, int trafficClass) {
  if (handle.magic != kHandleMagic || handle.addressLength > sizeof handle.address)
    return makeError(ErrorCode::InvalidArgument, "the connection handle is not one TuCCL's IB network wrote");
  Expected<const ib::VerbsApi*> api = verbs();
  if (!api) return api.status();
  Expected<const ib::IbDevice*> device = deviceAt(dev);
  if (!device) return device.status();
  auto state = std::make_unique<ConnectState>();
  state->peer = SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(handle.address), handle.addressLength);
  if (state->peer.empty()) return makeError(ErrorCode::InvalidArgument, "the connection handle has no address");
  Expected<std::unique_ptr<IbComm>> comm = IbComm::create(**api, **device, true, ib::ibCommOptionsFromEnv(trafficClass));
  if (!comm) return comm.status();
  state->comm = std::move(*comm);
  state->out = state->comm->localInfo(kInfoMagic, handle.token);
  Expected<Socket> socket = startConnecting(state->peer);
  if (!socket) return socket.status();
  state->socket = std::move(*socket);
  return state.release();
}

/// Advances the connect; the comm once the receiver has its info and this end is ready.
Expected<IbComm*> advanceConnect(ConnectState& state) {
  using Stage = ConnectState::Stage;
  if (state.stage == Stage::Connecting) {
    Expected<bool> connected = connectCompleted(state.socket, state.peer);
    if (!connected || !*connected) return connected ? Expected<IbComm*>(nullptr) : Expected<IbComm*>(connected.status());
    state.stage = Stage::SendInfo;
  }
  if (state.stage == Stage::SendInfo) {
    Expected<bool> sent = exchange(state.socket, true, &state.out, sizeof state.out, state.done);
    if (!sent || !*sent) return sent ? Expected<IbComm*>(nullptr) : Expected<IbComm*>(sent.status());
    state.stage = Stage::ReceiveInfo;
    state.done = 0;
  }
  if (state.stage == Stage::ReceiveInfo) {
    Expected<bool> got = exchange(state.socket, false, &state.in, sizeof state.in, state.done);
    if (!got || !*got) return got ? Expected<IbComm*>(nullptr) : Expected<IbComm*>(got.status());
    if (!infoValid(state.in, state.out.token))
      return makeError(ErrorCode::RemoteError, state.peer.toString() + " answered with a handshake that is not TuCCL's IB one");
    Status connected = state.comm->connect(state.in);
    if (!connected) return connected;
    state.stage = Stage::SendReady;
    state.done = 0;
  }
  Expected<bool> sent = exchange(state.socket, true, &state.ready, 1, state.done);
  if (!sent || !*sent) return sent ? Expected<IbComm*>(nullptr) : Expected<IbComm*>(sent.status());
  state.comm->keepSocket(std::move(state.socket));
  return state.comm.release();
}

Expected<IbComm*> progressConnect(void* handleBytes, int dev, int trafficClass) {
  ListenHandle handle;
  std::memcpy(&handle, handleBytes, sizeof handle);
  if (handle.state == nullptr) {
    Expected<ConnectState*> started = startConnect(handle, dev, trafficClass);
    if (!started) return started.status();
    handle.state = *started;
    std::memcpy(handleBytes, &handle, sizeof handle);
  }
  Expected<IbComm*> comm = advanceConnect(*handle.state);
  if (!comm || *comm != nullptr) {  // through or failed: the state goes
    delete handle.state;
    handle.state = nullptr;
    std::memcpy(handleBytes, &handle, sizeof handle);
  }
  return comm;
}

// ---- Receiver: listen and accept -------------------------------------------------------------------

struct PendingAccept {
  Socket socket;
  ConnectionInfo in{};
  ConnectionInfo out{};
  std::unique_ptr<IbComm> comm;
  size_t done = 0;
  uint8_t ready = 0;
  enum class Stage { ReceiveInfo, SendInfo, ReceiveReady } stage = Stage::ReceiveInfo;
};

struct ListenComm {
  Socket listener;
  uint64_t token = 0;
  int dev = 0;
  int trafficClass = -1;
  std::vector<std::unique_ptr<PendingAccept>> pending;
};

Expected<ListenComm*> listenOnDevice(void* ctx, int dev, void* handleBytes) {
  Expected<const ib::IbDevice*> device = deviceAt(dev);
  if (!device) return device.status();
  Expected<SocketAddress> address = handshakeAddress();
  if (!address) return address.status();
  Expected<Socket> listener = transport::listenOn(*address);
  if (!listener) return listener.status();
  Expected<SocketAddress> bound = listener->localAddress();
  if (!bound) return bound.status();
  auto comm = std::make_unique<ListenComm>();
  comm->listener = std::move(*listener);
  comm->token = randomWord();
  comm->dev = dev;
  comm->trafficClass = trafficClassOf(ctx);
  ListenHandle handle{};
  handle.magic = kHandleMagic;
  handle.token = comm->token;
  handle.addressLength = bound->length();
  std::memcpy(handle.address, bound->get(), bound->length());
  std::memset(handleBytes, 0, TUCCL_NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handleBytes, &handle, sizeof handle);
  return comm.release();
}

/// Advances one pending accept: the comm when through, nullptr while in progress; an error
/// refuses this peer only (RemoteError) or fails the accept (anything else).
Expected<IbComm*> advanceAccept(ListenComm& listen, PendingAccept& pending) {
  using Stage = PendingAccept::Stage;
  if (pending.stage == Stage::ReceiveInfo) {
    Expected<bool> got = exchange(pending.socket, false, &pending.in, sizeof pending.in, pending.done);
    if (!got || !*got) return got ? Expected<IbComm*>(nullptr) : Expected<IbComm*>(got.status());
    if (!infoValid(pending.in, listen.token))
      return makeError(ErrorCode::RemoteError, "its handshake is not TuCCL's IB one or not for this listener");
    Expected<const ib::VerbsApi*> api = verbs();
    if (!api) return api.status();
    Expected<const ib::IbDevice*> device = deviceAt(listen.dev);
    if (!device) return device.status();
    ib::IbCommOptions options = ib::ibCommOptionsFromEnv(listen.trafficClass);
    options.nQps = static_cast<int>(pending.in.nQps);  // the sender decides
    Expected<std::unique_ptr<IbComm>> comm = IbComm::create(**api, **device, false, options);
    if (!comm) return comm.status();
    pending.comm = std::move(*comm);
    Status connected = pending.comm->connect(pending.in);
    if (!connected) return connected;
    pending.out = pending.comm->localInfo(kInfoMagic, listen.token);
    pending.stage = Stage::SendInfo;
    pending.done = 0;
  }
  if (pending.stage == Stage::SendInfo) {
    Expected<bool> sent = exchange(pending.socket, true, &pending.out, sizeof pending.out, pending.done);
    if (!sent || !*sent) return sent ? Expected<IbComm*>(nullptr) : Expected<IbComm*>(sent.status());
    pending.stage = Stage::ReceiveReady;
    pending.done = 0;
  }
  Expected<bool> got = exchange(pending.socket, false, &pending.ready, 1, pending.done);
  if (!got || !*got) return got ? Expected<IbComm*>(nullptr) : Expected<IbComm*>(got.status());
  if (pending.ready != kReady) return makeError(ErrorCode::RemoteError, "its ready byte is wrong");
  pending.comm->keepSocket(std::move(pending.socket));
  return pending.comm.release();
}

Expected<IbComm*> progressAccept(ListenComm& listen) {
  Status accepted = acceptWaiting(listen.listener, [&](Socket socket) {
    auto pending = std::make_unique<PendingAccept>();
    pending->socket = std::move(socket);
    listen.pending.push_back(std::move(pending));
  });
  if (!accepted) return accepted;
  for (size_t i = 0; i < listen.pending.size();) {
    PendingAccept& pending = *listen.pending[i];
    const std::string from = pending.socket.valid() ? peerName(pending.socket) : std::string();
    Expected<IbComm*> comm = advanceAccept(listen, pending);
    if (comm && *comm == nullptr) {
      ++i;
      continue;
    }
    listen.pending.erase(listen.pending.begin() + static_cast<std::ptrdiff_t>(i));
    if (comm) return comm;
    if (comm.status().code() != ErrorCode::RemoteError) return comm.status();
    TUCCL_NET_WARN("TuCCL net: IB: refused a connection from %s: %s", from.c_str(), comm.status().message().c_str());
  }
  return static_cast<IbComm*>(nullptr);
}

// ---- The table (net_table.h: what both networks share) -----------------------------------------------

struct IbTransport {
  static constexpr std::string_view kLabelPrefix = "IB ";
  using Comm = IbComm;
  using Listen = ListenComm;
  using Request = IbRequest;

  static int deviceCount() { return static_cast<int>(ib::ibDevices().devices.size()); }  // logs why none, once

  static ncclResult_t properties(int dev, tucclNcclNetProperties_v12_t* props, const char* what) {
    Expected<const ib::IbDevice*> found = deviceAt(dev);
    if (!found) return report(found.status(), what);
    const ib::IbDevice& device = **found;
    *props = hostDeviceProperties(dev);
    props->name = const_cast<char*>(device.displayName.c_str());
    props->pciPath = device.pciPath.empty() ? nullptr : const_cast<char*>(device.pciPath.c_str());
    props->guid = device.guid;
    props->ptrSupport = device.ptrSupport;
    props->speed = device.speed;
    props->port = device.port;
    props->maxComms = std::max(device.maxQp, 1);
    props->maxRecvs = ib::kMaxRecvs;
    return ncclSuccess;
  }

  static Expected<ListenComm*> listen(void* ctx, int dev, void* handle) { return listenOnDevice(ctx, dev, handle); }
  static Expected<IbComm*> connect(void* ctx, int dev, void* handle) {
    return progressConnect(handle, dev, trafficClassOf(ctx));
  }
  static Expected<IbComm*> accept(ListenComm& listen) { return progressAccept(listen); }

  static Expected<IbRequest*> postSend(IbComm& comm, void* data, size_t size, int tag, void* mhandle) {
    return comm.postSend(data, size, tag, static_cast<MemoryRegion*>(mhandle));
  }
  static Expected<IbRequest*> postRecv(IbComm& comm, int n, void** data, size_t* sizes, int* tags, void** mhandles) {
    return comm.postRecv(n, data, sizes, tags, reinterpret_cast<MemoryRegion* const*>(mhandles));
  }
};

ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) noexcept {
  return handOut("IB regMr", mhandle, [&] { return static_cast<IbComm*>(comm)->registerMemory(data, size, type); });
}

ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                            void** mhandle) noexcept {
  return handOut("IB regMrDmaBuf", mhandle,
                 [&] { return static_cast<IbComm*>(comm)->registerDmabuf(data, size, type, offset, fd); });
}

ncclResult_t netDeregMr(void* comm, void* mhandle) noexcept {
  return guarded("IB deregMr", [&] {
    return report(static_cast<IbComm*>(comm)->deregister(static_cast<MemoryRegion*>(mhandle)), "IB deregMr");
  });
}

ncclResult_t netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) noexcept {
  return handOut("IB iflush", request, [&] {
    return static_cast<IbComm*>(recvComm)->postFlush(n, data, sizes, reinterpret_cast<MemoryRegion* const*>(mhandles));
  });
}

constexpr tucclNcclNet_v12_t ibNet =
    NetEntries<IbTransport>::table("TuCCL-IB", {netRegMr, netRegMrDmaBuf, netDeregMr, netIflush});

}  // namespace

const tucclNcclNet_v12_t& ibNetV12() { return ibNet; }

const std::string& ibUnavailableReason() { return ib::ibDevices().reason; }

}  // namespace tuccl::net
