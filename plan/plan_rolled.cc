// Rolling a plan into runs and rank templates, and expanding it back (plan_rolled.h).
#include "plan/plan_rolled.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "plan/affine_runs.h"

namespace tuccl {

namespace {

// Whether a stride or an affine coefficient fits the 32 bits the reader allows.
bool fits32(int64_t value) { return value >= INT32_MIN && value <= INT32_MAX; }

EntryShape shapeOf(const PlanEntry& entry) {
  return EntryShape{entry.kind, entry.srcBuffer, entry.dstBuffer, entry.next.dstBuffer, entry.hasDependents,
                    static_cast<int32_t>(entry.deps.size())};
}

// The entry's integers in EntryField order, then each dependency's tb and entry.
void fieldsOf(const PlanEntry& entry, std::vector<int64_t>& out) {
  out.assign({entry.peer, entry.srcIndex, entry.dstIndex, entry.count, entry.step, entry.op, entry.subPipeline,
              static_cast<int64_t>(entry.loc.line), static_cast<int64_t>(entry.loc.column)});
  if (isFused(entry.kind)) {
    const PlanEntry::Next& next = entry.next;
    out.insert(out.end(), {next.peer, next.dstIndex, next.step, next.op, next.subPipeline,
                           static_cast<int64_t>(next.loc.line), static_cast<int64_t>(next.loc.column)});
  }
  for (const EntryRef& dep : entry.deps) {
    out.push_back(dep.tb);
    out.push_back(dep.entry);
  }
}

// One rank rolled, as a structure (what must be equal to share a template) and its values.
//   structure: tbs, then per TB its runs, then per run kind, buffers, hasDependents, deps, repeat
//   values:    per TB id, sendPeer, recvPeer, then per run and field its base, stride, modulo
struct RankCode {
  std::vector<int64_t> structure;
  std::vector<int64_t> values;
};

// The length of the maximal run of `entries` starting at `first`.
size_t runLength(const std::vector<PlanEntry>& entries, size_t first, std::span<const int32_t> moduli,
                 std::vector<int64_t>& v0, std::vector<int64_t>& v1, std::vector<AffineForms>& forms) {
  const EntryShape shape = shapeOf(entries[first]);
  if (first + 1 >= entries.size() || !(shapeOf(entries[first + 1]) == shape)) return 1;
  fieldsOf(entries[first], v0);
  fieldsOf(entries[first + 1], v1);
  forms.clear();
  for (size_t f = 0; f < v0.size(); ++f) forms.push_back(startAffineForms(v0[f], v1[f], moduli));
  std::vector<int64_t> vi;
  std::vector<AffineForms> narrowed(forms.size());
  size_t next = first + 2;
  for (; next < entries.size() && shapeOf(entries[next]) == shape; ++next) {
    fieldsOf(entries[next], vi);
    const auto i = static_cast<int64_t>(next - first);
    bool fits = true;
    for (size_t f = 0; f < vi.size() && fits; ++f) {
      narrowed[f] = forms[f];
      narrowAffineForms(narrowed[f], v0[f], v1[f], vi[f], i, moduli);
      fits = narrowed[f].any();
    }
    if (!fits) break;
    forms.swap(narrowed);
  }
  return next - first;
}

void appendRun(const std::vector<PlanEntry>& entries, size_t first, size_t length, std::span<const int32_t> moduli,
               const std::vector<int64_t>& v0, const std::vector<int64_t>& v1, const std::vector<AffineForms>& forms,
               RankCode& code) {
  const EntryShape shape = shapeOf(entries[first]);
  code.structure.insert(code.structure.end(),
                        {static_cast<int64_t>(shape.kind), static_cast<int64_t>(shape.srcBuffer),
                         static_cast<int64_t>(shape.dstBuffer), static_cast<int64_t>(shape.nextDstBuffer),
                         shape.hasDependents ? 1 : 0, shape.deps,
                         static_cast<int64_t>(length)});
  if (length == 1) {
    std::vector<int64_t> only;
    fieldsOf(entries[first], only);
    for (int64_t value : only) code.values.insert(code.values.end(), {value, 0, 0});
    return;
  }
  for (size_t f = 0; f < v0.size(); ++f) {
    const int64_t m = chosenModulus(forms[f], moduli);
    const int64_t stride = m > 0 ? floorMod(v1[f] - v0[f], m) : v1[f] - v0[f];
    code.values.insert(code.values.end(), {v0[f], stride, m});
  }
}

RankCode encodeTb(const PlanTb& tb, std::span<const int32_t> moduli) {
  RankCode code;
  code.values.insert(code.values.end(), {tb.id, tb.sendPeer, tb.recvPeer});
  code.structure.push_back(0);
  std::vector<int64_t> v0, v1;
  std::vector<AffineForms> forms;
  for (size_t first = 0; first < tb.entries.size();) {
    const size_t length = runLength(tb.entries, first, moduli, v0, v1, forms);
    appendRun(tb.entries, first, length, moduli, v0, v1, forms, code);
    ++code.structure[0];
    first += length;
  }
  return code;
}

// The rank's TBs in canonical order (by structure, then id), so that ranks whose TBs are a
// permutation of one another share a template: the expansion puts each TB back at its id. A rank
// whose ids are not 0, 1, ... in order (not a valid plan) keeps its order.
RankCode encodeRank(const PlanRank& rank, std::span<const int32_t> moduli) {
  std::vector<RankCode> tbs;
  bool idsArePositions = true;
  for (size_t b = 0; b < rank.tbs.size(); ++b) {
    tbs.push_back(encodeTb(rank.tbs[b], moduli));
    idsArePositions = idsArePositions && rank.tbs[b].id == static_cast<int32_t>(b);
  }
  std::vector<size_t> order(tbs.size());
  for (size_t b = 0; b < order.size(); ++b) order[b] = b;
  if (idsArePositions) {
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return tbs[x].structure < tbs[y].structure; });
  }
  RankCode code;
  code.structure.push_back(static_cast<int64_t>(tbs.size()));
  for (size_t b : order) {
    code.structure.insert(code.structure.end(), tbs[b].structure.begin(), tbs[b].structure.end());
    code.values.insert(code.values.end(), tbs[b].values.begin(), tbs[b].values.end());
  }
  return code;
}

