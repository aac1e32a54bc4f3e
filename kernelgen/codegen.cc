// Kernel generation (codegen.h). The output is meant to be read: every loop and block of code
// names the plan entries and the source lines it came from.
#include "kernelgen/codegen.h"

#include <set>
#include <sstream>

#include "kernelgen/kernel_roles.h"
#include "plan/plan_storage.h"

namespace tuccl {
namespace {

std::string slotText(StorageSlot slot, int32_t count) {
  std::string text = std::string(bufferName(slot.buffer)) + "[" + std::to_string(slot.index);
  if (count > 1) text += ".." + std::to_string(slot.index + count - 1);
  return text + "]";
}

std::string range(int32_t first, int32_t last) {
  return first == last ? std::to_string(first) : std::to_string(first) + ".." + std::to_string(last);
}

std::string sourceLoc(const Plan& plan, const PlanEntry& entry) {
  return plan.sourceName + ":" + std::to_string(entry.loc.line) + ":" + std::to_string(entry.loc.column);
}

// The comment of a single entry: its primitive, operation, step, source line, slots and ring.
void commentEntry(std::ostringstream& out, const Plan& plan, const KernelLayout& layout, int32_t rank,
                  const PlanTb& tb, int32_t e, const std::string& indent) {
  const auto [entry, where, remote, srcRank, dstRank, src, dst, nextRank, next] = entrySlots(plan, layout, rank, tb, e);
  out << indent << "// entry " << e << ": " << primitiveName(entry.kind);
  if (entry.kind == PrimitiveKind::Send) out << " -> rank " << entry.peer;
  if (isReceive(entry.kind)) out << " <- rank " << entry.peer;
  if (isFused(entry.kind)) out << " -> rank " << nextRank;
  out << ", op " << entry.op << ", step " << entry.step << ", sub-pipeline " << entry.subPipeline;
  if (!plan.sourceName.empty() && entry.loc.known()) out << ", " << sourceLoc(plan, entry);
  auto ringText = [&](int32_t index) {
    const RingInfo& ring = layout.rings[index];
    out << " via ring " << index << " (rank " << ring.srcRank << " tb " << ring.srcTb << " -> rank " << ring.dstRank
        << " tb " << ring.dstTb << ")";
  };
  out << "\n" << indent << "//   rank " << srcRank << " " << slotText(src, entry.count) << " -> rank " << dstRank << " "
      << slotText(dst, entry.count);
  if (remote) ringText(where.ring);
  if (isFused(entry.kind)) {
    out << "\n" << indent << "//   then op " << entry.next.op << ", step " << entry.next.step << ", sub-pipeline "
        << entry.next.subPipeline;
    if (!plan.sourceName.empty() && entry.next.loc.known()) {
      out << ", " << plan.sourceName << ":" << entry.next.loc.line << ":" << entry.next.loc.column;
    }
    out << ": -> rank " << nextRank << " " << slotText(next, entry.count);
    ringText(where.outRing);
  }
  out << "\n";
}

// The comment of a rerolled run: the entries, their peers, operations, steps and source lines.
void commentRun(std::ostringstream& out, const Plan& plan, const PlanTb& tb, const EntryRun& run,
                const std::string& indent) {
  if (run.count == 0) {
    out << indent << "// a loop without entries on this rank (other ranks of this kernel run it)\n";
    return;
  }
  const PlanEntry& first = tb.entries[run.firstEntry];
  const PlanEntry& last = tb.entries[run.firstEntry + run.count - 1];
  out << indent << "// entries " << run.firstEntry << ".." << run.firstEntry + run.count - 1 << " (" << run.count
      << ", rerolled): " << primitiveName(first.kind);
  if (first.kind != PrimitiveKind::Copy && first.kind != PrimitiveKind::Reduce) {
    out << (first.kind == PrimitiveKind::Send ? " -> " : " <- ")
        << (first.peer == last.peer ? "rank " : "ranks ") << range(first.peer, last.peer);
  }
  if (isFused(first.kind)) {
    out << " -> " << (first.next.peer == last.next.peer ? "rank " : "ranks ") << range(first.next.peer, last.next.peer);
  }
  out << ", ops " << range(first.op, last.op) << ", steps " << range(first.step, last.step) << ", sub-pipelines "
      << range(first.subPipeline, last.subPipeline) << "\n";
  if (plan.sourceName.empty()) return;
  std::vector<std::string> locations;
  std::set<std::pair<int32_t, int32_t>> seen;
  for (int32_t e = run.firstEntry; e < run.firstEntry + run.count; ++e) {
    const PlanEntry& entry = tb.entries[e];
    if (entry.loc.known() && seen.insert({entry.loc.line, entry.loc.column}).second) {
      locations.push_back(sourceLoc(plan, entry));
    }
  }
  if (locations.empty()) return;
  out << indent << "//   source";
  for (size_t i = 0; i < locations.size() && i < 4; ++i) out << (i == 0 ? " " : ", ") << locations[i];
  if (locations.size() > 4) out << " and " << locations.size() - 4 << " more";
  out << "\n";
}

// How the kernel computes one value of its role.
std::string valueExpr(const RoleValue& value) {
  switch (value.form) {
    case RoleValue::Literal: return std::to_string(value.b);
    case RoleValue::RankAffine: {
      std::string text = value.a == 1 ? "rank" : std::to_string(value.a) + " * rank";
      if (value.b != 0) {
        text += (value.b > 0 ? " + " : " - ") + std::to_string(value.b > 0 ? value.b : -int64_t{value.b});
      }
      if (value.m > 0) return "((" + text + ") % " + std::to_string(value.m) + ")";
      return value.a == 1 && value.b == 0 ? text : "(" + text + ")";
    }
    default: return "v[" + std::to_string(value.slot) + "]";
  }
}

// One hole of a run: base + i * stride (modulo `modulus` when not 0), simplified.
std::string holeExpr(const RoleValue& base, const RoleValue* stride, int32_t modulus) {
  const std::string b = valueExpr(base);
  if (stride == nullptr || (stride->form == RoleValue::Literal && stride->b == 0)) return b;
  const bool one = stride->form == RoleValue::Literal && stride->b == 1;
  const std::string step = one ? "i" : "i * " + valueExpr(*stride);
  std::string sum;
  if (base.form == RoleValue::Literal && base.b == 0) {
    sum = one ? step : "(" + step + ")";
  } else {
    sum = "(" + b + " + " + step + ")";
  }
  return modulus > 0 ? "(" + sum + " % " + std::to_string(modulus) + ")" : sum;
}

void writeIndented(std::ostringstream& out, const std::string& text, const std::string& indent) {
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    out << indent << text.substr(start, end - start) << "\n";
    start = end == std::string::npos ? text.size() : end + 1;
  }
}

// Renders one role's kernel: the representative rank's comments, the role's value expressions.
class KernelWriter {
 public:
  KernelWriter(const Plan& plan, const KernelLayout& layout, const EntryTemplates& templates, const KernelRole& role)
      : plan_(plan), layout_(layout), templates_(templates), role_(role), rank_(role.code.rank) {}

