#include "lang/resccl_parser.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace tuccl {

namespace {

// Python keywords ResCCLang does not have: a clearer message than "expected '='".
constexpr std::string_view kUnsupportedWords[] = {"while", "break",  "continue", "return", "import", "from",
                                                  "class", "lambda", "with",     "try",    "global", "is"};

class Parser {
 public:
  Parser(const SourceText& source, const std::vector<Token>& tokens) : source_(source), tokens_(tokens) {}

  RescclProgram run() {
    if (tokens_.empty() || tokens_.back().kind != TokenKind::EndOfFile) {
      fail(SourceLoc{}, "internal error: the token list does not end with end of file");
    }
    parseHeader();
    program_.body = parseSuite("the algorithm header", program_.headerLoc);
    if (peek().kind != TokenKind::EndOfFile) {
      fail(peek().loc,
           "unexpected " + describeToken(peek()) +
               " after the algorithm body; statements of the algorithm must be indented under its header");
    }
    return std::move(program_);
  }

 private:
  // ---- Tokens -------------------------------------------------------------------------------

  const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool at(TokenKind kind) const { return peek().kind == kind; }
  const Token& advance() {
    const Token& token = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return token;
  }
  bool accept(TokenKind kind) {
    if (!at(kind)) return false;
    advance();
    return true;
  }
  const Token& expect(TokenKind kind, std::string_view what) {
    if (!at(kind)) {
      fail(peek().loc, "expected '" + std::string(tokenKindSpelling(kind)) + "' " + std::string(what) +
                           ", found " + describeToken(peek()));
    }
    return advance();
  }

  [[noreturn]] void fail(SourceLoc loc, std::string message) const {
    throw DiagnosticError(Diagnostic{Severity::Error, source_.name(), loc, std::move(message)});
  }

  // ---- Header -------------------------------------------------------------------------------

  void parseHeader() {
    if (at(TokenKind::Indent)) fail(peek().loc, "unexpected indent before the algorithm header");
    bool hasDef = accept(TokenKind::KwDef);
    const Token& name = peek();
    if (name.kind != TokenKind::Name || name.text != "ResCCLAlgo") {
      fail(name.loc, std::string("expected the algorithm header ") + (hasDef ? "" : "'def' ") +
                         "'ResCCLAlgo(nRanks=..., OpType=..., ...):', found " + describeToken(name));
    }
    program_.headerLoc = name.loc;
    advance();
    expect(TokenKind::LParen, "after 'ResCCLAlgo'");
    while (!at(TokenKind::RParen)) {
      parseHeaderParam();
      if (!accept(TokenKind::Comma)) break;
    }
    expect(TokenKind::RParen, "after the header parameters");
    expect(TokenKind::Colon, "after the algorithm header");
  }

  void parseHeaderParam() {
    const Token& name = peek();
    if (name.kind != TokenKind::Name) {
      fail(name.loc, "expected a header parameter name (nRanks, OpType, ...), found " + describeToken(name));
    }
    const HeaderParamInfo* info = nullptr;
    for (const HeaderParamInfo& candidate : kHeaderParams) {
      if (candidate.name == name.text) info = &candidate;
    }
    if (info == nullptr) {
      std::string known;
      for (const HeaderParamInfo& candidate : kHeaderParams) {
        known += known.empty() ? "" : ", ";
        known += candidate.name;
      }
      fail(name.loc, "unknown header parameter '" + name.text + "' (known: " + known + ")");
    }
    for (const HeaderParam& previous : program_.header) {
      if (previous.name == name.text) {
        fail(name.loc, "duplicate header parameter '" + name.text + "' (first given at line " +
                           std::to_string(previous.nameLoc.line) + ", column " +
                           std::to_string(previous.nameLoc.column) + ")");
      }
    }
    HeaderParam param;
    param.name = name.text;
    param.nameLoc = name.loc;
    advance();
    expect(TokenKind::Assign, "after the header parameter '" + param.name + "'");
    param.valueLoc = peek().loc;
    if (at(TokenKind::String)) {
      param.isString = true;
      param.string = advance().text;
    } else {
      bool negative = false;
      if (accept(TokenKind::Minus)) {
        negative = true;
      } else {
        accept(TokenKind::Plus);
      }
      if (!at(TokenKind::Integer)) {
        fail(peek().loc, std::string("expected ") + (info->isString ? "a string" : "an integer") +
                             " value for the header parameter '" + param.name + "', found " +
                             describeToken(peek()));
      }
      param.integer = negative ? -advance().value : advance().value;
    }
    if (param.isString != info->isString) {
      fail(param.valueLoc, "header parameter '" + param.name + "' takes " +
                               (info->isString ? "a string (in quotes)" : "an integer") + ", found " +
                               (param.isString ? "a string" : "an integer"));
    }
    program_.header.push_back(std::move(param));
  }

