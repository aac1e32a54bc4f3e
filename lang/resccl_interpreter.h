// The ResCCLang interpreter: runs a parsed program and collects the operations it emits.
//
// In:  a RescclProgram (lang/resccl_parser.h), the source it came from, and RescclOptions
//      (header parameter overrides, limits).
// Out: the Algorithm: the collective and buffer sizes from the header, one Operation per executed
//      transfer() call; or a DiagnosticError at the first evaluation error (unknown name, division
//      by zero, overflow, rank/chunk/step out of range at the offending argument, a limit hit).
#pragma once

#include "lang/algorithm.h"
#include "lang/resccl.h"
#include "lang/resccl_ast.h"
#include "support/source_text.h"

namespace tuccl {

Algorithm runResccl(const RescclProgram& program, const SourceText& source, const RescclOptions& options);

}  // namespace tuccl