// Fits one value across the ranks of a template: literal, affine in the rank (plainly or modulo
// one of the plan's sizes), or nothing (the caller makes it per rank).
std::optional<RankValue> fitAffine(std::span<const int32_t> ranks, std::span<const int64_t> values,
                                   std::span<const int32_t> moduli) {
  const int64_t v0 = values[0];
  if (std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == v0; })) return RankValue::literal(v0);
  const int64_t r0 = ranks[0], d = ranks[1] - r0, dv = values[1] - v0;
  if (d == 0) return std::nullopt;  // not a valid plan's ranks: keep the values per rank
  auto fitsAll = [&](const RankValue& value) {
    for (size_t k = 0; k < ranks.size(); ++k) {
      if (value.valueFor(ranks[k], {}) != values[k]) return false;
    }
    return true;
  };
  if (dv % d == 0 && fits32(dv / d) && fits32(v0 - dv / d * r0)) {
    const int64_t a = dv / d;
    const RankValue plain{RankValue::Form::RankAffine, a, v0 - a * r0, 0, 0};
    if (fitsAll(plain)) return plain;
  }
  constexpr int64_t kLargestSearchedModulus = 1 << 16;
  for (int64_t m : moduli) {
    if (m > kLargestSearchedModulus) break;
    if (!std::all_of(values.begin(), values.end(), [&](int64_t v) { return v >= 0 && v < m; })) continue;
    for (int64_t a = 0; a < m; ++a) {
      if (floorMod(a * d - dv, m) != 0) continue;
      const RankValue modular{RankValue::Form::RankAffine, a, floorMod(v0 - a * r0, m), m, 0};
      if (fitsAll(modular)) return modular;
    }
  }
  return std::nullopt;
}