  // ---- Blocks and statements ----------------------------------------------------------------

  int32_t newBlock() {
    program_.blocks.emplace_back();
    return static_cast<int32_t>(program_.blocks.size() - 1);
  }

  int32_t addStatement(int32_t block, Stmt stmt) {
    program_.statements.push_back(stmt);
    int32_t index = static_cast<int32_t>(program_.statements.size() - 1);
    program_.blocks[block].statements.push_back(index);
    return index;
  }

  // After a ':': either simple statements on the same line, or NEWLINE INDENT statements DEDENT.
  int32_t parseSuite(std::string_view after, SourceLoc owner) {
    int32_t block = newBlock();
    if (++blockDepth_ > kMaxBlockDepth) {
      fail(owner, "blocks are nested too deeply (more than " + std::to_string(kMaxBlockDepth) + " levels)");
    }
    if (accept(TokenKind::Newline)) {
      if (!at(TokenKind::Indent)) {
        fail(peek().loc,
             "expected an indented block after " + std::string(after) + ", found " + describeToken(peek()));
      }
      advance();
      while (!at(TokenKind::Dedent) && !at(TokenKind::EndOfFile)) parseStatement(block);
      accept(TokenKind::Dedent);
    } else {
      parseSimpleLine(block);
    }
    --blockDepth_;
    return block;
  }

  void parseStatement(int32_t block) {
    switch (peek().kind) {
      case TokenKind::KwFor:
        return parseFor(block);
      case TokenKind::KwIf:
        return parseIf(block);
      case TokenKind::Indent:
        fail(peek().loc, "unexpected indent");
      case TokenKind::KwElif:
      case TokenKind::KwElse:
        fail(peek().loc, "'" + std::string(tokenKindSpelling(peek().kind)) + "' without a matching 'if'");
      default:
        return parseSimpleLine(block);
    }
  }

  // simple (';' simple)* [';'] NEWLINE
  void parseSimpleLine(int32_t block) {
    parseSimpleStatement(block);
    while (accept(TokenKind::Semicolon)) {
      if (at(TokenKind::Newline)) break;
      parseSimpleStatement(block);
    }
    if (!accept(TokenKind::Newline)) {
      fail(peek().loc, "expected the end of the line after the statement, found " + describeToken(peek()));
    }
  }

  void parseSimpleStatement(int32_t block) {
    const Token& first = peek();
    if (first.kind == TokenKind::KwPass) {
      advance();
      Stmt stmt;
      stmt.kind = StmtKind::Pass;
      stmt.loc = first.loc;
      addStatement(block, stmt);
      return;
    }
    if (first.kind == TokenKind::KwDef) fail(first.loc, "nested 'def' is not supported");
    if (first.kind == TokenKind::KwFor || first.kind == TokenKind::KwIf) {
      fail(first.loc, "'" + std::string(tokenKindSpelling(first.kind)) +
                          "' must start its own line (it cannot follow ':' or ';' on the same line)");
    }
    if (first.kind != TokenKind::Name) fail(first.loc, "expected a statement, found " + describeToken(first));
    for (std::string_view word : kUnsupportedWords) {
      if (first.text == word) fail(first.loc, "'" + first.text + "' is not supported in ResCCLang");
    }
    const Token& second = peek(1);
    if (second.kind == TokenKind::Assign) return parseAssign(block);
    if (second.kind == TokenKind::LParen) {
      if (first.text == "transfer") return parseTransfer(block);
      fail(first.loc, "unknown function '" + first.text + "'; the only statement call is transfer()");
    }
    fail(second.loc, "expected '=' after the name '" + first.text + "', found " + describeToken(second));
  }

  void parseAssign(int32_t block) {
    const Token& target = advance();
    advance();  // '='
    Stmt stmt;
    stmt.kind = StmtKind::Assign;
    stmt.loc = target.loc;
    stmt.slot = slotOf(target.text);
    stmt.args[0] = parseExpression();
    if (at(TokenKind::Assign)) fail(peek().loc, "chained assignment 'a = b = c' is not supported");
    addStatement(block, stmt);
  }

