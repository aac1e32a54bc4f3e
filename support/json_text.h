// JSON text of a user file, parsed with nlohmann/json (header-only), a syntax error reported at
// file:line:col. Every reader of a JSON format (plans, topologies, cost models, search spaces)
// starts here.
#pragma once

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "support/source_text.h"
#include "support/status.h"

namespace tuccl {

/// A JSON library error as a user reads it: without nlohmann's "[json.exception.type_error.302] "
/// tag, e.g. "type must be number, but is string".
inline std::string jsonErrorMessage(const std::exception& error) {
  std::string message = error.what();
  if (message.rfind("[json.exception.", 0) == 0) {
    if (const size_t end = message.find("] "); end != std::string::npos) message.erase(0, end + 2);
  }
  return message;
}

/// The document, or an InvalidInput status "not valid JSON: syntax error ..." at the offending
/// character of `source` ("not valid JSON: number overflow parsing '1e999'" for a number no double
/// holds, which nlohmann reports without a position).
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
  } catch (const typename Json::out_of_range& error) {
    return makeError(ErrorCode::InvalidInput, source.name(), SourceLoc{}, "not valid JSON: " + jsonErrorMessage(error));
  }
}

/// Interprets a parsed document of `source` with `interpret`: what it throws as a JSON library
/// error (a value of the wrong type, a missing key) or as std::invalid_argument / std::out_of_range
/// becomes an InvalidInput status naming the file, so no reader of a JSON format prints a bare
/// library message.
template <typename Interpret>
auto interpretJson(const SourceText& source, Interpret&& interpret) -> Expected<decltype(interpret())> {
  try {
    return interpret();
  } catch (const nlohmann::json::exception& error) {
    return makeError(ErrorCode::InvalidInput, source.name(), SourceLoc{}, jsonErrorMessage(error));
  } catch (const std::invalid_argument& error) {
    return makeError(ErrorCode::InvalidInput, source.name(), SourceLoc{}, error.what());
  } catch (const std::out_of_range& error) {
    return makeError(ErrorCode::InvalidInput, source.name(), SourceLoc{}, error.what());
  }
}

}  // namespace tuccl
