#include "lang/resccl.h"

#include "lang/resccl_interpreter.h"
#include "lang/resccl_lexer.h"
#include "lang/resccl_parser.h"

namespace tuccl {

Algorithm compileResccl(const SourceText& source, const RescclOptions& options) {
  RescclProgram program = parseResccl(source, tokenizeResccl(source));
  return runResccl(program, source, options);
}

}  // namespace tuccl
