// The socket network's devices, handshake and its side of the v12 table (socket_net.h; the shared entries: net_table.h).
#include "net/socket_net.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <span>
#include <string_view>
#include <vector>

#include "net/handshake.h"
#include "net/handshake_socket.h"
#include "net/interface_choice.h"
#include "net/net_env.h"
#include "net/net_log.h"
#include "net/net_result.h"
#include "net/net_table.h"
#include "net/rails.h"
#include "net/socket_comm.h"
#include "support/environment.h"

namespace tuccl::net {
namespace {

using transport::Socket;
using transport::SocketAddress;

constexpr int kMaxDevices = 16;
constexpr int kMaxVirtualDevices = 16;
static_assert(kHandleBytes == TUCCL_NCCL_NET_HANDLE_MAXSIZE);

// ---- Devices -------------------------------------------------------------------------------------

struct Device {
  NetInterface interface;
  std::string pciPath;  ///< empty: not a PCI device
  int speed = 10000;    ///< Mbps
  int rail = -1;        ///< the sketch's NIC group (rails.h); -1 when not a PCI device
  /// A virtual device's physical members (makeVDevice); empty for a physical device.
  std::vector<int> members;
  std::string name;     ///< a virtual device's: its members' names joined by '+'
};

std::mutex devicesMutex;
std::vector<Device> devices;  ///< the physical devices, then the virtual ones
size_t physicalDevices = 0;
bool devicesFound = false;

std::string pciPathOf(const std::string& name) {
  char resolved[PATH_MAX];
  const std::string link = "/sys/class/net/" + name + "/device";
  if (realpath(link.c_str(), resolved) == nullptr) return {};
  return resolved;
}

int speedOf(const std::string& name) {
  std::ifstream file("/sys/class/net/" + name + "/speed");
  int speed = 0;
  if (file >> speed && speed > 0) return speed;
  return 10000;  // NCCL's value when the speed is unknown
}

/// Finds the devices once per process (under devicesMutex); the count.
int discoverDevices() {
  std::lock_guard lock(devicesMutex);
  if (devicesFound) return static_cast<int>(devices.size());
  const std::optional<std::string> specText = envFirst("TUCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME");
  const int family = parseSocketFamily(env::text("NCCL_SOCKET_FAMILY").value_or(""));
  const InterfaceSpec spec = parseInterfaceSpec(specText.value_or(""));
  for (NetInterface& chosen :
       chooseInterfaces(transport::upInterfaceAddresses(), specText ? &spec : nullptr, family, kMaxDevices)) {
    Device device{chosen, pciPathOf(chosen.name), speedOf(chosen.name)};
    devices.push_back(std::move(device));
  }
  std::vector<DeviceLocation> locations;
  for (const Device& device : devices) locations.push_back({device.pciPath, device.speed});
  const std::vector<int> rails = railsOfDevices(locations);
  for (size_t i = 0; i < devices.size(); ++i) {
    devices[i].rail = rails[i];
    TUCCL_NET_INFO("TuCCL net: device %zu is %s (%s), rail %d", i, devices[i].interface.name.c_str(),
                   devices[i].interface.address.host().c_str(), devices[i].rail);
  }
  if (devices.empty())
    TUCCL_NET_WARN("TuCCL net: no usable network interface (%s='%s')", specText ? "the interface list" : "default choice",
                   specText.value_or("").c_str());
  physicalDevices = devices.size();
  devicesFound = true;
  return static_cast<int>(devices.size());
}

/// NIC fusion (ncclNet v9+ makeVDevice): a virtual device over 1 to kMaxHandleListeners distinct
/// physical devices. Its connections open a listener on every member and spread their data
/// sockets over them (the sender's data socket i connects to member (i - 1) mod n), so a large
/// message's chunks cross every member; its speed is the members' sum. The same members again
/// give the same virtual device.
Expected<int> makeVirtualDevice(const tucclNcclNetVDeviceProps_v12_t& props) {
  discoverDevices();
  std::lock_guard lock(devicesMutex);
  if (props.ndevs < 1 || props.ndevs > kMaxHandleListeners)
    return makeError(ErrorCode::InvalidArgument, "a virtual device fuses 1 to " + std::to_string(kMaxHandleListeners) +
                                                     " devices, not " + std::to_string(props.ndevs));
  std::vector<int> members(props.devs, props.devs + props.ndevs);
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || members[i] >= static_cast<int>(physicalDevices))
      return makeError(ErrorCode::InvalidArgument, "device " + std::to_string(members[i]) + " is not a physical device (" +
                                                       std::to_string(physicalDevices) + " exist)");
    if (std::find(members.begin(), members.begin() + static_cast<std::ptrdiff_t>(i), members[i]) !=
        members.begin() + static_cast<std::ptrdiff_t>(i))
      return makeError(ErrorCode::InvalidArgument, "device " + std::to_string(members[i]) + " is named twice");
  }
  for (size_t d = physicalDevices; d < devices.size(); ++d) {
    if (devices[d].members == members) return static_cast<int>(d);
  }
  if (devices.size() - physicalDevices >= static_cast<size_t>(kMaxVirtualDevices))
    return makeError(ErrorCode::ResourceExhausted, std::to_string(kMaxVirtualDevices) + " virtual devices exist already");
  Device fused = devices[static_cast<size_t>(members[0])];
  fused.members = members;
  fused.name = devices[static_cast<size_t>(members[0])].interface.name;
  fused.speed = 0;
  for (int member : members) {
    if (member != members[0]) fused.name += "+" + devices[static_cast<size_t>(member)].interface.name;
    fused.speed += devices[static_cast<size_t>(member)].speed;
  }
  devices.push_back(std::move(fused));
  const int index = static_cast<int>(devices.size() - 1);
  TUCCL_NET_INFO("TuCCL net: virtual device %d fuses %s", index, devices.back().name.c_str());
  return index;
}

