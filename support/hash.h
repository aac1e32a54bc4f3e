// Content hashes: FNV-1a 64, the one hash TuCCL uses to name content (table files, cached plans
// and kernels). Not cryptographic: it detects changes and corruption, not tampering.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tuccl {

inline constexpr uint64_t kFnv1a64OffsetBasis = 0xcbf29ce484222325ull;

/// FNV-1a 64 of the bytes; `hash` continues a previous result, so parts can be hashed in turn.
uint64_t fnv1a64(std::string_view bytes, uint64_t hash = kFnv1a64OffsetBasis);
/// "0x" and 16 hex digits.
std::string formatHash(uint64_t hash);
/// 16 hex digits, no prefix: the hash as a file name.
std::string hashFileName(uint64_t hash);

}  // namespace tuccl
