#include "lang/msccl_xml.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <unordered_map>
#include <utility>

#include <pugixml.hpp>

namespace tuccl {

namespace {

// Bounds that keep a hostile file from exhausting memory before any real work.
constexpr int64_t kMaxRanks = 1 << 16;
constexpr int64_t kMaxChunks = 1 << 24;  // chunks per buffer, and per step
constexpr int64_t kMaxChannels = 1 << 10;

bool sends(MscclStepType t) {
  return t == MscclStepType::Send || t == MscclStepType::RecvCopySend || t == MscclStepType::RecvReduceSend ||
         t == MscclStepType::RecvReduceCopySend;
}
bool receives(MscclStepType t) {
  return t == MscclStepType::Recv || t == MscclStepType::RecvCopySend || t == MscclStepType::RecvReduceSend ||
         t == MscclStepType::RecvReduceCopy || t == MscclStepType::RecvReduceCopySend;
}
bool readsSrc(MscclStepType t) {
  return t == MscclStepType::Send || t == MscclStepType::RecvReduceSend || t == MscclStepType::RecvReduceCopy ||
         t == MscclStepType::RecvReduceCopySend || t == MscclStepType::Copy || t == MscclStepType::Reduce;
}
bool writesDst(MscclStepType t) {
  return t == MscclStepType::Recv || t == MscclStepType::RecvCopySend || t == MscclStepType::RecvReduceCopy ||
         t == MscclStepType::RecvReduceCopySend || t == MscclStepType::Copy || t == MscclStepType::Reduce;
}
bool reducesOnReceive(MscclStepType t) {
  return t == MscclStepType::RecvReduceCopy || t == MscclStepType::RecvReduceCopySend ||
         t == MscclStepType::RecvReduceSend;
}

// A place on one rank: buffer and first chunk.
struct Slot {
  BufferKind buffer = BufferKind::Input;
  int32_t index = -1;
  friend bool operator==(const Slot&, const Slot&) = default;
};

struct StepRec {
  int32_t tb = 0;  // index into Importer::tbs_
  int32_t s = 0;
  MscclStepType type = MscclStepType::Nop;
  Slot src;
  Slot dst;
  int32_t cnt = 0;
  int32_t depTb = -1;  // tb id on the same rank, -1 none
  int32_t depStep = -1;
  SourceLoc loc;
  SourceLoc cntLoc;
  SourceLoc depLoc;
  SourceLoc depsLoc;
  int32_t tmp = -1;  // rrs: first scratch chunk that holds the reduced value
  int32_t snapshot = -1;  // a sending step whose slot is rewritten before its receive: its scratch copy
  int32_t snapshotOp = -1;
  // Events of the step, as node ids (-1 absent): receive, local operation, send.
  int32_t recvNode = -1;
  int32_t localNode = -1;
  int32_t sendNode = -1;
  int32_t pairedRecv = -1;  // sending step: the receiving step it pairs with
  int32_t pairedSend = -1;  // receiving step: the sending step it pairs with
  int32_t recvOp = -1;
  int32_t localOp = -1;
  int32_t sendOp = -1;  // the peer's receive operation that carries what this step sends
  // src and dst name one slot: the same (buffer, offset), or in place the two views of one chunk
  // (RCCL's in-place files reduce input chunks into the output view of the same memory).
  bool srcIsDst = false;

  int32_t firstNode() const { return recvNode >= 0 ? recvNode : localNode >= 0 ? localNode : sendNode; }
  int32_t lastNode() const { return sendNode >= 0 ? sendNode : localNode >= 0 ? localNode : recvNode; }
  // The rrc/rrcs forms whose reduce cannot happen on arrival: dst is not src.
  bool reducesLocally() const {
    return type == MscclStepType::RecvReduceSend ||
           ((type == MscclStepType::RecvReduceCopy || type == MscclStepType::RecvReduceCopySend) && !srcIsDst);
  }
};

struct TbRec {
  int32_t rank = 0;
  int32_t id = 0;
  int32_t send = -1;
  int32_t recv = -1;
  int32_t chan = 0;
  int32_t firstStep = 0;
  int32_t nSteps = 0;
  SourceLoc loc;
};

struct CopyRec {
  int32_t rank = 0;
  int32_t iOff = 0;
  int32_t oOff = 0;
  int32_t cnt = 1;
  SourceLoc loc;
};

struct GpuRec {
  std::array<int32_t, kBufferKinds> declared{0, 0, 0};
  std::array<SourceLoc, kBufferKinds> declaredLoc{};
  pugi::xml_node node;
  std::vector<int32_t> tbById;  // indices into Importer::tbs_
  bool seen = false;
};

std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text.substr(0, 64)) out += (static_cast<unsigned char>(c) < 0x20 || c == '"') ? '?' : c;
  if (text.size() > 64) out += "...";
  return out + "\"";
}

std::string fileStem(std::string_view name) {
  size_t slash = name.find_last_of('/');
  std::string_view base = slash == std::string_view::npos ? name : name.substr(slash + 1);
  size_t dot = base.rfind('.');
  return std::string(dot == std::string_view::npos || dot == 0 ? base : base.substr(0, dot));
}

class Importer {
 public:
  Importer(const SourceText& source, const MscclImportOptions& options) : source_(source), options_(options) {}

  ImportedMscclAlgorithm run() {
    pugi::xml_document document;
    const std::string& text = source_.text();
    const unsigned flags = pugi::parse_default & ~pugi::parse_escapes;
    pugi::xml_parse_result parsed = document.load_buffer(text.data(), text.size(), flags, pugi::encoding_utf8);
    if (parsed.status == pugi::status_no_document_element) {
      fail(source_.locationOf(0), "expected an <algo> element; the file has none");
    }
    if (!parsed) {
      const size_t offset = parsed.offset < 0 ? 0 : std::min(static_cast<size_t>(parsed.offset), text.size());
      fail(source_.locationOf(offset), std::string("malformed XML: ") + parsed.description());
    }
    pugi::xml_node root = document.first_child();
    while (root && root.type() != pugi::node_element) root = root.next_sibling();
    if (!root) fail(source_.locationOf(0), "expected an <algo> element; the file has none");
    if (std::string_view(root.name()) != "algo") {
      fail(locOf(root), "expected <algo> as the root element, found <" + std::string(root.name()) + ">");
    }
    readAlgo(root);
    readGpus(root);
    decideCollective(root);
    for (int32_t rank = 0; rank < nRanks_; ++rank) readGpuBody(rank);
    resolveDependencies();
    pairSendsWithReceives();
    buildEvents();
    std::vector<int32_t> depth = orderEvents();
    assignSnapshots(depth);
    emitOperations(depth);
    decideRoot(root);
    buildSchedule();
    if (Status problem = validateStructure(result_.algorithm); !problem.ok()) throw StatusError(problem);
    return std::move(result_);
  }