Expected<Device> deviceAt(int dev) {
  std::lock_guard lock(devicesMutex);
  if (dev < 0 || dev >= static_cast<int>(devices.size()))
    return makeError(ErrorCode::Internal, "device " + std::to_string(dev) + " does not exist");
  return devices[static_cast<size_t>(dev)];
}

// ---- Handshake (the wire formats and their checks: handshake.h) -------------------------------

struct PendingSocket {
  Socket socket;
  Hello hello{};        ///< connect side: the hello to send
  size_t sent = 0;
  bool connected = false;
  HelloReader reader;   ///< accept side: the hello arriving
};

/// A sender's connection in progress; the handle's progress field points at it.
struct ConnectState {
  std::vector<SocketAddress> peers;  ///< the listener's, then a virtual device's other members'
  std::vector<PendingSocket> sockets;
  std::vector<size_t> peerOf;        ///< by socket: its index into peers
  int nThreads = 1;
};

/// The connect states this process has handed out. A handle arrives from the peer, so its
/// progress field is trusted only when it names one of these (a fresh handle carries 0; anything
/// else in it is garbage and starts a new connect).
std::mutex connectsMutex;
std::set<ConnectState*> liveConnects;

ConnectState* liveConnect(uintptr_t progress) {
  std::lock_guard lock(connectsMutex);
  auto found = liveConnects.find(reinterpret_cast<ConnectState*>(progress));
  return found == liveConnects.end() ? nullptr : *found;
}

void endConnect(ConnectState* state, void* handle) {
  {
    std::lock_guard lock(connectsMutex);
    liveConnects.erase(state);
  }
  delete state;
  storeProgress(handle, 0);
}

/// One connection being assembled from its sockets (the hellos of one connect share a nonce).
struct Assembly {
  HelloBoard board;
  std::vector<Socket> placed;  ///< by hello index, sized by the first good hello
};

/// Connections from several connectors may arrive at once, their sockets interleaved: each is
/// assembled on its own board, keyed by its nonce, and accept() returns whichever completes first.
struct ListenComm {
  std::vector<Socket> listeners;  ///< one, or one per member of a virtual device
  uint64_t token;
  std::vector<PendingSocket> pending;  ///< accepted, hello not complete
  std::map<uint64_t, Assembly> assemblies;
};

/// Connections assembled at once on one listener, at most (more are refused until one completes):
/// a bound on what a peer holding the token can make the listener keep.
constexpr size_t kMaxAssemblies = 64;

Expected<ListenComm*> listenOnDevice(int dev, void* handle) {
  Expected<Device> device = deviceAt(dev);
  if (!device) return device.status();
  std::vector<NetInterface> interfaces;
  if (device->members.empty()) {
    interfaces.push_back(device->interface);
  } else {
    for (int member : device->members) {
      Expected<Device> physical = deviceAt(member);
      if (!physical) return physical.status();
      interfaces.push_back(physical->interface);
    }
  }
  auto comm = std::make_unique<ListenComm>(ListenComm{{}, randomWord(), {}, {}});
  std::vector<SocketAddress> bound;
  for (const NetInterface& interface : interfaces) {
    Expected<Socket> listener = transport::listenOn(interface.address);
    if (!listener) return listener.status();
    Expected<SocketAddress> address = listener->localAddress();
    if (!address) return address.status();
    bound.push_back(*address);
    comm->listeners.push_back(std::move(*listener));
  }
  writeHandle(handle, comm->token, bound);
  return comm.release();
}

