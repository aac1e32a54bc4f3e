// Kernel shapes, rerolling and roles (kernel_roles.h).
#include "kernelgen/kernel_roles.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include "plan/plan_storage.h"

namespace tuccl {
namespace {

const char* bufferId(BufferKind buffer) {
  switch (buffer) {
    case BufferKind::Input: return "kInput";
    case BufferKind::Output: return "kOutput";
    default: return "kScratch";
  }
}

// Builds a template and its values side by side: hole(v) writes a hole and records v. Without
// text (the template is known already) only the values are collected.
struct TemplateWriter {
  bool withText = true;
  std::string text;
  std::vector<int32_t> values;
  TemplateWriter& operator<<(const char* s) {
    if (withText) text += s;
    return *this;
  }
  TemplateWriter& hole(int32_t value) {
    if (withText) text += kTemplateHole;
    values.push_back(value);
    return *this;
  }
};

// What decides an entry's template text: its primitive, buffers, dependency count, whether it
// uses a ring and whether it posts progress.
uint64_t templateSignature(PrimitiveKind kind, BufferKind src, BufferKind dst, size_t deps, bool remote,
                           bool posts) {
  uint64_t key = static_cast<uint64_t>(kind);
  key = key * 8 + static_cast<uint64_t>(src);
  key = key * 8 + static_cast<uint64_t>(dst);
  key = key * 2 + (remote ? 1 : 0);
  key = key * 2 + (posts ? 1 : 0);
  return key + (static_cast<uint64_t>(deps) << 32);
}

}  // namespace

EntrySlots entrySlots(const Plan& plan, const KernelLayout& layout, int32_t rank, const PlanTb& tb, int32_t e) {
  const PlanEntry& entry = tb.entries[e];
  const EntryLayout& where = layout.at(rank, tb.id, e);
  const bool remote = where.ring >= 0;
  const int32_t srcRank = entry.kind == PrimitiveKind::Send || !remote ? rank : entry.peer;
  const int32_t dstRank = entry.kind == PrimitiveKind::Send ? entry.peer : rank;
  const bool fused = isFused(entry.kind);
  const int32_t nextRank = fused ? entry.next.peer : -1;
  return {entry,
          where,
          remote,
          srcRank,
          dstRank,
          planStorage(plan, srcRank, entry.srcBuffer, entry.srcIndex),
          planStorage(plan, dstRank, entry.dstBuffer, entry.dstIndex),
          nextRank,
          fused ? planStorage(plan, nextRank, entry.next.dstBuffer, entry.next.dstIndex) : StorageSlot{}};
}

namespace {

// One entry's code (docs/kernels.md "The generated kernel"): the progress report, a flag wait per
// dependency, the primitive and the post of its own progress counter.
EntryCode encodeEntry(const Plan& plan, const KernelLayout& layout, int32_t rank, const PlanTb& tb, int32_t e,
                      EntryTemplates& templates) {
  [[maybe_unused]] const auto [entry, where, remote, srcRank, dstRank, src, dst, nextRank, next] =
      entrySlots(plan, layout, rank, tb, e);
  const uint64_t signature =
      templateSignature(entry.kind, src.buffer, dst.buffer, entry.deps.size(), remote, where.progress >= 0);
  const int32_t known = templates.find(signature);
  TemplateWriter w;
  w.withText = known < 0;
  w.values.reserve(6 + 3 * entry.deps.size());
  w << "t.at(";
  w.hole(e) << ", mb);\n";
  for (const EntryRef& dep : entry.deps) {
    w << "TUCCL_TRY(waitEntry(t, ";
    w.hole(layout.at(rank, dep.tb, dep.entry).progress) << ", ";
    w.hole(dep.tb) << ", ";
    w.hole(dep.entry) << ", mb));\n";
  }
  w << "TUCCL_TRY(";
  switch (entry.kind) {
    case PrimitiveKind::Send:
      w << "send(t, ";
      w.hole(where.ring) << ", " << bufferId(src.buffer) << ", ";
      w.hole(src.index) << ", ";
      w.hole(dst.index) << ", ";
      break;
    case PrimitiveKind::Recv:
    case PrimitiveKind::RecvReduceCopy:
      w << (entry.kind == PrimitiveKind::Recv ? "recv(t, " : "recvReduceCopy(t, ");
      w.hole(where.ring) << ", ";
      w.hole(src.index) << ", " << bufferId(dst.buffer) << ", ";
      w.hole(dst.index) << ", ";
      break;
    case PrimitiveKind::RecvCopySend:
    case PrimitiveKind::RecvReduceSend:
    case PrimitiveKind::RecvReduceCopySend:
      w << (entry.kind == PrimitiveKind::RecvCopySend     ? "recvCopySend(t, "
            : entry.kind == PrimitiveKind::RecvReduceSend ? "recvReduceSend(t, "
                                                          : "recvReduceCopySend(t, ");
      w.hole(where.ring) << ", ";
      w.hole(where.outRing) << ", ";
      w.hole(src.index) << ", " << bufferId(dst.buffer) << ", ";
      w.hole(dst.index) << ", ";
      break;
    case PrimitiveKind::Copy:
    case PrimitiveKind::Reduce:
      w << (entry.kind == PrimitiveKind::Copy ? "copy(t, " : "reduce(t, ") << bufferId(src.buffer) << ", ";
      w.hole(src.index) << ", " << bufferId(dst.buffer) << ", ";
      w.hole(dst.index) << ", ";
      break;
  }
  w.hole(entry.count);
  if (remote) w << ", ", w.hole(entry.op);
  if (isFused(entry.kind)) w << ", ", w.hole(entry.next.op);
  w << ", mb));\n";
  if (where.progress >= 0) {
    w << "postEntry(t, ";
    w.hole(where.progress) << ", mb);\n";
  }
  if (known >= 0) return EntryCode{known, std::move(w.values)};
  const int32_t shape = templates.intern(w.text);
  templates.remember(signature, shape);
  return EntryCode{shape, std::move(w.values)};
}

// Prologue copy for out-of-place calls of in-place plans: (units copied, destination unit block).
std::pair<int32_t, int32_t> prologueCopy(const Plan& plan, const KernelLayout& layout, int32_t rank) {
  if (!plan.inPlace) return {0, 0};
  switch (layout.collective) {
    case Collective::AllGather: return {1, rank};
    case Collective::ReduceScatter: return {0, 0};  // storage is the input: see docs/kernels.md
    case Collective::AllToAll: return {plan.nRanks, 0};
    default: return {1, 0};
  }
}

// Replay plans: the stretches of entries replayed per micro-batch ([first, last) index pairs).
std::vector<std::pair<int32_t, int32_t>> replayBlocks(const Plan& plan, const PlanTb& tb) {
  const int32_t n = static_cast<int32_t>(tb.entries.size());
  if (plan.executionLevel == ExecutionLevel::Task) return {{0, n}};
  const bool wholeAlgorithm = plan.executionLevel == ExecutionLevel::Algorithm;
  std::vector<std::pair<int32_t, int32_t>> blocks;
  for (int32_t first = 0; first < n;) {
    int32_t last = first + 1;
    while (last < n && (wholeAlgorithm || tb.entries[last].subPipeline == tb.entries[first].subPipeline)) ++last;
    blocks.emplace_back(first, last);
    first = last;
  }
  return blocks;
}


// A run of `count` entries starting with `head` then `second`, with the chosen moduli.
EntryRun makeRun(const EntryCode& head, const EntryCode* second, int32_t firstEntry, int32_t count,
                 const std::vector<int32_t>& modulus) {
  EntryRun run;
  run.shape = head.shape;
  run.firstEntry = firstEntry;
  run.count = count;
  run.base = head.values;
  if (count > 1) {
    run.modulus = modulus;
    for (size_t h = 0; h < run.base.size(); ++h) {
      const int64_t d = int64_t{second->values[h]} - head.values[h];
      run.stride.push_back(static_cast<int32_t>(modulus[h] > 0 ? floorMod(d, modulus[h]) : d));
    }
  }
  return run;
}

}  // namespace

int32_t EntryTemplates::intern(const std::string& text) {
  auto [it, inserted] = ids_.try_emplace(text, static_cast<int32_t>(texts_.size()));
  if (inserted) {
    texts_.push_back(text);
    holes_.push_back(static_cast<int32_t>(std::count(text.begin(), text.end(), kTemplateHole)));
  }
  return it->second;
}

std::vector<std::vector<EntryCode>> encodeEntries(const Plan& plan, const KernelLayout& layout, int32_t rank,
                                                  EntryTemplates& templates) {
  std::vector<std::vector<EntryCode>> tbs;
  for (const PlanTb& tb : plan.ranks[rank].tbs) {
    std::vector<EntryCode>& codes = tbs.emplace_back();
    codes.reserve(tb.entries.size());
    for (int32_t e = 0; e < static_cast<int32_t>(tb.entries.size()); ++e) {
      codes.push_back(encodeEntry(plan, layout, rank, tb, e, templates));
    }
  }
  return tbs;
}

int32_t EntryRun::valueAt(size_t hole, int32_t i) const {
  if (count == 1 || stride.empty()) return base[hole];
  const int64_t v = int64_t{base[hole]} + int64_t{i} * stride[hole];
  return static_cast<int32_t>(modulus[hole] > 0 ? floorMod(v, modulus[hole]) : v);
}

namespace {

// Greedy maximal runs over entries [0, n) given by shape(j) and value(j, h) (holes(j) values):
// calls emit(first, next, forms) per run, forms empty for a single entry.
template <typename Shape, typename Value, typename Holes, typename Emit>
void greedyRuns(size_t n, bool reroll, std::span<const int32_t> moduli, Shape shape, Value value, Holes holes,
                Emit emit) {
  std::vector<AffineForms> forms;
  std::vector<AffineForms> narrowed;
  for (size_t first = 0; first < n;) {
    size_t next = first + 1;
    forms.clear();
    if (reroll && next < n && shape(next) == shape(first)) {
      const size_t nHoles = static_cast<size_t>(holes(first));
      bool ok = true;
      for (size_t h = 0; h < nHoles && ok; ++h) {
        forms.push_back(startAffineForms(value(first, h), value(next, h), moduli));
        ok = forms.back().any();
      }
      if (!ok) {
        forms.clear();
      } else {
        ++next;
        while (next < n && shape(next) == shape(first)) {
          narrowed.assign(forms.begin(), forms.end());
          bool keeps = true;
          for (size_t h = 0; h < nHoles && keeps; ++h) {
            narrowAffineForms(narrowed[h], value(first, h), value(first + 1, h), value(next, h),
                        static_cast<int64_t>(next - first), moduli);
            keeps = narrowed[h].any();
          }
          if (!keeps) break;
          forms.swap(narrowed);
          ++next;
        }
      }
    }
    emit(first, next, forms);
    first = next;
  }
}

}  // namespace

std::vector<EntryRun> rerollEntries(std::span<const EntryCode> entries, int32_t firstEntry, bool reroll,
                                    std::span<const int32_t> moduli) {
  std::vector<EntryRun> runs;
  greedyRuns(
      entries.size(), reroll, moduli, [&](size_t j) { return entries[j].shape; },
      [&](size_t j, size_t h) { return entries[j].values[h]; },
      [&](size_t j) { return static_cast<int32_t>(entries[j].values.size()); },
      [&](size_t first, size_t next, const std::vector<AffineForms>& forms) {
        std::vector<int32_t> modulus;
        for (const AffineForms& f : forms) modulus.push_back(chosenModulus(f, moduli));
        const int32_t count = static_cast<int32_t>(next - first);
        runs.push_back(makeRun(entries[first], count > 1 ? &entries[first + 1] : nullptr,
                               firstEntry + static_cast<int32_t>(first), count, modulus));
      });
  return runs;
}

namespace {

// Whether the rank's out-of-place prologue may leave its copy unawaited: it copies one unit and no
// entry of the rank writes into that unit's storage (a Send writes only the peer's side), so every
// read of it can come from the input (primitives.h `prologue`).
bool readsCopyFromInput(const Plan& plan, const KernelLayout& layout, int32_t rank, int32_t copyBlocks,
                        int32_t dstBlock) {
  if (copyBlocks != 1) return false;
  const int32_t k = layout.chunksPerUnit;
  for (const PlanTb& tb : plan.ranks[rank].tbs) {
    for (int32_t e = 0; e < static_cast<int32_t>(tb.entries.size()); ++e) {
      if (tb.entries[e].kind == PrimitiveKind::Send) continue;
      const EntrySlots slots = entrySlots(plan, layout, rank, tb, e);
      if (slots.dst.buffer != BufferKind::Output) continue;
      const int32_t first = slots.dst.index / k;
      const int32_t last = (slots.dst.index + slots.entry.count - 1) / k;
      if (first <= dstBlock && dstBlock <= last) return false;
    }
  }
  return true;
}

RankCode rankFrame(const Plan& plan, const KernelLayout& layout, int32_t rank) {
  RankCode code;
  code.rank = rank;
  const auto [copyBlocks, dstBlock] = prologueCopy(plan, layout, rank);
  int32_t epilogueBlock = 0;
  int32_t epilogueBlocks = 0;
  if (isReduction(layout.collective)) {
    const StorageSlot first = planStorage(plan, rank, BufferKind::Output, 0);
    code.epilogueBuffer = first.buffer == BufferKind::Input ? 0 : first.buffer == BufferKind::Output ? 1 : 2;
    epilogueBlock = first.index / layout.chunksPerUnit;
    epilogueBlocks = 1;
  }
  code.frame = {copyBlocks, dstBlock, epilogueBlock, epilogueBlocks,
                readsCopyFromInput(plan, layout, rank, copyBlocks, dstBlock) ? 1 : 0};
  return code;
}

// One run of a rank: entries [begin, end) of RankRuns' concatenated entries.
struct RunSpan {
  int32_t tb = 0;     ///< canonical position of its TB
  int32_t block = 0;  ///< replay block within the TB
  int32_t first = 0;  ///< entry index within the TB
  size_t begin = 0;
  size_t end = 0;
  bool isLoop = false;  ///< a loop (any length, even 0 or 1, when re-cut to another skeleton)
  int32_t shape = -1;   ///< the template, when re-cut (an empty loop has no entry to tell it)
  bool loop() const { return isLoop; }
};

// A rank's entries and its own maximal runs, its TBs in canonical order: what roles are made of.
// The skeleton (`key`) is per TB its blocks and per run its template and whether it is a loop;
// the run lengths are values, so ranks whose schedules put the same runs in the same order share
// a skeleton even when a run is longer on one rank than on another (HPDS orders each node's ring
// entries by the global chunk queue, so the turning points of a node's loops move with the node).
struct RankRuns {
  RankCode frame;  ///< frame values and TB ids (canonical order); no runs
  std::vector<int32_t> key;
  std::vector<int32_t> blocksOfTb;  ///< per TB (canonical order): its replay blocks
  std::vector<int32_t> shapes;      ///< per entry
  std::vector<uint32_t> valueAt;    ///< per entry: offset of its values
  std::vector<int32_t> values;
  std::vector<RunSpan> runs;       ///< TB by TB, block by block
  std::vector<uint32_t> formsAt;   ///< per run: offset of its holes' forms (loops only)
  std::vector<AffineForms> forms;

