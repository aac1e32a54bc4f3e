// Affine runs: consecutive values v0, v1, ... that step by a constant, plainly or modulo one of
// the plan's sizes (chunk indices and peers wrap around rings). Plan JSON version 3 writes such
// runs of entries once (plan_rolled.h); the kernel generator makes them loops
// (kernelgen/kernel_roles.h).
//
// In:  a run's first two values, then each next one; the plan's moduli (planModuli).
// Out: the forms the run can still take (AffineForms), and the modulus it uses (chosenModulus).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "plan/plan.h"

namespace tuccl {

/// v mod m in [0, m), for m > 0.
inline int64_t floorMod(int64_t v, int64_t m) {
  const int64_t r = v % m;
  return r < 0 ? r + m : r;
}

/// The sizes a value may wrap around: the ranks and the chunks of each buffer (ascending,
/// distinct, at least 2; only the first 32 take part in AffineForms).
std::vector<int32_t> planModuli(const Plan& plan);

/// The forms a run can take: plainly affine in the position (its stride within 32 bits), or
/// affine modulo moduli[j] (bit j).
struct AffineForms {
  bool plain = true;
  uint32_t modular = 0;
  bool any() const { return plain || modular != 0; }
};

/// The forms of a run that starts v0, v1.
AffineForms startAffineForms(int64_t v0, int64_t v1, std::span<const int32_t> moduli);
/// Keeps the forms under which `vi` at position i continues the run v0, v1, ...
void narrowAffineForms(AffineForms& forms, int64_t v0, int64_t v1, int64_t vi, int64_t i,
                       std::span<const int32_t> moduli);
/// The modulus a run uses: 0 when it is plainly affine (or has no form), else the smallest one
/// that holds.
int32_t chosenModulus(const AffineForms& forms, std::span<const int32_t> moduli);

}  // namespace tuccl
