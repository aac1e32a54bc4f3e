#include "plugin/cost_table.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace tuccl {
namespace {

bool available(float cost) { return cost >= 0.0f; }  // false for -1.0 (ignored) and NaN

/// The entry NCCL would pick among those `choice` allows: the cheapest available one, ties to the
/// first in NCCL's scan order (algorithm-major). -1 when none.
int cheapestAllowed(Choice choice, const float* costTable, int numAlgo, int numProto) {
  int best = -1;
  float bestCost = 0.0f;
  for (int a = 0; a < numAlgo && a < kNcclAlgorithms; ++a) {
    if (choice.algorithm && static_cast<int>(*choice.algorithm) != a) continue;
    for (int p = 0; p < numProto && p < kProtocols; ++p) {
      if (choice.protocol && static_cast<int>(*choice.protocol) != p) continue;
      float cost = costTable[a * numProto + p];
      if (available(cost) && (best < 0 || cost < bestCost)) {
        best = a * numProto + p;
        bestCost = cost;
      }
    }
  }
  return best;
}

void setChannels(const CompiledDecision& decision, int* nChannels, AppliedDecision& result) {
  if (decision.nChannels > 0 && nChannels != nullptr) {
    *nChannels = decision.nChannels;
    result.channelsSet = true;
  }
}

}  // namespace

AppliedDecision applyToCostTable(const CompiledDecision& decision, float* costTable, int numAlgo,
                                 int numProto, int* nChannels) noexcept {
  AppliedDecision result;
  if (decision.numChoices == 0) {
    result.outcome = DecisionOutcome::Applied;
    setChannels(decision, nChannels, result);
    return result;
  }
  if (costTable == nullptr || numAlgo <= 0 || numProto <= 0) return result;
  for (int i = 0; i < decision.numChoices; ++i) {
    Choice choice = decision.choices[i];
    if (!choice.algorithm && !choice.protocol) {
      // "any/any": NCCL's own choice, taken as is.
      result.outcome = DecisionOutcome::Applied;
      result.choice = i;
      setChannels(decision, nChannels, result);
      return result;
    }
    int selected = cheapestAllowed(choice, costTable, numAlgo, numProto);
    if (selected < 0) continue;
    for (int earlier = 0; earlier < selected; ++earlier) {
      if (costTable[earlier] == 0.0f) costTable[earlier] = 1e-6f;
    }
    costTable[selected] = 0.0f;
    result.outcome = DecisionOutcome::Applied;
    result.choice = i;
    result.selected = {ncclAlgorithmAt(selected / numProto), protocolAt(selected % numProto)};
    setChannels(decision, nChannels, result);
    return result;
  }
  return result;
}

AppliedDecision applyToV2(const CompiledDecision& decision, int collNetSupport, int nvlsSupport,
                          int* algorithm, int* protocol, int* nChannels) noexcept {
  AppliedDecision result;
  if (decision.numChoices == 0) {
    result.outcome = DecisionOutcome::Applied;
    setChannels(decision, nChannels, result);
    return result;
  }
  for (int i = 0; i < decision.numChoices; ++i) {
    Choice choice = decision.choices[i];
    if (!choice.algorithm && !choice.protocol) {
      result.outcome = DecisionOutcome::Applied;
      result.choice = i;
      setChannels(decision, nChannels, result);
      return result;
    }
    if (!choice.algorithm || !choice.protocol) continue;
    const NcclAlgorithm a = *choice.algorithm;
    const bool collNet = a == NcclAlgorithm::CollNetDirect || a == NcclAlgorithm::CollNetChain;
    const bool nvls = a == NcclAlgorithm::Nvls || a == NcclAlgorithm::NvlsTree;
    if (a == NcclAlgorithm::Pat) continue;
    if (collNet && !collNetSupport) continue;
    if (nvls && !nvlsSupport) continue;
    if ((collNet || nvls) && *choice.protocol != Protocol::Simple) continue;
    if (algorithm == nullptr || protocol == nullptr) return result;
    *algorithm = static_cast<int>(a);
    *protocol = static_cast<int>(*choice.protocol);
    result.outcome = DecisionOutcome::Applied;
    result.choice = i;
    result.selected = choice;
    setChannels(decision, nChannels, result);
    return result;
  }
  return result;
}

uint64_t chunkSizeFor(const CompiledDecision& decision, NcclAlgorithm algorithm, Protocol protocol) noexcept {
  if (decision.chunkSize == 0) return 0;
  if (decision.numChoices == 0) return decision.chunkSize;
  for (int i = 0; i < decision.numChoices; ++i) {
    Choice choice = decision.choices[i];
    if ((!choice.algorithm || *choice.algorithm == algorithm) &&
        (!choice.protocol || *choice.protocol == protocol)) {
      return decision.chunkSize;
    }
  }
  return 0;
}

}  // namespace tuccl
