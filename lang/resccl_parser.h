// The ResCCLang parser: tokens to a RescclProgram (lang/resccl_ast.h).
//
// In:  a ResCCLang program (ResCCL Appendix B, Figure 14, plus the extensions documented in
//      docs/resccl-language.md).
// Out: the header parameters and the body as flat expression / statement / block arrays with
//      variables resolved to slots; or a DiagnosticError at the first syntax error, naming what
//      was expected and what was found.
//
// Nesting is bounded (kMaxBlockDepth, kMaxExprDepth) so no input can exhaust the stack of the
// parser or of the interpreter.
#pragma once

#include <vector>

#include "lang/resccl_ast.h"
#include "lang/resccl_lexer.h"
#include "support/source_text.h"

namespace tuccl {

inline constexpr int kMaxBlockDepth = 100;  ///< nested for / if blocks
inline constexpr int kMaxExprDepth = 200;   ///< operators and parentheses in one expression

/// Parses a token list produced by tokenizeResccl(source).
RescclProgram parseResccl(const SourceText& source, const std::vector<Token>& tokens);

/// Tokenises and parses.
RescclProgram parseResccl(const SourceText& source);

}  // namespace tuccl
