// The ResCCLang syntax tree, laid out for a fast interpreter.
//
// In:  built by the parser (lang/resccl_parser.h).
// Out: read by the interpreter (lang/resccl_interpreter.h).
//
// Expressions, statements and blocks live in flat arrays and refer to each other by index;
// variables are resolved to integer slots at parse time, so running a program touches no maps
// and allocates nothing but the operations it produces.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lang/algorithm.h"
#include "support/source_text.h"

namespace tuccl {

inline constexpr int32_t kNoNode = -1;

enum class ExprOp : uint8_t {
  Integer,   ///< value
  Variable,  ///< value = slot
  Negate,
  Not,
  Add,
  Subtract,
  Multiply,
  FloorDivide,  ///< '/' and '//': Python's floor division
  Modulo,       ///< Python's modulo: the result has the sign of the divisor
  Equal,
  NotEqual,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  And,  ///< Python's 'and': the left value when it is 0, else the right value
  Or,   ///< Python's 'or': the left value when it is not 0, else the right value
};

struct Expr {
  ExprOp op = ExprOp::Integer;
  int32_t lhs = kNoNode;  ///< operand of unary operators, left operand of binary ones
  int32_t rhs = kNoNode;
  int64_t value = 0;  ///< Integer: the literal; Variable: the slot
  SourceLoc loc;      ///< the operator (binary), or the token (leaves)
  SourceLoc start;    ///< the expression's first token, where argument errors point
};

enum class StmtKind : uint8_t { Assign, For, If, Transfer, Pass };

/// Optional transfer() keyword arguments (extensions, docs/resccl-language.md).
enum class BufferChoice : uint8_t { Default, Input, Output, Scratch };

struct Stmt {
  StmtKind kind = StmtKind::Pass;
  SourceLoc loc;           ///< the first token (the 'transfer' / 'for' / 'if' keyword, the target name)
  int32_t slot = kNoNode;  ///< Assign: target; For: loop variable
  /// Assign: {value}. For: {start, stop, step} (unused ones kNoNode). If: {condition}.
  /// Transfer: {src, dst, step, chunk, dstChunk, count} (the last two may be kNoNode).
  int32_t args[6] = {kNoNode, kNoNode, kNoNode, kNoNode, kNoNode, kNoNode};
  int32_t body = kNoNode;        ///< For, If: the block run
  int32_t elseBody = kNoNode;    ///< If: the else block (an elif is an If inside it)
  OpKind opKind = OpKind::Copy;  ///< Transfer: recv = Copy, rrc = Reduce
  BufferChoice srcBuffer = BufferChoice::Default;
  BufferChoice dstBuffer = BufferChoice::Default;
  SourceLoc rangeLoc;  ///< For: the 'range' token
};

struct Block {
  std::vector<int32_t> statements;  ///< indices into RescclProgram::statements
};

/// The parameters a header may name: the paper's (Figure 14) and TuCCL's extensions.
struct HeaderParamInfo {
  std::string_view name;
  bool isString;
  bool extension;
};
inline constexpr HeaderParamInfo kHeaderParams[] = {
    {"nRanks", false, false},     {"nChannels", false, false}, {"nWarps", false, false},
    {"AlgoName", true, false},    {"OpType", true, false},     {"GPUPerNode", false, false},
    {"NICPerNode", false, false}, {"nChunks", false, true},    {"Root", false, true},
    {"nScratch", false, true},    {"InPlace", false, true},
};

/// One `name=value` of the header `def ResCCLAlgo(...)`.
struct HeaderParam {
  std::string name;
  SourceLoc nameLoc;
  SourceLoc valueLoc;
  bool isString = false;
  int64_t integer = 0;
  std::string string;
};

struct RescclProgram {
  SourceLoc headerLoc;  ///< the 'ResCCLAlgo' name
  std::vector<HeaderParam> header;
  std::vector<Expr> exprs;
  std::vector<Stmt> statements;
  std::vector<Block> blocks;
  int32_t body = kNoNode;              ///< the top-level block
  std::vector<std::string> slotNames;  ///< variable slot -> name
  int64_t transferCount = 0;           ///< transfer() statements in the text (not executions)
};

}  // namespace tuccl
