#include "plugin/decision.h"

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
  for (int a = 0; a < numAlgo && a < kNumAlgorithms; ++a) {
    if (choice.algorithm != kAny && choice.algorithm != a) continue;
    for (int p = 0; p < numProto && p < kNumProtocols; ++p) {
      if (choice.protocol != kAny && choice.protocol != p) continue;
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
    if (choice.algorithm == kAny && choice.protocol == kAny) {
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
    result.algorithm = selected / numProto;
    result.protocol = selected % numProto;
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
    if (choice.algorithm == kAny && choice.protocol == kAny) {
      result.outcome = DecisionOutcome::Applied;
      result.choice = i;
      setChannels(decision, nChannels, result);
      return result;
    }
    if (choice.algorithm == kAny || choice.protocol == kAny) continue;
    bool collNet = choice.algorithm == kAlgoCollNetDirect || choice.algorithm == kAlgoCollNetChain;
    bool nvls = choice.algorithm == kAlgoNvls || choice.algorithm == kAlgoNvlsTree;
    if (choice.algorithm >= kAlgoPat) continue;
    if (collNet && !collNetSupport) continue;
    if (nvls && !nvlsSupport) continue;
    if ((collNet || nvls) && choice.protocol != kProtoSimple) continue;
    if (algorithm == nullptr || protocol == nullptr) return result;
    *algorithm = choice.algorithm;
    *protocol = choice.protocol;
    result.outcome = DecisionOutcome::Applied;
    result.choice = i;
    result.algorithm = choice.algorithm;
    result.protocol = choice.protocol;
    setChannels(decision, nChannels, result);
    return result;
  }
  return result;
}

uint64_t chunkSizeFor(const CompiledDecision& decision, int algorithm, int protocol) noexcept {
  if (decision.chunkSize == 0) return 0;
  if (decision.numChoices == 0) return decision.chunkSize;
  for (int i = 0; i < decision.numChoices; ++i) {
    Choice choice = decision.choices[i];
    if ((choice.algorithm == kAny || choice.algorithm == algorithm) &&
        (choice.protocol == kAny || choice.protocol == protocol)) {
      return decision.chunkSize;
    }
  }
  return 0;
}

const char* formatChoice(Choice choice, char* out, size_t size) noexcept {
  std::string_view algorithm = algorithmName(choice.algorithm);
  std::string_view protocol = choiceProtocolName(choice.protocol);
  std::snprintf(out, size, "%.*s/%.*s", static_cast<int>(algorithm.size()), algorithm.data(),
                static_cast<int>(protocol.size()), protocol.data());
  return out;
}

}  // namespace tuccl
