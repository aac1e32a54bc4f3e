// ResCCLang printer (resccl_printer.h).
#include "lang/resccl_printer.h"

#include <optional>
#include <sstream>

namespace tuccl {
namespace {

// Header limits of the front end (docs/resccl-language.md, "Header").
constexpr int64_t kMaxRanks = 1'048'576;
constexpr int64_t kMaxHint = 65'536;

Status unsupported(const std::string& what) {
  return makeError(ErrorCode::Unsupported, "ResCCLang cannot express this algorithm: " + what);
}

// The buffer transfer() addresses by default: the output, the input for ReduceScatter.
BufferKind dataBuffer(Collective collective) {
  return collective == Collective::ReduceScatter ? BufferKind::Input : BufferKind::Output;
}

// A string literal the lexer reads back to `text`; empty when a character cannot be written.
std::optional<std::string> stringLiteral(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return std::nullopt;
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

Status checkExpressible(const Algorithm& algorithm) {
  if (Status status = validateStructure(algorithm); !status) return unsupported(status.message());
  if (algorithm.nRanks > kMaxRanks) return unsupported("more than 1,048,576 ranks");
  const int32_t k = algorithm.chunksPerRank();
  const auto conventional = conventionalBufferChunks(algorithm.collective, algorithm.nRanks, k, algorithm.chunks(BufferKind::Scratch));
  if (conventional != algorithm.bufferChunks) {
    return unsupported("its buffers (input " + std::to_string(algorithm.chunks(BufferKind::Input)) + ", output " +
                       std::to_string(algorithm.chunks(BufferKind::Output)) + " chunks) are not NCCL's for " +
                       std::string(collectiveName(algorithm.collective)));
  }
  for (int64_t hint : {int64_t{algorithm.nicsPerNode}, int64_t{algorithm.nChannels}, int64_t{algorithm.nWarps}}) {
    if (hint < 0 || hint > kMaxHint) return unsupported("a NICPerNode, nChannels or nWarps hint outside [0, 65536]");
  }
  if (!stringLiteral(algorithm.name)) return unsupported("its name has a control character");
  return {};
}

void printHeader(std::ostringstream& out, const Algorithm& algorithm) {
  out << "def ResCCLAlgo(nRanks=" << algorithm.nRanks << ", OpType=\"" << collectiveName(algorithm.collective) << "\"";
  if (!algorithm.name.empty()) out << ", AlgoName=" << *stringLiteral(algorithm.name);
  if (hasRoot(algorithm.collective)) out << ", Root=" << algorithm.root;
  out << ", nChunks=" << algorithm.chunks(dataBuffer(algorithm.collective));
  if (algorithm.chunks(BufferKind::Scratch) > 0) out << ", nScratch=" << algorithm.chunks(BufferKind::Scratch);
  if (algorithm.ranksPerNode > 0) out << ", GPUPerNode=" << algorithm.ranksPerNode;
  if (algorithm.nicsPerNode > 0) out << ", NICPerNode=" << algorithm.nicsPerNode;
  if (algorithm.nChannels > 0) out << ", nChannels=" << algorithm.nChannels;
  if (algorithm.nWarps > 0) out << ", nWarps=" << algorithm.nWarps;
  if (!algorithm.inPlace) out << ", InPlace=0";
  out << "):\n";
}

void printTransfer(std::ostringstream& out, const Operation& op, BufferKind data) {
  out << "    transfer(" << op.srcRank << ", " << op.dstRank << ", " << op.step << ", " << op.srcIndex << ", "
      << (op.kind == OpKind::Copy ? "recv" : "rrc");
  if (op.dstIndex != op.srcIndex) out << ", dstChunk=" << op.dstIndex;
  if (op.count != 1) out << ", count=" << op.count;
  if (op.srcBuffer != data) out << ", srcBuf=\"" << bufferName(op.srcBuffer) << "\"";
  if (op.dstBuffer != data) out << ", dstBuf=\"" << bufferName(op.dstBuffer) << "\"";
  out << ")\n";
}

}  // namespace

Expected<std::string> printResccl(const Algorithm& algorithm) {
  if (Status status = checkExpressible(algorithm); !status) return status;
  std::ostringstream out;
  out << "# " << algorithm.ops.size() << " operations, printed by TuCCL's ResCCLang printer\n";
  printHeader(out, algorithm);
  const BufferKind data = dataBuffer(algorithm.collective);
  for (const Operation& op : algorithm.ops) printTransfer(out, op, data);
  if (algorithm.ops.empty()) out << "    pass\n";
  return out.str();
}

}  // namespace tuccl