  std::string write(const GeneratedKernel& kernel) {
    writeHeader(kernel);
    const RoleValue& copyBlocks = next();
    const RoleValue& dstBlock = next();
    const RoleValue& epilogueBlock = next();
    const RoleValue& epilogueBlocks = next();
    const RoleValue& readInput = next();
    out_ << "  TUCCL_TRY(prologue(t, " << kernel.nTbs << ", " << valueExpr(copyBlocks) << ", " << valueExpr(dstBlock)
         << ", " << valueExpr(readInput) << "));\n";
    writeTbSwitch();
    for (size_t c = 0; c < role_.code.tbs.size(); ++c) writeTb(role_.code.tbs[c], tbLabels_[c]);
    static const char* const kBufferIds[] = {"kInput", "kOutput", "kScratch"};
    out_ << "    default:\n      break;\n  }\n"
         << "  TUCCL_TRY(epilogue(t, " << kernel.nTbs << ", " << kBufferIds[role_.code.epilogueBuffer] << ", "
         << valueExpr(epilogueBlock) << ", " << valueExpr(epilogueBlocks) << "));  // avg: divide the result by nRanks\n"
         << "}\n";
    return out_.str();
  }

 private:
  const RoleValue& next() { return role_.values[cursor_++]; }

  void writeHeader(const GeneratedKernel& kernel) {
    const bool replay = plan_.executionLevel != ExecutionLevel::Task;
    out_ << "// " << kernel.fileName << ": generated by TuCCL kernelgen; do not edit.\n"
         << "// Plan: " << collectiveName(plan_.collective) << " \"" << plan_.algorithm << "\", " << plan_.nRanks
         << " ranks, " << (plan_.inPlace ? "in-place" : "out-of-place") << "\n"
         << "// Kernel " << kernel.id << " runs rank" << (role_.ranks.size() > 1 ? "s " : " ")
         << rankRanges(role_.ranks);
    if (role_.ranks.size() > 1) out_ << " (" << role_.ranks.size() << " ranks; comments show rank " << rank_ << ")";
    out_ << "\n"
         << "// Schedule: " << schedulerName(plan_.scheduler) << " (" << executionLevelName(plan_.executionLevel)
         << "-level execution), " << tbPolicyName(plan_.tbAllocation) << " TBs\n"
         << "// Protocol, slice and channels are the launch's (KernelArgs): the source, and so its\n"
         << "// compilation, is the same for every protocol, chunk size and channel count.\n";
    if (!plan_.sourceName.empty()) out_ << "// Source: " << plan_.sourceName << "\n";
    out_ << "// " << kernel.nTbs << " TB(s): launch with gridDim.x = " << kernel.nTbs << " x channels"
         << " per channel; blockIdx.x selects a TB and its channel (docs/kernels.md).\n"
         << (replay ? "// Each TB replays the entries of a block of sub-pipelines once per micro-batch.\n"
                    : "// Each entry runs all micro-batches before the TB's next entry (task-level).\n");
    if (role_.tableSize > 0 || role_.ranks.size() > 1) {
      out_ << "// Values that differ between the ranks: (a * rank + b), or v[k] from the rank's table of "
           << role_.tableSize << " (KernelArgs::roleValues).\n";
    }
    out_ << "#include \"primitives.h\"\n\n"
         << "TUCCL_KERNEL_THREADS(" << plan_.config.nThreads << ") " << kernel.kernelName
         << "(tuccl::dev::KernelArgs args) {\n"
         << "  using namespace tuccl::dev;\n"
         << "  Tb t = makeTb(args, static_cast<int32_t>(blockIdx.x), " << kernel.nTbs << ");\n"
         << "  [[maybe_unused]] const int32_t rank = args.rank;\n"
         << "  [[maybe_unused]] const int32_t* const v = args.roleValues;\n";
  }

