#include "lang/semantic_check.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <limits>
#include <span>
#include <utility>

namespace tuccl {

// The enumerator's own spelling, one word, so tests and tools can match it.
std::string_view violationName(ViolationKind kind) {
  switch (kind) {
    case ViolationKind::Structure:
      return "Structure";
    case ViolationKind::UnwrittenRead:
      return "UnwrittenRead";
    case ViolationKind::LostContribution:
      return "LostContribution";
    case ViolationKind::DoubleCount:
      return "DoubleCount";
    case ViolationKind::MixedChunks:
      return "MixedChunks";
    case ViolationKind::Race:
      return "Race";
    case ViolationKind::Postcondition:
      return "Postcondition";
  }
  return "?";
}

namespace {

// Per-slot flags.
constexpr uint8_t kReadSinceWritten = 1;  // some operation read the value after it was written
constexpr uint8_t kUnique = 2;            // the value may exist nowhere else (see runCopy)

constexpr int32_t kNone = -1;

// Everything the checker tracks about one (rank, storage buffer, chunk) slot except the
// contributor bitset, which lives in one flat array beside it (W words per slot).
struct SlotMeta {
  int32_t origin = kNone;      // input chunk index the value derives from; kNone = empty
  int32_t lastWriter = kNone;  // operation that wrote the value; kNone = initial or empty
  // Race stamps: the last step that wrote / read the slot and by which operations. Two distinct
  // readers are kept so a writer that also reads the slot still sees the other reader.
  int32_t writeStep = kNone;
  int32_t writeOp = kNone;
  int32_t readStep = kNone;
  int32_t reader1 = kNone;
  int32_t reader2 = kNone;
  uint8_t flags = 0;
};

// The prose for a set of ranks: "{0, 1, 3, 4, 5, 7, 8, 9, ... (12 more)}".
std::string formatRanks(std::span<const uint64_t> words) {
  constexpr int kShown = 8;
  int64_t total = 0;
  for (uint64_t w : words) total += std::popcount(w);
  std::string text = "{";
  int shown = 0;
  for (size_t wi = 0; wi < words.size() && shown < kShown; ++wi) {
    for (uint64_t w = words[wi]; w != 0 && shown < kShown; w &= w - 1) {
      if (shown > 0) text += ", ";
      text += std::to_string(wi * 64 + static_cast<size_t>(std::countr_zero(w)));
      ++shown;
    }
  }
  if (total > shown) text += ", ... (" + std::to_string(total - shown) + " more)";
  return text + "}";
}

std::string slotName(int32_t rank, BufferKind buffer, int64_t index) {
  return "rank " + std::to_string(rank) + " " + std::string(bufferName(buffer)) + " chunk " +
         std::to_string(index);
}

// Each rank's slots are its storage buffers back to back: input, output, scratch when out of
// place; the one shared storage (inPlaceStorage) and scratch when in place. base is -1 for a
// buffer that is only a view.
struct StorageLayout {
  std::array<int64_t, kBufferKinds> base{};
  int64_t slotsPerRank = 0;
};

StorageLayout storageLayout(const Algorithm& algorithm) {
  StorageLayout layout;
  for (int b = 0; b < kBufferKinds; ++b) {
    const auto buffer = static_cast<BufferKind>(b);
    const bool stored = !algorithm.inPlace || buffer == BufferKind::Scratch ||
                        inPlaceStorage(algorithm, 0, buffer, 0).buffer == buffer;
    layout.base[b] = stored ? layout.slotsPerRank : -1;
    if (stored) layout.slotsPerRank += algorithm.chunks(buffer);
  }
  return layout;
}

// Bytes of symbolic state the check needs: per slot, its metadata and a bitset of n bits.
double stateBytes(const Algorithm& algorithm) {
  const double words = (algorithm.nRanks + 63) / 64;
  return static_cast<double>(algorithm.nRanks) * static_cast<double>(storageLayout(algorithm).slotsPerRank) *
         (sizeof(SlotMeta) + sizeof(uint64_t) * words);
}

// Beyond this the check refuses with a message instead of exhausting memory. (HM AllReduce at
// 1,024 ranks needs about 160 MiB.)
constexpr double kMaxStateBytes = 16.0 * 1024 * 1024 * 1024;

// Runs an algorithm symbolically. One object per check; the state is sized once up front.
class SymbolicRun {
 public:
  explicit SymbolicRun(const Algorithm& algorithm)
      : algorithm_(algorithm),
        n_(algorithm.nRanks),
        k_(algorithm.chunksPerRank()),
        words_((algorithm.nRanks + 63) / 64),
        reduction_(isReduction(algorithm.collective)) {
    layOutStorage();
    initialise();
  }