/// Starts the non-blocking connects of a new connection: the control socket to the first
/// listener, data socket i to listener (i - 1) mod n, at least one data socket per listener.
Expected<std::unique_ptr<ConnectState>> startConnect(const ParsedHandle& in) {
  auto state = std::make_unique<ConnectState>();
  state->peers.push_back(in.listener);
  state->peers.insert(state->peers.end(), in.more.begin(), in.more.end());
  const SocketNetConfig config = socketNetConfigFromEnv();
  const int nData = std::max(config.nThreads * config.nSocksPerThread, static_cast<int>(state->peers.size()));
  state->nThreads = config.nThreads;
  const uint64_t nonce = randomWord();
  for (int i = 0; i <= nData; ++i) {
    const size_t peer = i == 0 ? 0 : static_cast<size_t>(i - 1) % state->peers.size();
    Expected<Socket> socket = startConnecting(state->peers[peer]);
    if (!socket) return socket.status();
    PendingSocket pending;
    pending.socket = std::move(*socket);
    pending.hello = makeHello(in.token, nonce, i, nData, config.nThreads);
    state->sockets.push_back(std::move(pending));
    state->peerOf.push_back(peer);
  }
  return state;
}

/// Progresses one socket of a connect: connected, then its hello sent. True when done.
Expected<bool> progressConnectSocket(PendingSocket& pending, const SocketAddress& peer) {
  if (!pending.connected) {
    Expected<bool> connected = connectCompleted(pending.socket, peer);
    if (!connected || !*connected) return connected;
    pending.connected = true;
  }
  while (pending.sent < sizeof(Hello)) {
    const ssize_t sent = ::send(pending.socket.fd(), reinterpret_cast<const char*>(&pending.hello) + pending.sent,
                                sizeof(Hello) - pending.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (sent <= 0) return systemError("handshake with " + peer.toString() + " failed");
    pending.sent += static_cast<size_t>(sent);
  }
  return true;
}

/// One connect() call: progresses the connection in the handle; a SocketComm once it is through.
Expected<SocketComm*> progressConnect(void* handle) {
  Expected<ParsedHandle> in = parseHandle(handle);
  if (!in) return in.status();
  ConnectState* state = liveConnect(in->progress);
  if (state == nullptr) {
    Expected<std::unique_ptr<ConnectState>> started = startConnect(*in);
    if (!started) return started.status();
    state = started->release();
    std::lock_guard lock(connectsMutex);
    liveConnects.insert(state);
  }
  storeProgress(handle, reinterpret_cast<uintptr_t>(state));
  bool all = true;
  for (size_t i = 0; i < state->sockets.size(); ++i) {
    PendingSocket& pending = state->sockets[i];
    Expected<bool> done = progressConnectSocket(pending, state->peers[state->peerOf[i]]);
    if (!done) {
      endConnect(state, handle);
      return done.status();
    }
    all = all && *done;
  }
  if (!all) return static_cast<SocketComm*>(nullptr);
  std::vector<Socket> sockets;
  for (PendingSocket& pending : state->sockets) sockets.push_back(std::move(pending.socket));
  auto* comm = new SocketComm(true, std::move(sockets), state->nThreads);
  endConnect(state, handle);
  return comm;
}

/// Reads the hellos that are there; places the sockets whose hello is right, refuses (closes)
/// the others.
void readHellos(ListenComm& listen) {
  for (size_t i = 0; i < listen.pending.size();) {
    PendingSocket& pending = listen.pending[i];
    bool drop = false;
    while (!pending.reader.complete()) {
      const std::span<std::byte> unread = pending.reader.unread();
      const ssize_t got = ::recv(pending.socket.fd(), unread.data(), unread.size(), MSG_DONTWAIT);
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      if (got <= 0) {
        drop = true;
        break;
      }
      pending.reader.received(static_cast<size_t>(got));
    }
    if (!drop && pending.reader.complete()) {
      const Hello& hello = pending.reader.hello();
      Status valid = checkHello(hello, listen.token);
      auto known = listen.assemblies.find(hello.nonce);
      if (valid && known == listen.assemblies.end()) {
        if (listen.assemblies.size() < kMaxAssemblies) {
          known = listen.assemblies.emplace(hello.nonce, Assembly{HelloBoard(listen.token), {}}).first;
        } else {
          valid = makeError(ErrorCode::ResourceExhausted, std::to_string(kMaxAssemblies) +
                                                              " connections are already being assembled");
        }
      }
      const Expected<int> index = valid ? known->second.board.place(hello) : Expected<int>(valid);
      if (index) {
        Assembly& assembly = known->second;
        if (assembly.placed.size() != assembly.board.sockets()) assembly.placed.resize(assembly.board.sockets());
        assembly.placed[static_cast<size_t>(*index)] = std::move(pending.socket);
      } else {
        TUCCL_NET_WARN("TuCCL net: refused a connection from %s: %s", peerName(pending.socket).c_str(),
                       index.status().message().c_str());
      }
      drop = true;  // placed or refused, it leaves the pending list
    }
    if (drop)
      listen.pending.erase(listen.pending.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
}

/// One accept() call: a SocketComm once every socket of the connection has said hello.
Expected<SocketComm*> progressAccept(ListenComm& listen) {
  for (Socket& listener : listen.listeners) {
    Status accepted = acceptWaiting(listener, [&](Socket socket) {
      PendingSocket pending;
      pending.socket = std::move(socket);
      listen.pending.push_back(std::move(pending));
    });
    if (!accepted) return accepted;
  }
  readHellos(listen);
  for (auto it = listen.assemblies.begin(); it != listen.assemblies.end(); ++it) {
    if (!it->second.board.complete()) continue;
    auto* comm = new SocketComm(false, std::move(it->second.placed), it->second.board.nThreads());
    listen.assemblies.erase(it);
    return comm;
  }
  return static_cast<SocketComm*>(nullptr);
}

// ---- The table (net_table.h: what both networks share) -----------------------------------------

struct SocketTransport {
  static constexpr std::string_view kLabelPrefix = "";
  using Comm = SocketComm;
  using Listen = ListenComm;
  using Request = SocketRequest;

  static int deviceCount() { return discoverDevices(); }  // warns when there is none

  static ncclResult_t properties(int dev, tucclNcclNetProperties_v12_t* props, const char*) {
    std::lock_guard lock(devicesMutex);
    if (dev < 0 || dev >= static_cast<int>(devices.size())) return ncclInvalidArgument;
    const Device& device = devices[static_cast<size_t>(dev)];
    *props = hostDeviceProperties(dev);
    props->name = const_cast<char*>(device.members.empty() ? device.interface.name.c_str() : device.name.c_str());
    if (!device.members.empty()) {
      props->vProps.ndevs = static_cast<int>(device.members.size());
      for (size_t i = 0; i < device.members.size(); ++i) props->vProps.devs[i] = device.members[i];
    }
    props->pciPath = device.pciPath.empty() ? nullptr : const_cast<char*>(device.pciPath.c_str());
    props->guid = static_cast<uint64_t>(dev);
    props->ptrSupport = TUCCL_NCCL_PTR_HOST;
    props->speed = device.speed;
    props->port = 0;
    props->maxComms = 65536;
    props->maxRecvs = kMaxGroupedReceives;
    props->railId = static_cast<int16_t>(device.rail);
    return ncclSuccess;
  }

  static Expected<int> makeVDevice(const tucclNcclNetVDeviceProps_v12_t& props) { return makeVirtualDevice(props); }
  static Expected<ListenComm*> listen(void*, int dev, void* handle) { return listenOnDevice(dev, handle); }
  static Expected<SocketComm*> connect(void*, int, void* handle) { return progressConnect(handle); }
  static Expected<SocketComm*> accept(ListenComm& listen) { return progressAccept(listen); }

  static Expected<SocketRequest*> postSend(SocketComm& comm, void* data, size_t size, int tag, void*) {
    return comm.postSend(data, size, tag);
  }
  static Expected<SocketRequest*> postRecv(SocketComm& comm, int n, void** data, size_t* sizes, int* tags, void**) {
    return comm.postRecv(n, data, sizes, tags);
  }
};

int hostRegistration = 0;  // the mhandle of every registration: host memory needs nothing

ncclResult_t netRegMr(void*, void*, size_t, int type, void** mhandle) noexcept {
  if (type != TUCCL_NCCL_PTR_HOST) return ncclInternalError;
  *mhandle = &hostRegistration;
  return ncclSuccess;
}

ncclResult_t netDeregMr(void*, void*) noexcept { return ncclSuccess; }

ncclResult_t netIflush(void*, int, void**, int*, void**, void**) noexcept {
  return ncclInternalError;  // never called: no GPU memory is registered
}

constexpr tucclNcclNet_v12_t socketNet =
    NetEntries<SocketTransport>::table("TuCCL-Socket", {netRegMr, nullptr, netDeregMr, netIflush});

}  // namespace

SocketNetConfig socketNetConfigFromEnv() {
  SocketNetConfig config;
  config.nThreads = std::clamp(envInt("TUCCL_SOCKET_NTHREADS", "NCCL_SOCKET_NTHREADS", config.nThreads), 1, kMaxThreads);
  config.nSocksPerThread =
      std::clamp(envInt("TUCCL_NSOCKS_PERTHREAD", "NCCL_NSOCKS_PERTHREAD", config.nSocksPerThread), 1, kMaxSockets);
  if (config.nThreads * config.nSocksPerThread > kMaxSockets) config.nSocksPerThread = kMaxSockets / config.nThreads;
  return config;
}

const tucclNcclNet_v12_t& socketNetV12() { return socketNet; }

}  // namespace tuccl::net