 private:
  // ---- Diagnostics ------------------------------------------------------------------------------

  [[noreturn]] void fail(SourceLoc loc, std::string message, ErrorCode code = ErrorCode::InvalidInput) const {
    throw StatusError(makeError(code, source_.name(), loc, std::move(message)));
  }

  SourceLoc locAt(ptrdiff_t offset) const {
    if (offset < 0 || static_cast<size_t>(offset) >= source_.text().size()) return {};
    return source_.locationOf(static_cast<size_t>(offset));
  }
  // The element's '<'.
  SourceLoc locOf(pugi::xml_node node) const {
    const ptrdiff_t offset = node.offset_debug();
    return locAt(offset > 0 ? offset - 1 : offset);
  }
  // The attribute's name: pugixml parses in place, so names keep their offsets from the element's.
  SourceLoc locOf(pugi::xml_node node, pugi::xml_attribute attribute) const {
    const ptrdiff_t base = node.offset_debug();
    if (base < 0 || !attribute) return locOf(node);
    const ptrdiff_t delta = attribute.name() - node.name();
    if (delta <= 0 || delta > static_cast<ptrdiff_t>(source_.text().size())) return locOf(node);
    return locAt(base + delta);
  }

  std::string where(const TbRec& tb) const {
    return "rank " + std::to_string(tb.rank) + " <tb id=\"" + std::to_string(tb.id) + "\">";
  }
  std::string where(const StepRec& step) const {
    return where(tbs_[step.tb]) + " step " + std::to_string(step.s) + " (line " + std::to_string(step.loc.line) + ")";
  }

  // ---- Attributes -------------------------------------------------------------------------------

  // An integer attribute in [lo, hi]; `fallback` when absent (nullopt: required).
  int64_t integer(pugi::xml_node node, const char* name, int64_t lo, int64_t hi,
                  std::optional<int64_t> fallback = std::nullopt, SourceLoc* at = nullptr) const {
    pugi::xml_attribute attribute = node.attribute(name);
    if (at != nullptr) *at = locOf(node, attribute);
    if (!attribute) {
      if (fallback) return *fallback;
      fail(locOf(node), "<" + std::string(node.name()) + "> lacks the required attribute '" + name + "'");
    }
    std::string_view value = attribute.value();
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    int64_t result = 0;
    const char* begin = value.data();
    const char* end = begin + value.size();
    if (begin != end && *begin == '+') ++begin;
    auto [ptr, ec] = std::from_chars(begin, end, result);
    if (value.empty() || ec == std::errc::invalid_argument || ptr != end) {
      fail(locOf(node, attribute), "attribute " + std::string(name) + "=" + quoted(attribute.value()) + " of <" +
                                       node.name() + "> is not an integer");
    }
    if (ec == std::errc::result_out_of_range || result < lo || result > hi) {
      fail(locOf(node, attribute), "attribute " + std::string(name) + "=" + quoted(attribute.value()) + " of <" +
                                       node.name() + "> is out of range [" + std::to_string(lo) + ", " +
                                       std::to_string(hi) + "]");
    }
    return result;
  }

  int32_t integer32(pugi::xml_node node, const char* name, int64_t lo, int64_t hi,
                    std::optional<int64_t> fallback = std::nullopt, SourceLoc* at = nullptr) const {
    return static_cast<int32_t>(integer(node, name, lo, hi, fallback, at));
  }

  bool flag(pugi::xml_node node, const char* name, bool fallback) const {
    return integer(node, name, 0, 1, fallback ? 1 : 0) != 0;
  }

  // ---- <algo> -----------------------------------------------------------------------------------

  void readAlgo(pugi::xml_node algo) {
    Algorithm& algorithm = result_.algorithm;
    algorithm.sourceName = source_.name();
    algorithm.name = algo.attribute("name") ? std::string(algo.attribute("name").value()) : fileStem(source_.name());
    if (algorithm.name.empty()) algorithm.name = "MscclAlgo";
    nRanks_ = integer32(algo, "ngpus", 1, kMaxRanks);
    nChunks_ = integer32(algo, "nchunksperloop", 1, kMaxChunks);
    nChannels_ = integer32(algo, "nchannels", 1, kMaxChannels, 0);
    algorithm.nRanks = nRanks_;
    algorithm.nChannels = nChannels_;
    algorithm.inPlace = flag(algo, "inplace", false);
    result_.outOfPlace = flag(algo, "outofplace", !algorithm.inPlace);
    result_.minBytes = integer(algo, "minBytes", 0, std::numeric_limits<int64_t>::max(), 0);
    result_.maxBytes = integer(algo, "maxBytes", 0, std::numeric_limits<int64_t>::max(), 0);
    result_.nThreads = integer32(algo, "nthreads", 0, 1 << 20, 0);
    result_.redop = algo.attribute("redop").value();
    if (pugi::xml_attribute proto = algo.attribute("proto")) {
      result_.protocol = parseProtocol(proto.value());
      if (!result_.protocol) {
        fail(locOf(algo, proto), "attribute proto=" + quoted(proto.value()) + " of <algo> is not Simple, LL or LL128");
      }
    }
    if (algo.attribute("root")) rootAttribute_ = integer32(algo, "root", 0, nRanks_ - 1, std::nullopt, &rootLoc_);
  }

  // ---- <gpu> buffers ----------------------------------------------------------------------------

  void readGpus(pugi::xml_node algo) {
    gpus_.resize(static_cast<size_t>(nRanks_));
    for (pugi::xml_node gpu : algo.children("gpu")) {
      SourceLoc idLoc;
      const int32_t id = integer32(gpu, "id", 0, nRanks_ - 1, std::nullopt, &idLoc);
      GpuRec& rec = gpus_[id];
      if (rec.seen) {
        fail(idLoc, "a second <gpu id=\"" + std::to_string(id) + "\"> (the first is at line " +
                        std::to_string(locOf(rec.node).line) + ")");
      }
      rec.seen = true;
      rec.node = gpu;
      rec.declared[0] = integer32(gpu, "i_chunks", 0, kMaxChunks, std::nullopt, &rec.declaredLoc[0]);
      rec.declared[1] = integer32(gpu, "o_chunks", 0, kMaxChunks, std::nullopt, &rec.declaredLoc[1]);
      rec.declared[2] = integer32(gpu, "s_chunks", 0, kMaxChunks, 0, &rec.declaredLoc[2]);
    }
    for (int32_t rank = 0; rank < nRanks_; ++rank) {
      if (!gpus_[rank].seen) {
        fail(locOf(algo), "<algo> has ngpus=\"" + std::to_string(nRanks_) + "\" but no <gpu id=\"" +
                              std::to_string(rank) + "\">");
      }
    }
  }