  int32_t value(size_t entry, size_t hole) const { return values[valueAt[entry] + hole]; }
  EntryCode entry(const EntryTemplates& templates, size_t j) const {
    const int32_t holes = templates.holes(shapes[j]);
    return EntryCode{shapes[j], std::vector<int32_t>(values.begin() + valueAt[j], values.begin() + valueAt[j] + holes)};
  }
  const AffineForms& formsOf(size_t run, size_t hole) const { return forms[formsAt[run] + hole]; }
  int32_t shapeOfRun(size_t run) const { return runs[run].shape >= 0 ? runs[run].shape : shapes[runs[run].begin]; }
};

// One TB's entries and maximal runs (greedy, per replay block), and its skeleton.
struct TbRuns {
  struct Run {
    int32_t block = 0;
    int32_t first = 0;
    int32_t count = 0;
    std::vector<AffineForms> forms;  ///< per hole; empty for a single entry
  };
  std::vector<EntryCode> entries;
  int32_t blocks = 0;
  std::vector<Run> runs;
  std::vector<int32_t> key;
};

TbRuns tbRuns(const Plan& plan, const KernelLayout& layout, int32_t rank, const PlanTb& tb, EntryTemplates& templates,
              bool reroll, std::span<const int32_t> moduli) {
  TbRuns out;
  out.entries.reserve(tb.entries.size());
  for (int32_t e = 0; e < static_cast<int32_t>(tb.entries.size()); ++e) {
    out.entries.push_back(encodeEntry(plan, layout, rank, tb, e, templates));
  }
  const std::vector<std::pair<int32_t, int32_t>> blocks = replayBlocks(plan, tb);
  out.blocks = static_cast<int32_t>(blocks.size());
  out.key.push_back(out.blocks);
  for (int32_t b = 0; b < out.blocks; ++b) {
    const int32_t first = blocks[b].first;  // not a structured binding: lambdas capture it (Clang 14)
    const int32_t last = blocks[b].second;
    const size_t runsAt = out.key.size();
    out.key.push_back(0);
    const EntryCode* at = out.entries.data() + first;
    greedyRuns(
        static_cast<size_t>(last - first), reroll, moduli, [&](size_t j) { return at[j].shape; },
        [&](size_t j, size_t h) { return at[j].values[h]; },
        [&](size_t j) { return static_cast<int32_t>(at[j].values.size()); },
        [&](size_t runFirst, size_t next, const std::vector<AffineForms>& forms) {
          const int32_t count = static_cast<int32_t>(next - runFirst);
          out.runs.push_back(TbRuns::Run{b, first + static_cast<int32_t>(runFirst), count, forms});
          out.key.push_back(at[runFirst].shape);
          out.key.push_back(count > 1 ? 1 : 0);
          ++out.key[runsAt];
        });
  }
  return out;
}

// The rank's TBs sorted by their skeletons (then by id), so ranks whose TBs are a permutation of
// one another line up, concatenated.
RankRuns encodeRankRuns(const Plan& plan, const KernelLayout& layout, int32_t rank, EntryTemplates& templates,
                        bool reroll, std::span<const int32_t> moduli) {
  RankRuns out;
  out.frame = rankFrame(plan, layout, rank);
  const std::vector<PlanTb>& planTbs = plan.ranks[rank].tbs;
  std::vector<TbRuns> tbs;
  tbs.reserve(planTbs.size());
  for (const PlanTb& tb : planTbs) tbs.push_back(tbRuns(plan, layout, rank, tb, templates, reroll, moduli));
  std::vector<int32_t> order(tbs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tbs[a].key < tbs[b].key; });
  out.key = {out.frame.epilogueBuffer, static_cast<int32_t>(tbs.size())};
  for (size_t c = 0; c < order.size(); ++c) {
    TbRuns& tb = tbs[order[c]];
    out.frame.tbs.emplace_back().tb = order[c];
    out.blocksOfTb.push_back(tb.blocks);
    out.key.insert(out.key.end(), tb.key.begin(), tb.key.end());
    const size_t base = out.shapes.size();
    for (const EntryCode& code : tb.entries) {
      out.shapes.push_back(code.shape);
      out.valueAt.push_back(static_cast<uint32_t>(out.values.size()));
      out.values.insert(out.values.end(), code.values.begin(), code.values.end());
    }
    for (const TbRuns::Run& run : tb.runs) {
      const size_t begin = base + static_cast<size_t>(run.first);
      out.runs.push_back(RunSpan{static_cast<int32_t>(c), run.block, run.first, begin,
                                 begin + static_cast<size_t>(run.count), run.count > 1});
      out.formsAt.push_back(static_cast<uint32_t>(out.forms.size()));
      out.forms.insert(out.forms.end(), run.forms.begin(), run.forms.end());
    }
    tb = TbRuns{};
  }
  return out;
}

// Per run, the modulus of each hole (loops only): 0 for plain affine, else a plan size.
using RunModuli = std::vector<std::vector<int32_t>>;

RunModuli ownModuli(const RankRuns& rank, const EntryTemplates& templates, std::span<const int32_t> moduli) {
  RunModuli chosen(rank.runs.size());
  for (size_t s = 0; s < rank.runs.size(); ++s) {
    if (!rank.runs[s].loop()) continue;
    const int32_t holes = templates.holes(rank.shapeOfRun(s));
    for (int32_t h = 0; h < holes; ++h) chosen[s].push_back(chosenModulus(rank.formsOf(s, h), moduli));
  }
  return chosen;
}

// The moduli that hold on every member (same skeleton): plain where all are plainly affine, else
// the smallest plan size all agree on; nullopt when some hole has none in common.
std::optional<RunModuli> commonModuli(std::span<const RankRuns* const> members, const EntryTemplates& templates,
                                      std::span<const int32_t> moduli) {
  const RankRuns& first = *members[0];
  RunModuli chosen(first.runs.size());
  for (size_t s = 0; s < first.runs.size(); ++s) {
    if (!first.runs[s].loop()) continue;
    const int32_t holes = templates.holes(first.shapeOfRun(s));
    for (int32_t h = 0; h < holes; ++h) {
      AffineForms all;
      all.modular = ~0u;
      for (const RankRuns* member : members) {
        const AffineForms& forms = member->formsOf(s, h);
        all.plain = all.plain && forms.plain;
        all.modular &= forms.modular;
      }
      if (!all.any()) return std::nullopt;
      chosen[s].push_back(chosenModulus(all, moduli));
    }
  }
  return chosen;
}

// The rank's code: its runs with the given moduli. A loop of 0 or 1 entries (a rank re-cut to a
// longer skeleton) has stride 0 and, when empty, base 0.
RankCode cutRuns(const RankRuns& rank, const EntryTemplates& templates, const RunModuli& chosen) {
  RankCode code = rank.frame;
  for (size_t c = 0; c < code.tbs.size(); ++c) code.tbs[c].blocks.resize(static_cast<size_t>(rank.blocksOfTb[c]));
  for (size_t s = 0; s < rank.runs.size(); ++s) {
    const RunSpan& span = rank.runs[s];
    const int32_t count = static_cast<int32_t>(span.end - span.begin);
    std::vector<EntryRun>& block = code.tbs[span.tb].blocks[span.block];
    if (span.loop() && count < 2) {
      EntryRun& run = block.emplace_back();
      run.shape = rank.shapeOfRun(s);
      run.firstEntry = span.first;
      run.count = count;
      run.modulus = chosen[s];
      run.base = count == 1 ? rank.entry(templates, span.begin).values : std::vector<int32_t>(chosen[s].size(), 0);
      run.stride.assign(chosen[s].size(), 0);
      continue;
    }
    const EntryCode head = rank.entry(templates, span.begin);
    const EntryCode second = count > 1 ? rank.entry(templates, span.begin + 1) : EntryCode{};
    block.push_back(makeRun(head, count > 1 ? &second : nullptr, span.first, count, chosen[s]));
  }
  return code;
}

// Re-cutting a rank to another role's skeleton: its TB's runs are split into pieces that line up
// with the skeleton's runs, a loop of the skeleton may get no entries (a zero-length loop), a
// single entry exactly one. A piece of an affine run is affine, so the rank's code is unchanged.
struct Piece {
  size_t begin = 0;  ///< index into RankRuns' concatenated entries
  size_t count = 0;
  size_t run = 0;    ///< the rank's own run it comes from (forms), when count > 0
};

class SkeletonFit {
 public:
  SkeletonFit(const RankRuns& rank, size_t firstRun, size_t nRuns, const RankRuns& target, size_t targetFirst,
              size_t targetRuns)
      : rank_(rank), first_(firstRun), n_(nRuns), target_(target), targetFirst_(targetFirst), m_(targetRuns) {}