  std::optional<Violation> run() {
    const std::vector<int32_t> order = opsInStepOrder();
    size_t begin = 0;
    while (begin < order.size()) {
      const int32_t step = algorithm_.ops[order[begin]].step;
      size_t end = begin;
      while (end < order.size() && algorithm_.ops[order[end]].step == step) ++end;
      const std::span<const int32_t> ops(order.data() + begin, end - begin);
      // Races first: the operations of a step are concurrent, so a race makes every other verdict
      // about the step depend on an order that does not exist.
      for (int32_t op : ops) {
        if (auto violation = stampAccesses(op)) return violation;
      }
      for (int32_t op : ops) {
        if (auto violation = execute(op)) return violation;
      }
      begin = end;
    }
    return checkPostcondition();
  }

 private:
  // ---- Storage layout ---------------------------------------------------------------------------

  void layOutStorage() {
    const StorageLayout layout = storageLayout(algorithm_);
    base_ = layout.base;
    slotsPerRank_ = layout.slotsPerRank;
    const size_t slots = static_cast<size_t>(n_) * static_cast<size_t>(slotsPerRank_);
    meta_.assign(slots, SlotMeta{});
    bits_.assign(slots * static_cast<size_t>(words_), 0);
  }

  // The global slot of chunk `index` of `buffer` on `rank`; chunks of one operation are
  // consecutive slots, because inPlaceStorage is a shift of the index.
  int64_t slotOf(int32_t rank, BufferKind buffer, int32_t index) const {
    const StorageSlot storage = inPlaceStorage(algorithm_, rank, buffer, index);
    return rank * slotsPerRank_ + base_[static_cast<int>(storage.buffer)] + storage.index;
  }

  uint64_t* bits(int64_t slot) { return bits_.data() + slot * words_; }
  std::span<const uint64_t> ranksOf(int64_t slot) const {
    return {bits_.data() + slot * words_, static_cast<size_t>(words_)};
  }

  // Input slots start with the rank's own data. Under Broadcast only the root's input is needed
  // by the postcondition, so the other ranks' inputs are not "unique" and may be overwritten.
  void initialise() {
    const int32_t inputChunks = algorithm_.chunks(BufferKind::Input);
    for (int32_t rank = 0; rank < n_; ++rank) {
      const bool needed = algorithm_.collective != Collective::Broadcast || rank == algorithm_.root;
      for (int32_t i = 0; i < inputChunks; ++i) {
        const int64_t slot = slotOf(rank, BufferKind::Input, i);
        meta_[slot].origin = i;
        meta_[slot].flags = needed ? kUnique : 0;
        bits(slot)[rank / 64] = uint64_t{1} << (rank % 64);
      }
    }
  }

  // Operation indices sorted stably by step: a counting sort when steps are dense enough.
  std::vector<int32_t> opsInStepOrder() const {
    const auto& ops = algorithm_.ops;
    std::vector<int32_t> order(ops.size());
    const int64_t maxStep = algorithm_.maxStep();
    if (maxStep > 4 * static_cast<int64_t>(ops.size()) + 1024) {
      for (size_t i = 0; i < ops.size(); ++i) order[i] = static_cast<int32_t>(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return ops[a].step < ops[b].step; });
      return order;
    }
    std::vector<int32_t> start(static_cast<size_t>(maxStep) + 2, 0);
    for (const Operation& op : ops) ++start[op.step + 1];
    for (size_t s = 1; s < start.size(); ++s) start[s] += start[s - 1];
    for (size_t i = 0; i < ops.size(); ++i) order[start[ops[i].step]++] = static_cast<int32_t>(i);
    return order;
  }

  // ---- Violations -------------------------------------------------------------------------------

  Violation violation(ViolationKind kind, int32_t opIndex, std::string message,
                      int32_t otherOp = kNone) const {
    Violation result;
    result.kind = kind;
    result.message = std::move(message);
    result.opIndex = opIndex;
    if (opIndex != kNone) result.loc = algorithm_.ops[opIndex].loc;
    result.otherOpIndex = otherOp;
    if (otherOp != kNone) result.otherLoc = algorithm_.ops[otherOp].loc;
    return result;
  }

  std::string describeOp(int32_t opIndex) const {
    const SourceLoc loc = algorithm_.ops[opIndex].loc;
    if (loc.known()) return "line " + std::to_string(loc.line);
    return "operation " + std::to_string(opIndex);
  }

