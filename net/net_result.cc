#include "net/net_result.h"

namespace tuccl::net {

ncclResult_t toResult(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::Ok: return ncclSuccess;
    case ErrorCode::InvalidArgument: return ncclInvalidArgument;
    case ErrorCode::InvalidInput: return ncclInvalidUsage;
    case ErrorCode::Internal:
    case ErrorCode::Unsupported: return ncclInternalError;
    default: return ncclSystemError;
  }
}

ncclResult_t report(const Status& status, const char* what) noexcept {
  if (status) return ncclSuccess;
  TUCCL_NET_WARN("TuCCL net: %s: %s", what, status.message().c_str());
  return toResult(status.code());
}

}  // namespace tuccl::net