  /// The pieces, one per target run, or empty when the TB does not fit.
  std::optional<std::vector<Piece>> fit() {
    std::vector<Piece> pieces;
    if (!search(0, 0, 0, pieces)) return std::nullopt;
    return pieces;
  }

 private:
  size_t length(size_t i) const { return rank_.runs[first_ + i].end - rank_.runs[first_ + i].begin; }
  int32_t shapeOf(size_t i) const { return rank_.shapeOfRun(first_ + i); }

  // Target run j onwards, from the rank's run i at offset `off`; depth-first, few lengths per loop
  // (all, all but one or two, one, two, none), memoising failures.
  bool search(size_t j, size_t i, size_t off, std::vector<Piece>& pieces) {
    if (j == m_) return i == n_;
    const uint64_t state = (uint64_t{j} << 40) | (uint64_t{i} << 20) | off;
    if (failed_.count(state)) return false;
    const RunSpan& want = target_.runs[targetFirst_ + j];
    const int32_t wantShape = target_.shapeOfRun(targetFirst_ + j);
    const bool matches = i < n_ && shapeOf(i) == wantShape;
    const size_t rem = i < n_ ? length(i) - off : 0;
    std::vector<size_t> takes;
    if (!want.loop()) {
      if (matches) takes.push_back(1);
    } else {
      if (matches) {
        for (size_t k : {rem, rem - std::min<size_t>(rem, 1), rem - std::min<size_t>(rem, 2), size_t{1}, size_t{2}}) {
          if (k >= 1 && k <= rem && std::find(takes.begin(), takes.end(), k) == takes.end()) takes.push_back(k);
        }
      }
      takes.push_back(0);
    }
    for (size_t k : takes) {
      const size_t begin = i < n_ ? rank_.runs[first_ + i].begin + off : 0;
      pieces.push_back(Piece{begin, k, first_ + i});
      const bool done = k > 0 && k == rem;
      if (search(j + 1, done ? i + 1 : i, done ? 0 : off + k, pieces)) return true;
      pieces.pop_back();
    }
    failed_.insert(state);
    return false;
  }

