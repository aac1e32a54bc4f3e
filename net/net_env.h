// The network layer's environment variables: every knob has a TUCCL_ name and the NCCL_ name it
// mirrors; the TUCCL_ one wins. Values that do not parse are warned about (net_log.h) and ignored.
#pragma once

#include <optional>
#include <string>

namespace tuccl::net {

/// The value of `tucclName`, else of `ncclName`; nullopt when both are unset or empty.
std::optional<std::string> envFirst(const char* tucclName, const char* ncclName);
/// A non-negative integer from envFirst, else `fallback` (warned about when the text is not one).
int envInt(const char* tucclName, const char* ncclName, int fallback);

}  // namespace tuccl::net
