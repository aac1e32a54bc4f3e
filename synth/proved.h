// What every generator and synthesiser hands out: an algorithm the semantic checker has proved.
//
// In:  an Algorithm built by a generator or a synthesiser, and that producer's name.
// Out: the same algorithm, or an Internal error naming the producer and the checker's first
//      violation. A generated algorithm that fails the checker is a TuCCL bug, never the user's
//      input, so it is reported as Internal rather than InvalidInput.
#pragma once

#include <string_view>

#include "lang/algorithm.h"
#include "support/status.h"

namespace tuccl {

Expected<Algorithm> proveGenerated(Algorithm algorithm, std::string_view producer);

}  // namespace tuccl