  // The collective from coll, or inferred from the buffer sizes where they say it alone.
  void decideCollective(pugi::xml_node algo) {
    pugi::xml_attribute coll = algo.attribute("coll");
    const int64_t n = nRanks_;
    const int64_t perRank = nChunks_ % n == 0 ? nChunks_ / n : -1;
    Collective kind = Collective::AllReduce;
    if (coll) {
      const std::string_view name = coll.value();
      if (name == "custom") {
        fail(locOf(algo, coll),
             "coll=\"custom\" is not supported: a custom collective has no postcondition TuCCL could prove",
             ErrorCode::Unsupported);
      }
      for (std::string_view other : {"send", "recv", "gather", "scatter", "alltoallv"}) {
        if (name == other) {
          fail(locOf(algo, coll),
               "coll=" + quoted(name) +
                   " is not supported (TuCCL imports allreduce, allgather, reducescatter, alltoall, reduce and "
                   "broadcast)",
               ErrorCode::Unsupported);
        }
      }
      std::optional<Collective> parsed = parseCollective(name);
      if (!parsed) {
        fail(locOf(algo, coll), "unknown collective coll=" + quoted(name) +
                                    " (expected allreduce, allgather, reducescatter or reduce_scatter, alltoall, "
                                    "reduce, broadcast)");
      }
      kind = *parsed;
    } else {
      // AllGather: input a rank's share (0 when in place), output all; ReduceScatter the mirror.
      // Equal sizes fit AllReduce, AllToAll, Reduce and Broadcast alike.
      bool allGather = perRank > 0 && n > 1;
      bool reduceScatter = allGather;
      for (const GpuRec& gpu : gpus_) {
        allGather = allGather && (gpu.declared[0] == perRank || gpu.declared[0] == 0) && gpu.declared[1] == nChunks_;
        reduceScatter =
            reduceScatter && gpu.declared[0] == nChunks_ && (gpu.declared[1] == perRank || gpu.declared[1] == 0);
      }
      if (allGather == reduceScatter) {
        const GpuRec& first = gpus_[0];
        fail(locOf(algo), "<algo> has no coll attribute and the buffers do not tell the collective: i_chunks=\"" +
                              std::to_string(first.declared[0]) + "\" o_chunks=\"" +
                              std::to_string(first.declared[1]) + "\" with nchunksperloop=\"" +
                              std::to_string(nChunks_) + "\" on " + std::to_string(n) +
                              " GPUs; add coll=\"allreduce\" (or alltoall, reduce, broadcast, ...)");
      }
      kind = allGather ? Collective::AllGather : Collective::ReduceScatter;
    }
    Algorithm& algorithm = result_.algorithm;
    algorithm.collective = kind;
    int32_t k = nChunks_;
    if (kind == Collective::AllGather || kind == Collective::ReduceScatter || kind == Collective::AllToAll) {
      if (perRank <= 0) {
        fail(locOf(algo, algo.attribute("nchunksperloop")),
             "nchunksperloop=\"" + std::to_string(nChunks_) + "\" is not a multiple of ngpus=\"" +
                 std::to_string(n) + "\", as " + std::string(collectiveName(kind)) + " needs");
      }
      k = static_cast<int32_t>(perRank);
    }
    int32_t scratch = 0;
    for (const GpuRec& gpu : gpus_) scratch = std::max(scratch, gpu.declared[2]);
    algorithm.bufferChunks = conventionalBufferChunks(kind, nRanks_, k, scratch);
    scratchEnd_.assign(static_cast<size_t>(nRanks_), scratch);
    for (int32_t rank = 0; rank < nRanks_; ++rank) {
      const GpuRec& gpu = gpus_[rank];
      for (int b = 0; b < 2; ++b) {
        if (gpu.declared[b] > algorithm.bufferChunks[b]) {
          fail(gpu.declaredLoc[b], std::string(b == 0 ? "i_chunks" : "o_chunks") + "=\"" +
                                       std::to_string(gpu.declared[b]) + "\" of <gpu id=\"" + std::to_string(rank) +
                                       "\"> exceeds the " + std::string(bufferName(static_cast<BufferKind>(b))) +
                                       " of a " + std::string(collectiveName(kind)) + " with nchunksperloop=\"" +
                                       std::to_string(nChunks_) + "\" on " + std::to_string(n) + " GPUs (" +
                                       std::to_string(algorithm.bufferChunks[b]) + " chunks)");
        }
      }
    }
  }

  // ---- <copy>, <tb> and <step> ------------------------------------------------------------------

  Slot slotAttribute(pugi::xml_node step, const char* bufName, const char* offName, int32_t rank, int32_t cnt,
                     bool used) const {
    pugi::xml_attribute buf = step.attribute(bufName);
    if (!used) return {};
    if (!buf) fail(locOf(step), "<step> lacks the required attribute '" + std::string(bufName) + "'");
    const std::string_view letter = buf.value();
    BufferKind kind = BufferKind::Input;
    if (letter == "i") {
      kind = BufferKind::Input;
    } else if (letter == "o") {
      kind = BufferKind::Output;
    } else if (letter == "s") {
      kind = BufferKind::Scratch;
    } else {
      fail(locOf(step, buf), "attribute " + std::string(bufName) + "=" + quoted(letter) +
                                 " of <step> is not a buffer (expected \"i\", \"o\" or \"s\")");
    }
    SourceLoc offLoc;
    const int32_t limit = gpus_[rank].declared[static_cast<int>(kind)];
    const int32_t off = integer32(step, offName, -1, kMaxChunks, std::nullopt, &offLoc);
    if (cnt > 0 && (off < 0 || int64_t{off} + cnt > limit)) {
      const char* declaredName = kind == BufferKind::Input ? "i_chunks" : kind == BufferKind::Output ? "o_chunks" : "s_chunks";
      fail(offLoc, "attribute " + std::string(offName) + "=\"" + std::to_string(off) + "\" with cnt=\"" +
                       std::to_string(cnt) + "\" is out of range: rank " + std::to_string(rank) + " has " +
                       declaredName + "=\"" + std::to_string(limit) + "\"");
    }
    return {kind, off};
  }

  void chargeWork(int64_t chunks, SourceLoc loc) {
    work_ += chunks;
    if (work_ > options_.maxChunkWork) {
      fail(loc, "the file moves more than " + std::to_string(options_.maxChunkWork) +
                    " chunks in all its steps; too large to import", ErrorCode::ResourceExhausted);
    }
  }

