// JSON text of a user file, parsed with nlohmann/json (header-only), a syntax error reported at
// file:line:col. Every reader of a JSON format (plans, topologies, cost models, search spaces)
// starts here.
#pragma once

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "support/source_text.h"
#include "support/status.h"

namespace tuccl {

/// The document, or an InvalidInput status "not valid JSON: syntax error ..." at the offending
/// character of `source`.
template <typename Json = nlohmann::json>
Expected<Json> parseJsonText(const SourceText& source) {
  try {
    return Json::parse(source.text());
  } catch (const typename Json::parse_error& error) {
    // nlohmann counts bytes from 1 and points just past the offending character.
    const size_t offset = std::min<size_t>(error.byte > 0 ? error.byte - 1 : 0, source.text().size());
    std::string message = error.what();
    if (const size_t at = message.find("syntax error"); at != std::string::npos) message = message.substr(at);
    return makeError(ErrorCode::InvalidInput, source.name(), source.locationOf(offset), "not valid JSON: " + message);
  }
}

}  // namespace tuccl
