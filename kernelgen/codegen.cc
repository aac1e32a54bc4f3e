// Kernel generation (codegen.h). The output is meant to be read: every block of code names the
// plan entry and the source line it came from.
#include "kernelgen/codegen.h"

#include <sstream>

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

std::string slotText(StorageSlot slot, int32_t count) {
  std::string text = std::string(bufferName(slot.buffer)) + "[" + std::to_string(slot.index);
  if (count > 1) text += ".." + std::to_string(slot.index + count - 1);
  return text + "]";
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

// Avg epilogue: (buffer, first unit block, units) of the rank's reduced result.
struct ResultRegion {
  BufferKind buffer = BufferKind::Output;
  int32_t block = 0;
  int32_t blocks = 0;
};
ResultRegion resultRegion(const Plan& plan, const KernelLayout& layout, int32_t rank) {
  if (!isReduction(layout.collective)) return {};
  const StorageSlot first = planStorage(plan, rank, BufferKind::Output, 0);
  return {first.buffer, first.index / layout.chunksPerUnit, 1};
}

void emitEntry(std::ostringstream& out, const Plan& plan, const KernelLayout& layout, int32_t rank, const PlanTb& tb,
               int32_t e, const std::string& indent) {
  const PlanEntry& entry = tb.entries[e];
  const EntryLayout& where = layout.at(rank, tb.id, e);
  const bool remote = where.ring >= 0;
  // The own rank's side of the transfer is mapped to storage; the peer's side is named as planned.
  const int32_t srcRank = entry.kind == PrimitiveKind::Send || !remote ? rank : entry.peer;
  const int32_t dstRank = entry.kind == PrimitiveKind::Send ? entry.peer : rank;
  const StorageSlot src = planStorage(plan, srcRank, entry.srcBuffer, entry.srcIndex);
  const StorageSlot dst = planStorage(plan, dstRank, entry.dstBuffer, entry.dstIndex);

  out << indent << "// entry " << e << ": " << primitiveName(entry.kind);
  if (entry.kind == PrimitiveKind::Send) out << " -> rank " << entry.peer;
  if (entry.kind == PrimitiveKind::Recv || entry.kind == PrimitiveKind::RecvReduceCopy) {
    out << " <- rank " << entry.peer;
  }
  out << ", op " << entry.op << ", step " << entry.step << ", sub-pipeline " << entry.subPipeline;
  if (!plan.sourceName.empty() && entry.loc.known()) {
    out << ", " << plan.sourceName << ":" << entry.loc.line << ":" << entry.loc.column;
  }
  out << "\n" << indent << "//   rank " << srcRank << " " << slotText(src, entry.count) << " -> rank " << dstRank << " "
      << slotText(dst, entry.count);
  if (remote) {
    const RingInfo& ring = layout.rings[where.ring];
    out << " via ring " << where.ring << " (rank " << ring.srcRank << " tb " << ring.srcTb << " -> rank " << ring.dstRank
        << " tb " << ring.dstTb << ")";
  }
  out << "\n";
  out << indent << "t.at(" << e << ", mb);\n";
  for (const EntryRef& dep : entry.deps) {
    const int32_t counter = layout.at(rank, dep.tb, dep.entry).progress;
    out << indent << "TUCCL_TRY(waitEntry(t, " << counter << ", " << dep.tb << ", " << dep.entry
        << ", mb));  // after tb " << dep.tb << " entry " << dep.entry << "\n";
  }
  out << indent << "TUCCL_TRY(";
  switch (entry.kind) {
    case PrimitiveKind::Send:
      out << "send(t, " << where.ring << ", " << bufferId(src.buffer) << ", " << src.index << ", " << dst.index << ", "
          << entry.count << ", " << entry.op << ", mb)";
      break;
    case PrimitiveKind::Recv:
    case PrimitiveKind::RecvReduceCopy:
      out << (entry.kind == PrimitiveKind::Recv ? "recv" : "recvReduceCopy") << "(t, " << where.ring << ", "
          << src.index << ", " << bufferId(dst.buffer) << ", " << dst.index << ", " << entry.count << ", " << entry.op
          << ", mb)";
      break;
    case PrimitiveKind::Copy:
    case PrimitiveKind::Reduce:
      out << (entry.kind == PrimitiveKind::Copy ? "copy" : "reduce") << "(t, " << bufferId(src.buffer) << ", "
          << src.index << ", " << bufferId(dst.buffer) << ", " << dst.index << ", " << entry.count << ", mb)";
      break;
  }
  out << ");\n";
  if (where.progress >= 0) out << indent << "postEntry(t, " << where.progress << ", mb);\n";
}

}  // namespace