  const RankRuns& rank_;
  size_t first_, n_;
  const RankRuns& target_;
  size_t targetFirst_, m_;
  std::set<uint64_t> failed_;
};

// The forms a piece of `count` entries allows: those of its run, all for an empty loop, and for
// one entry the moduli its values lie under.
void pieceForms(const RankRuns& rank, const EntryTemplates& templates, const Piece& piece, int32_t shape,
                std::span<const int32_t> moduli, std::vector<AffineForms>& forms) {
  const int32_t holes = templates.holes(shape);
  for (int32_t h = 0; h < holes; ++h) {
    AffineForms f;
    if (piece.count >= 2) {
      f = rank.formsOf(piece.run, static_cast<size_t>(h));
    } else {
      f.modular = 0;
      for (size_t j = 0; j < moduli.size() && j < 32; ++j) {
        const int32_t v = piece.count == 1 ? rank.value(piece.begin, static_cast<size_t>(h)) : 0;
        if (v >= 0 && v < moduli[j]) f.modular |= 1u << j;
      }
    }
    forms.push_back(f);
  }
}

// `rank` re-cut to the skeleton of `target` (task-level plans: one block per TB), or nullopt.
std::optional<RankRuns> recut(const RankRuns& rank, const RankRuns& target, const EntryTemplates& templates,
                              std::span<const int32_t> moduli) {
  const size_t nTbs = rank.frame.tbs.size();
  if (target.frame.tbs.size() != nTbs || rank.frame.epilogueBuffer != target.frame.epilogueBuffer) return std::nullopt;
  for (size_t c = 0; c < nTbs; ++c) {
    if (rank.blocksOfTb[c] != 1 || target.blocksOfTb[c] != 1) return std::nullopt;
  }
  auto runsOf = [](const RankRuns& r) {
    std::vector<std::pair<size_t, size_t>> ranges(r.frame.tbs.size(), {0, 0});
    for (size_t s = 0; s < r.runs.size(); ++s) {
      auto& range = ranges[static_cast<size_t>(r.runs[s].tb)];
      if (range.second == 0) range.first = s;
      ++range.second;
    }
    return ranges;
  };
  const auto own = runsOf(rank);
  const auto want = runsOf(target);
  RankRuns out;
  out.frame = rank.frame;
  out.frame.tbs.clear();
  out.key = target.key;
  out.shapes = rank.shapes;
  out.valueAt = rank.valueAt;
  out.values = rank.values;
  std::vector<bool> used(nTbs, false);
  for (size_t c = 0; c < nTbs; ++c) {
    std::optional<std::vector<Piece>> pieces;
    size_t match = nTbs;
    for (size_t t = 0; t < nTbs && !pieces; ++t) {
      if (used[t]) continue;
      pieces = SkeletonFit(rank, own[t].first, own[t].second, target, want[c].first, want[c].second).fit();
      if (pieces) match = t;
    }
    if (!pieces) return std::nullopt;
    used[match] = true;
    out.frame.tbs.push_back(rank.frame.tbs[match]);
    out.blocksOfTb.push_back(1);
    const size_t tbBegin = own[match].second > 0 ? rank.runs[own[match].first].begin : 0;
    for (size_t j = 0; j < pieces->size(); ++j) {
      const Piece& piece = (*pieces)[j];
      const RunSpan& shape = target.runs[want[c].first + j];
      const size_t begin = piece.count > 0 ? piece.begin : tbBegin;
      const int32_t shapeId = target.shapeOfRun(want[c].first + j);
      RunSpan span{static_cast<int32_t>(c), 0, static_cast<int32_t>(begin - tbBegin), begin, begin + piece.count,
                   shape.loop(), shapeId};
      out.formsAt.push_back(static_cast<uint32_t>(out.forms.size()));
      if (span.loop()) pieceForms(rank, templates, piece, shapeId, moduli, out.forms);
      out.runs.push_back(span);
    }
  }
  return out;
}

}  // namespace

