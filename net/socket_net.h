// TuCCL's socket network: the ncclNet v12 function table over TCP (IPv4 or IPv6), the one
// implementation behind the plugin's version adapters and, later, libtuccl's inter-node proxy.
//
// Devices are the interfaces interface_choice.h picks (TUCCL_SOCKET_IFNAME, else
// NCCL_SOCKET_IFNAME; NCCL_SOCKET_FAMILY). A connection is one control socket plus
// nThreads × nSocksPerThread data sockets (TUCCL_SOCKET_NTHREADS / NCCL_SOCKET_NTHREADS, default
// 2; TUCCL_NSOCKS_PERTHREAD / NCCL_NSOCKS_PERTHREAD, default 1; at most 16 threads and 64
// sockets). listen/connect/accept never block: connect and accept return a null comm until the
// handshake (a hello with TuCCL's magic and the listener's random token on every socket) is
// through; a connection whose hello is wrong is closed and logged, and the listener waits on.
#pragma once

#include <string>
#include <string_view>

#include "tuccl/nccl_net.h"

namespace tuccl::net {

struct SocketNetConfig {
  int nThreads = 2;
  int nSocksPerThread = 1;
};

/// Reads the TUCCL_ / NCCL_ variables (the TUCCL_ one wins), clamped to NCCL's limits; a value
/// that is not a number is warned about and ignored.
SocketNetConfig socketNetConfigFromEnv();

/// The table; its entries are noexcept and map failures to ncclResult_t.
const tucclNcclNet_v12_t& socketNetV12();

}  // namespace tuccl::net
