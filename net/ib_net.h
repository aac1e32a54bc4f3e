// TuCCL's verbs network: the ncclNet v12 function table over RDMA (InfiniBand or RoCE, RC queue
// pairs, data by RDMA WRITE WITH IMMEDIATE into the receiver's posted buffers; protocol in
// ib_protocol.h), the second implementation beside socket_net.h.
//
// Devices: every active port of every RDMA device (ib_devices.h; TUCCL_IB_HCA / NCCL_IB_HCA).
// libibverbs is loaded with dlopen at the first call; without it, or without a device,
// devices() reports 0 and init fails, the reason logged once. Connection setup goes over a TCP
// socket on the interface the socket transport would use (TUCCL_/NCCL_SOCKET_IFNAME): the
// handle carries its address, the sender's queue-pair numbers, GID/LID and control-block key go
// one way, the receiver's the other, then a one-byte "ready" from the sender. connect/accept
// never block: they return a null comm until the exchange is through. The socket stays open for
// the comm's life and tells a receiver whose sender died.
#pragma once

#include <string>

#include "tuccl/nccl_net.h"

namespace tuccl::net {

/// The table ("TuCCL-IB"); its entries are noexcept and map failures to ncclResult_t.
const tucclNcclNet_v12_t& ibNetV12();

/// Why the verbs network has no device; empty when it has at least one. Finds the devices on
/// the first call.
const std::string& ibUnavailableReason();

}  // namespace tuccl::net