// The template of `code`'s structure with each value slot's form.
RankTemplate buildTemplate(const RankCode& code, const std::vector<RankValue>& slots, int32_t perRank) {
  RankTemplate tmpl;
  tmpl.perRankValues = perRank;
  size_t s = 0, v = 0;
  const auto tbs = code.structure[s++];
  for (int64_t b = 0; b < tbs; ++b) {
    RolledTb tb;
    tb.id = slots[v++];
    tb.sendPeer = slots[v++];
    tb.recvPeer = slots[v++];
    const auto runs = code.structure[s++];
    for (int64_t r = 0; r < runs; ++r) {
      RolledRun run;
      run.shape.kind = static_cast<PrimitiveKind>(code.structure[s++]);
      run.shape.srcBuffer = static_cast<BufferKind>(code.structure[s++]);
      run.shape.dstBuffer = static_cast<BufferKind>(code.structure[s++]);
      run.shape.nextDstBuffer = static_cast<BufferKind>(code.structure[s++]);
      run.shape.hasDependents = code.structure[s++] != 0;
      run.shape.deps = static_cast<int32_t>(code.structure[s++]);
      run.repeat = code.structure[s++];
      for (int32_t f = 0; f < namedFields(run.shape.kind) + 2 * run.shape.deps; ++f) {
        run.base.push_back(slots[v++]);
        run.stride.push_back(slots[v++]);
        run.modulo.push_back(slots[v++]);
      }
      tb.runs.push_back(std::move(run));
    }
    tmpl.tbs.push_back(std::move(tb));
  }
  return tmpl;
}

// Ranks sharing one structure (`members`: positions in the plan, ascending): their values decide
// each slot's form.
void rollGroup(const Plan& plan, const std::vector<RankCode>& codes, const std::vector<int32_t>& members,
               std::span<const int32_t> moduli, RolledPlan& rolled) {
  const auto templateIndex = static_cast<int32_t>(rolled.templates.size());
  const RankCode& first = codes[members[0]];
  std::vector<int32_t> ranks;
  for (int32_t position : members) ranks.push_back(plan.ranks[position].rank);
  std::vector<RankValue> slots(first.values.size());
  std::vector<size_t> perRankSlots;
  std::vector<int64_t> column(members.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    for (size_t k = 0; k < members.size(); ++k) column[k] = codes[members[k]].values[s];
    std::optional<RankValue> fitted =
        members.size() == 1 ? RankValue::literal(column[0]) : fitAffine(ranks, column, moduli);
    if (fitted) {
      slots[s] = *fitted;
    } else {
      slots[s] = RankValue{RankValue::Form::PerRank, 0, 0, 0, static_cast<int32_t>(perRankSlots.size())};
      perRankSlots.push_back(s);
    }
  }
  rolled.templates.push_back(buildTemplate(first, slots, static_cast<int32_t>(perRankSlots.size())));
  for (int32_t position : members) {
    RolledRank& rank = rolled.ranks[position];
    rank.rank = plan.ranks[position].rank;
    rank.templateIndex = templateIndex;
    for (size_t s : perRankSlots) rank.values.push_back(codes[position].values[s]);
  }
}

[[noreturn]] void failExpansion(const std::string& message) { throw std::runtime_error(message); }

