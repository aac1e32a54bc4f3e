// The net plugin libtuccl's inter-node proxy drives (design.md "libtuccl": between nodes a proxy
// hands staging rings to a net plugin). Any NCCL net plugin serves: TuCCL's own network (linked
// in), or a plugin loaded by name, as NCCL loads one:
//
//   TUCCL_NET_PLUGIN, else NCCL_NET_PLUGIN:
//     unset, "", "tuccl", "builtin"  TuCCL's network, linked into libtuccl (no dlopen)
//     "none"                         no plugin: a communicator that spans nodes fails at init
//     a name "X"                     libnccl-net-X.so, then X itself (dlopen's search path)
//     a path (contains '/')          that file
//
// A loaded plugin exports ncclNetPlugin_v12 .. _v8 (nccl-net-abi.md); the newest one present is
// used through thin adapters, so the proxy sees one interface (NetApi) whatever the version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "support/status.h"
#include "tuccl/nccl_net.h"

namespace tuccl::backend {

/// The properties of a net device the proxy uses.
struct NetDeviceInfo {
  std::string name;
  std::string pciPath;
  int speedMbps = 0;
  int ptrSupport = 0;
  int maxRecvs = 1;
};

/// One net plugin, initialised for one communicator. Calls map NCCL's results to Status; a
/// plugin's failure is an error naming the call and the plugin. Not thread-safe: one proxy
/// thread drives it (and the communicator's init before that thread starts).
class NetApi {
 public:
  virtual ~NetApi() = default;
  /// The table's name ("TuCCL-Socket", "IB", "AWS Libfabric", ...).
  virtual const std::string& name() const = 0;
  /// Where it came from: "built into libtuccl" or the file dlopened, with the ABI version.
  virtual const std::string& origin() const = 0;

  virtual Expected<int> devices() = 0;
  virtual Expected<NetDeviceInfo> properties(int dev) = 0;
  /// Listens on `dev`; `handle` (TUCCL_NCCL_NET_HANDLE_MAXSIZE bytes) goes to the peers.
  virtual Expected<void*> listen(int dev, void* handle) = 0;
  /// Non-blocking: nullptr until the connection is made (call again with the same handle).
  virtual Expected<void*> connect(int dev, void* handle) = 0;
  virtual Expected<void*> accept(void* listenComm) = 0;
  virtual Expected<void*> regMr(void* comm, void* data, size_t size) = 0;  ///< host memory
  virtual Status deregMr(void* comm, void* mhandle) = 0;
  /// nullptr: no request slot free now (retry later).
  virtual Expected<void*> isend(void* sendComm, void* data, size_t size, int tag, void* mhandle) = 0;
  virtual Expected<void*> irecv(void* recvComm, void* data, size_t size, int tag, void* mhandle) = 0;
  /// Whether the request finished; `size` gets the bytes moved.
  virtual Expected<bool> test(void* request, size_t* size) = 0;
  virtual Status closeSend(void* comm) = 0;
  virtual Status closeRecv(void* comm) = 0;
  virtual Status closeListen(void* comm) = 0;
};

/// The plugin the environment names (above), initialised with libtuccl's logger and `commId`.
/// NotFound when the file or its ncclNetPlugin_v* symbols are missing, Unsupported for "none",
/// SystemError when its init fails; every error names the variable and the plugin.
Expected<std::unique_ptr<NetApi>> loadNetPlugin(uint64_t commId);

/// Adapts a plugin table of version `version` (8 .. 12) — for tests and for loadNetPlugin.
/// `keepAlive` (a dlopen handle or nullptr) is closed with the returned object.
Expected<std::unique_ptr<NetApi>> adaptNetTable(const void* table, int version, std::string origin, void* keepAlive,
                                                uint64_t commId);

}  // namespace tuccl::backend