  // ---- Pass 1 of a step: races ------------------------------------------------------------------

  std::optional<Violation> stampAccesses(int32_t opIndex) {
    const Operation& op = algorithm_.ops[opIndex];
    const int64_t src = slotOf(op.srcRank, op.srcBuffer, op.srcIndex);
    const int64_t dst = slotOf(op.dstRank, op.dstBuffer, op.dstIndex);
    if (std::abs(src - dst) < op.count) {
      // A chunk of the operation would read what another chunk of it writes, or itself.
      const int64_t c = src > dst ? src - dst : 0;
      const std::string slot = slotName(op.dstRank, op.dstBuffer, static_cast<int32_t>(op.dstIndex + c));
      return violation(ViolationKind::Race, opIndex,
                       src == dst ? std::string(op.kind == OpKind::Reduce ? "reduces " : "copies ") + slot +
                                        (op.kind == OpKind::Reduce ? " into itself" : " onto itself")
                                  : "the operation's source and destination overlap at " + slot);
    }
    // Messages are built only on failure: this runs for millions of operations.
    auto prefix = [&] { return "operations of step " + std::to_string(op.step) + " race on "; };
    for (int32_t c = 0; c < op.count; ++c) {
      SlotMeta& in = meta_[src + c];
      if (in.writeStep == op.step && in.writeOp != opIndex) {
        return violation(ViolationKind::Race, opIndex,
                         prefix() + slotName(op.srcRank, op.srcBuffer, op.srcIndex + c) +
                             ": this one reads it while another (" + describeOp(in.writeOp) + ") writes it",
                         in.writeOp);
      }
      if (in.readStep != op.step) {
        in.readStep = op.step;
        in.reader1 = opIndex;
        in.reader2 = kNone;
      } else if (in.reader1 != opIndex && in.reader2 == kNone) {
        in.reader2 = opIndex;
      }
    }
    for (int32_t c = 0; c < op.count; ++c) {
      SlotMeta& out = meta_[dst + c];
      if (out.writeStep == op.step && out.writeOp != opIndex) {
        return violation(ViolationKind::Race, opIndex,
                         prefix() + slotName(op.dstRank, op.dstBuffer, op.dstIndex + c) +
                             ": this one writes it while another (" + describeOp(out.writeOp) +
                             ") also writes it",
                         out.writeOp);
      }
      if (out.readStep == op.step) {
        const int32_t reader = out.reader1 != opIndex ? out.reader1 : out.reader2;
        if (reader != kNone) {
          return violation(ViolationKind::Race, opIndex,
                           prefix() + slotName(op.dstRank, op.dstBuffer, op.dstIndex + c) +
                               ": this one writes it while another (" + describeOp(reader) + ") reads it",
                           reader);
        }
      }
      out.writeStep = op.step;
      out.writeOp = opIndex;
    }
    return std::nullopt;
  }

  // ---- Pass 2 of a step: the data ---------------------------------------------------------------

  std::optional<Violation> execute(int32_t opIndex) {
    const Operation& op = algorithm_.ops[opIndex];
    const int64_t src = slotOf(op.srcRank, op.srcBuffer, op.srcIndex);
    const int64_t dst = slotOf(op.dstRank, op.dstBuffer, op.dstIndex);
    for (int32_t c = 0; c < op.count; ++c) {
      if (meta_[src + c].origin == kNone) {
        return violation(ViolationKind::UnwrittenRead, opIndex,
                         "reads " + slotName(op.srcRank, op.srcBuffer, op.srcIndex + c) +
                             ", which holds no data at step " + std::to_string(op.step));
      }
      auto result = op.kind == OpKind::Reduce ? runReduce(opIndex, c, src + c, dst + c)
                                              : runCopy(opIndex, c, src + c, dst + c);
      if (result) return result;
      meta_[src + c].flags |= kReadSinceWritten;
      meta_[dst + c].lastWriter = opIndex;
    }
    return std::nullopt;
  }