// A template integer's value on a rank, within [low, high].
int64_t checkedValue(const RankValue& value, const RolledRank& rank, int64_t low, int64_t high,
                     const std::string& where) {
  const int64_t v = value.valueFor(rank.rank, rank.values);
  if (v < low || v > high) {
    failExpansion(where + " = " + std::to_string(v) + " on rank " + std::to_string(rank.rank) + " is out of range [" +
                  std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  return v;
}

std::string fieldName(int32_t field, int32_t named) {
  if (field < named) return entryFieldName(field);
  return std::string("deps[") + std::to_string((field - named) / 2) + "][" + std::to_string((field - named) % 2) + "]";
}

// The smallest value a field of an expanded entry may take.
int64_t lowestValue(int32_t field) { return field == static_cast<int32_t>(EntryField::Count) ? 1 : 0; }

void expandRun(const RolledRun& run, const RolledRank& rank, const std::string& where, PlanTb& tb) {
  const auto fields = static_cast<int32_t>(run.base.size());
  const int32_t named = namedFields(run.shape.kind);
  if (fields != named + 2 * run.shape.deps) failExpansion(where + ": the run's fields do not match its kind and deps");
  std::vector<int64_t> base(fields), stride(fields), modulo(fields), value(fields);
  for (int32_t f = 0; f < fields; ++f) {
    const std::string name = fieldName(f, named);
    base[f] = checkedValue(run.base[f], rank, INT32_MIN, INT32_MAX, where + ".entry." + name);
    stride[f] = checkedValue(run.stride[f], rank, INT32_MIN, INT32_MAX, where + ".stride." + name);
    modulo[f] = checkedValue(run.modulo[f], rank, 0, INT32_MAX, where + ".modulo." + name);
  }
  for (int64_t i = 0; i < run.repeat; ++i) {
    for (int32_t f = 0; f < fields; ++f) {
      const int64_t v = base[f] + i * stride[f];
      value[f] = modulo[f] > 0 ? floorMod(v, modulo[f]) : v;
      if (value[f] < lowestValue(f) || value[f] > INT32_MAX) {
        failExpansion(where + ": entry " + std::to_string(i) + " of the run on rank " + std::to_string(rank.rank) +
                      " has " + fieldName(f, named) + " = " + std::to_string(value[f]) + ", out of range [" +
                      std::to_string(lowestValue(f)) + ", " + std::to_string(INT32_MAX) + "]");
      }
    }
    PlanEntry entry;
    entry.kind = run.shape.kind;
    entry.srcBuffer = run.shape.srcBuffer;
    entry.dstBuffer = run.shape.dstBuffer;
    entry.hasDependents = run.shape.hasDependents;
    entry.peer = static_cast<int32_t>(value[0]);
    entry.srcIndex = static_cast<int32_t>(value[1]);
    entry.dstIndex = static_cast<int32_t>(value[2]);
    entry.count = static_cast<int32_t>(value[3]);
    entry.step = static_cast<int32_t>(value[4]);
    entry.op = static_cast<int32_t>(value[5]);
    entry.subPipeline = static_cast<int32_t>(value[6]);
    entry.loc = SourceLoc{static_cast<uint32_t>(value[7]), static_cast<uint32_t>(value[8])};
    if (isFused(entry.kind)) {
      PlanEntry::Next& next = entry.next;
      next.dstBuffer = run.shape.nextDstBuffer;
      next.peer = static_cast<int32_t>(value[9]);
      next.dstIndex = static_cast<int32_t>(value[10]);
      next.step = static_cast<int32_t>(value[11]);
      next.op = static_cast<int32_t>(value[12]);
      next.subPipeline = static_cast<int32_t>(value[13]);
      next.loc = SourceLoc{static_cast<uint32_t>(value[14]), static_cast<uint32_t>(value[15])};
    }
    entry.deps.reserve(run.shape.deps);
    for (int32_t d = 0; d < run.shape.deps; ++d) {
      entry.deps.push_back(EntryRef{static_cast<int32_t>(value[named + 2 * d]),
                                    static_cast<int32_t>(value[named + 2 * d + 1])});
    }
    tb.entries.push_back(std::move(entry));
  }
}

// A template lists a rank's TBs in canonical order; each goes back to the position of its id.
Expected<PlanRank> placeTbsById(PlanRank rank, const std::string& where) {
  std::vector<PlanTb> placed(rank.tbs.size());
  std::vector<bool> taken(rank.tbs.size(), false);
  for (PlanTb& tb : rank.tbs) {
    const auto id = static_cast<size_t>(tb.id);
    if (id >= placed.size() || taken[id]) {
      return makeError(ErrorCode::InvalidInput, where + ": the TB ids of rank " + std::to_string(rank.rank) +
                                                    " are not 0.." + std::to_string(placed.size() - 1) +
                                                    " each once (TB id " + std::to_string(tb.id) + ")");
    }
    taken[id] = true;
    placed[id] = std::move(tb);
  }
  rank.tbs = std::move(placed);
  return rank;
}

}  // namespace

int64_t RankValue::valueFor(int32_t rank, std::span<const int64_t> values) const {
  switch (form) {
    case Form::Literal:
      return b;
    case Form::RankAffine: {
      const int64_t v = a * rank + b;
      return m > 0 ? floorMod(v, m) : v;
    }
    case Form::PerRank:
      return values[slot];
  }
  return b;
}

const char* entryFieldName(int field) {
  static constexpr const char* kNames[kEntryFields + kNextFields] = {
      "peer",     "srcIndex",     "dstIndex", "count",  "step",           "op",       "subPipeline", "line",
      "column",   "nextPeer",     "nextDstIndex", "nextStep", "nextOp", "nextSubPipeline", "nextLine", "nextColumn"};
  return kNames[field];
}

int namedFields(PrimitiveKind kind) { return kEntryFields + (isFused(kind) ? kNextFields : 0); }

RolledPlan rollPlan(const Plan& plan) {
  const std::vector<int32_t> moduli = planModuli(plan);
  std::vector<RankCode> codes;
  codes.reserve(plan.ranks.size());
  std::map<std::vector<int64_t>, size_t> groupOf;  // structure -> group, in order of first rank
  std::vector<std::vector<int32_t>> groups;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    codes.push_back(encodeRank(plan.ranks[r], moduli));
    auto [it, added] = groupOf.try_emplace(codes.back().structure, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(static_cast<int32_t>(r));
  }
  RolledPlan rolled;
  rolled.ranks.resize(plan.ranks.size());
  for (const std::vector<int32_t>& members : groups) rollGroup(plan, codes, members, moduli, rolled);
  return rolled;
}

int64_t expandedCost(const RankTemplate& tmpl) {
  int64_t cost = 0;
  for (const RolledTb& tb : tmpl.tbs) {
    for (const RolledRun& run : tb.runs) {
      const int64_t per = 1 + run.shape.deps;
      if (run.repeat > (INT64_MAX - cost) / per) return INT64_MAX;
      cost += run.repeat * per;
    }
  }
  return cost;
}

Expected<PlanRank> expandRolledRank(const RankTemplate& tmpl, const RolledRank& rank, const std::string& where) {
  if (rank.values.size() != static_cast<size_t>(tmpl.perRankValues)) {
    return makeError(ErrorCode::InvalidInput, "rank " + std::to_string(rank.rank) + " has " +
                                                  std::to_string(rank.values.size()) + " values, its template needs " +
                                                  std::to_string(tmpl.perRankValues));
  }
  PlanRank expanded;
  expanded.rank = rank.rank;
  try {
    for (size_t b = 0; b < tmpl.tbs.size(); ++b) {
      const RolledTb& rolledTb = tmpl.tbs[b];
      const std::string tbWhere = where + ".tbs[" + std::to_string(b) + "]";
      PlanTb tb;
      tb.id = static_cast<int32_t>(checkedValue(rolledTb.id, rank, 0, INT32_MAX, tbWhere + ".id"));
      tb.sendPeer = static_cast<int32_t>(checkedValue(rolledTb.sendPeer, rank, -2, INT32_MAX, tbWhere + ".sendPeer"));
      tb.recvPeer = static_cast<int32_t>(checkedValue(rolledTb.recvPeer, rank, -2, INT32_MAX, tbWhere + ".recvPeer"));
      for (size_t r = 0; r < rolledTb.runs.size(); ++r) {
        expandRun(rolledTb.runs[r], rank, tbWhere + ".runs[" + std::to_string(r) + "]", tb);
      }
      expanded.tbs.push_back(std::move(tb));
    }
  } catch (const std::runtime_error& error) {
    return makeError(ErrorCode::InvalidInput, error.what());
  }
  return placeTbsById(std::move(expanded), where);
}

}  // namespace tuccl
