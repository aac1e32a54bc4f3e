// The rolled plan: a Plan written with as many records as it has distinct work, not as many as it
// has entries (docs/plan-format.md, version 3). Plan JSON version 3 is this structure as text.
//
// Within a TB, a run of consecutive entries with the same shape (kind, buffers, hasDependents,
// number of deps) whose integers step affinely in the position i within the run, plainly
// (base + i * stride) or modulo a plan size (rings wrap: (base + i * stride) mod m), is one
// RolledRun. Ranks whose rolled TBs have the same structure (TB count, runs, shapes, repeats)
// share one RankTemplate; each integer of a template (a TB's id and peers, a run's bases, strides
// and moduli) is the same on all its ranks, affine in the rank ((a * rank + b) mod m), or read from
// the rank's own values.
//
// In:  a Plan (rollPlan), or a RolledPlan read from JSON (expandRolledRank).
// Out: the RolledPlan, or each rank's PlanRank exactly as the original plan had it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "support/status.h"

namespace tuccl {

/// One integer of a rank template.
struct RankValue {
  enum class Form : uint8_t {
    Literal,     ///< b on every rank
    RankAffine,  ///< a * rank + b, taken modulo m when m > 0 (floor modulo: in [0, m))
    PerRank,     ///< the rank's values[slot]
  };
  Form form = Form::Literal;
  int64_t a = 0;
  int64_t b = 0;
  int64_t m = 0;
  int32_t slot = 0;
  static RankValue literal(int64_t value) { return RankValue{Form::Literal, 0, value, 0, 0}; }
  int64_t valueFor(int32_t rank, std::span<const int64_t> values) const;
  friend bool operator==(const RankValue&, const RankValue&) = default;
};

/// The integers of an entry, in this order; a fused entry's PlanEntry::Next follows (NextPeer
/// ...); then per dependency its tb and entry.
enum class EntryField : uint8_t {
  Peer, SrcIndex, DstIndex, Count, Step, Op, SubPipeline, Line, Column,
  NextPeer, NextDstIndex, NextStep, NextOp, NextSubPipeline, NextLine, NextColumn
};
inline constexpr int kEntryFields = 9;
inline constexpr int kNextFields = 7;
/// The named fields of an entry of `kind`: kEntryFields, plus kNextFields for a fused kind.
int namedFields(PrimitiveKind kind);
/// "peer", "srcIndex", ..., "nextPeer", ... as the JSON names them.
const char* entryFieldName(int field);

/// What every entry of a run shares.
struct EntryShape {
  PrimitiveKind kind = PrimitiveKind::Send;
  BufferKind srcBuffer = BufferKind::Input;
  BufferKind dstBuffer = BufferKind::Output;
  BufferKind nextDstBuffer = BufferKind::Input;  ///< fused kinds: PlanEntry::Next::dstBuffer
  bool hasDependents = false;
  int32_t deps = 0;  ///< dependencies per entry
  friend bool operator==(const EntryShape&, const EntryShape&) = default;
};

/// `repeat` consecutive entries: entry i has field f = base[f] + i * stride[f], taken modulo
/// modulo[f] when that is positive. Fields are namedFields(kind), then 2 per dependency.
struct RolledRun {
  EntryShape shape;
  int64_t repeat = 1;
  std::vector<RankValue> base, stride, modulo;
  friend bool operator==(const RolledRun&, const RolledRun&) = default;
};

struct RolledTb {
  RankValue id, sendPeer, recvPeer;
  std::vector<RolledRun> runs;
  friend bool operator==(const RolledTb&, const RolledTb&) = default;
};

struct RankTemplate {
  std::vector<RolledTb> tbs;
  int32_t perRankValues = 0;  ///< how many values each rank of the template carries
  friend bool operator==(const RankTemplate&, const RankTemplate&) = default;
};

struct RolledRank {
  int32_t rank = 0;
  int32_t templateIndex = 0;
  std::vector<int64_t> values;  ///< RankValue::PerRank slots
  friend bool operator==(const RolledRank&, const RolledRank&) = default;
};

struct RolledPlan {
  std::vector<RankTemplate> templates;
  std::vector<RolledRank> ranks;  ///< in the plan's rank order
};

/// The plan's ranks rolled: deterministic (equal plans give equal RolledPlans).
RolledPlan rollPlan(const Plan& plan);

/// Entries plus dependencies `tmpl` expands to per rank, saturated at INT64_MAX.
int64_t expandedCost(const RankTemplate& tmpl);

/// Expands `rank` of `tmpl`; every value is checked against its field's range. An error names
/// the template, TB, run and position (`where` is prefixed, e.g. "plan.templates[0]").
Expected<PlanRank> expandRolledRank(const RankTemplate& tmpl, const RolledRank& rank, const std::string& where);

}  // namespace tuccl
