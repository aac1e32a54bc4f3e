#include "support/status.h"

namespace tuccl {

std::string_view errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::Ok: return "ok";
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::InvalidInput: return "invalid input";
    case ErrorCode::NotFound: return "not found";
    case ErrorCode::IoError: return "i/o error";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::SystemError: return "system error";
    case ErrorCode::Internal: return "internal error";
    case ErrorCode::RemoteError: return "remote error";
    case ErrorCode::Aborted: return "aborted";
    case ErrorCode::ResourceExhausted: return "resource exhausted";
  }
  return "?";
}

std::string Status::toString() const {
  if (ok()) return "ok";
  return formatDiagnostic(diagnostic_, nullptr);
}

Status makeError(ErrorCode code, std::string message) {
  Diagnostic diagnostic;
  diagnostic.message = std::move(message);
  return Status(code, std::move(diagnostic));
}

Status makeError(ErrorCode code, std::string file, SourceLoc loc, std::string message) {
  return Status(code, Diagnostic{Severity::Error, std::move(file), loc, std::move(message)});
}

Status statusFromDiagnostic(const DiagnosticError& error, ErrorCode code) { return Status(code, error.diagnostic()); }

StatusError::StatusError(Status status) : DiagnosticError(status.diagnostic()), status_(std::move(status)) {}

void throwStatusError(const Status& status) { throw StatusError(status); }

void throwIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

}  // namespace tuccl