  void readGpuBody(int32_t rank) {
    GpuRec& gpu = gpus_[rank];
    const Algorithm& algorithm = result_.algorithm;
    for (pugi::xml_node copy : gpu.node.children("copy")) {
      CopyRec rec;
      rec.rank = rank;
      rec.loc = locOf(copy);
      rec.cnt = integer32(copy, "cnt", 0, kMaxChunks, 1);
      SourceLoc iLoc, oLoc;
      rec.iOff = integer32(copy, "i_off", 0, kMaxChunks, std::nullopt, &iLoc);
      rec.oOff = integer32(copy, "o_off", 0, kMaxChunks, std::nullopt, &oLoc);
      if (int64_t{rec.iOff} + rec.cnt > algorithm.chunks(BufferKind::Input)) {
        fail(iLoc, "i_off=\"" + std::to_string(rec.iOff) + "\" (cnt " + std::to_string(rec.cnt) +
                       ") is out of range: the input has " + std::to_string(algorithm.chunks(BufferKind::Input)) +
                       " chunks");
      }
      if (int64_t{rec.oOff} + rec.cnt > algorithm.chunks(BufferKind::Output)) {
        fail(oLoc, "o_off=\"" + std::to_string(rec.oOff) + "\" (cnt " + std::to_string(rec.cnt) +
                       ") is out of range: the output has " + std::to_string(algorithm.chunks(BufferKind::Output)) +
                       " chunks");
      }
      chargeWork(rec.cnt, rec.loc);
      copies_.push_back(rec);
    }
    std::vector<pugi::xml_node> tbNodes;
    for (pugi::xml_node tb : gpu.node.children("tb")) tbNodes.push_back(tb);
    const int32_t nTbs = static_cast<int32_t>(tbNodes.size());
    gpu.tbById.assign(tbNodes.size(), -1);
    for (pugi::xml_node node : tbNodes) {
      TbRec tb;
      tb.rank = rank;
      tb.loc = locOf(node);
      SourceLoc idLoc, sendLoc, recvLoc;
      tb.id = integer32(node, "id", 0, std::numeric_limits<int32_t>::max(), std::nullopt, &idLoc);
      if (tb.id >= nTbs) {
        fail(idLoc, "<tb id=\"" + std::to_string(tb.id) + "\"> of rank " + std::to_string(rank) +
                        ": ids must be 0 .. " + std::to_string(nTbs - 1) + " without gaps (the rank has " +
                        std::to_string(nTbs) + " <tb>s)");
      }
      if (gpu.tbById[tb.id] >= 0) {
        fail(idLoc, "a second <tb id=\"" + std::to_string(tb.id) + "\"> on rank " + std::to_string(rank) +
                        " (the first is at line " + std::to_string(tbs_[gpu.tbById[tb.id]].loc.line) + ")");
      }
      tb.send = integer32(node, "send", -1, nRanks_ - 1, std::nullopt, &sendLoc);
      tb.recv = integer32(node, "recv", -1, nRanks_ - 1, std::nullopt, &recvLoc);
      if (tb.send == rank) fail(sendLoc, "<tb> of rank " + std::to_string(rank) + " sends to its own rank");
      if (tb.recv == rank) fail(recvLoc, "<tb> of rank " + std::to_string(rank) + " receives from its own rank");
      SourceLoc chanLoc;
      const bool noChannel = std::string_view(node.attribute("chan").value()) == "-1";
      tb.chan = integer32(node, "chan", noChannel ? -1 : 0, (nChannels_ > 0 ? nChannels_ : kMaxChannels) - 1, std::nullopt,
                          &chanLoc);
      if (tb.chan < 0) {
        // SCCL's older dialect writes chan="-1" on thread blocks that use no connection; the
        // runtimes check only the upper bound and never index a channel for such a tb. A tb
        // with a peer would index channel -1: wrong on every runtime.
        if (tb.send >= 0 || tb.recv >= 0) {
          fail(chanLoc, "chan=\"-1\" names no channel, but this <tb> " +
                            std::string(tb.send >= 0 ? "sends to rank " + std::to_string(tb.send) : "") +
                            (tb.send >= 0 && tb.recv >= 0 ? " and " : "") +
                            (tb.recv >= 0 ? "receives from rank " + std::to_string(tb.recv) : "") +
                            ": a connection is one channel's, 0 .. nchannels-1");
        }
        if (!chanMinusOneWarned_) {
          chanMinusOneWarned_ = true;
          result_.warnings.push_back(Diagnostic{Severity::Warning, source_.name(), chanLoc,
                                                "chan=\"-1\" (SCCL's older dialect) on a <tb> that neither sends nor "
                                                "receives: it uses no connection, read as channel 0 (said once)"});
        }
        tb.chan = 0;
      }
      maxChannel_ = std::max(maxChannel_, tb.chan);
      tb.firstStep = static_cast<int32_t>(steps_.size());
      const int32_t tbIndex = static_cast<int32_t>(tbs_.size());
      gpu.tbById[tb.id] = tbIndex;
      tbs_.push_back(tb);
      for (pugi::xml_node step : node.children("step")) readStep(step, tbIndex);
      tbs_[tbIndex].nSteps = static_cast<int32_t>(steps_.size()) - tbs_[tbIndex].firstStep;
    }
  }

  MscclStepType stepType(pugi::xml_node step) const {
    pugi::xml_attribute type = step.attribute("type");
    if (!type) fail(locOf(step), "<step> lacks the required attribute 'type'");
    const std::string_view name = type.value();
    if (std::optional<MscclStepType> known = parseMscclStepType(name)) return *known;
    if (name == "ra") {
      fail(locOf(step, type), "step type \"ra\" (residual add) is not supported: no MSCCL runtime executes it",
           ErrorCode::Unsupported);
    }
    fail(locOf(step, type), "unknown step type=" + quoted(name) + " (expected s, r, rcs, rrs, rrc, rrcs, cpy, re or nop)");
  }

  void readStep(pugi::xml_node node, int32_t tbIndex) {
    const TbRec& tb = tbs_[tbIndex];
    StepRec step;
    step.tb = tbIndex;
    step.loc = locOf(node);
    SourceLoc sLoc;
    step.s = integer32(node, "s", 0, std::numeric_limits<int32_t>::max(), std::nullopt, &sLoc);
    const int32_t expected = static_cast<int32_t>(steps_.size()) - tb.firstStep;
    if (step.s != expected) {
      fail(sLoc, "<step s=\"" + std::to_string(step.s) + "\"> of " + where(tb) + ": steps must be numbered 0, 1, 2 "
                 "... in order (expected s=\"" + std::to_string(expected) + "\")");
    }
    step.type = stepType(node);
    step.cnt = integer32(node, "cnt", 0, kMaxChunks, step.type == MscclStepType::Nop ? std::optional<int64_t>(0) : std::nullopt,
                         &step.cntLoc);
    if (sends(step.type) && tb.send < 0) {
      fail(locOf(node, node.attribute("type")), "step type=\"" + std::string(mscclStepTypeName(step.type)) +
                                                    "\" sends, but its " + where(tb) + " has send=\"-1\"");
    }
    if (receives(step.type) && tb.recv < 0) {
      fail(locOf(node, node.attribute("type")), "step type=\"" + std::string(mscclStepTypeName(step.type)) +
                                                    "\" receives, but its " + where(tb) + " has recv=\"-1\"");
    }
    step.src = slotAttribute(node, "srcbuf", "srcoff", tb.rank, step.cnt, readsSrc(step.type));
    step.dst = slotAttribute(node, "dstbuf", "dstoff", tb.rank, step.cnt, writesDst(step.type));
    step.depTb = integer32(node, "depid", -1, std::numeric_limits<int32_t>::max(), -1, &step.depLoc);
    step.depStep = integer32(node, "deps", -1, std::numeric_limits<int32_t>::max(), -1, &step.depsLoc);
    (void)flag(node, "hasdep", false);
    chargeWork(step.cnt, step.loc);
    steps_.push_back(step);
  }

