// Values users write as text on command lines and in files: byte sizes ("64K", "1MiB", "1.5M"),
// comma-separated lists, and ASCII case. One grammar each, shared by every tool and reader.
//
// Standard library only (the tuner plugin links it into its shared object).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace tuccl {

/// A byte count: digits with an optional fraction, then an optional binary unit — K, M, G or T
/// (powers of 1024), each optionally followed by "B" or "iB", or a bare "B"; case-insensitive.
/// "1048576", "64K", "64k", "1MiB", "512KB", "2G", "1.5M", "7B". The result must be a whole number
/// of bytes that fits in 64 bits. Fails with InvalidArgument naming the text.
Expected<uint64_t> parseByteSize(std::string_view text);
/// The largest unit that divides the count exactly: 1048576 -> "1M", 1536 -> "1536", 0 -> "0".
std::string formatByteSize(uint64_t bytes);

/// The items of a comma-separated list, each trimmed of blanks; empty items are dropped
/// ("a,,b " -> {"a", "b"}, "" -> {}).
std::vector<std::string> splitList(std::string_view text, char separator = ',');

/// ASCII case conversions and comparison (file spellings of vocabulary names: "allreduce",
/// "SIMPLE").
std::string toLowerCase(std::string_view text);
std::string toUpperCase(std::string_view text);
bool equalsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace tuccl
