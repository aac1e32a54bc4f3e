#include "support/hash.h"

#include <cstdio>

namespace tuccl {

uint64_t fnv1a64(std::string_view bytes, uint64_t hash) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ull;  // the FNV-1a 64 prime
  }
  return hash;
}

std::string formatHash(uint64_t hash) { return "0x" + hashFileName(hash); }

std::string hashFileName(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace tuccl
