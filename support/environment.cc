#include "support/environment.h"

#include <cstdlib>

#include "support/text_values.h"

namespace tuccl::env {
namespace {

// "a whole number from 1 to 64"; "a byte size from 1M to 1T".
std::string rangeText(const char* what, const std::string& low, const std::string& high) {
  return std::string(what) + " from " + low + " to " + high;
}

std::string numberText(double value) {
  std::string text = std::to_string(value);
  while (!text.empty() && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

}  // namespace

std::optional<std::string> text(const char* name) {
  const char* value = std::getenv(name);  // the one read of the environment in TuCCL
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool isSet(const char* name) { return text(name).has_value(); }

std::optional<std::pair<const char*, std::string>> firstOf(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (std::optional<std::string> value = text(name)) return std::make_pair(name, std::move(*value));
  }
  return std::nullopt;
}

Status invalid(const char* name, std::string_view value, std::string_view accepted) {
  return makeError(ErrorCode::InvalidArgument,
                   std::string(name) + "='" + std::string(value) + "': expected " + std::string(accepted));
}

Expected<std::optional<int64_t>> integer(const char* name, int64_t min, int64_t max) {
  const std::optional<std::string> value = text(name);
  if (!value) return std::optional<int64_t>();
  Expected<int64_t> parsed = parseIntegerInRange(*value, min, max);
  if (!parsed) {
    return invalid(name, *value,
                   rangeText("a whole number", std::to_string(min), std::to_string(max)));
  }
  return std::optional<int64_t>(*parsed);
}

Expected<std::optional<double>> number(const char* name, double min, double max) {
  const std::optional<std::string> value = text(name);
  if (!value) return std::optional<double>();
  Expected<double> parsed = parseNumberInRange(*value, min, max);
  if (!parsed) return invalid(name, *value, rangeText("a number", numberText(min), numberText(max)));
  return std::optional<double>(*parsed);
}

Expected<std::optional<uint64_t>> byteSize(const char* name, uint64_t min, uint64_t max) {
  const std::optional<std::string> value = text(name);
  if (!value) return std::optional<uint64_t>();
  Expected<uint64_t> parsed = parseByteSizeInRange(*value, min, max);
  if (!parsed) {
    return invalid(name, *value,
                   rangeText("a byte size", formatByteSize(min), formatByteSize(max)));
  }
  return std::optional<uint64_t>(*parsed);
}

Expected<std::optional<bool>> flag(const char* name) {
  const std::optional<std::string> value = text(name);
  if (!value) return std::optional<bool>();
  for (const char* yes : {"1", "true", "yes", "on"}) {
    if (equalsIgnoreCase(*value, yes)) return std::optional<bool>(true);
  }
  for (const char* no : {"0", "false", "no", "off"}) {
    if (equalsIgnoreCase(*value, no)) return std::optional<bool>(false);
  }
  return invalid(name, *value, "1, true, yes or on; 0, false, no or off");
}

Expected<std::optional<std::string>> choice(const char* name, std::initializer_list<std::string_view> choices) {
  const std::optional<std::string> value = text(name);
  if (!value) return std::optional<std::string>();
  std::string accepted;
  size_t i = 0;
  for (std::string_view candidate : choices) {
    if (equalsIgnoreCase(*value, candidate)) return std::optional<std::string>(std::string(candidate));
    accepted += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::string(candidate);
    ++i;
  }
  return invalid(name, *value, accepted);
}

}  // namespace tuccl::env