  void resolveDependencies() {
    for (StepRec& step : steps_) {
      if (step.depTb < 0) continue;
      const TbRec& tb = tbs_[step.tb];
      const std::vector<int32_t>& byId = gpus_[tb.rank].tbById;
      if (step.depTb >= static_cast<int32_t>(byId.size())) {
        fail(step.depLoc, "depid=\"" + std::to_string(step.depTb) + "\" names no <tb> of rank " +
                              std::to_string(tb.rank) + " (it has " + std::to_string(byId.size()) + ")");
      }
      const TbRec& target = tbs_[byId[step.depTb]];
      if (step.depStep < 0 || step.depStep >= target.nSteps) {
        fail(step.depsLoc, "deps=\"" + std::to_string(step.depStep) + "\" names no step of " + where(target) +
                               " (it has " + std::to_string(target.nSteps) + " steps)");
      }
    }
  }

  // ---- Pairing ----------------------------------------------------------------------------------

  uint64_t connectionKey(int32_t sender, int32_t receiver, int32_t chan) const {
    return (static_cast<uint64_t>(sender) * static_cast<uint64_t>(nRanks_) + static_cast<uint64_t>(receiver)) *
               static_cast<uint64_t>(kMaxChannels) +
           static_cast<uint64_t>(chan);
  }

  std::string connectionName(int32_t sender, int32_t receiver, int32_t chan) const {
    return "rank " + std::to_string(sender) + " -> rank " + std::to_string(receiver) + " on channel " +
           std::to_string(chan);
  }

  // The k-th sending step of A's (send=B, chan c) tb with the k-th receiving step of B's (recv=A,
  // chan c) tb; one tb per connection end (each is one FIFO in the runtimes).
  void pairSendsWithReceives() {
    std::unordered_map<uint64_t, int32_t> senders;
    std::unordered_map<uint64_t, int32_t> receivers;
    senders.reserve(tbs_.size());
    receivers.reserve(tbs_.size());
    for (int32_t t = 0; t < static_cast<int32_t>(tbs_.size()); ++t) {
      const TbRec& tb = tbs_[t];
      if (tb.send >= 0) {
        auto [it, fresh] = senders.emplace(connectionKey(tb.rank, tb.send, tb.chan), t);
        if (!fresh) {
          fail(tb.loc, where(tb) + " and <tb id=\"" + std::to_string(tbs_[it->second].id) + "\"> (line " +
                           std::to_string(tbs_[it->second].loc.line) + ") both send on " +
                           connectionName(tb.rank, tb.send, tb.chan) +
                           ": one connection is one FIFO, so the runtimes hang or mix the data");
        }
      }
      if (tb.recv >= 0) {
        auto [it, fresh] = receivers.emplace(connectionKey(tb.recv, tb.rank, tb.chan), t);
        if (!fresh) {
          fail(tb.loc, where(tb) + " and <tb id=\"" + std::to_string(tbs_[it->second].id) + "\"> (line " +
                           std::to_string(tbs_[it->second].loc.line) + ") both receive on " +
                           connectionName(tb.recv, tb.rank, tb.chan) +
                           ": one connection is one FIFO, so the runtimes hang or mix the data");
        }
      }
    }
    for (int32_t t = 0; t < static_cast<int32_t>(tbs_.size()); ++t) {
      const TbRec& tb = tbs_[t];
      if (tb.recv >= 0 && !senders.count(connectionKey(tb.recv, tb.rank, tb.chan))) {
        if (countSteps(tb, receives) > 0) {
          fail(tb.loc, where(tb) + " receives on " + connectionName(tb.recv, tb.rank, tb.chan) + ", but rank " +
                           std::to_string(tb.recv) + " has no <tb> with send=\"" + std::to_string(tb.rank) +
                           "\" chan=\"" + std::to_string(tb.chan) + "\"");
        }
      }
      if (tb.send < 0) continue;
      auto found = receivers.find(connectionKey(tb.rank, tb.send, tb.chan));
      if (found == receivers.end()) {
        if (countSteps(tb, sends) == 0) continue;
        fail(tb.loc, where(tb) + " sends on " + connectionName(tb.rank, tb.send, tb.chan) + ", but rank " +
                         std::to_string(tb.send) + " has no <tb> with recv=\"" + std::to_string(tb.rank) +
                         "\" chan=\"" + std::to_string(tb.chan) + "\"");
      }
      pairSteps(t, found->second);
    }
  }

  int32_t countSteps(const TbRec& tb, bool (*predicate)(MscclStepType)) const {
    int32_t count = 0;
    for (int32_t i = 0; i < tb.nSteps; ++i) count += predicate(steps_[tb.firstStep + i].type) ? 1 : 0;
    return count;
  }

  void pairSteps(int32_t senderTb, int32_t receiverTb) {
    const TbRec& from = tbs_[senderTb];
    const TbRec& to = tbs_[receiverTb];
    const int32_t nSends = countSteps(from, sends);
    const int32_t nReceives = countSteps(to, receives);
    if (nSends != nReceives) {
      fail(nSends > nReceives ? from.loc : to.loc,
           where(from) + " sends " + std::to_string(nSends) + " times on " + connectionName(from.rank, to.rank, from.chan) +
               ", but " + where(to) + " (line " + std::to_string((nSends > nReceives ? to.loc : from.loc).line) +
               ") receives " + std::to_string(nReceives) + " times; every send pairs with one receive in order");
    }
    int32_t r = to.firstStep;
    for (int32_t i = from.firstStep; i < from.firstStep + from.nSteps; ++i) {
      StepRec& send = steps_[i];
      if (!sends(send.type)) continue;
      while (!receives(steps_[r].type)) ++r;
      StepRec& recv = steps_[r++];
      if (send.cnt != recv.cnt) {
        fail(recv.cntLoc, "cnt=\"" + std::to_string(recv.cnt) + "\" of this receive (" + where(recv) +
                              ") differs from cnt=\"" + std::to_string(send.cnt) + "\" of the send it pairs with (" +
                              where(send) + ")");
      }
      send.pairedRecv = static_cast<int32_t>(&recv - steps_.data());
      recv.pairedSend = i;
    }
  }

  // ---- The happens-before DAG -------------------------------------------------------------------