RankCode encodeRank(const Plan& plan, const KernelLayout& layout, int32_t rank, EntryTemplates& templates,
                    bool reroll) {
  const std::vector<int32_t> moduli = planModuli(plan);
  const RankRuns runs = encodeRankRuns(plan, layout, rank, templates, reroll, moduli);
  return cutRuns(runs, templates, ownModuli(runs, templates, moduli));
}

std::vector<EntryCode> unrollTb(const TbCode& tb) {
  std::vector<EntryCode> entries;
  for (const std::vector<EntryRun>& block : tb.blocks) {
    for (const EntryRun& run : block) {
      for (int32_t i = 0; i < run.count; ++i) {
        EntryCode& entry = entries.emplace_back();
        entry.shape = run.shape;
        for (size_t h = 0; h < run.base.size(); ++h) entry.values.push_back(run.valueAt(h, i));
      }
    }
  }
  return entries;
}

std::vector<int32_t> structureKey(const RankCode& code) {
  std::vector<int32_t> key = {code.epilogueBuffer, static_cast<int32_t>(code.tbs.size())};
  for (const TbCode& tb : code.tbs) {
    key.push_back(static_cast<int32_t>(tb.blocks.size()));
    for (const std::vector<EntryRun>& block : tb.blocks) {
      key.push_back(static_cast<int32_t>(block.size()));
      for (const EntryRun& run : block) {
        key.push_back(run.shape);
        key.push_back(run.stride.empty() ? 0 : 1);  // the length of a loop is a value
        key.insert(key.end(), run.modulus.begin(), run.modulus.end());
      }
    }
  }
  return key;
}