  void parseFor(int32_t block) {
    Stmt stmt;
    stmt.kind = StmtKind::For;
    stmt.loc = advance().loc;
    const Token& var = peek();
    if (var.kind != TokenKind::Name)
      fail(var.loc, "expected a loop variable name after 'for', found " + describeToken(var));
    advance();
    stmt.slot = slotOf(var.text);
    expect(TokenKind::KwIn, "after the loop variable '" + var.text + "'");
    const Token& range = peek();
    if (range.kind != TokenKind::Name || range.text != "range") {
      fail(range.loc, "expected 'range(...)' after 'in', found " + describeToken(range));
    }
    stmt.rangeLoc = range.loc;
    advance();
    expect(TokenKind::LParen, "after 'range'");
    int count = 0;
    while (!at(TokenKind::RParen)) {
      if (at(TokenKind::Name) && peek(1).kind == TokenKind::Assign) {
        fail(peek().loc, "range() takes no keyword arguments");
      }
      int32_t expr = parseExpression();
      if (count == 3)
        fail(program_.exprs[expr].start, "range() takes at most 3 arguments (start, stop, step)");
      stmt.args[count++] = expr;
      if (!accept(TokenKind::Comma)) break;
    }
    expect(TokenKind::RParen, "after the arguments of range()");
    if (count == 0) fail(range.loc, "range() needs at least 1 argument (stop), or (start, stop[, step])");
    if (count == 1) std::swap(stmt.args[0], stmt.args[1]);  // range(stop): start = 0
    expect(TokenKind::Colon, "after 'for ... in range(...)'");
    stmt.body = parseSuite("'for'", stmt.loc);
    addStatement(block, stmt);
  }

  void parseIf(int32_t block) {
    Stmt stmt;
    stmt.kind = StmtKind::If;
    stmt.loc = advance().loc;
    stmt.args[0] = parseExpression();
    expect(TokenKind::Colon, "after the condition of 'if'");
    stmt.body = parseSuite("'if'", stmt.loc);
    int32_t index = addStatement(block, stmt);
    // elif: an If alone in the else block of the previous one.
    while (at(TokenKind::KwElif) || at(TokenKind::KwElse)) {
      const Token& keyword = advance();
      if (keyword.kind == TokenKind::KwElse) {
        expect(TokenKind::Colon, "after 'else'");
        int32_t body = parseSuite("'else'", keyword.loc);
        program_.statements[index].elseBody = body;
        return;
      }
      int32_t elseBlock = newBlock();
      program_.statements[index].elseBody = elseBlock;
      Stmt elif;
      elif.kind = StmtKind::If;
      elif.loc = keyword.loc;
      elif.args[0] = parseExpression();
      expect(TokenKind::Colon, "after the condition of 'elif'");
      elif.body = parseSuite("'elif'", keyword.loc);
      index = addStatement(elseBlock, elif);
    }
  }

  void parseTransfer(int32_t block) {
    Stmt stmt;
    stmt.kind = StmtKind::Transfer;
    stmt.loc = advance().loc;
    advance();  // '('
    static constexpr std::string_view kPositional[] = {"source rank", "destination rank", "step", "chunk id",
                                                       "communication type"};
    int positional = 0;
    bool sawKeyword = false;
    bool sawCommType = false;
    while (!at(TokenKind::RParen)) {
      const Token& token = peek();
      if (token.kind == TokenKind::Name && peek(1).kind == TokenKind::Assign) {
        sawKeyword = true;
        parseTransferKeyword(stmt);
      } else {
        if (sawKeyword) fail(token.loc, "positional argument of transfer() after a keyword argument");
        if (positional == 5) {
          fail(token.loc,
               "transfer() takes 5 positional arguments (src, dst, step, chunk, recv|rrc); this is a 6th");
        }
        if (positional == 4) {
          stmt.opKind = parseCommType();
          sawCommType = true;
        } else {
          if (token.kind == TokenKind::Name && (token.text == "recv" || token.text == "rrc") &&
              (peek(1).kind == TokenKind::RParen || peek(1).kind == TokenKind::Comma)) {
            fail(token.loc, "transfer() is missing its " + std::string(kPositional[positional]) +
                                " argument before the communication type " + token.text +
                                "; it takes (src, dst, step, chunk, recv|rrc)");
          }
          stmt.args[positional] = parseExpression();
        }
        ++positional;
      }
      if (!accept(TokenKind::Comma)) break;
    }
    if (!at(TokenKind::RParen)) {
      fail(peek().loc, "expected ')' after the arguments of transfer(), found " + describeToken(peek()));
    }
    if (!sawCommType) {
      fail(peek().loc, "transfer() is missing its " + std::string(kPositional[positional]) +
                           " argument; it takes (src, dst, step, chunk, recv|rrc)");
    }
    advance();
    ++program_.transferCount;
    addStatement(block, stmt);
  }