  void buildEvents() {
    for (StepRec& step : steps_) {
      step.srcIsDst = step.src == step.dst ||
                      (result_.algorithm.inPlace && step.src.index >= 0 && step.dst.index >= 0 &&
                       storageKey(tbs_[step.tb].rank, step.src, 0) == storageKey(tbs_[step.tb].rank, step.dst, 0));
    }
    int32_t next = 0;
    nodeStep_.reserve(steps_.size() * 2);
    for (int32_t i = 0; i < static_cast<int32_t>(steps_.size()); ++i) {
      StepRec& step = steps_[i];
      const MscclStepType t = step.type;
      if (receives(t)) step.recvNode = next++;
      if (t == MscclStepType::Copy || t == MscclStepType::Reduce || t == MscclStepType::Nop || step.reducesLocally()) {
        step.localNode = next++;
      }
      if (sends(t)) step.sendNode = next++;
      nodeStep_.resize(static_cast<size_t>(next), i);
      if (t == MscclStepType::RecvReduceSend && step.cnt > 0) {
        const int32_t rank = tbs_[step.tb].rank;
        step.tmp = scratchEnd_[rank];
        if (int64_t{step.tmp} + step.cnt > kMaxChunks) fail(step.loc, "too many rrs steps: their scratch exceeds " + std::to_string(kMaxChunks) + " chunks");
        scratchEnd_[rank] += step.cnt;
      }
    }
    edges_.reserve(steps_.size() * 3);
    for (const TbRec& tb : tbs_) {
      // Open sends of this tb: storage chunk -> the receive that reads it. A later step of the tb
      // that overwrites the chunk must wait for that receive (MSCCL captures data at the send).
      std::unordered_map<int64_t, int32_t> open;
      for (int32_t i = tb.firstStep; i < tb.firstStep + tb.nSteps; ++i) {
        const StepRec& step = steps_[i];
        if (i > tb.firstStep) edges_.emplace_back(steps_[i - 1].lastNode(), step.firstNode());
        if (step.recvNode >= 0 && step.localNode >= 0) edges_.emplace_back(step.recvNode, step.localNode);
        const int32_t beforeSend = step.localNode >= 0 ? step.localNode : step.recvNode;
        if (step.sendNode >= 0 && beforeSend >= 0) edges_.emplace_back(beforeSend, step.sendNode);
        if (step.depTb >= 0) {
          const TbRec& target = tbs_[gpus_[tb.rank].tbById[step.depTb]];
          edges_.emplace_back(steps_[target.firstStep + step.depStep].lastNode(), step.firstNode());
        }
        const StepRec* receiver = step.sendNode >= 0 ? &steps_[step.pairedRecv] : nullptr;
        if (receiver != nullptr) edges_.emplace_back(step.sendNode, receiver->recvNode);
        if (step.cnt == 0) continue;
        const Slot written = writtenSlot(step);
        if (written.index >= 0) {
          for (int32_t c = 0; c < step.cnt; ++c) {
            auto it = open.find(storageKey(tb.rank, written, c));
            if (it == open.end()) continue;
            edges_.emplace_back(it->second, step.firstNode());
            open.erase(it);
          }
        }
        if (receiver != nullptr) {
          const Slot sent = sentSlot(step);
          for (int32_t c = 0; c < step.cnt; ++c) open[storageKey(tb.rank, sent, c)] = receiver->recvNode;
        }
      }
    }
    nNodes_ = next;
  }

  // What a step writes on its own rank (index -1: nothing).
  static Slot writtenSlot(const StepRec& step) {
    if (step.type == MscclStepType::RecvReduceSend) return {BufferKind::Scratch, step.tmp};
    if (writesDst(step.type)) return step.dst;
    return {};
  }
  // Where the data a sending step sends is: s its src, rcs/rrcs the dst they stored, rrs its scratch.
  static Slot sentSlot(const StepRec& step) {
    if (step.type == MscclStepType::Send) return step.src;
    if (step.type == MscclStepType::RecvReduceSend) return {BufferKind::Scratch, step.tmp};
    return step.dst;
  }

  int64_t storageKey(int32_t rank, Slot slot, int32_t c) const {
    const StorageSlot storage = inPlaceStorage(result_.algorithm, rank, slot.buffer, slot.index + c);
    return static_cast<int64_t>(storage.buffer) * (int64_t{1} << 40) + storage.index;
  }

  // Capture at the send (the header): a sending step S of rank r gets a snapshot when a step W of
  // another tb of r writes S's sent storage, W comes after S in the happens-before order, and W's
  // first event is no deeper than the peer's receive (so in step order it would come first, or
  // race). Only nodes no deeper than the receive are searched.
  void assignSnapshots(const std::vector<int32_t>& depth) {
    std::unordered_map<int64_t, std::vector<int32_t>> writers;  // rank-qualified storage -> steps
    auto rankKey = [&](int32_t rank, int64_t storage) { return storage * 4096 + rank; };
    for (int32_t i = 0; i < static_cast<int32_t>(steps_.size()); ++i) {
      const StepRec& w = steps_[i];
      if (w.cnt == 0) continue;
      const Slot written = writtenSlot(w);
      if (written.index < 0) continue;
      const int32_t rank = tbs_[w.tb].rank;
      for (int32_t c = 0; c < w.cnt; ++c) writers[rankKey(rank, storageKey(rank, written, c))].push_back(i);
    }
    std::vector<int32_t> start, targets;
    std::vector<int32_t> mark(static_cast<size_t>(nNodes_), -1);
    std::vector<int32_t> stack;
    for (int32_t i = 0; i < static_cast<int32_t>(steps_.size()); ++i) {
      StepRec& send = steps_[i];
      if (send.sendNode < 0 || send.cnt == 0 || send.type == MscclStepType::RecvReduceSend) continue;
      const int32_t rank = tbs_[send.tb].rank;
      const int32_t horizon = depth[steps_[send.pairedRecv].recvNode];
      const Slot sent = sentSlot(send);
      std::vector<int32_t> targetsOf;  // first events of the candidate writers
      for (int32_t c = 0; c < send.cnt; ++c) {
        auto it = writers.find(rankKey(rank, storageKey(rank, sent, c)));
        if (it == writers.end()) continue;
        for (int32_t w : it->second) {
          const StepRec& writer = steps_[w];
          const int32_t node = writer.firstNode();
          if (writer.tb != send.tb && depth[node] > depth[send.sendNode] && depth[node] <= horizon)
            targetsOf.push_back(node);
        }
      }
      if (targetsOf.empty()) continue;
      if (start.empty()) adjacency(start, targets);
      // Depth-bounded search from the send: does it reach a candidate writer?
      bool reached = false;
      stack.assign(1, send.sendNode);
      mark[send.sendNode] = i;
      for (int32_t node : targetsOf) mark[node] = mark[node] == i ? i : -2 - i;  // candidates of this send
      while (!stack.empty() && !reached) {
        const int32_t v = stack.back();
        stack.pop_back();
        for (int32_t e = start[v]; e < start[v + 1] && !reached; ++e) {
          const int32_t u = targets[e];
          if (depth[u] > horizon || mark[u] == i) continue;
          reached = mark[u] == -2 - i;
          mark[u] = i;
          stack.push_back(u);
        }
      }
      if (!reached) continue;
      // The copy's chunks have the lengths of the sent ones: a chunk's length follows its index
      // modulo the chunk unit k (docs/kernels.md), so the snapshot starts at the same residue.
      const int32_t k = std::max(1, result_.algorithm.chunksPerRank());
      const int32_t residue = inPlaceStorage(result_.algorithm, rank, sent.buffer, sent.index).index % k;
      scratchEnd_[rank] += ((residue - scratchEnd_[rank] % k) % k + k) % k;
      send.snapshot = scratchEnd_[rank];
      if (int64_t{send.snapshot} + send.cnt > kMaxChunks)
        fail(send.loc, "too many snapshots of sent data: their scratch exceeds " + std::to_string(kMaxChunks) + " chunks");
      scratchEnd_[rank] += send.cnt;
    }
  }

