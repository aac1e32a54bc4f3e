// One way to fail: a Status (or an Expected<T>, a value or a Status) carrying an error code and a
// Diagnostic. Everything a user can cause (a bad file, a bad option, a refused request) comes
// back this way; exceptions are for bugs and stay inside a component. At a C ABI (tuccl.h, the
// plugins) one switch maps ErrorCode to the ABI's result code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "support/source_text.h"

namespace tuccl {

enum class ErrorCode : uint8_t {
  Ok = 0,
  InvalidArgument,  ///< a value the caller passed is out of range or malformed
  InvalidInput,     ///< a file or text the user wrote is malformed (the diagnostic says where)
  NotFound,         ///< a file, preset, entry or symbol does not exist
  IoError,          ///< reading or writing failed
  Unsupported,      ///< well-formed but not something this build can do
  Timeout,          ///< a bounded wait expired
  SystemError,      ///< the OS or a driver refused
  Internal,         ///< a TuCCL bug caught at run time
  RemoteError,      ///< a peer rank failed, disagreed or went away
  Aborted,          ///< stopped by an abort (tucclCommAbort, or a peer that gave up)
  ResourceExhausted,  ///< memory, shared memory or a size limit ran out
};

/// "ok", "invalid argument", "invalid input", ...
std::string_view errorCodeName(ErrorCode code);

/// Success, or an error code with a diagnostic.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, Diagnostic diagnostic) : code_(code), diagnostic_(std::move(diagnostic)) {}

  bool ok() const { return code_ == ErrorCode::Ok; }
  explicit operator bool() const { return ok(); }
  ErrorCode code() const { return code_; }
  const Diagnostic& diagnostic() const { return diagnostic_; }
  const std::string& message() const { return diagnostic_.message; }
  /// `file:line:col: error: message` (formatDiagnostic without source), or "ok".
  std::string toString() const;

 private:
  ErrorCode code_ = ErrorCode::Ok;
  Diagnostic diagnostic_;
};

/// An error with only a message (no file): `field` or the caller's context goes into the message.
Status makeError(ErrorCode code, std::string message);
/// An error at a place in a file.
Status makeError(ErrorCode code, std::string file, SourceLoc loc, std::string message);
/// The Status of a caught DiagnosticError.
Status statusFromDiagnostic(const DiagnosticError& error, ErrorCode code = ErrorCode::InvalidInput);

/// Throws StatusError carrying `status`: what reading the value of an error Expected does.
[[noreturn]] void throwStatusError(const Status& status);

/// A value, or the Status saying why there is none (std::expected's shape, in C++20). Reading the
/// value of an error throws StatusError with the error's message.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : state_(std::in_place_index<1>, std::move(status)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    if (!ok()) throwStatusError(std::get<1>(state_));
    return std::get<0>(state_);
  }
  const T& value() const& {
    if (!ok()) throwStatusError(std::get<1>(state_));
    return std::get<0>(state_);
  }
  T&& value() && {
    if (!ok()) throwStatusError(std::get<1>(state_));
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  /// The error; an ok Status when there is a value.
  Status status() const { return ok() ? Status() : std::get<1>(state_); }
  const Diagnostic& diagnostic() const { return std::get<1>(state_).diagnostic(); }

 private:
  std::variant<T, Status> state_;
};

/// A Status in flight: for code inside a component that unwinds to its boundary, where it is
/// caught and returned as the Status it carries. A DiagnosticError, so readers that catch those
/// still see the diagnostic.
class StatusError : public DiagnosticError {
 public:
  explicit StatusError(Status status);
  const Status& status() const { return status_; }

 private:
  Status status_;
};

/// Throws StatusError carrying the status when it is an error; no-op when ok.
void throwIfError(const Status& status);

}  // namespace tuccl
