#include "sim/trace.h"

#include <set>

namespace tuccl {

using json = nlohmann::json;

namespace {
constexpr int32_t kTidPerReplica = 1000;

std::string spanName(const TraceSpan& span) {
  std::string name(primitiveName(span.kind));
  if (span.kind == PrimitiveKind::Send) {
    name += "\u2192" + std::to_string(span.peer);
  } else if (span.kind == PrimitiveKind::Recv || span.kind == PrimitiveKind::RecvReduceCopy) {
    name += "\u2190" + std::to_string(span.peer);
  }
  return name + " op" + std::to_string(span.op) + " mb" + std::to_string(span.slice);
}
}  // namespace

json chromeTrace(const Plan& plan, const Network& network, const SimResult& result) {
  json events = json::array();
  for (int32_t r = 0; r < plan.nRanks; ++r) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", "rank " + std::to_string(r)}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r}, {"args", {{"sort_index", r}}}});
  }
  for (const SimTb& tb : result.tbs) {
    const int32_t tid = tb.replica * kTidPerReplica + tb.tb;
    std::string name = "tb " + std::to_string(tb.tb);
    if (plan.config.nChannels > 1) name += " ch " + std::to_string(tb.replica);
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", tb.rank}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  const int32_t linksPid = plan.nRanks;
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", linksPid}, {"args", {{"name", "links"}}}});
  events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", linksPid}, {"args", {{"sort_index", linksPid}}}});
  std::set<int32_t> namedLinks;
  const auto& resources = network.resources();
  for (const TraceSpan& span : result.trace) {
    if (span.tb >= 0) {
      const SimTb& tb = result.tbs[span.tb];
      events.push_back({{"name", spanName(span)},
                        {"cat", std::string(primitiveName(span.kind))},
                        {"ph", "X"},
                        {"ts", span.beginUs},
                        {"dur", span.endUs - span.beginUs},
                        {"pid", tb.rank},
                        {"tid", tb.replica * kTidPerReplica + tb.tb},
                        {"args", {{"op", span.op}, {"peer", span.peer}, {"microBatch", span.slice}}}});
    } else if (span.resource >= 0 && span.resource < static_cast<int32_t>(resources.size())) {
      if (namedLinks.insert(span.resource).second) {
        events.push_back({{"name", "thread_name"},
                          {"ph", "M"},
                          {"pid", linksPid},
                          {"tid", span.resource},
                          {"args", {{"name", resources[span.resource].name}}}});
      }
      events.push_back({{"name", "busy"},
                        {"cat", "link"},
                        {"ph", "X"},
                        {"ts", span.beginUs},
                        {"dur", span.endUs - span.beginUs},
                        {"pid", linksPid},
                        {"tid", span.resource}});
    }
  }
  json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  trace["otherData"] = {{"collective", collectiveName(plan.collective)},
                        {"algorithm", plan.algorithm},
                        {"scheduler", schedulerName(plan.scheduler)},
                        {"messageBytes", result.messageBytes},
                        {"timeUs", result.timeUs},
                        {"truncated", result.traceTruncated}};
  return trace;
}

std::string writeChromeTrace(const Plan& plan, const Network& network, const SimResult& result) {
  return chromeTrace(plan, network, result).dump() + "\n";
}

}  // namespace tuccl
