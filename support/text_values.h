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

// Numbers a user gives, checked against the range the program can honour, with messages that state
// the range as people write it ("between 1 KiB and 1 GiB", "at least 1.01"): every size, count
// and factor read from a command line or a file goes through one of these.

/// A byte count for people: "512 B", "1 KiB", "1.5 MiB", "4 GiB" (binary units, at most three
/// decimals, trailing zeros dropped; "~" in front when rounded).
std::string formatBytesForPeople(uint64_t bytes);
/// A number for people: the shortest text that reads back as `value` ("1.01", "64", "1e+20");
/// large whole numbers with thousands separators ("1,048,576").
std::string formatNumberForPeople(double value);
/// "between MIN and MAX", or "at least MIN" / "at most MAX" when that side is unbounded, or
/// "exactly MIN"; the bounds already written for people.
std::string describeRange(const std::string& min, const std::string& max, bool noMin, bool noMax);

/// A byte size (parseByteSize's grammar) within [min, max]; InvalidArgument otherwise, e.g.
/// "'1' is out of range: must be between 1 KiB and 1 GiB".
Expected<uint64_t> parseByteSizeInRange(std::string_view text, uint64_t min, uint64_t max);
/// A whole decimal number (an optional sign, digits) within [min, max].
Expected<int64_t> parseIntegerInRange(std::string_view text, int64_t min, int64_t max);
/// A finite decimal number ("1.5", "2", "1e-3") within [min, max]: "nan", "inf" and trailing text
/// are refused.
Expected<double> parseNumberInRange(std::string_view text, double min, double max);
/// Whether a number already read lies in [min, max] (and is finite); InvalidArgument naming
/// `what` otherwise, e.g. "the size factor 1.0000001 is out of range: must be at least 1.01".
Status checkNumberInRange(std::string_view what, double value, double min, double max);

/// The items of a comma-separated list, each trimmed of blanks; empty items are dropped
/// ("a,,b " -> {"a", "b"}, "" -> {}).
std::vector<std::string> splitList(std::string_view text, char separator = ',');
/// splitList, refusing an empty list and an item given twice (case-insensitively): InvalidArgument
/// "'allreduce' is listed twice" / "the list is empty".
Expected<std::vector<std::string>> splitDistinctList(std::string_view text, char separator = ',');

/// ASCII case conversions and comparison (file spellings of vocabulary names: "allreduce",
/// "SIMPLE").
std::string toLowerCase(std::string_view text);
std::string toUpperCase(std::string_view text);
bool equalsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace tuccl
