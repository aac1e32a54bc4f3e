// The one mapping from Status to ncclResult_t at the net table's entries, and the guard that
// keeps C++ exceptions (out of memory, a bug) from crossing the ABI.
#pragma once

#include <new>

#include "net/net_log.h"
#include "support/status.h"
#include "tuccl/nccl_net.h"

namespace tuccl::net {

/// InvalidArgument → ncclInvalidArgument, InvalidInput → ncclInvalidUsage, Internal/Unsupported
/// → ncclInternalError, anything else (the OS, the network, a peer) → ncclSystemError.
ncclResult_t toResult(ErrorCode code) noexcept;

/// ncclSuccess for an ok status; otherwise WARNs "<what>: <message>" and maps the code.
ncclResult_t report(const Status& status, const char* what) noexcept;

/// Runs `body` (returning ncclResult_t), turning an escaping exception into an error code.
template <typename Body>
ncclResult_t guarded(const char* what, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    TUCCL_NET_WARN("TuCCL net: %s: out of memory", what);
    return ncclSystemError;
  } catch (...) {
    TUCCL_NET_WARN("TuCCL net: %s: internal error", what);
    return ncclInternalError;
  }
}

}  // namespace tuccl::net