  // dst op= src: same chunk, disjoint contributors. The result exists only here.
  std::optional<Violation> runReduce(int32_t opIndex, int32_t c, int64_t src, int64_t dst) {
    const Operation& op = algorithm_.ops[opIndex];
    SlotMeta& to = meta_[dst];
    const SlotMeta& from = meta_[src];
    auto target = [&] { return slotName(op.dstRank, op.dstBuffer, op.dstIndex + c); };
    if (to.origin == kNone) {
      return violation(
          ViolationKind::UnwrittenRead, opIndex,
          "reduces into " + target() + ", which holds no data at step " + std::to_string(op.step));
    }
    uint64_t* out = bits(dst);
    const uint64_t* in = bits(src);
    if (!reduction_) {
      // Without a reduction every chunk is one rank's data: combining two is always wrong.
      const bool same = to.origin == from.origin && std::equal(in, in + words_, out);
      return violation(same ? ViolationKind::DoubleCount : ViolationKind::MixedChunks, opIndex,
                       "reduces " + describeValue(src) + " into " + target() + ", which holds " +
                           describeValue(dst) + ", but " +
                           std::string(collectiveName(algorithm_.collective)) + " combines no data",
                       to.lastWriter);
    }
    if (to.origin != from.origin) {
      return violation(ViolationKind::MixedChunks, opIndex,
                       "reduces chunk " + std::to_string(from.origin) + " into " + target() +
                           ", which holds chunk " + std::to_string(to.origin),
                       to.lastWriter);
    }
    for (int w = 0; w < words_; ++w) {
      if (const uint64_t both = in[w] & out[w]) {
        const int64_t rank = int64_t{w} * 64 + std::countr_zero(both);
        return violation(ViolationKind::DoubleCount, opIndex,
                         "rank " + std::to_string(rank) + "'s contribution to chunk " +
                             std::to_string(to.origin) + " would be counted twice on rank " +
                             std::to_string(op.dstRank) + " (" + target() + " already holds it)",
                         to.lastWriter);
      }
    }
    for (int w = 0; w < words_; ++w) out[w] |= in[w];
    to.flags = kUnique;
    return std::nullopt;
  }

  // dst = src.
  //
  // Lost contribution, deliberately simple: a copy is rejected when the value it overwrites
  //   (1) is not empty,
  //   (2) has not been read since it was written,
  //   (3) is not contained in the new value (same origin chunk, contributors a subset), and
  //   (4) is "unique": the result of a reduce, or an initial input value the postcondition needs
  //       (every input except non-root inputs of Broadcast).
  // A plain copy is never unique: its source may still hold it. Without reductions this leaves
  // only initial inputs that were never read.
  std::optional<Violation> runCopy(int32_t opIndex, int32_t c, int64_t src, int64_t dst) {
    const Operation& op = algorithm_.ops[opIndex];
    SlotMeta& to = meta_[dst];
    const SlotMeta& from = meta_[src];
    uint64_t* out = bits(dst);
    const uint64_t* in = bits(src);
    if (to.origin != kNone && !(to.flags & kReadSinceWritten) && (to.flags & kUnique)) {
      bool contained = to.origin == from.origin;
      for (int w = 0; contained && w < words_; ++w) contained = (out[w] & ~in[w]) == 0;
      if (!contained) {
        return violation(ViolationKind::LostContribution, opIndex,
                         "overwrites " + slotName(op.dstRank, op.dstBuffer, op.dstIndex + c) +
                             " holding the contributions of ranks " + formatRanks(ranksOf(dst)) +
                             " to chunk " + std::to_string(to.origin) + ", which nothing has read",
                         to.lastWriter);
      }
    }
    std::copy(in, in + words_, out);
    to.origin = from.origin;
    to.flags = 0;
    return std::nullopt;
  }

  std::string describeValue(int64_t slot) const {
    const SlotMeta& meta = meta_[slot];
    const auto ranks = ranksOf(slot);
    int64_t count = 0;
    int64_t first = -1;
    for (int w = 0; w < words_; ++w) {
      count += std::popcount(ranks[w]);
      if (first < 0 && ranks[w] != 0) first = int64_t{w} * 64 + std::countr_zero(ranks[w]);
    }
    if (count == 1) return "chunk " + std::to_string(meta.origin) + " of rank " + std::to_string(first);
    return "chunk " + std::to_string(meta.origin) + " of ranks " + formatRanks(ranks);
  }

  // ---- The end state ----------------------------------------------------------------------------

