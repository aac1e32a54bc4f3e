// Which network the NCCL plugin and libtuccl use: the verbs one (ib_net.h) or the socket one
// (socket_net.h), as NCCL chooses between its internal IB and Socket transports.
//
// TUCCL_NET = IB | Socket (any case) forces one; an other value is an error. Else NCCL_NET = IB |
// Socket does (other NCCL_NET values name a plugin to NCCL — "TuCCL" for this one — and leave
// the choice automatic). Automatic: IB when it has at least one device, else sockets. IB forced
// with no device is an error naming why (no libibverbs, no device, no active port).
//
// The decision is made once per process, at the first init or devices call (after init has
// handed over NCCL's logger), and logged; the combined table forwards every entry to the chosen
// network's table from then on.
#pragma once

#include <optional>
#include <string_view>

#include "support/status.h"
#include "tuccl/nccl_net.h"

namespace tuccl::net {

enum class NetTransport { Ib, Socket };

/// "IB" / "Socket" in either name's variable; nullopt when the text names neither and
/// `strict` is false (NCCL_NET), InvalidArgument naming `variable` when `strict` (TUCCL_NET).
Expected<std::optional<NetTransport>> parseNetChoice(std::string_view text, const char* variable, bool strict);

/// The decision: `forced` (by the variable `forcedBy`) if set — IB with no device is InvalidInput
/// naming the variable and `ibReason` — else IB when `ibDevices` ≥ 1, else Socket.
Expected<NetTransport> chooseNet(std::optional<NetTransport> forced, std::string_view forcedBy, int ibDevices,
                                 std::string_view ibReason);

/// The chosen network's table, deciding on the first call; the error when the environment asks
/// for something that cannot be had.
Expected<const tucclNcclNet_v12_t*> selectedNet();

/// The combined table ("TuCCL"): init and devices decide (selectedNet) and report a failed
/// decision as ncclInvalidUsage; every entry forwards to the chosen table. makeVDevice (NIC
/// fusion, the socket network's) is there only when the environment at the first call forces
/// sockets (TUCCL_NET or NCCL_NET = Socket): the verbs network does not fuse devices, and NCCL
/// would ask a non-NULL entry to merge every multi-port NIC.
const tucclNcclNet_v12_t& selectedNetV12();

}  // namespace tuccl::net
