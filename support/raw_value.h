// The value a C caller passed for an enum parameter, read as the int it is: a C caller may pass
// any int, and loading it as the enum would be undefined where it names no enumerator. Used by
// libtuccl's C API and the NCCL drop-in, which take enums from C callers.
#pragma once

#include <cstring>

namespace tuccl {

template <typename Enum>
int rawValue(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int));
  int raw = 0;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

}  // namespace tuccl
