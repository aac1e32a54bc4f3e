#include "lang/resccl.h"

#include "lang/resccl_interpreter.h"
#include "lang/resccl_lexer.h"
#include "lang/resccl_parser.h"

namespace tuccl {

Expected<Algorithm> compileResccl(const SourceText& source, const RescclOptions& options) {
  // The lexer, parser and interpreter unwind with DiagnosticError; it stops here.
  try {
    RescclProgram program = parseResccl(source, tokenizeResccl(source));
    return runResccl(program, source, options);
  } catch (const DiagnosticError& error) {
    return statusFromDiagnostic(error);
  }
}

}  // namespace tuccl
