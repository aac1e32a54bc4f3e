// The NCCL tuner plugin: ncclTunerPlugin_v2 .. ncclTunerPlugin_v7 (nccl-tuner-abi.md; v7:
// nccl-api.md), the only symbols libnccl-tuner-tuccl.so exports. One implementation (a context
// per communicator, the table's index and decision rules) behind thin adapters per version.
//
// Every exported function is noexcept and returns ncclSuccess unless its arguments make going on
// impossible (a null context pointer in init): NCCL fails the communicator on any error, so a
// bad table only costs the tuning, never the job. getCollInfo and getChunkSize read an immutable
// index: no allocation, no lock, no I/O (TRACE logging, when switched on, goes to NCCL's logger)
// — unless the runtime phase is on (TUCCL_ADAPT=1 and a rendezvous is set, tuner_adapt.h): then getCollInfo counts the
// call under the communicator's lock and, at agreement calls, waits (bounded) for the rendezvous.
// The duration intake, tucclTunerReportDuration (include/tuccl/tuner_adapt.h), is exported too.
#include <cstdio>
#include <optional>

#include "plugin/tuner_context.h"
#include "plugin/cost_table.h"
#include "tuccl/nccl_tuner.h"

namespace tuccl {
namespace {

constexpr const char* kPluginName = "TuCCL";

const char* originPrefix(TableFormat format) { return format == TableFormat::Csv ? "line " : "entries["; }
const char* originSuffix(TableFormat format) { return format == TableFormat::Csv ? "" : "]"; }

const char* collectiveLabel(int coll) {
  return coll >= 0 && coll < kTunerCollectives ? collectiveName(static_cast<Collective>(coll)).data() : "?";
}

void traceNoMatch(const TunerContext& ctx, int coll, size_t nBytes, int numPipeOps, int regBuff) noexcept {
  TUCCL_TUNER_LOG(ctx.logger, NCCL_LOG_TRACE,
                  "TuCCL tuner: %s %zu B (pipeOps %d, regBuff %d): no table entry matches; NCCL decides",
                  collectiveLabel(coll), nBytes, numPipeOps, regBuff);
}

void traceDecision(const TunerContext& ctx, int coll, size_t nBytes, int numPipeOps, int regBuff,
                   const CompiledDecision& decision, const AppliedDecision& applied) noexcept {
  char chosen[48];
  formatChoice(applied.selected, chosen, sizeof chosen);
  char first[48] = "none";
  if (decision.numChoices > 0) formatChoice(decision.choices[0], first, sizeof first);
  if (applied.outcome == DecisionOutcome::AllUnavailable) {
    TUCCL_TUNER_LOG(
        ctx.logger, NCCL_LOG_TRACE,
        "TuCCL tuner: %s %zu B (pipeOps %d, regBuff %d): %s%u%s wants %s and %d fallback(s), none "
        "available; NCCL decides, nChannels unchanged",
        collectiveLabel(coll), nBytes, numPipeOps, regBuff, originPrefix(ctx.format), decision.origin,
        originSuffix(ctx.format), first, decision.numChoices - 1);
    return;
  }
  if (decision.numChoices == 0 || !applied.selected.algorithm) {
    TUCCL_TUNER_LOG(
        ctx.logger, NCCL_LOG_TRACE,
        "TuCCL tuner: %s %zu B (pipeOps %d, regBuff %d): %s%u%s -> NCCL's algorithm/protocol, nChannels %d%s",
        collectiveLabel(coll), nBytes, numPipeOps, regBuff, originPrefix(ctx.format), decision.origin,
        originSuffix(ctx.format), applied.channelsSet ? decision.nChannels : 0,
        applied.channelsSet ? "" : " (kept)");
    return;
  }
  TUCCL_TUNER_LOG(
      ctx.logger, NCCL_LOG_TRACE,
      "TuCCL tuner: %s %zu B (pipeOps %d, regBuff %d): %s%u%s -> %s (choice %d of %d%s), nChannels %d%s",
      collectiveLabel(coll), nBytes, numPipeOps, regBuff, originPrefix(ctx.format), decision.origin,
      originSuffix(ctx.format), chosen, applied.choice + 1, static_cast<int>(decision.numChoices),
      applied.choice > 0 ? "; earlier choices unavailable" : "", applied.channelsSet ? decision.nChannels : 0,
      applied.channelsSet ? "" : " (kept)");
}

ncclResult_t collInfoWithCosts(void* context, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                               float** collCostTable, int numAlgo, int numProto, int regBuff,
                               int* nChannels) noexcept {
  const auto* ctx = static_cast<const TunerContext*>(context);
  if (ctx == nullptr || ctx->index == nullptr) return ncclSuccess;
  const CompiledDecision* decision = ctx->index->lookup(static_cast<int>(coll), nBytes, numPipeOps, regBuff);
  if (decision == nullptr) {
    if (ctx->trace) traceNoMatch(*ctx, coll, nBytes, numPipeOps, regBuff);
    return ncclSuccess;
  }
  const CompiledDecision& served = adaptedDecision(*ctx, static_cast<int>(coll), nBytes, *decision);
  // collCostTable is declared float** but NCCL passes a contiguous float[numAlgo][numProto].
  AppliedDecision applied =
      applyToCostTable(served, reinterpret_cast<float*>(collCostTable), numAlgo, numProto, nChannels);
  if (ctx->trace) traceDecision(*ctx, coll, nBytes, numPipeOps, regBuff, served, applied);
  return ncclSuccess;
}

// ---- v2 -------------------------------------------------------------------------------------------
ncclResult_t initV2(size_t nRanks, size_t nNodes, ncclDebugLogger_t logger, void** context) noexcept {
  if (context == nullptr) return ncclInvalidArgument;
  *context = createTunerContext(nRanks, nNodes, logger, std::nullopt);
  return ncclSuccess;
}

ncclResult_t collInfoV2(void* context, ncclFunc_t coll, size_t nBytes, int collNetSupport, int nvlsSupport,
                        int numPipeOps, int* algorithm, int* protocol, int* nChannels) noexcept {
  const auto* ctx = static_cast<const TunerContext*>(context);
  if (ctx == nullptr || ctx->index == nullptr) return ncclSuccess;
  const CompiledDecision* decision = ctx->index->lookup(static_cast<int>(coll), nBytes, numPipeOps, -1);
  if (decision == nullptr) {
    if (ctx->trace) traceNoMatch(*ctx, coll, nBytes, numPipeOps, -1);
    return ncclSuccess;
  }
  const CompiledDecision& served = adaptedDecision(*ctx, static_cast<int>(coll), nBytes, *decision);
  AppliedDecision applied = applyToV2(served, collNetSupport, nvlsSupport, algorithm, protocol, nChannels);
  if (ctx->trace) traceDecision(*ctx, coll, nBytes, numPipeOps, -1, served, applied);
  return ncclSuccess;
}

ncclResult_t destroyV2(void* context) noexcept {
  destroyTunerContext(static_cast<TunerContext*>(context));
  return ncclSuccess;
}

// ---- v3 / v4 --------------------------------------------------------------------------------------
ncclResult_t collInfoV3(void* context, ncclFunc_t coll, size_t nBytes, int numPipeOps, float** collCostTable,
                        int numAlgo, int numProto, int* nChannels) noexcept {
  return collInfoWithCosts(context, coll, nBytes, numPipeOps, collCostTable, numAlgo, numProto, -1,
                           nChannels);
}

// ---- v5 / v6 / v7 ---------------------------------------------------------------------------------
static_assert(sizeof(ncclTunerConstants_v5_t) == kNumTunerConstantsV5 * sizeof(double));
static_assert(sizeof(ncclTunerConstants_v7_t) == kNumTunerConstantsV7 * sizeof(double));

/// v5+ init: the context, then the table's cost-model overrides on NCCL's constants of `layout`.
ncclResult_t initWithConstants(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                               ncclDebugLogger_t logger, double* constants, TunerConstantsLayout layout) noexcept {
  if (context == nullptr) return ncclInvalidArgument;
  TunerContext* ctx = createTunerContext(nRanks, nNodes, logger, commId);
  *context = ctx;
  if (ctx != nullptr) applyTunerConstants(*ctx, constants, layout);
  return ncclSuccess;
}

ncclResult_t initV5(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                    ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t* /*nvlDomainInfo*/,
                    ncclTunerConstants_v5_t* constants) noexcept {
  return initWithConstants(context, commId, nRanks, nNodes, logger, reinterpret_cast<double*>(constants),
                           TunerConstantsLayout::V5);
}

ncclResult_t initV7(void** context, uint64_t commId, size_t nRanks, size_t nNodes,
                    ncclDebugLogger_t logger, ncclNvlDomainInfo_v7_t* /*nvlDomainInfo*/,
                    ncclTunerConstants_v7_t* constants) noexcept {
  return initWithConstants(context, commId, nRanks, nNodes, logger, reinterpret_cast<double*>(constants),
                           TunerConstantsLayout::V7);
}

ncclResult_t chunkSizeV6(void* context, ncclFunc_t coll, size_t nBytes, int algorithm, int protocol,
                         int /*nChannels*/, size_t* chunkSize) noexcept {
  const auto* ctx = static_cast<const TunerContext*>(context);
  if (ctx == nullptr || ctx->index == nullptr || chunkSize == nullptr) return ncclSuccess;
  const std::optional<NcclAlgorithm> algo = ncclAlgorithmAt(algorithm);
  const std::optional<Protocol> proto = protocolAt(protocol);
  if (!algo || !proto) return ncclSuccess;
  // NCCL does not pass numPipeOps / regBuff here: entries filtering on them do not apply.
  const CompiledDecision* found = ctx->index->lookup(static_cast<int>(coll), nBytes, -1, -1);
  if (found == nullptr) return ncclSuccess;
  const CompiledDecision* decision = &lastAdaptedDecision(*ctx, static_cast<int>(coll), nBytes, *found);
  uint64_t size = chunkSizeFor(*decision, *algo, *proto);
  if (size == 0) return ncclSuccess;
  *chunkSize = static_cast<size_t>(size);
  if (ctx->trace) {
    char choice[48];
    formatChoice(Choice{algo, proto}, choice, sizeof choice);
    TUCCL_TUNER_LOG(ctx->logger, NCCL_LOG_TRACE, "TuCCL tuner: %s %zu B %s: %s%u%s -> chunk size %zu",
                    collectiveLabel(coll), nBytes, choice, originPrefix(ctx->format), decision->origin,
                    originSuffix(ctx->format), *chunkSize);
  }
  return ncclSuccess;
}

}  // namespace
}  // namespace tuccl

#define TUCCL_EXPORT __attribute__((visibility("default")))

extern "C" TUCCL_EXPORT const ncclTuner_v7_t ncclTunerPlugin_v7 = {
    tuccl::kPluginName, tuccl::initV7, tuccl::collInfoWithCosts, tuccl::destroyV2, tuccl::chunkSizeV6};
extern "C" TUCCL_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    tuccl::kPluginName, tuccl::initV5, tuccl::collInfoWithCosts, tuccl::destroyV2, tuccl::chunkSizeV6};
extern "C" TUCCL_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    tuccl::kPluginName, tuccl::initV5, tuccl::collInfoWithCosts, tuccl::destroyV2};
extern "C" TUCCL_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    tuccl::kPluginName, tuccl::initV2, tuccl::collInfoWithCosts, tuccl::destroyV2};
extern "C" TUCCL_EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {tuccl::kPluginName, tuccl::initV2,
                                                                   tuccl::collInfoV3, tuccl::destroyV2};
extern "C" TUCCL_EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {tuccl::kPluginName, tuccl::initV2,
                                                                   tuccl::collInfoV2, tuccl::destroyV2};