  // The happens-before DAG as adjacency lists (CSR): node v's successors are targets[start[v] ..
  // start[v + 1]).
  void adjacency(std::vector<int32_t>& start, std::vector<int32_t>& targets) const {
    start.assign(static_cast<size_t>(nNodes_) + 1, 0);
    for (const auto& edge : edges_) ++start[edge.first + 1];
    for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
    targets.assign(edges_.size(), 0);
    std::vector<int32_t> fill(start.begin(), start.end() - 1);
    for (const auto& edge : edges_) targets[fill[edge.first]++] = edge.second;
  }

  // Kahn's algorithm with longest-path depths; a cycle is reported at a step on it.
  std::vector<int32_t> orderEvents() {
    std::vector<int32_t> start, targets;
    adjacency(start, targets);
    std::vector<int32_t> indegree(static_cast<size_t>(nNodes_), 0);
    for (const auto& edge : edges_) ++indegree[edge.second];
    std::vector<int32_t> depth(static_cast<size_t>(nNodes_), 0);
    std::vector<int32_t> ready;
    ready.reserve(static_cast<size_t>(nNodes_));
    for (int32_t v = 0; v < nNodes_; ++v) {
      if (indegree[v] == 0) ready.push_back(v);
    }
    for (size_t head = 0; head < ready.size(); ++head) {
      const int32_t v = ready[head];
      for (int32_t e = start[v]; e < start[v + 1]; ++e) {
        const int32_t w = targets[e];
        depth[w] = std::max(depth[w], depth[v] + 1);
        if (--indegree[w] == 0) ready.push_back(w);
      }
    }
    if (static_cast<int32_t>(ready.size()) < nNodes_) reportCycle(indegree);
    return depth;
  }

  // Every node left with indegree > 0 has a predecessor also left; walking predecessors backwards
  // must revisit a node, which lies on a cycle.
  [[noreturn]] void reportCycle(const std::vector<int32_t>& indegree) const {
    std::vector<int32_t> predecessor(static_cast<size_t>(nNodes_), -1);
    for (const auto& edge : edges_) {
      if (indegree[edge.first] > 0 && indegree[edge.second] > 0) predecessor[edge.second] = edge.first;
    }
    int32_t v = 0;
    while (indegree[v] == 0) ++v;
    std::vector<char> seen(static_cast<size_t>(nNodes_), 0);
    while (!seen[v]) {
      seen[v] = 1;
      v = predecessor[v];
    }
    // v is on the cycle: list its steps in order of execution.
    std::vector<int32_t> cycle{v};
    for (int32_t u = predecessor[v]; u != v; u = predecessor[u]) cycle.push_back(u);
    std::reverse(cycle.begin(), cycle.end());
    std::string path;
    int32_t listed = 0;
    int32_t lastStep = -1;
    for (int32_t node : cycle) {
      const int32_t s = nodeStep_[node];
      if (s == lastStep) continue;
      lastStep = s;
      if (listed == 6) {
        path += " -> ...";
        break;
      }
      path += (listed++ > 0 ? " -> " : "") + where(steps_[s]);
    }
    const StepRec& at = steps_[nodeStep_[cycle.front()]];
    fail(at.loc, "dependency cycle: " + path + " -> back to the first (program order, depid/deps and sends before "
                     "their receives)");
  }

  // ---- Operations -------------------------------------------------------------------------------

  int32_t addOp(int32_t srcRank, Slot src, int32_t dstRank, Slot dst, int32_t count, OpKind kind, int32_t step,
                SourceLoc loc) {
    Operation op;
    op.srcRank = srcRank;
    op.srcBuffer = src.buffer;
    op.srcIndex = src.index;
    op.dstRank = dstRank;
    op.dstBuffer = dst.buffer;
    op.dstIndex = dst.index;
    op.count = count;
    op.kind = kind;
    op.step = step;
    op.loc = loc;
    result_.algorithm.ops.push_back(op);
    return static_cast<int32_t>(result_.algorithm.ops.size()) - 1;
  }

  void emitOperations(const std::vector<int32_t>& depth) {
    Algorithm& algorithm = result_.algorithm;
    algorithm.bufferChunks[static_cast<int>(BufferKind::Scratch)] =
        *std::max_element(scratchEnd_.begin(), scratchEnd_.end());
    algorithm.ops.reserve(steps_.size() + copies_.size());
    // <copy> runs before the schedule: step 0, everything else after it.
    const int32_t base = copies_.empty() ? 0 : 1;
    for (const CopyRec& copy : copies_) {
      const Slot in{BufferKind::Input, copy.iOff};
      const Slot out{BufferKind::Output, copy.oOff};
      if (copy.cnt == 0) continue;
      // In place, a copy onto its own alias is what the layout already does.
      if (algorithm.inPlace && storageKey(copy.rank, in, 0) == storageKey(copy.rank, out, 0)) continue;
      result_.schedule.preCopyOps.push_back(addOp(copy.rank, in, copy.rank, out, copy.cnt, OpKind::Copy, 0, copy.loc));
    }
    for (StepRec& step : steps_) {
      if (step.cnt == 0) continue;
      const int32_t rank = tbs_[step.tb].rank;
      if (step.recvNode >= 0) {
        StepRec& sender = steps_[step.pairedSend];
        const Slot target = step.type == MscclStepType::RecvReduceSend ? Slot{BufferKind::Scratch, step.tmp} : step.dst;
        const OpKind kind = reducesOnReceive(step.type) && !step.reducesLocally() ? OpKind::Reduce : OpKind::Copy;
        const Slot source = sender.snapshot >= 0 ? Slot{BufferKind::Scratch, sender.snapshot} : sentSlot(sender);
        step.recvOp = addOp(tbs_[sender.tb].rank, source, rank, target, step.cnt, kind,
                            base + depth[step.recvNode], step.loc);
        sender.sendOp = step.recvOp;
      }
      // A cpy of a slot onto itself (in place, often through the other view) moves nothing: the
      // runtime copies the memory onto itself. Its step still orders the others.
      const bool selfCopy = step.type == MscclStepType::Copy && step.srcIsDst;
      if (step.localNode >= 0 && step.type != MscclStepType::Nop && !selfCopy) {
        const Slot target = step.type == MscclStepType::RecvReduceSend ? Slot{BufferKind::Scratch, step.tmp} : step.dst;
        const OpKind kind = step.type == MscclStepType::Copy ? OpKind::Copy : OpKind::Reduce;
        step.localOp = addOp(rank, step.src, rank, target, step.cnt, kind, base + depth[step.localNode], step.loc);
      }
      if (step.snapshot >= 0) {
        step.snapshotOp = addOp(rank, sentSlot(step), rank, Slot{BufferKind::Scratch, step.snapshot}, step.cnt,
                                OpKind::Copy, base + depth[step.sendNode], step.loc);
      }
    }
    compactSteps();
  }

