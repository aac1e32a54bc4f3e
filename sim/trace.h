// The simulated timeline as a Chrome trace (reference/formats.md; opens in Perfetto and
// chrome://tracing).
//
// In:  the Plan, the Network and a SimResult recorded with SimOptions::recordTrace.
// Out: {"traceEvents": [...]}: one process per rank with one thread (track) per TB of each replica
//      (tid = replica × 1000 + TB), each primitive invocation an "X" event named like
//      "send→5 op12 mb3"; one process "links" (pid = nRanks) with one track per resource that
//      carried data, its busy intervals as "X" events. Metadata events name every track.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "sim/simulator.h"
#include "sim/network.h"

namespace tuccl {

nlohmann::json chromeTrace(const Plan& plan, const Network& network, const SimResult& result);
std::string writeChromeTrace(const Plan& plan, const Network& network, const SimResult& result);

}  // namespace tuccl