  OpKind parseCommType() {
    const Token& token = peek();
    std::string_view word;
    if (token.kind == TokenKind::Name || token.kind == TokenKind::String) word = token.text;
    if (word == "recv") {
      advance();
      return OpKind::Copy;
    }
    if (word == "rrc") {
      advance();
      return OpKind::Reduce;
    }
    fail(token.loc, "expected the communication type recv or rrc as the 5th argument of transfer(), found " +
                        describeToken(token));
  }

  void parseTransferKeyword(Stmt& stmt) {
    const Token& name = advance();
    advance();  // '='
    auto once = [&](bool taken) {
      if (taken) fail(name.loc, "transfer() argument '" + name.text + "' given twice");
    };
    if (name.text == "dstChunk") {
      once(stmt.args[4] != kNoNode);
      stmt.args[4] = parseExpression();
    } else if (name.text == "count") {
      once(stmt.args[5] != kNoNode);
      stmt.args[5] = parseExpression();
    } else if (name.text == "srcBuf") {
      once(stmt.srcBuffer != BufferChoice::Default);
      stmt.srcBuffer = parseBufferName();
    } else if (name.text == "dstBuf") {
      once(stmt.dstBuffer != BufferChoice::Default);
      stmt.dstBuffer = parseBufferName();
    } else {
      fail(name.loc,
           "unknown transfer() argument '" + name.text + "' (expected dstChunk, count, srcBuf or dstBuf)");
    }
  }

  BufferChoice parseBufferName() {
    const Token& token = peek();
    std::string_view word;
    if (token.kind == TokenKind::Name || token.kind == TokenKind::String) word = token.text;
    BufferChoice choice = BufferChoice::Default;
    if (word == "input") choice = BufferChoice::Input;
    if (word == "output") choice = BufferChoice::Output;
    if (word == "scratch") choice = BufferChoice::Scratch;
    if (choice == BufferChoice::Default) {
      fail(token.loc,
           "expected a buffer name \"input\", \"output\" or \"scratch\", found " + describeToken(token));
    }
    advance();
    return choice;
  }

  // ---- Expressions --------------------------------------------------------------------------
  //
  // or > and > not > comparison (not chained) > + - > * / // % > unary + - > primary

  int32_t slotOf(const std::string& name) {
    auto [it, inserted] = slots_.try_emplace(name, static_cast<int32_t>(program_.slotNames.size()));
    if (inserted) program_.slotNames.push_back(name);
    return it->second;
  }

  int depthOf(int32_t expr) const { return expr == kNoNode ? 0 : depths_[expr]; }

  int32_t addExpr(Expr expr) {
    int depth = 1 + std::max(depthOf(expr.lhs), depthOf(expr.rhs));
    if (depth > kMaxExprDepth) {
      fail(expr.loc,
           "expression is nested too deeply (more than " + std::to_string(kMaxExprDepth) + " levels)");
    }
    program_.exprs.push_back(expr);
    depths_.push_back(depth);
    return static_cast<int32_t>(program_.exprs.size() - 1);
  }

  int32_t binary(ExprOp op, SourceLoc loc, int32_t lhs, int32_t rhs) {
    Expr expr;
    expr.op = op;
    expr.lhs = lhs;
    expr.rhs = rhs;
    expr.loc = loc;
    expr.start = program_.exprs[lhs].start;
    return addExpr(expr);
  }

  void enter() {
    if (++recursion_ > kMaxExprDepth) {
      fail(peek().loc,
           "expression is nested too deeply (more than " + std::to_string(kMaxExprDepth) + " levels)");
    }
  }

  int32_t parseExpression() { return parseOr(); }

  int32_t parseOr() {
    int32_t lhs = parseAnd();
    while (at(TokenKind::KwOr)) {
      SourceLoc loc = advance().loc;
      lhs = binary(ExprOp::Or, loc, lhs, parseAnd());
    }
    return lhs;
  }

  int32_t parseAnd() {
    int32_t lhs = parseNot();
    while (at(TokenKind::KwAnd)) {
      SourceLoc loc = advance().loc;
      lhs = binary(ExprOp::And, loc, lhs, parseNot());
    }
    return lhs;
  }

  int32_t parseNot() {
    if (!at(TokenKind::KwNot)) return parseComparison();
    SourceLoc loc = advance().loc;
    enter();
    int32_t operand = parseNot();
    --recursion_;
    Expr expr;
    expr.op = ExprOp::Not;
    expr.lhs = operand;
    expr.loc = loc;
    expr.start = loc;
    return addExpr(expr);
  }