  // Renumbers the steps densely (0, 1, 2 ... in the same order).
  void compactSteps() {
    std::vector<Operation>& ops = result_.algorithm.ops;
    if (ops.empty()) return;
    const int32_t maxStep = result_.algorithm.maxStep();
    std::vector<int32_t> used(static_cast<size_t>(maxStep) + 1, 0);
    for (const Operation& op : ops) used[op.step] = 1;
    int32_t next = 0;
    for (int32_t& u : used) u = u ? next++ : -1;
    for (Operation& op : ops) op.step = used[op.step];
  }

  // Broadcast: the one rank that receives nothing. Reduce: the one rank that sends nothing.
  void decideRoot(pugi::xml_node algo) {
    Algorithm& algorithm = result_.algorithm;
    if (!hasRoot(algorithm.collective)) {
      if (rootAttribute_ >= 0) {
        fail(rootLoc_, "root applies only to broadcast and reduce, not to " +
                           std::string(collectiveName(algorithm.collective)));
      }
      return;
    }
    if (rootAttribute_ >= 0) {
      algorithm.root = rootAttribute_;
      return;
    }
    const bool broadcast = algorithm.collective == Collective::Broadcast;
    std::vector<char> active(static_cast<size_t>(nRanks_), 0);
    for (const Operation& op : algorithm.ops) {
      if (!op.isLocal()) active[broadcast ? op.dstRank : op.srcRank] = 1;
    }
    std::vector<int32_t> candidates;
    for (int32_t rank = 0; rank < nRanks_; ++rank) {
      if (!active[rank]) candidates.push_back(rank);
    }
    if (candidates.size() == 1) {
      algorithm.root = candidates[0];
      return;
    }
    std::string list;
    for (size_t i = 0; i < candidates.size() && i < 8; ++i) list += (i ? ", " : "") + std::to_string(candidates[i]);
    if (candidates.size() > 8) list += ", ...";
    fail(locOf(algo), "cannot infer the " + std::string(collectiveName(algorithm.collective)) + " root: " +
                          (candidates.empty() ? std::string("every rank ") + (broadcast ? "receives" : "sends")
                                              : "ranks {" + list + "} " + (broadcast ? "receive" : "send") + " nothing") +
                          "; add root=\"R\" to <algo>");
  }

  void buildSchedule() {
    MscclSchedule& schedule = result_.schedule;
    schedule.ranks.resize(static_cast<size_t>(nRanks_));
    for (int32_t rank = 0; rank < nRanks_; ++rank) {
      std::vector<MscclThreadBlock>& out = schedule.ranks[rank];
      out.reserve(gpus_[rank].tbById.size());
      for (int32_t t : gpus_[rank].tbById) {
        const TbRec& tb = tbs_[t];
        MscclThreadBlock block;
        block.id = tb.id;
        block.sendPeer = tb.send;
        block.recvPeer = tb.recv;
        block.channel = tb.chan;
        block.loc = tb.loc;
        block.steps.reserve(static_cast<size_t>(tb.nSteps));
        for (int32_t i = tb.firstStep; i < tb.firstStep + tb.nSteps; ++i) {
          const StepRec& step = steps_[i];
          MscclScheduleStep entry;
          entry.index = step.s;
          entry.type = step.type;
          entry.loc = step.loc;
          for (int32_t op : {step.recvOp, step.localOp, step.snapshotOp, step.sendOp}) {
            if (op >= 0) entry.ops[entry.nOps++] = op;
          }
          block.steps.push_back(entry);
        }
        out.push_back(std::move(block));
      }
    }
    if (result_.algorithm.nChannels == 0) result_.algorithm.nChannels = maxChannel_ + 1;
  }

  const SourceText& source_;
  const MscclImportOptions& options_;
  ImportedMscclAlgorithm result_;
  int32_t nRanks_ = 0;
  int32_t nChunks_ = 0;
  int32_t nChannels_ = 0;  // 0: not given
  int32_t maxChannel_ = 0;
  bool chanMinusOneWarned_ = false;
  int32_t rootAttribute_ = -1;
  SourceLoc rootLoc_;
  int64_t work_ = 0;
  std::vector<GpuRec> gpus_;
  std::vector<TbRec> tbs_;
  std::vector<StepRec> steps_;
  std::vector<CopyRec> copies_;
  std::vector<int32_t> scratchEnd_;  // per rank: scratch chunks used (s_chunks, then rrs values)
  int32_t nNodes_ = 0;
  std::vector<int32_t> nodeStep_;
  std::vector<std::pair<int32_t, int32_t>> edges_;
};

}  // namespace

Expected<ImportedMscclAlgorithm> importMscclXml(const SourceText& source, const MscclImportOptions& options) {
  // The importer unwinds with StatusError; it stops here.
  try {
    return Importer(source, options).run();
  } catch (const StatusError& error) {
    return error.status();
  } catch (const std::bad_alloc&) {
    return makeError(ErrorCode::ResourceExhausted, source.name(), {}, "out of memory importing the file");
  }
}

Expected<ImportedMscclAlgorithm> importMscclXml(std::string_view fileName, std::string_view text,
                                                const MscclImportOptions& options) {
  return importMscclXml(SourceText(std::string(fileName), std::string(withoutByteOrderMark(text))), options);
}

Expected<ImportedMscclAlgorithm> importMscclXmlFile(const std::string& path, const MscclImportOptions& options) {
  try {
    return importMscclXml(readSourceFile(path), options);
  } catch (const DiagnosticError& error) {
    return statusFromDiagnostic(error, ErrorCode::IoError);
  }
}

}  // namespace tuccl