  std::optional<Violation> checkPostcondition() {
    const Collective kind = algorithm_.collective;
    const int32_t outputChunks = algorithm_.chunks(BufferKind::Output);
    std::vector<uint64_t> all(static_cast<size_t>(words_), 0);
    for (int32_t q = 0; q < n_; ++q) all[q / 64] |= uint64_t{1} << (q % 64);
    for (int32_t rank = 0; rank < n_; ++rank) {
      if (kind == Collective::Reduce && rank != algorithm_.root) continue;
      for (int32_t i = 0; i < outputChunks; ++i) {
        // The expected value: chunk `origin` of one rank `owner`, or reduced over all (owner -1).
        int32_t origin = i;
        int32_t owner = -1;
        switch (kind) {
          case Collective::AllGather:
            origin = i % k_;
            owner = i / k_;
            break;
          case Collective::ReduceScatter:
            origin = rank * k_ + i;
            break;
          case Collective::Broadcast:
            owner = algorithm_.root;
            break;
          case Collective::AllToAll:
            origin = rank * k_ + i % k_;
            owner = i / k_;
            break;
          case Collective::AllReduce:
          case Collective::Reduce:
            break;
        }
        const int64_t slot = slotOf(rank, BufferKind::Output, i);
        if (auto problem = compareWith(slot, origin, owner, all)) {
          const SlotMeta& meta = meta_[slot];
          return violation(ViolationKind::Postcondition, meta.lastWriter,
                           "postcondition unmet: " + slotName(rank, BufferKind::Output, i) + " " + *problem);
        }
      }
    }
    return std::nullopt;
  }

  // What is wrong with the slot's value, or nothing when it is the expected one.
  std::optional<std::string> compareWith(int64_t slot, int32_t origin, int32_t owner,
                                         const std::vector<uint64_t>& all) const {
    const SlotMeta& meta = meta_[slot];
    if (meta.origin == kNone) return "holds no data";
    const auto ranks = ranksOf(slot);
    if (owner >= 0) {
      bool exact = meta.origin == origin;
      for (int w = 0; exact && w < words_; ++w) {
        exact = ranks[w] == (w == owner / 64 ? uint64_t{1} << (owner % 64) : 0);
      }
      if (exact) return std::nullopt;
      return "holds " + describeValue(slot) + " instead of chunk " + std::to_string(origin) + " of rank " +
             std::to_string(owner);
    }
    if (meta.origin != origin) {
      return "holds chunk " + std::to_string(meta.origin) + " instead of chunk " + std::to_string(origin);
    }
    std::vector<uint64_t> missing(static_cast<size_t>(words_));
    bool complete = true;
    for (int w = 0; w < words_; ++w) {
      missing[w] = all[w] & ~ranks[w];
      complete = complete && missing[w] == 0;
    }
    if (complete) return std::nullopt;
    return "misses the contributions of ranks " + formatRanks(missing) + " to chunk " +
           std::to_string(origin) + " (holds " + formatRanks(ranks) + ")";
  }

  const Algorithm& algorithm_;
  const int32_t n_;
  const int32_t k_;
  const int32_t words_;
  const bool reduction_;
  std::array<int64_t, kBufferKinds> base_{};
  int64_t slotsPerRank_ = 0;
  std::vector<SlotMeta> meta_;
  std::vector<uint64_t> bits_;
};

}  // namespace

CheckReport checkAlgorithm(const Algorithm& algorithm) {
  auto refuse = [](std::string message, SourceLoc loc = {}) {
    Violation structure;
    structure.kind = ViolationKind::Structure;
    structure.message = std::move(message);
    structure.loc = loc;
    return CheckReport{std::move(structure)};
  };
  if (Status problem = validateStructure(algorithm); !problem.ok())
    return refuse(problem.message(), problem.diagnostic().loc);
  if (algorithm.ops.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return refuse("too many operations to check (" + std::to_string(algorithm.ops.size()) + ")");
  }
  if (const double bytes = stateBytes(algorithm); bytes > kMaxStateBytes) {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    return refuse("too large to check: the symbolic state would take " +
                  std::to_string(static_cast<int64_t>(bytes / kGiB)) + " GiB (limit " +
                  std::to_string(static_cast<int64_t>(kMaxStateBytes / kGiB)) + " GiB)");
  }
  return CheckReport{SymbolicRun(algorithm).run()};
}

std::vector<Diagnostic> violationDiagnostics(const Algorithm& algorithm, const Violation& violation) {
  std::vector<Diagnostic> diagnostics;
  diagnostics.push_back(Diagnostic{Severity::Error, algorithm.sourceName, violation.loc, violation.message});
  if (violation.otherOpIndex >= 0) {
    std::string note;
    switch (violation.kind) {
      case ViolationKind::Race:
        note = "the other operation is here";
        break;
      case ViolationKind::LostContribution:
        note = "the overwritten value was last written here";
        break;
      default:
        note = "the destination was last written here";
        break;
    }
    diagnostics.push_back(
        Diagnostic{Severity::Note, algorithm.sourceName, violation.otherLoc, std::move(note)});
  }
  return diagnostics;
}

}  // namespace tuccl
