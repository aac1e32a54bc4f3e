// Affine runs (affine_runs.h).
#include "plan/affine_runs.h"

#include <algorithm>
#include <climits>

namespace tuccl {

namespace {
constexpr size_t kMaxModuli = 32;  // one bit each in AffineForms::modular
}  // namespace

std::vector<int32_t> planModuli(const Plan& plan) {
  std::vector<int32_t> moduli = {plan.nRanks};
  for (int32_t chunks : plan.bufferChunks) moduli.push_back(chunks);
  std::sort(moduli.begin(), moduli.end());
  moduli.erase(std::unique(moduli.begin(), moduli.end()), moduli.end());
  moduli.erase(std::remove_if(moduli.begin(), moduli.end(), [](int32_t m) { return m < 2; }), moduli.end());
  return moduli;
}

AffineForms startAffineForms(int64_t v0, int64_t v1, std::span<const int32_t> moduli) {
  AffineForms forms;
  forms.plain = v1 - v0 >= INT32_MIN && v1 - v0 <= INT32_MAX;
  for (size_t j = 0; j < moduli.size() && j < kMaxModuli; ++j) {
    if (v0 >= 0 && v1 >= 0 && v0 < moduli[j] && v1 < moduli[j]) forms.modular |= 1u << j;
  }
  return forms;
}

// While the run is plainly affine, a modulus stays consistent exactly while the values stay in
// [0, m).
void narrowAffineForms(AffineForms& forms, int64_t v0, int64_t v1, int64_t vi, int64_t i,
                       std::span<const int32_t> moduli) {
  if (forms.plain) {
    if (vi == v0 + i * (v1 - v0)) {
      for (size_t j = 0; j < moduli.size() && j < kMaxModuli; ++j) {
        if (vi < 0 || vi >= moduli[j]) forms.modular &= ~(1u << j);
      }
      return;
    }
    forms.plain = false;
  }
  for (size_t j = 0; j < moduli.size() && j < kMaxModuli; ++j) {
    if ((forms.modular & (1u << j)) == 0) continue;
    const int64_t m = moduli[j];
    if (vi < 0 || vi >= m || vi != floorMod(v0 + i * floorMod(v1 - v0, m), m)) forms.modular &= ~(1u << j);
  }
}

int32_t chosenModulus(const AffineForms& forms, std::span<const int32_t> moduli) {
  if (forms.plain) return 0;
  for (size_t j = 0; j < moduli.size() && j < kMaxModuli; ++j) {
    if (forms.modular & (1u << j)) return moduli[j];
  }
  return 0;
}

}  // namespace tuccl
