#include "lang/resccl_interpreter.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace tuccl {

namespace {

constexpr int64_t kMaxRanks = int64_t{1} << 20;
constexpr int64_t kMaxChunks = int64_t{1} << 30;  // per buffer, so chunk indices fit int32_t
constexpr int64_t kMaxHint = int64_t{1} << 16;    // nChannels, nWarps, NICPerNode
constexpr int64_t kMaxStep = std::numeric_limits<int32_t>::max();
constexpr size_t kParamCount = std::size(kHeaderParams);

std::string rangeText(int64_t limit) { return "[0, " + std::to_string(limit) + ")"; }

// "examples/algorithms/hm_allreduce.resccl" -> "hm_allreduce".
std::string fileStem(const std::string& path) {
  size_t slash = path.find_last_of("/\\");
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.find_last_of('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  return base;
}

struct ParamValue {
  bool present = false;
  bool overridden = false;
  int64_t integer = 0;
  std::string string;
  SourceLoc loc;
};

class Interpreter {
 public:
  Interpreter(const RescclProgram& program, const SourceText& source, const RescclOptions& options)
      : program_(program),
        source_(source),
        options_(options),
        exprs_(program.exprs.data()),
        values_(program.slotNames.size(), 0),
        defined_(program.slotNames.size(), 0) {}

  Algorithm run() {
    resolveHeader();
    statementBudget_ = options_.maxStatements;
    operationBudget_ = options_.maxOperations;
    algorithm_.ops.reserve(static_cast<size_t>(std::clamp<int64_t>(options_.maxOperations, 0, 4096)));
    if (program_.body != kNoNode) runBlock(program_.body);
    std::vector<Operation>& ops = algorithm_.ops;
    if (ops.capacity() - ops.size() > ops.size() / 4 + 1024) ops.shrink_to_fit();
    return std::move(algorithm_);
  }

 private:
  [[noreturn]] void fail(SourceLoc loc, std::string message) const {
    throw DiagnosticError(Diagnostic{Severity::Error, source_.name(), loc, std::move(message)});
  }

  // ---- Header -------------------------------------------------------------------------------

  static size_t paramIndex(std::string_view name) {
    for (size_t i = 0; i < kParamCount; ++i) {
      if (kHeaderParams[i].name == name) return i;
    }
    return kParamCount;
  }

  ParamValue& param(std::string_view name) { return params_[paramIndex(name)]; }

  void require(const ParamValue& value, std::string_view name, bool ok, const std::string& message) const {
    if (ok) return;
    fail(value.loc, std::string(name) + " = " + std::to_string(value.integer) + ": " + message +
                        (value.overridden ? " (the value comes from a parameter override)" : ""));
  }

  void resolveHeader() {
    for (const HeaderParam& given : program_.header) {
      ParamValue& value = param(given.name);
      value.present = true;
      value.integer = given.integer;
      value.string = given.string;
      value.loc = given.valueLoc;
    }
    applyOverrides();

    ParamValue& opType = param("OpType");
    if (!opType.present)
      fail(program_.headerLoc, "missing required header parameter 'OpType' (e.g. OpType=\"Allreduce\")");
    std::optional<Collective> kind = parseCollective(opType.string);
    if (!kind) {
      fail(opType.loc,
           "unknown OpType \"" + opType.string +
               "\" (expected Allgather, Allreduce, Reducescatter, Broadcast, Reduce or Alltoall)");
    }
    ParamValue& nRanks = param("nRanks");
    if (!nRanks.present)
      fail(program_.headerLoc, "missing required header parameter 'nRanks' (e.g. nRanks=8)");
    require(nRanks, "nRanks", nRanks.integer >= 1 && nRanks.integer <= kMaxRanks,
            "the number of ranks must be in [1, " + std::to_string(kMaxRanks) + "]");
    const int64_t n = nRanks.integer;

    algorithm_.collective = *kind;
    algorithm_.nRanks = static_cast<int32_t>(n);
    const ParamValue& name = param("AlgoName");
    algorithm_.name = name.present ? name.string : fileStem(source_.name());
    if (algorithm_.name.empty()) algorithm_.name = "ResCCLAlgo";
    algorithm_.sourceName = source_.name();
    algorithm_.inPlace = true;

    if (ParamValue& g = param("GPUPerNode"); g.present) {
      require(g, "GPUPerNode", g.integer >= 1 && g.integer <= n, "the GPUs per node must be in [1, nRanks]");
      require(g, "GPUPerNode", n % g.integer == 0, "does not divide nRanks = " + std::to_string(n));
      algorithm_.ranksPerNode = static_cast<int32_t>(g.integer);
    }
    auto hint = [&](std::string_view paramName, int32_t* field) {
      ParamValue& value = param(paramName);
      if (!value.present) return;
      require(value, paramName, value.integer >= 1 && value.integer <= kMaxHint,
              "must be in [1, " + std::to_string(kMaxHint) + "]");
      *field = static_cast<int32_t>(value.integer);
    };
    hint("NICPerNode", &algorithm_.nicsPerNode);
    hint("nChannels", &algorithm_.nChannels);
    hint("nWarps", &algorithm_.nWarps);
    // InPlace=0: separate input and output buffers (an out-of-place call), e.g. an imported MSCCL
    // file with inplace="0"; transfers name the buffers with srcBuf / dstBuf.
    if (ParamValue& inPlace = param("InPlace"); inPlace.present) {
      require(inPlace, "InPlace", inPlace.integer == 0 || inPlace.integer == 1,
              "must be 1 (input and output are one buffer, the default) or 0 (separate buffers)");
      algorithm_.inPlace = inPlace.integer == 1;
    }

    ParamValue& root = param("Root");
    if (hasRoot(*kind)) {
      if (!root.present) {
        fail(program_.headerLoc, "missing header parameter 'Root': " + std::string(collectiveName(*kind)) +
                                     " needs a root rank (e.g. Root=0)");
      }
      require(root, "Root", root.integer >= 0 && root.integer < n,
              "the root rank is out of range " + rangeText(n));
      algorithm_.root = static_cast<int32_t>(root.integer);
    } else if (root.present) {
      fail(root.loc,
           "Root applies only to Broadcast and Reduce, not to " + std::string(collectiveName(*kind)));
    }

    ParamValue& chunks = param("nChunks");
    int64_t nChunks = chunks.present ? chunks.integer : n;
    if (chunks.present) {
      require(chunks, "nChunks", nChunks >= 1 && nChunks <= kMaxChunks,
              "the chunks per buffer must be in [1, " + std::to_string(kMaxChunks) + "]");
    }
    bool perRank = *kind == Collective::AllGather || *kind == Collective::ReduceScatter ||
                   *kind == Collective::AllToAll;
    if (perRank) {
      require(chunks, "nChunks", nChunks % n == 0,
              "must be a multiple of nRanks = " + std::to_string(n) + " for " +
                  std::string(collectiveName(*kind)));
    }
    ParamValue& scratch = param("nScratch");
    if (scratch.present) {
      require(scratch, "nScratch", scratch.integer >= 0 && scratch.integer <= kMaxChunks,
              "the scratch chunks per rank must be in [0, " + std::to_string(kMaxChunks) + "]");
    }
    int64_t k = perRank ? nChunks / n : nChunks;
    algorithm_.bufferChunks =
        conventionalBufferChunks(*kind, static_cast<int32_t>(n), static_cast<int32_t>(k),
                                 static_cast<int32_t>(scratch.present ? scratch.integer : 0));
    // The single data buffer of ResCCLang is the in-place storage (lang/algorithm.h).
    storage_ = *kind == Collective::ReduceScatter ? BufferKind::Input : BufferKind::Output;

    // Integer parameters are predefined variables of the body.
    for (size_t i = 0; i < kParamCount; ++i) {
      if (!params_[i].present || kHeaderParams[i].isString) continue;
      for (size_t slot = 0; slot < program_.slotNames.size(); ++slot) {
        if (program_.slotNames[slot] == kHeaderParams[i].name) {
          values_[slot] = params_[i].integer;
          defined_[slot] = 1;
        }
      }
    }
  }

  void applyOverrides() {
    for (const auto& [name, value] : options_.parameterOverrides) {
      std::string what = "parameter override '" + name + "=" + std::to_string(value) + "'";
      size_t index = paramIndex(name);
      if (index == kParamCount) {
        std::string known;
        for (const HeaderParamInfo& info : kHeaderParams) {
          if (info.isString) continue;
          known += known.empty() ? "" : ", ";
          known += info.name;
        }
        fail(program_.headerLoc,
             what + ": unknown parameter '" + name + "' (integer parameters: " + known + ")");
      }
      if (kHeaderParams[index].isString) {
        fail(program_.headerLoc, what + ": '" + name + "' is a string parameter and cannot be overridden");
      }
      ParamValue& target = params_[index];
      if (!target.present) target.loc = program_.headerLoc;  // added by the override
      target.present = true;
      target.overridden = true;
      target.integer = value;
    }
  }

  // ---- Statements ---------------------------------------------------------------------------

  void tick(SourceLoc loc) {
    if (--statementBudget_ >= 0) return;
    fail(loc, "the program executed more than " + std::to_string(options_.maxStatements) +
                  " statements, the limit (raise it with --max-statements or RescclOptions::maxStatements)");
  }

  void runBlock(int32_t block) {
    for (int32_t index : program_.blocks[block].statements) runStatement(program_.statements[index]);
  }

  void runStatement(const Stmt& stmt) {
    tick(stmt.loc);
    switch (stmt.kind) {
      case StmtKind::Pass:
        return;
      case StmtKind::Assign:
        assign(stmt.slot, operand(stmt.args[0]));
        return;
      case StmtKind::If:
        if (eval(stmt.args[0]) != 0) {
          runBlock(stmt.body);
        } else if (stmt.elseBody != kNoNode) {
          runBlock(stmt.elseBody);
        }
        return;
      case StmtKind::For:
        return runFor(stmt);
      case StmtKind::Transfer:
        return runTransfer(stmt);
    }
  }

  void assign(int32_t slot, int64_t value) {
    values_[slot] = value;
    defined_[slot] = 1;
  }

  // Python's range(): bounds evaluated once; the body may reassign the variable freely.
  void runFor(const Stmt& stmt) {
    int64_t start = stmt.args[0] == kNoNode ? 0 : eval(stmt.args[0]);
    int64_t stop = eval(stmt.args[1]);
    int64_t step = 1;
    if (stmt.args[2] != kNoNode) {
      step = eval(stmt.args[2]);
      if (step == 0) fail(exprs_[stmt.args[2]].start, "range() step must not be zero");
    }
    for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
      tick(stmt.loc);
      assign(stmt.slot, i);
      runBlock(stmt.body);
      if (__builtin_add_overflow(i, step, &i)) break;
    }
  }

  BufferKind bufferOf(BufferChoice choice) const {
    switch (choice) {
      case BufferChoice::Input:
        return BufferKind::Input;
      case BufferChoice::Output:
        return BufferKind::Output;
      case BufferChoice::Scratch:
        return BufferKind::Scratch;
      case BufferChoice::Default:
        break;
    }
    return storage_;
  }

  void checkChunk(const Stmt& stmt, int arg, const char* what, int64_t chunk, int64_t count,
                  BufferKind buffer, bool named) const {
    const int64_t limit = algorithm_.chunks(buffer);
    if (chunk >= 0 && chunk < limit && count <= limit - chunk) [[likely]]
      return;
    failChunk(stmt, arg, what, chunk, count, buffer, named, limit);
  }

  [[noreturn]] void failChunk(const Stmt& stmt, int arg, const char* what, int64_t chunk, int64_t count,
                              BufferKind buffer, bool named, int64_t limit) const {
    std::string message = "transfer() " + std::string(what) + " " + std::to_string(chunk);
    if (count > 1) message += " (count " + std::to_string(count) + ")";
    message += " out of range " + rangeText(limit);
    if (named) message += " of the " + std::string(bufferName(buffer)) + " buffer";
    if (buffer == BufferKind::Scratch && limit == 0)
      message += " (the scratch buffer is empty; set nScratch in the header)";
    fail(exprs_[stmt.args[arg]].start, message);
  }

  void runTransfer(const Stmt& stmt) {
    const int64_t src = operand(stmt.args[0]);
    const int64_t dst = operand(stmt.args[1]);
    const int64_t step = operand(stmt.args[2]);
    const int64_t chunk = operand(stmt.args[3]);
    const int64_t dstChunk = stmt.args[4] == kNoNode ? chunk : operand(stmt.args[4]);
    const int64_t count = stmt.args[5] == kNoNode ? 1 : operand(stmt.args[5]);
    const int64_t n = algorithm_.nRanks;
    if (src < 0 || src >= n) {
      fail(exprs_[stmt.args[0]].start,
           "transfer() source rank " + std::to_string(src) + " out of range " + rangeText(n));
    }
    if (dst < 0 || dst >= n) {
      fail(exprs_[stmt.args[1]].start,
           "transfer() destination rank " + std::to_string(dst) + " out of range " + rangeText(n));
    }
    if (step < 0)
      fail(exprs_[stmt.args[2]].start, "transfer() step " + std::to_string(step) + " is negative");
    if (step > kMaxStep) {
      fail(exprs_[stmt.args[2]].start, "transfer() step " + std::to_string(step) +
                                           " is too large (the largest step is " + std::to_string(kMaxStep) +
                                           ")");
    }
    if (count <= 0)
      fail(exprs_[stmt.args[5]].start, "transfer() count " + std::to_string(count) + " is not positive");
    const BufferKind srcBuffer = bufferOf(stmt.srcBuffer);
    const BufferKind dstBuffer = bufferOf(stmt.dstBuffer);
    const bool named = stmt.srcBuffer != BufferChoice::Default || stmt.dstBuffer != BufferChoice::Default;
    checkChunk(stmt, 3, stmt.args[4] == kNoNode ? "chunk id" : "source chunk id", chunk, count, srcBuffer,
               named);
    if (stmt.args[4] != kNoNode || dstBuffer != srcBuffer) {
      checkChunk(stmt, stmt.args[4] == kNoNode ? 3 : 4, "destination chunk id", dstChunk, count, dstBuffer,
                 named);
    }
    if (--operationBudget_ < 0) {
      fail(stmt.loc, "the program emitted more than " + std::to_string(options_.maxOperations) +
                         " transfers, the limit (raise it with --max-ops or RescclOptions::maxOperations)");
    }
    Operation op;
    op.srcRank = static_cast<int32_t>(src);
    op.srcIndex = static_cast<int32_t>(chunk);
    op.dstRank = static_cast<int32_t>(dst);
    op.dstIndex = static_cast<int32_t>(dstChunk);
    op.count = static_cast<int32_t>(count);
    op.step = static_cast<int32_t>(step);
    op.loc = stmt.loc;
    op.srcBuffer = srcBuffer;
    op.dstBuffer = dstBuffer;
    op.kind = stmt.opKind;
    algorithm_.ops.push_back(op);
  }

  // ---- Expressions --------------------------------------------------------------------------

  [[noreturn]] void failUnknownName(const Expr& expr) const {
    const std::string& name = program_.slotNames[static_cast<size_t>(expr.value)];
    size_t index = paramIndex(name);
    if (index < kParamCount && kHeaderParams[index].isString) {
      fail(expr.loc, "'" + name + "' is a string header parameter; expressions take integers only");
    }
    bool assigned = false;
    for (const Stmt& stmt : program_.statements) {
      if ((stmt.kind == StmtKind::Assign || stmt.kind == StmtKind::For) && stmt.slot == expr.value)
        assigned = true;
    }
    if (index < kParamCount) {
      fail(expr.loc, "unknown name '" + name + "' (the header does not set this parameter)");
    }
    fail(expr.loc, "unknown name '" + name + "'" + (assigned ? " (it is used before it is assigned)" : ""));
  }

  [[noreturn]] void failOverflow(const Expr& expr, int64_t lhs, int64_t rhs, std::string_view op) const {
    fail(expr.loc, "integer overflow: " + std::to_string(lhs) + " " + std::string(op) + " " +
                       std::to_string(rhs) + " does not fit in 64 bits");
  }

  // Leaves (most operands) without a recursive call.
  int64_t operand(int32_t index) {
    const Expr& e = exprs_[index];
    if (e.op == ExprOp::Integer) return e.value;
    if (e.op == ExprOp::Variable) {
      if (!defined_[static_cast<size_t>(e.value)]) failUnknownName(e);
      return values_[static_cast<size_t>(e.value)];
    }
    return eval(index);
  }

  int64_t eval(int32_t index) {
    const Expr& e = exprs_[index];
    switch (e.op) {
      case ExprOp::Integer:
        return e.value;
      case ExprOp::Variable:
        if (!defined_[static_cast<size_t>(e.value)]) failUnknownName(e);
        return values_[static_cast<size_t>(e.value)];
      case ExprOp::Negate: {
        int64_t v = eval(e.lhs);
        if (v == std::numeric_limits<int64_t>::min()) {
          fail(e.loc, "integer overflow: -(" + std::to_string(v) + ") does not fit in 64 bits");
        }
        return -v;
      }
      case ExprOp::Not:
        return eval(e.lhs) == 0 ? 1 : 0;
      case ExprOp::And: {
        int64_t l = eval(e.lhs);
        return l == 0 ? l : eval(e.rhs);
      }
      case ExprOp::Or: {
        int64_t l = eval(e.lhs);
        return l != 0 ? l : eval(e.rhs);
      }
      default:
        break;
    }
    const int64_t a = operand(e.lhs);
    const int64_t b = operand(e.rhs);
    int64_t r = 0;
    switch (e.op) {
      case ExprOp::Add:
        if (__builtin_add_overflow(a, b, &r)) failOverflow(e, a, b, "+");
        return r;
      case ExprOp::Subtract:
        if (__builtin_sub_overflow(a, b, &r)) failOverflow(e, a, b, "-");
        return r;
      case ExprOp::Multiply:
        if (__builtin_mul_overflow(a, b, &r)) failOverflow(e, a, b, "*");
        return r;
      case ExprOp::FloorDivide: {
        if (b == 0) fail(e.loc, "division by zero");
        if (a == std::numeric_limits<int64_t>::min() && b == -1) failOverflow(e, a, b, "//");
        int64_t q = a / b;
        if (a % b != 0 && ((a < 0) != (b < 0))) --q;
        return q;
      }
      case ExprOp::Modulo: {
        if (b == 0) fail(e.loc, "modulo by zero");
        if (b == -1) return 0;
        r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      }
      case ExprOp::Equal:
        return a == b;
      case ExprOp::NotEqual:
        return a != b;
      case ExprOp::Less:
        return a < b;
      case ExprOp::LessEqual:
        return a <= b;
      case ExprOp::Greater:
        return a > b;
      case ExprOp::GreaterEqual:
        return a >= b;
      default:
        fail(e.loc, "internal error: unknown expression operator");
    }
  }

  const RescclProgram& program_;
  const SourceText& source_;
  const RescclOptions& options_;
  const Expr* exprs_;
  std::vector<int64_t> values_;
  std::vector<uint8_t> defined_;
  std::array<ParamValue, kParamCount> params_;
  BufferKind storage_ = BufferKind::Output;
  int64_t statementBudget_ = 0;
  int64_t operationBudget_ = 0;
  Algorithm algorithm_;
};

}  // namespace

Algorithm runResccl(const RescclProgram& program, const SourceText& source, const RescclOptions& options) {
  return Interpreter(program, source, options).run();
}

}  // namespace tuccl