  // TBs are in canonical order; a rank runs code c on TB id v_c. When the ids are the same on every
  // rank the switch is on blockIdx.x, else on the code the rank's ids select.
  void writeTbSwitch() {
    std::vector<const RoleValue*> ids;
    bool literal = true;
    for (size_t c = 0; c < role_.code.tbs.size(); ++c) {
      ids.push_back(&next());
      literal = literal && ids.back()->form == RoleValue::Literal;
    }
    if (literal) {
      for (const RoleValue* id : ids) tbLabels_.push_back(id->b);
      out_ << "  switch (t.baseTb) {\n";
      return;
    }
    out_ << "  // This rank's TB ids of the code blocks below (they differ between the ranks).\n"
         << "  const int32_t tb = t.baseTb;\n"
         << "  int32_t code = -1;\n";
    for (size_t c = 0; c < ids.size(); ++c) {
      out_ << "  " << (c == 0 ? "" : "else ") << "if (tb == " << valueExpr(*ids[c]) << ") code = " << c << ";\n";
      tbLabels_.push_back(static_cast<int32_t>(c));
    }
    out_ << "  switch (code) {\n";
  }

  void writeTb(const TbCode& code, int32_t label) {
    const PlanTb& tb = plan_.ranks[rank_].tbs[code.tb];
    out_ << "    case " << label << ": {  // TB " << tb.id << ", " << tb.entries.size() << " entries";
    if (tb.sendPeer >= 0) out_ << ", sends to rank " << tb.sendPeer;
    if (tb.sendPeer == -2) out_ << ", sends to several ranks";
    if (tb.recvPeer >= 0) out_ << ", receives from rank " << tb.recvPeer;
    if (tb.recvPeer == -2) out_ << ", receives from several ranks";
    out_ << "\n";
    const bool replay = plan_.executionLevel != ExecutionLevel::Task;
    for (const std::vector<EntryRun>& block : code.blocks) {
      if (!replay) {
        for (const EntryRun& run : block) writeRun(tb, run, false, "      ");
        continue;
      }
      const PlanEntry& first = tb.entries[block.front().firstEntry];
      const PlanEntry& last = tb.entries[block.back().firstEntry + block.back().count - 1];
      out_ << "      // block: sub-pipelines " << first.subPipeline << ".." << last.subPipeline
           << ", replayed per micro-batch\n"
           << "      for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) {\n";
      for (const EntryRun& run : block) writeRun(tb, run, true, "        ");
      out_ << "      }\n";
    }
    out_ << "      break;\n    }\n";
  }

