// The process environment, read in one place. Every TuCCL setting (TUCCL_*, and the NCCL_*,
// launcher and toolchain variables TuCCL honours) is read through these functions; nothing else
// calls getenv.
//
// One rule for every variable: a variable set to the empty string is the same as one not set
// (`TUCCL_DEVICE= prog` runs with the default). Typed reads answer nullopt when the variable is
// not set, the value when it is valid, and InvalidArgument naming the variable, its value and
// what it accepts otherwise: "TUCCL_NCHANNELS='0': expected a whole number from 1 to 64".
// Names of choices match without regard to case.
//
// Standard library only (the plugins link it into their shared objects).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "support/status.h"

namespace tuccl::env {

/// The value of `name`; nullopt when it is unset or empty.
std::optional<std::string> text(const char* name);
/// Whether `name` is set to a non-empty value.
bool isSet(const char* name);
/// The first of `names` that is set (non-empty), as {name, value}: a TuCCL variable before the
/// NCCL one it stands for.
std::optional<std::pair<const char*, std::string>> firstOf(std::initializer_list<const char*> names);

/// InvalidArgument "NAME='value': expected ACCEPTED" — for readers with their own grammar.
Status invalid(const char* name, std::string_view value, std::string_view accepted);

/// A whole decimal number in [min, max].
Expected<std::optional<int64_t>> integer(const char* name, int64_t min, int64_t max);
/// A finite decimal number in [min, max].
Expected<std::optional<double>> number(const char* name, double min, double max);
/// A byte size (support/text_values.h: "64K", "1MiB") in [min, max].
Expected<std::optional<uint64_t>> byteSize(const char* name, uint64_t min, uint64_t max);
/// A switch: 1, true, yes or on; 0, false, no or off (any case).
Expected<std::optional<bool>> flag(const char* name);
/// One of `choices`, ignoring case; the answer is spelled as in `choices`.
Expected<std::optional<std::string>> choice(const char* name, std::initializer_list<std::string_view> choices);

}  // namespace tuccl::env
