// Kernel shapes: a rank's generated code as data, so that runs of similar entries become loops
// (rerolling) and ranks with the same code share one kernel (roles). docs/kernels.md, "Rerolling
// and roles".
//
// In:  a Plan and its KernelLayout.
// Out: per rank a RankCode: each plan entry's code is an EntryTemplate (the text with every
//      integer constant a hole) and the hole values; a run of consecutive entries of a TB with
//      one template whose holes are affine in the position i within the run (base + i * stride)
//      is one EntryRun; a hole may also step modulo a plan size (chunk indices and peers wrap
//      around rings: (base + i * stride) % m). A rank's TBs are put in a canonical order (by the
//      templates of their runs), so ranks whose TBs are a permutation of one another share code.
//      Ranks whose own maximal runs have the same skeleton (per TB the templates of its runs, in
//      order, and which are loops) share a KernelRole: a loop's length is a value like any other,
//      so a node whose ring turns around after 3 entries and one that turns after 5 share a
//      kernel. A smaller group joins a larger one when its ranks can be re-cut to its skeleton
//      (runs split into pieces, loops of length 0 or 1; the same entries in the same order). A
//      value equal on all the role's ranks is a literal, one affine in the rank (possibly
//      modulo a plan size) is `(a * rank + b) % m`, any other is read from the rank's value table
//      (KernelArgs::roleValues).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernelgen/kernel_layout.h"
#include "plan/affine_runs.h"
#include "plan/plan.h"
#include "plan/plan_storage.h"

namespace tuccl {

/// The hole marker inside an entry template's text.
inline constexpr char kTemplateHole = '\x01';

/// Interned entry templates: equal texts get one id.
class EntryTemplates {
 public:
  int32_t intern(const std::string& text);
  /// The template of an entry signature (a key of what decides the text), or -1: lets the
  /// encoder skip building text it has built before.
  int32_t find(uint64_t signature) const {
    auto it = bySignature_.find(signature);
    return it == bySignature_.end() ? -1 : it->second;
  }
  void remember(uint64_t signature, int32_t id) { bySignature_.emplace(signature, id); }
  const std::string& text(int32_t id) const { return texts_[id]; }
  int32_t holes(int32_t id) const { return holes_[id]; }
  size_t size() const { return texts_.size(); }

 private:
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::string> texts_;
  std::vector<int32_t> holes_;
  std::unordered_map<uint64_t, int32_t> bySignature_;
};

/// One plan entry's code: its template and the values of its holes, in text order.
struct EntryCode {
  int32_t shape = 0;
  std::vector<int32_t> values;
  friend bool operator==(const EntryCode&, const EntryCode&) = default;
};

/// `count` consecutive entries of a TB, entry firstEntry + i having hole h = base[h] + i * stride[h],
/// taken modulo modulus[h] when that is not 0.
struct EntryRun {
  int32_t shape = 0;
  int32_t firstEntry = 0;
  int32_t count = 1;
  std::vector<int32_t> base;
  std::vector<int32_t> stride;   ///< empty when count == 1
  std::vector<int32_t> modulus;  ///< empty when count == 1; per hole 0 (plain) or m
  int32_t valueAt(size_t hole, int32_t i) const;
};

struct TbCode {
  int32_t tb = 0;  ///< the TB's id (a value: TBs are in canonical order)
  /// Task-level plans: one block; replay plans: one block per stretch replayed per micro-batch.
  std::vector<std::vector<EntryRun>> blocks;
};

struct RankCode {
  int32_t rank = 0;
  int32_t epilogueBuffer = 1;  ///< BufferId of the avg epilogue's region (structure)
  /// Prologue copy (units, destination block), epilogue region (first block, blocks) and whether
  /// the copied unit is read from the input (1: the rank never writes it).
  std::vector<int32_t> frame;
  std::vector<TbCode> tbs;
};

/// Entry `e` of `tb` as rank `rank` sees it: its own side of the transfer mapped to storage, the
/// peer's side named as planned.
struct EntrySlots {
  const PlanEntry& entry;
  const EntryLayout& where;
  bool remote;
  int32_t srcRank, dstRank;
  StorageSlot src, dst;
  int32_t nextRank;  ///< fused entries: the rank the result goes on to (-1 otherwise)
  StorageSlot next;  ///< fused entries: the slots there
};
EntrySlots entrySlots(const Plan& plan, const KernelLayout& layout, int32_t rank, const PlanTb& tb, int32_t e);

/// Each entry's code, per TB of `rank`.
std::vector<std::vector<EntryCode>> encodeEntries(const Plan& plan, const KernelLayout& layout, int32_t rank,
                                                  EntryTemplates& templates);

/// Maximal runs (greedy from the first entry) of `entries` with one template and holes affine in
/// the position, plainly or modulo one of `moduli`. `firstEntry` is the TB index of entries[0].
/// With reroll false every entry is its own run.
std::vector<EntryRun> rerollEntries(std::span<const EntryCode> entries, int32_t firstEntry, bool reroll = true,
                                    std::span<const int32_t> moduli = {});


/// The rank's code, rerolled (or not) into its own maximal runs, its TBs in canonical order.
RankCode encodeRank(const Plan& plan, const KernelLayout& layout, int32_t rank, EntryTemplates& templates,
                    bool reroll = true);

/// The entries a TB's runs stand for, in order (the inverse of rerolling).
std::vector<EntryCode> unrollTb(const TbCode& tb);

/// What a rank's kernel is, without its values (a loop's length is a value): equal keys share a
/// kernel.
std::vector<int32_t> structureKey(const RankCode& code);
/// Every value of the rank's code in a fixed order (frame, TB ids, then per run: its length if it
/// is a loop, its bases, its strides).
std::vector<int32_t> flattenValues(const RankCode& code);
/// The code of `structure` (a rank's code of the same key) with `values` (flattenValues order).
RankCode withValues(const RankCode& structure, std::span<const int32_t> values);

/// How a role's kernel obtains one value.
struct RoleValue {
  enum Form : uint8_t { Literal, RankAffine, Table } form = Literal;
  int32_t a = 0;     ///< RankAffine: (a * rank + b) % m
  int32_t b = 0;     ///< Literal: the value; RankAffine: the offset
  int32_t m = 0;     ///< RankAffine: the modulus, 0 for none
  int32_t slot = 0;  ///< Table: index into the rank's value table
  int32_t valueFor(int32_t rank, std::span<const int32_t> table) const;
};

struct KernelRole {
  RankCode code;                 ///< the first rank's code (comments show its values)
  std::vector<int32_t> ranks;    ///< ascending
  std::vector<RoleValue> values;  ///< per flattenValues slot
  int32_t tableSize = 0;
};

struct RoleAssignment {
  std::vector<KernelRole> roles;
  std::vector<int32_t> roleOfRank;
  std::vector<std::vector<int32_t>> tables;  ///< by rank: its value table
};

/// Groups every rank's code into roles. With share false every rank is its own role.
RoleAssignment assignRoles(const Plan& plan, const KernelLayout& layout, EntryTemplates& templates, bool reroll,
                           bool share);

/// The flattened values `rank` sees in its role's kernel (its table applied).
std::vector<int32_t> roleValuesFor(const KernelRole& role, int32_t rank, std::span<const int32_t> table);

/// The straight-line text of one entry: the template with its holes filled with `values`.
std::string fillTemplate(const std::string& text, std::span<const std::string> holes);

}  // namespace tuccl