std::vector<int32_t> flattenValues(const RankCode& code) {
  std::vector<int32_t> values = code.frame;
  for (const TbCode& tb : code.tbs) values.push_back(tb.tb);
  for (const TbCode& tb : code.tbs) {
    for (const std::vector<EntryRun>& block : tb.blocks) {
      for (const EntryRun& run : block) {
        if (!run.stride.empty()) values.push_back(run.count);
        values.insert(values.end(), run.base.begin(), run.base.end());
        values.insert(values.end(), run.stride.begin(), run.stride.end());
      }
    }
  }
  return values;
}

RankCode withValues(const RankCode& structure, std::span<const int32_t> values) {
  RankCode code = structure;
  size_t at = 0;
  auto take = [&](std::vector<int32_t>& into) {
    for (int32_t& v : into) v = values[at++];
  };
  take(code.frame);
  for (TbCode& tb : code.tbs) tb.tb = values[at++];
  for (TbCode& tb : code.tbs) {
    for (std::vector<EntryRun>& block : tb.blocks) {
      for (EntryRun& run : block) {
        if (!run.stride.empty()) run.count = values[at++];
        take(run.base);
        take(run.stride);
        if (!run.base.empty()) run.firstEntry = run.base[0];  // hole 0 is the entry index (t.at)
      }
    }
  }
  if (at != values.size()) throw std::logic_error("withValues: the values are not of this structure");
  return code;
}