  static bool comparisonOp(TokenKind kind, ExprOp* op) {
    switch (kind) {
      case TokenKind::Equal:
        *op = ExprOp::Equal;
        return true;
      case TokenKind::NotEqual:
        *op = ExprOp::NotEqual;
        return true;
      case TokenKind::Less:
        *op = ExprOp::Less;
        return true;
      case TokenKind::LessEqual:
        *op = ExprOp::LessEqual;
        return true;
      case TokenKind::Greater:
        *op = ExprOp::Greater;
        return true;
      case TokenKind::GreaterEqual:
        *op = ExprOp::GreaterEqual;
        return true;
      default:
        return false;
    }
  }

  int32_t parseComparison() {
    int32_t lhs = parseAdditive();
    ExprOp op;
    if (!comparisonOp(peek().kind, &op)) return lhs;
    SourceLoc loc = advance().loc;
    int32_t result = binary(op, loc, lhs, parseAdditive());
    if (comparisonOp(peek().kind, &op)) {
      fail(peek().loc, "chained comparisons like 'a < b < c' are not supported; write 'a < b and b < c'");
    }
    return result;
  }

  int32_t parseAdditive() {
    int32_t lhs = parseMultiplicative();
    while (at(TokenKind::Plus) || at(TokenKind::Minus)) {
      const Token& op = advance();
      lhs = binary(op.kind == TokenKind::Plus ? ExprOp::Add : ExprOp::Subtract, op.loc, lhs,
                   parseMultiplicative());
    }
    return lhs;
  }

  int32_t parseMultiplicative() {
    int32_t lhs = parseUnary();
    while (true) {
      ExprOp op;
      switch (peek().kind) {
        case TokenKind::Star:
          op = ExprOp::Multiply;
          break;
        case TokenKind::Slash:
        case TokenKind::SlashSlash:
          op = ExprOp::FloorDivide;
          break;
        case TokenKind::Percent:
          op = ExprOp::Modulo;
          break;
        default:
          return lhs;
      }
      SourceLoc loc = advance().loc;
      lhs = binary(op, loc, lhs, parseUnary());
    }
  }

  int32_t parseUnary() {
    if (at(TokenKind::Plus) || at(TokenKind::Minus)) {
      const Token& op = advance();
      enter();
      int32_t operand = parseUnary();
      --recursion_;
      if (op.kind == TokenKind::Plus) {
        program_.exprs[operand].start = op.loc;
        return operand;
      }
      Expr expr;
      expr.op = ExprOp::Negate;
      expr.lhs = operand;
      expr.loc = op.loc;
      expr.start = op.loc;
      return addExpr(expr);
    }
    return parsePrimary();
  }

  int32_t parsePrimary() {
    const Token& token = peek();
    Expr expr;
    expr.loc = token.loc;
    expr.start = token.loc;
    switch (token.kind) {
      case TokenKind::Integer:
        advance();
        expr.op = ExprOp::Integer;
        expr.value = token.value;
        return addExpr(expr);
      case TokenKind::Name:
        if (peek(1).kind == TokenKind::LParen) {
          fail(token.loc, "function calls are not supported in expressions ('" + token.text + "(...)')");
        }
        advance();
        expr.op = ExprOp::Variable;
        expr.value = slotOf(token.text);
        return addExpr(expr);
      case TokenKind::LParen: {
        advance();
        enter();
        int32_t inner = parseExpression();
        --recursion_;
        if (!at(TokenKind::RParen)) {
          fail(peek().loc, "expected ')' to close the '(' at line " + std::to_string(token.loc.line) +
                               ", column " + std::to_string(token.loc.column) + ", found " +
                               describeToken(peek()));
        }
        advance();
        program_.exprs[inner].start = token.loc;
        return inner;
      }
      case TokenKind::String:
        fail(token.loc, "strings are not allowed in expressions (only integers are)");
      default:
        fail(token.loc, "expected an expression, found " + describeToken(token));
    }
  }

  const SourceText& source_;
  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  RescclProgram program_;
  std::unordered_map<std::string, int32_t> slots_;
  std::vector<int> depths_;
  int blockDepth_ = 0;
  int recursion_ = 0;
};

}  // namespace

RescclProgram parseResccl(const SourceText& source, const std::vector<Token>& tokens) {
  return Parser(source, tokens).run();
}

RescclProgram parseResccl(const SourceText& source) { return parseResccl(source, tokenizeResccl(source)); }

}  // namespace tuccl