GeneratedKernel generateRankKernel(const Plan& plan, const KernelLayout& layout, int32_t rank) {
  const PlanRank& planRank = plan.ranks[rank];
  const int32_t nTbs = static_cast<int32_t>(planRank.tbs.size());
  GeneratedKernel kernel;
  kernel.rank = rank;
  kernel.fileName = "rank" + std::to_string(rank) + ".cu";
  kernel.kernelName = "tuccl_rank" + std::to_string(rank);
  kernel.nTbs = nTbs;
  const bool replay = plan.executionLevel != ExecutionLevel::Task;
  const bool wholeAlgorithm = plan.executionLevel == ExecutionLevel::Algorithm;

  std::ostringstream out;
  out << "// " << kernel.fileName << ": generated by TuCCL kernelgen; do not edit.\n"
      << "// Plan: " << collectiveName(plan.collective) << " \"" << plan.algorithm << "\", rank " << rank << " of " << plan.nRanks
      << ", " << (plan.inPlace ? "in-place" : "out-of-place") << "\n"
      << "// Schedule: " << schedulerName(plan.scheduler) << " (" << executionLevelName(plan.executionLevel)
      << "-level execution), " << tbPolicyName(plan.tbAllocation) << " TBs, protocol "
      << protocolName(plan.config.protocol) << ", chunk size " << plan.config.chunkSize
      << " bytes\n";
  if (!plan.sourceName.empty()) out << "// Source: " << plan.sourceName << "\n";
  out << "// One kernel per rank, " << nTbs << " TB(s): launch with gridDim.x = " << nTbs
      << "; blockIdx.x selects a TB (docs/kernels.md).\n"
      << (replay ? "// Each TB replays the entries of a block of sub-pipelines once per micro-batch.\n"
                 : "// Each entry runs all micro-batches before the TB's next entry (task-level).\n")
      << "#include \"primitives.h\"\n\n"
      << "TUCCL_KERNEL " << kernel.kernelName << "(tuccl::dev::KernelArgs args) {\n"
      << "  using namespace tuccl::dev;\n"
      << "  Tb t = makeTb(args, static_cast<int32_t>(blockIdx.x));\n";
  const auto [copyBlocks, dstBlock] = prologueCopy(plan, layout, rank);
  out << "  TUCCL_TRY(prologue(t, " << nTbs << ", " << copyBlocks << ", " << dstBlock << "));\n"
      << "  switch (blockIdx.x) {\n";
  for (const PlanTb& tb : planRank.tbs) {
    out << "    case " << tb.id << ": {  // TB " << tb.id << ", " << tb.entries.size() << " entries";
    if (tb.sendPeer >= 0) out << ", sends to rank " << tb.sendPeer;
    if (tb.sendPeer == -2) out << ", sends to several ranks";
    if (tb.recvPeer >= 0) out << ", receives from rank " << tb.recvPeer;
    if (tb.recvPeer == -2) out << ", receives from several ranks";
    out << "\n";
    const int32_t n = static_cast<int32_t>(tb.entries.size());
    if (!replay) {
      for (int32_t e = 0; e < n; ++e) {
        out << "      for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) {\n";
        emitEntry(out, plan, layout, rank, tb, e, "        ");
        out << "      }\n";
      }
    } else {
      for (int32_t first = 0; first < n;) {
        int32_t last = first + 1;
        while (last < n && (wholeAlgorithm || tb.entries[last].subPipeline == tb.entries[first].subPipeline)) ++last;
        out << "      // block: sub-pipelines " << tb.entries[first].subPipeline << ".."
            << tb.entries[last - 1].subPipeline << ", replayed per micro-batch\n"
            << "      for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) {\n";
        for (int32_t e = first; e < last; ++e) emitEntry(out, plan, layout, rank, tb, e, "        ");
        out << "      }\n";
        first = last;
      }
    }
    out << "      break;\n    }\n";
  }
  const ResultRegion region = resultRegion(plan, layout, rank);
  out << "    default:\n      break;\n  }\n"
      << "  TUCCL_TRY(epilogue(t, " << nTbs << ", " << bufferId(region.buffer) << ", " << region.block << ", "
      << region.blocks << "));  // avg: divide the result by nRanks\n"
      << "}\n";
  kernel.source = out.str();
  return kernel;
}

std::vector<GeneratedKernel> generateKernels(const Plan& plan) {
  const KernelLayout layout = layoutKernels(plan);
  std::vector<GeneratedKernel> kernels;
  kernels.reserve(plan.ranks.size());
  for (int32_t r = 0; r < plan.nRanks; ++r) kernels.push_back(generateRankKernel(plan, layout, r));
  return kernels;
}

std::string hostTranslationUnit(const std::vector<GeneratedKernel>& kernels) {
  std::ostringstream out;
  out << "// Host build of the generated kernels (docs/kernels.md): every rank's kernel, compiled\n"
      << "// against the host shim; the executor runs each TB as a thread.\n";
  for (const GeneratedKernel& kernel : kernels) out << "#include \"" << kernel.fileName << "\"\n";
  out << "\nextern \"C\" __attribute__((visibility(\"default\"))) void tuccl_host_set_block(unsigned block) {\n"
      << "  tuccl::dev::host::blockIdx.x = block;\n}\n";
  return out.str();
}

}  // namespace tuccl