int32_t RoleValue::valueFor(int32_t rank, std::span<const int32_t> table) const {
  switch (form) {
    case Literal: return b;
    case RankAffine: {
      const int64_t v = int64_t{a} * rank + b;
      return static_cast<int32_t>(m > 0 ? floorMod(v, m) : v);
    }
    default: return table[slot];
  }
}

namespace {

// How the ranks of a role obtain one value: a literal, (a * rank + b) % m, or a table slot.
RoleValue classify(std::span<const int32_t> ranks, std::span<const int32_t> values, std::span<const int32_t> moduli,
                   int32_t& tableSize) {
  RoleValue value;
  value.b = values[0];
  if (std::all_of(values.begin(), values.end(), [&](int32_t v) { return v == values[0]; })) return value;
  const int64_t dv = int64_t{values[1]} - values[0];
  const int64_t dr = int64_t{ranks[1]} - ranks[0];
  if (dv % dr == 0) {
    const int64_t a = dv / dr;
    const int64_t b = values[0] - a * ranks[0];
    bool affine = a >= INT32_MIN && a <= INT32_MAX && b >= INT32_MIN && b <= INT32_MAX;
    for (size_t i = 2; affine && i < ranks.size(); ++i) affine = int64_t{values[i]} == a * ranks[i] + b;
    if (affine) {
      value.form = RoleValue::RankAffine;
      value.a = static_cast<int32_t>(a);
      value.b = static_cast<int32_t>(b);
      return value;
    }
  }
  // Modulo a plan size: from two consecutive ranks, a = their difference.
  for (size_t i = 0; i + 1 < ranks.size(); ++i) {
    if (ranks[i + 1] != ranks[i] + 1) continue;
    for (int32_t m : moduli) {
      const int64_t a = floorMod(int64_t{values[i + 1]} - values[i], m);
      const int64_t b = floorMod(values[0] - a * ranks[0], m);
      bool fits = true;
      for (size_t k = 0; fits && k < ranks.size(); ++k) {
        fits = values[k] >= 0 && values[k] < m && values[k] == floorMod(a * ranks[k] + b, m);
      }
      if (fits) {
        value.form = RoleValue::RankAffine;
        value.a = static_cast<int32_t>(a);
        value.b = static_cast<int32_t>(b);
        value.m = m;
        return value;
      }
    }
    break;
  }
  value.form = RoleValue::Table;
  value.slot = tableSize++;
  return value;
}

// Joins each group, smallest last, to a larger group whose skeleton its ranks can be re-cut to
// (zero-length and one-entry loops, runs split into pieces) with moduli every rank agrees on:
// the first and last nodes of a ring, whose loops are shorter or missing, join the middle ones.
void mergeGroups(std::vector<RankRuns>& ranks, std::vector<std::vector<int32_t>>& groups,
                 const EntryTemplates& templates, std::span<const int32_t> moduli) {
  std::vector<size_t> order(groups.size());
  for (size_t g = 0; g < order.size(); ++g) order[g] = g;
  // Larger groups first, then richer skeletons (more runs): those are the ones others fit into.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (groups[a].size() != groups[b].size()) return groups[a].size() > groups[b].size();
    return ranks[groups[a].front()].runs.size() > ranks[groups[b].front()].runs.size();
  });
  std::vector<size_t> kept;
  std::vector<int32_t> representative(groups.size(), -1);  ///< a rank with the group's own skeleton
  for (size_t g : order) {
    bool merged = false;
    for (size_t h : kept) {
      const RankRuns& target = ranks[representative[h]];
      std::vector<RankRuns> recuts;
      for (int32_t r : groups[g]) {
        std::optional<RankRuns> fitted = recut(ranks[r], target, templates, moduli);
        if (!fitted) break;
        recuts.push_back(std::move(*fitted));
      }
      if (recuts.size() != groups[g].size()) continue;
      std::vector<const RankRuns*> members;
      for (int32_t r : groups[h]) members.push_back(&ranks[r]);
      for (const RankRuns& recut : recuts) members.push_back(&recut);
      if (!commonModuli(members, templates, moduli)) continue;
      for (size_t m = 0; m < recuts.size(); ++m) ranks[groups[g][m]] = std::move(recuts[m]);
      groups[h].insert(groups[h].end(), groups[g].begin(), groups[g].end());
      std::sort(groups[h].begin(), groups[h].end());
      merged = true;
      break;
    }
    if (!merged) {
      kept.push_back(g);
      representative[g] = groups[g].front();
    }
  }
  std::vector<std::vector<int32_t>> result;
  for (size_t g : kept) result.push_back(std::move(groups[g]));
  groups = std::move(result);
}

}  // namespace

