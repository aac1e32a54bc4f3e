// Kernel shapes, rerolling and roles (kernel_roles.h).
#include "kernelgen/kernel_roles.h"

#include <algorithm>
#include <map>
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
  return {entry, where, remote, srcRank, dstRank, planStorage(plan, srcRank, entry.srcBuffer, entry.srcIndex),
          planStorage(plan, dstRank, entry.dstBuffer, entry.dstIndex)};
}

namespace {

// One entry's code (docs/kernels.md "The generated kernel"): the progress report, a flag wait per
// dependency, the primitive and the post of its own progress counter.
EntryCode encodeEntry(const Plan& plan, const KernelLayout& layout, int32_t rank, const PlanTb& tb, int32_t e,
                      EntryTemplates& templates) {
  const auto [entry, where, remote, srcRank, dstRank, src, dst] = entrySlots(plan, layout, rank, tb, e);
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
    case PrimitiveKind::Copy:
    case PrimitiveKind::Reduce:
      w << (entry.kind == PrimitiveKind::Copy ? "copy(t, " : "reduce(t, ") << bufferId(src.buffer) << ", ";
      w.hole(src.index) << ", " << bufferId(dst.buffer) << ", ";
      w.hole(dst.index) << ", ";
      break;
  }
  w.hole(entry.count);
  if (remote) w << ", ", w.hole(entry.op);
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


int64_t floorMod(int64_t v, int64_t m) { return ((v % m) + m) % m; }

// The forms one hole of a run can take: plain affine in the position, or affine modulo one of the
// candidate moduli (bit j: moduli[j]). Built from the run's first two values, narrowed by each next.
struct HoleForms {
  bool plain = true;
  uint32_t modular = 0;
  bool any() const { return plain || modular != 0; }
};

HoleForms startForms(int32_t v0, int32_t v1, std::span<const int32_t> moduli) {
  HoleForms forms;
  forms.plain = int64_t{v1} - v0 >= INT32_MIN && int64_t{v1} - v0 <= INT32_MAX;
  for (size_t j = 0; j < moduli.size() && j < 32; ++j) {
    if (v0 >= 0 && v1 >= 0 && v0 < moduli[j] && v1 < moduli[j]) forms.modular |= 1u << j;
  }
  return forms;
}

// Keeps the forms under which value `vi` at position i continues the run v0, v1, ... While the run
// is plainly affine, a modulus stays consistent exactly while the values stay in [0, m).
void narrowForms(HoleForms& forms, int32_t v0, int32_t v1, int32_t vi, int64_t i, std::span<const int32_t> moduli) {
  if (forms.plain) {
    if (int64_t{vi} == v0 + i * (int64_t{v1} - v0)) {
      for (size_t j = 0; j < moduli.size() && j < 32; ++j) {
        if (vi < 0 || vi >= moduli[j]) forms.modular &= ~(1u << j);
      }
      return;
    }
    forms.plain = false;
  }
  for (size_t j = 0; j < moduli.size() && j < 32; ++j) {
    if ((forms.modular & (1u << j)) == 0) continue;
    const int64_t m = moduli[j];
    if (vi < 0 || vi >= m || vi != floorMod(v0 + i * floorMod(int64_t{v1} - v0, m), m)) forms.modular &= ~(1u << j);
  }
}

// The modulus a hole uses: 0 when plain affine works, else the smallest consistent one.
int32_t chosenModulus(const HoleForms& forms, std::span<const int32_t> moduli) {
  if (forms.plain) return 0;
  for (size_t j = 0; j < moduli.size() && j < 32; ++j) {
    if (forms.modular & (1u << j)) return moduli[j];
  }
  return -1;
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

std::vector<int32_t> planModuli(const Plan& plan) {
  std::vector<int32_t> moduli = {plan.nRanks};
  for (int32_t chunks : plan.bufferChunks) moduli.push_back(chunks);
  std::sort(moduli.begin(), moduli.end());
  moduli.erase(std::unique(moduli.begin(), moduli.end()), moduli.end());
  moduli.erase(std::remove_if(moduli.begin(), moduli.end(), [](int32_t m) { return m < 2; }), moduli.end());
  return moduli;
}

namespace {

// Greedy maximal runs over entries [0, n) given by shape(j) and value(j, h) (holes(j) values):
// calls emit(first, next, forms) per run, forms empty for a single entry.
template <typename Shape, typename Value, typename Holes, typename Emit>
void greedyRuns(size_t n, bool reroll, std::span<const int32_t> moduli, Shape shape, Value value, Holes holes,
                Emit emit) {
  std::vector<HoleForms> forms;
  std::vector<HoleForms> narrowed;
  for (size_t first = 0; first < n;) {
    size_t next = first + 1;
    forms.clear();
    if (reroll && next < n && shape(next) == shape(first)) {
      const size_t nHoles = static_cast<size_t>(holes(first));
      bool ok = true;
      for (size_t h = 0; h < nHoles && ok; ++h) {
        forms.push_back(startForms(value(first, h), value(next, h), moduli));
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
            narrowForms(narrowed[h], value(first, h), value(first + 1, h), value(next, h),
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
      [&](size_t first, size_t next, const std::vector<HoleForms>& forms) {
        std::vector<int32_t> modulus;
        for (const HoleForms& f : forms) modulus.push_back(chosenModulus(f, moduli));
        const int32_t count = static_cast<int32_t>(next - first);
        runs.push_back(makeRun(entries[first], count > 1 ? &entries[first + 1] : nullptr,
                               firstEntry + static_cast<int32_t>(first), count, modulus));
      });
  return runs;
}

namespace {

// The order of a rank's TBs in its kernel: by their templates (then by id), so ranks whose TBs are
// a permutation of one another get the same code.
std::vector<int32_t> canonicalTbOrder(const std::vector<std::vector<int32_t>>& tbKeys) {
  std::vector<int32_t> order(tbKeys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tbKeys[a] < tbKeys[b]; });
  return order;
}

// A TB's templates and replay blocks: what its canonical position is sorted by.
std::vector<int32_t> tbKey(const Plan& plan, const PlanTb& tb, std::span<const EntryCode> entries) {
  std::vector<int32_t> key;
  for (const auto& [first, last] : replayBlocks(plan, tb)) key.push_back(last - first);
  key.push_back(-1);
  for (const EntryCode& entry : entries) key.push_back(entry.shape);
  return key;
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
  code.frame = {copyBlocks, dstBlock, epilogueBlock, epilogueBlocks};
  return code;
}

}  // namespace

RankCode encodeRank(const Plan& plan, const KernelLayout& layout, int32_t rank, EntryTemplates& templates,
                    bool reroll) {
  RankCode code = rankFrame(plan, layout, rank);
  const std::vector<int32_t> moduli = planModuli(plan);
  const std::vector<std::vector<EntryCode>> entries = encodeEntries(plan, layout, rank, templates);
  const std::vector<PlanTb>& tbs = plan.ranks[rank].tbs;
  std::vector<std::vector<int32_t>> keys;
  for (const PlanTb& tb : tbs) keys.push_back(tbKey(plan, tb, entries[tb.id]));
  for (int32_t id : canonicalTbOrder(keys)) {
    TbCode& tbCode = code.tbs.emplace_back();
    tbCode.tb = id;
    const std::span<const EntryCode> all = entries[id];
    for (const auto& [first, last] : replayBlocks(plan, tbs[id])) {
      tbCode.blocks.push_back(rerollEntries(all.subspan(first, last - first), first, reroll, moduli));
    }
  }
  return code;
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
        key.push_back(run.count);
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
        take(run.base);
        take(run.stride);
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

// A rank's entries, compact: every entry's template and its values, concatenated; TBs in
// canonical order.
struct EncodedRank {
  RankCode frame;  ///< frame values and TB ids (canonical order); no runs
  std::vector<std::vector<std::pair<int32_t, int32_t>>> blocks;  ///< per TB: [first, last) entry ranges
  std::vector<int32_t> tbFirst;  ///< per TB: index of its first entry in `shapes`
  std::vector<int32_t> shapes;
  std::vector<uint32_t> valueAt;  ///< per entry: offset of its values
  std::vector<int32_t> values;

  int32_t value(size_t entry, size_t hole) const { return values[valueAt[entry] + hole]; }
  EntryCode entry(const EntryTemplates& templates, size_t j) const {
    const int32_t holes = templates.holes(shapes[j]);
    return EntryCode{shapes[j], std::vector<int32_t>(values.begin() + valueAt[j], values.begin() + valueAt[j] + holes)};
  }
};

EncodedRank encodeCompact(const Plan& plan, const KernelLayout& layout, int32_t rank, EntryTemplates& templates) {
  EncodedRank encoded;
  encoded.frame = rankFrame(plan, layout, rank);
  const std::vector<PlanTb>& tbs = plan.ranks[rank].tbs;
  std::vector<std::vector<EntryCode>> entries(tbs.size());
  std::vector<std::vector<int32_t>> keys;
  for (const PlanTb& tb : tbs) {
    for (int32_t e = 0; e < static_cast<int32_t>(tb.entries.size()); ++e) {
      entries[tb.id].push_back(encodeEntry(plan, layout, rank, tb, e, templates));
    }
    keys.push_back(tbKey(plan, tb, entries[tb.id]));
  }
  for (int32_t id : canonicalTbOrder(keys)) {
    encoded.frame.tbs.emplace_back().tb = id;
    encoded.tbFirst.push_back(static_cast<int32_t>(encoded.shapes.size()));
    encoded.blocks.push_back(replayBlocks(plan, tbs[id]));
    for (EntryCode& code : entries[id]) {
      encoded.shapes.push_back(code.shape);
      encoded.valueAt.push_back(static_cast<uint32_t>(encoded.values.size()));
      encoded.values.insert(encoded.values.end(), code.values.begin(), code.values.end());
    }
    entries[id].clear();
    entries[id].shrink_to_fit();
  }
  return encoded;
}

// What must be equal for ranks to share a kernel before rerolling: the TBs (in canonical order),
// their blocks and the template of every entry.
std::vector<int32_t> shapeKey(const EncodedRank& encoded) {
  std::vector<int32_t> key = {encoded.frame.epilogueBuffer, static_cast<int32_t>(encoded.blocks.size())};
  for (const auto& blocks : encoded.blocks) {
    key.push_back(static_cast<int32_t>(blocks.size()));
    for (const auto& [first, last] : blocks) key.push_back(last - first);
  }
  key.insert(key.end(), encoded.shapes.begin(), encoded.shapes.end());
  return key;
}

// The starts of the rank's own maximal runs (and of every block), by entry.
void markRunStarts(const EncodedRank& encoded, const EntryTemplates& templates, bool reroll,
                   std::span<const int32_t> moduli, std::vector<bool>& starts) {
  for (size_t tb = 0; tb < encoded.blocks.size(); ++tb) {
    const size_t base = static_cast<size_t>(encoded.tbFirst[tb]);
    for (const auto& [first, last] : encoded.blocks[tb]) {
      const size_t at = base + static_cast<size_t>(first);
      greedyRuns(
          static_cast<size_t>(last - first), reroll, moduli, [&](size_t j) { return encoded.shapes[at + j]; },
          [&](size_t j, size_t h) { return encoded.value(at + j, h); },
          [&](size_t j) { return templates.holes(encoded.shapes[at + j]); },
          [&](size_t runFirst, size_t, const std::vector<HoleForms>&) { starts[at + runFirst] = true; });
    }
  }
}

// One run of a role: entries [begin, end) of the concatenated entries.
struct RunSpan {
  size_t tb = 0;
  int32_t first = 0;  ///< entry index within the TB
  size_t begin = 0;
  size_t end = 0;
};

std::vector<RunSpan> runSpans(const EncodedRank& encoded, const std::vector<bool>& starts) {
  std::vector<RunSpan> spans;
  for (size_t tb = 0; tb < encoded.blocks.size(); ++tb) {
    const size_t base = static_cast<size_t>(encoded.tbFirst[tb]);
    for (const auto& [first, last] : encoded.blocks[tb]) {
      for (int32_t e = first; e < last;) {
        int32_t next = e + 1;
        while (next < last && !starts[base + next]) ++next;
        spans.push_back(RunSpan{tb, e, base + e, base + next});
        e = next;
      }
    }
  }
  return spans;
}

// The moduli of every run and hole that hold on every rank of the role; a run without one for some
// hole is marked to be cut into single entries (returns false).
bool commonModuli(const std::vector<const EncodedRank*>& members, const EntryTemplates& templates,
                  std::span<const int32_t> moduli, const std::vector<RunSpan>& spans, std::vector<bool>& starts,
                  std::vector<std::vector<int32_t>>& chosen) {
  bool ok = true;
  chosen.assign(spans.size(), {});
  for (size_t s = 0; s < spans.size(); ++s) {
    const RunSpan& span = spans[s];
    if (span.end - span.begin < 2) continue;
    const int32_t holes = templates.holes(members[0]->shapes[span.begin]);
    for (int32_t h = 0; h < holes; ++h) {
      HoleForms all;
      all.modular = ~0u;
      for (const EncodedRank* member : members) {
        const int32_t v0 = member->value(span.begin, h);
        const int32_t v1 = member->value(span.begin + 1, h);
        HoleForms forms = startForms(v0, v1, moduli);
        for (size_t j = span.begin + 2; j < span.end && forms.any(); ++j) {
          narrowForms(forms, v0, v1, member->value(j, h), static_cast<int64_t>(j - span.begin), moduli);
        }
        all.plain = all.plain && forms.plain;
        all.modular &= forms.modular;
      }
      if (!all.any()) {
        for (size_t j = span.begin; j < span.end; ++j) starts[j] = true;
        ok = false;
        break;
      }
      chosen[s].push_back(chosenModulus(all, moduli));
    }
  }
  return ok;
}

RankCode cutRuns(const EncodedRank& encoded, const EntryTemplates& templates, const std::vector<RunSpan>& spans,
                 const std::vector<std::vector<int32_t>>& chosen) {
  RankCode code = encoded.frame;
  size_t s = 0;
  for (size_t tb = 0; tb < encoded.blocks.size(); ++tb) {
    for (const auto& [first, last] : encoded.blocks[tb]) {
      std::vector<EntryRun>& block = code.tbs[tb].blocks.emplace_back();
      for (; s < spans.size() && spans[s].tb == tb && spans[s].first < last; ++s) {
        const RunSpan& span = spans[s];
        const int32_t count = static_cast<int32_t>(span.end - span.begin);
        const EntryCode head = encoded.entry(templates, span.begin);
        const EntryCode second = count > 1 ? encoded.entry(templates, span.begin + 1) : EntryCode{};
        block.push_back(makeRun(head, count > 1 ? &second : nullptr, span.first, count, chosen[s]));
      }
    }
  }
  return code;
}

}  // namespace

RoleAssignment assignRoles(const Plan& plan, const KernelLayout& layout, EntryTemplates& templates, bool reroll,
                           bool share) {
  RoleAssignment assignment;
  assignment.roleOfRank.assign(static_cast<size_t>(plan.nRanks), -1);
  assignment.tables.resize(static_cast<size_t>(plan.nRanks));
  const std::vector<int32_t> moduli = planModuli(plan);
  // Pass 1: group the ranks by their templates; a group's runs start wherever one of its ranks'
  // own runs starts (a piece of a run is a run), so every rank of the group has the same loops.
  std::map<std::vector<int32_t>, int32_t> roleOfKey;
  std::vector<std::vector<bool>> startsOfRole;
  std::vector<EncodedRank> encoded;
  encoded.reserve(static_cast<size_t>(plan.nRanks));
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    encoded.push_back(encodeCompact(plan, layout, r, templates));
    std::vector<int32_t> key = shapeKey(encoded.back());
    if (!share) key.push_back(r);
    auto [it, inserted] = roleOfKey.try_emplace(std::move(key), static_cast<int32_t>(assignment.roles.size()));
    if (inserted) {
      assignment.roles.emplace_back();
      startsOfRole.emplace_back(encoded.back().shapes.size(), false);
    }
    assignment.roles[it->second].ranks.push_back(r);
    assignment.roleOfRank[r] = it->second;
    markRunStarts(encoded.back(), templates, reroll, moduli, startsOfRole[it->second]);
  }
  // Pass 2: per role the moduli every rank agrees on (runs without are cut), each rank's runs and
  // values, and how the kernel obtains each value.
  for (size_t k = 0; k < assignment.roles.size(); ++k) {
    KernelRole& role = assignment.roles[k];
    std::vector<const EncodedRank*> members;
    for (int32_t r : role.ranks) members.push_back(&encoded[r]);
    std::vector<RunSpan> spans;
    std::vector<std::vector<int32_t>> chosen;
    do {
      spans = runSpans(*members[0], startsOfRole[k]);
    } while (!commonModuli(members, templates, moduli, spans, startsOfRole[k], chosen));
    std::vector<std::vector<int32_t>> values;
    for (int32_t r : role.ranks) {
      RankCode code = cutRuns(encoded[r], templates, spans, chosen);
      encoded[r] = EncodedRank{};  // done with it
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