  // A run: one entry's block, or a loop over i (its length a value of the role); task-level code
  // loops over micro-batches inside.
  void writeRun(const PlanTb& tb, const EntryRun& run, bool insideMicroBatches, const std::string& indent) {
    const std::string& text = templates_.text(run.shape);
    const bool loop = !run.stride.empty();
    const RoleValue* count = loop ? &next() : nullptr;
    const size_t holes = run.base.size();
    std::vector<const RoleValue*> base(holes);
    for (size_t h = 0; h < holes; ++h) base[h] = &next();
    std::vector<std::string> exprs(holes);
    for (size_t h = 0; h < holes; ++h) {
      const RoleValue* stride = loop ? &next() : nullptr;
      exprs[h] = holeExpr(*base[h], stride, loop ? run.modulus[h] : 0);
    }
    const std::string body = fillTemplate(text, exprs);
    std::string inner = indent;
    if (loop) {
      commentRun(out_, plan_, tb, run, indent);
      out_ << indent << "for (int32_t i = 0; i < " << valueExpr(*count) << "; ++i) {\n";
      inner += "  ";
    }
    if (!insideMicroBatches) {
      out_ << inner << "for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) {\n";
      if (!loop) commentEntry(out_, plan_, layout_, rank_, tb, run.firstEntry, inner + "  ");
      writeIndented(out_, body, inner + "  ");
      out_ << inner << "}\n";
    } else {
      if (!loop) commentEntry(out_, plan_, layout_, rank_, tb, run.firstEntry, inner);
      writeIndented(out_, body, inner);
    }
    if (loop) out_ << indent << "}\n";
  }

  const Plan& plan_;
  const KernelLayout& layout_;
  const EntryTemplates& templates_;
  const KernelRole& role_;
  const int32_t rank_;
  size_t cursor_ = 0;
  std::vector<int32_t> tbLabels_;  ///< per code block: its case label
  std::ostringstream out_;
};

}  // namespace

std::string rankRanges(const std::vector<int32_t>& ranks, size_t maxRanges) {
  std::string text;
  size_t ranges = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (ranges == maxRanges) return text + ", ...";
    if (!text.empty()) text += ", ";
    text += std::to_string(ranks[i]);
    if (j > i) text += "-" + std::to_string(ranks[j]);
    ++ranges;
    i = j + 1;
  }
  return text;
}

GeneratedKernels generateKernels(const Plan& plan, const KernelLayout& layout, const KernelGenOptions& options) {
  EntryTemplates templates;
  RoleAssignment roles = assignRoles(plan, layout, templates, options.reroll, options.shareRoles);
  GeneratedKernels result;
  result.kernels.reserve(roles.roles.size());
  for (size_t k = 0; k < roles.roles.size(); ++k) {
    const KernelRole& role = roles.roles[k];
    GeneratedKernel& kernel = result.kernels.emplace_back();
    kernel.id = static_cast<int32_t>(k);
    kernel.fileName = "kernel" + std::to_string(k) + ".cu";
    kernel.kernelName = "tuccl_kernel" + std::to_string(k);
    kernel.nTbs = static_cast<int32_t>(role.code.tbs.size());
    kernel.ranks = role.ranks;
    kernel.tableSize = role.tableSize;
    kernel.source = KernelWriter(plan, layout, templates, role).write(kernel);
  }
  result.ranks.resize(static_cast<size_t>(plan.nRanks));
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    result.ranks[r].kernel = roles.roleOfRank[r];
    result.ranks[r].values = std::move(roles.tables[r]);
  }
  return result;
}

std::string hostTranslationUnit(const std::vector<GeneratedKernel>& kernels) {
  std::ostringstream out;
  out << "// Host build of the generated kernels (docs/kernels.md): every kernel, compiled\n"
      << "// against the host shim; the executor runs each TB as a thread.\n";
  for (const GeneratedKernel& kernel : kernels) out << "#include \"" << kernel.fileName << "\"\n";
  out << "\nextern \"C\" __attribute__((visibility(\"default\"))) void tuccl_host_set_block(unsigned block) {\n"
      << "  tuccl::dev::host::blockIdx.x = block;\n}\n";
  return out.str();
}

}  // namespace tuccl