RoleAssignment assignRoles(const Plan& plan, const KernelLayout& layout, EntryTemplates& templates, bool reroll,
                           bool share) {
  RoleAssignment assignment;
  assignment.roleOfRank.assign(static_cast<size_t>(plan.nRanks), -1);
  assignment.tables.resize(static_cast<size_t>(plan.nRanks));
  const std::vector<int32_t> moduli = planModuli(plan);
  // Pass 1: every rank's own maximal runs; ranks of one skeleton form a group.
  std::vector<RankRuns> ranks;
  ranks.reserve(static_cast<size_t>(plan.nRanks));
  std::map<std::vector<int32_t>, size_t> groupOfKey;
  std::vector<std::vector<int32_t>> groups;
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    ranks.push_back(encodeRankRuns(plan, layout, r, templates, reroll, moduli));
    std::vector<int32_t> key = ranks.back().key;
    if (!share) key.push_back(r);
    auto [it, inserted] = groupOfKey.try_emplace(std::move(key), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(r);
  }
  if (share && reroll) mergeGroups(ranks, groups, templates, moduli);
  // Pass 2: a group whose ranks agree on a modulus for every hole of every loop is a role; else
  // it splits by the ranks' own moduli (each part agrees by construction).
  std::vector<std::pair<std::vector<int32_t>, RunModuli>> roles;
  for (std::vector<int32_t>& group : groups) {
    std::vector<const RankRuns*> members;
    for (int32_t r : group) members.push_back(&ranks[r]);
    if (std::optional<RunModuli> chosen = commonModuli(members, templates, moduli)) {
      roles.emplace_back(std::move(group), std::move(*chosen));
      continue;
    }
    std::map<RunModuli, std::vector<int32_t>> parts;
    for (int32_t r : group) parts[ownModuli(ranks[r], templates, moduli)].push_back(r);
    for (auto& [chosen, part] : parts) roles.emplace_back(std::move(part), chosen);
  }
  std::sort(roles.begin(), roles.end(), [](const auto& a, const auto& b) { return a.first.front() < b.first.front(); });
  // Each rank's code and values, and how the role's kernel obtains each value.
  for (auto& [members, chosen] : roles) {
    KernelRole& role = assignment.roles.emplace_back();
    role.ranks = std::move(members);
    std::vector<std::vector<int32_t>> values;
    for (int32_t r : role.ranks) {
      assignment.roleOfRank[r] = static_cast<int32_t>(assignment.roles.size() - 1);
      RankCode code = cutRuns(ranks[r], templates, chosen);
      ranks[r] = RankRuns{};  // done with it
      values.push_back(flattenValues(code));
      if (r == role.ranks.front()) role.code = std::move(code);
    }
    const size_t slots = values[0].size();
    std::vector<int32_t> column(values.size());
    for (size_t s = 0; s < slots; ++s) {
      for (size_t m = 0; m < values.size(); ++m) column[m] = values[m][s];
      const RoleValue value = classify(role.ranks, column, moduli, role.tableSize);
      if (value.form == RoleValue::Table) {
        for (size_t m = 0; m < values.size(); ++m) assignment.tables[role.ranks[m]].push_back(column[m]);
      }
      role.values.push_back(value);
    }
  }
  return assignment;
}

std::vector<int32_t> roleValuesFor(const KernelRole& role, int32_t rank, std::span<const int32_t> table) {
  std::vector<int32_t> values;
  values.reserve(role.values.size());
  for (const RoleValue& value : role.values) values.push_back(value.valueFor(rank, table));
  return values;
}

std::string fillTemplate(const std::string& text, std::span<const std::string> holes) {
  std::string out;
  size_t next = 0;
  for (char c : text) {
    if (c == kTemplateHole) {
      out += holes[next++];
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tuccl
