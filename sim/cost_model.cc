#include "sim/cost_model.h"

#include "support/json_text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace tuccl {

using json = nlohmann::json;

namespace {

// ---- Defaults, each with its source (../shared/reference/cost-model.md unless said otherwise) ----

// NCCL tuning.cc base latency, Ring, {LL, LL128, Simple} µs: {6.6, 14, 8.4}.
constexpr double kRingBaseLatencyUs[kProtocols] = {6.6, 14.0, 8.4};
// NCCL tuning.cc per-hop hardware latency, Ring, {LL, LL128, Simple} µs, by link class:
// NVLink {0.6, 1.9, 3.4}; PCIe {1, 2.5, 5.7}; Network {2.7, 4, 14}.
constexpr double kRingHopLatencyUs[kHopClasses][kProtocols] = {{0.6, 1.9, 3.4}, {1.0, 2.5, 5.7}, {2.7, 4.0, 14.0}};
// Payload per wire byte: "LL sends 4 bytes of data with a 4-byte flag (50% efficiency)"; "LL128 sends
// 120 of every 128 bytes"; "Simple moves bulk data" (efficiency 1).
constexpr double kEfficiency[kProtocols] = {0.5, 120.0 / 128.0, 1.0};
// NCCL tuning.cc per-channel LL128 cap on Ampere: 20 GB/s (Volta 20, Hopper 36.7, Blackwell 40).
constexpr double kAmpereLl128ChannelGBps = 20.0;
// A TB is one NCCL channel's worth of threads. NCCL tuning.cc per-channel Tree cap, Ampere, one
// node: 24 GB/s; NCCL runs 512 threads per channel for Simple (NCCL_NTHREADS default), so one
// thread moves 24 / 512 GB/s.
constexpr double kAmpereChannelGBps = 24.0;
constexpr double kNcclDefaultThreads = 512.0;
// ResCCL §3, Figure 4: over one NIC "with four TBs, the combined throughput of all threads just
// matches the link's capacity"; the NIC is 200 Gb/s = 25 GB/s ("NICs 200 Gb/s (25 GB/s) each").
constexpr double kNicGBps = 25.0;
constexpr double kTbsFillingOneNic = 4.0;
// NCCL tuning.cc netOverhead: 1 µs per step (the flag/fence handshake of one pipeline step).
constexpr double kSyncOverheadUs = 1.0;
// ResCCL Eq. 1 gives the form T = n·z·(α + cβ) + L(z)·γ but no value for γ and Figure 4 no
// numbers beyond the peak at 4 TBs and the drop at 8. Assumption, to be calibrated: γ = 0.15, so
// 8 TBs over one NIC (z = 2) keep 1 / 1.15 = 87% of the link; the factor never falls below 25%.
constexpr double kContentionGamma = 0.15;
constexpr double kContentionFloor = 0.25;
// NCCL defaults: NCCL_BUFFSIZE 4 MiB per connection, NCCL_STEPS 8 slots.
constexpr int64_t kStagingBufferBytes = 4 << 20;
constexpr int32_t kStagingSlots = 8;

const char* const kHopClassNames[kHopClasses] = {"nvlink", "pcie", "network"};
// What a cost-model file may say of a connection's staging: 1 TiB and a million slots are beyond
// any runtime's (NCCL's largest NCCL_BUFFSIZE is far below), and within the integer types.
constexpr double kMostStagingBytes = 1099511627776.0;
constexpr double kMostStagingSlots = 1 << 20;

/// "0.05", "1e-06": a bound as a person writes it.
std::string humanNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// The number at `key` (`value` when absent): finite and >= min, or > min when `minExcluded`.
double number(const json& object, const char* key, double value, double min, const std::string& where,
              bool minExcluded = false) {
  auto it = object.find(key);
  if (it == object.end()) return value;
  if (!it->is_number()) throw std::invalid_argument(where + "." + key + " must be a number");
  double read = it->get<double>();
  if (!(minExcluded ? read > min : read >= min) || !std::isfinite(read)) {
    throw std::invalid_argument(where + "." + key + " must be a finite number " + (minExcluded ? "> " : ">= ") +
                                humanNumber(min) + "; got " + it->dump());
  }
  return read;
}

void rejectUnknown(const json& object, std::initializer_list<const char*> known, const std::string& where) {
  if (!object.is_object()) throw std::invalid_argument(where + " must be an object");
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; }))
      throw std::invalid_argument("unknown key " + where + "." + it.key());
  }
}

}  // namespace

CostModel defaultCostModel() {
  CostModel model;
  for (int p = 0; p < kProtocols; ++p) {
    ProtocolCost& cost = model.protocols[p];
    cost.efficiency = kEfficiency[p];
    cost.baseLatencyUs = kRingBaseLatencyUs[p];
    for (int h = 0; h < kHopClasses; ++h) cost.hopLatencyUs[h] = kRingHopLatencyUs[h][p];
  }
  model.protocols[static_cast<int>(Protocol::LL128)].tbCapGBps = kAmpereLl128ChannelGBps;
  model.perThreadGBps = kAmpereChannelGBps / kNcclDefaultThreads;
  model.networkTbGBps = kNicGBps / kTbsFillingOneNic;
  model.syncOverheadUs = kSyncOverheadUs;
  model.contentionGamma = kContentionGamma;
  model.contentionFloor = kContentionFloor;
  model.stagingBufferBytes = kStagingBufferBytes;
  model.maxStagingSlots = kStagingSlots;
  model.localGBps = 0;  // a TB copies and reduces at its own cap
  return model;
}

double tbCapGBps(const CostModel& model, Protocol protocol, int32_t nThreads, bool network) {
  double cap = model.perThreadGBps > 0 ? model.perThreadGBps * std::max(1, nThreads)
                                       : std::numeric_limits<double>::infinity();
  const double protocolCap = model.protocol(protocol).tbCapGBps;
  if (protocolCap > 0) cap = std::min(cap, protocolCap);
  if (network && model.networkTbGBps > 0) cap = std::min(cap, model.networkTbGBps);
  return cap;
}

CostModel costModelForMessage(const CostModel& model, int64_t messageBytes) {
  if (!(model.cacheBytes > 0) || !(model.cacheSpeedup > 1)) return model;
  const double ratio = static_cast<double>(std::max<int64_t>(0, messageBytes)) / model.cacheBytes;
  const double factor = 1 + (model.cacheSpeedup - 1) / (1 + ratio * ratio);
  CostModel at = model;
  at.perThreadGBps *= factor;
  at.localGBps *= factor;
  return at;
}

double contentionFactor(const CostModel& model, double z) {
  if (!(z > 1.0) || model.contentionGamma <= 0) return 1.0;
  return std::max(model.contentionFloor, 1.0 / (1.0 + model.contentionGamma * (z - 1.0)));
}

int32_t stagingSlots(const CostModel& model, double sliceBytes) {
  const int32_t most = std::max(1, model.maxStagingSlots);
  if (!(sliceBytes > 0)) return most;
  const double fit = std::floor(static_cast<double>(model.stagingBufferBytes) / sliceBytes);
  return static_cast<int32_t>(std::clamp(fit, 1.0, static_cast<double>(most)));
}

json costModelToJson(const CostModel& model) {
  json protocols = json::object();
  for (int p = 0; p < kProtocols; ++p) {
    const ProtocolCost& cost = model.protocols[p];
    json hops = json::object();
    for (int h = 0; h < kHopClasses; ++h) hops[kHopClassNames[h]] = cost.hopLatencyUs[h];
    protocols[std::string(protocolName(static_cast<Protocol>(p)))] = {
        {"efficiency", cost.efficiency},
        {"baseLatencyUs", cost.baseLatencyUs},
        {"hopLatencyUs", hops},
        {"tbCapGBps", cost.tbCapGBps}};
  }
  return {{"format", "tuccl-cost-model"},
          {"version", 1},
          {"protocols", protocols},
          {"perThreadGBps", model.perThreadGBps},
          {"networkTbGBps", model.networkTbGBps},
          {"syncOverheadUs", model.syncOverheadUs},
          {"contentionGamma", model.contentionGamma},
          {"contentionFloor", model.contentionFloor},
          {"stagingBufferBytes", model.stagingBufferBytes},
          {"maxStagingSlots", model.maxStagingSlots},
          {"localGBps", model.localGBps},
          {"cacheBytes", model.cacheBytes},
          {"cacheSpeedup", model.cacheSpeedup},
          {"hardwareClass", model.hardwareClass},
          {"sources", model.sources}};
}

CostModel costModelFromJson(const json& document, const CostModel& base) {
  CostModel model = base;
  rejectUnknown(document,
                {"format", "version", "protocols", "perThreadGBps", "networkTbGBps", "syncOverheadUs", "contentionGamma",
                 "contentionFloor", "stagingBufferBytes", "maxStagingSlots", "localGBps", "cacheBytes", "cacheSpeedup",
                 "hardwareClass", "sources"},
                "cost");
  if (auto it = document.find("format"); it != document.end() && *it != "tuccl-cost-model")
    throw std::invalid_argument("cost.format must be \"tuccl-cost-model\"");
  if (auto it = document.find("version"); it != document.end() && *it != 1)
    throw std::invalid_argument("cost.version must be 1");
  if (auto it = document.find("protocols"); it != document.end()) {
    rejectUnknown(*it, {"LL", "LL128", "Simple"}, "cost.protocols");
    for (auto p = it->begin(); p != it->end(); ++p) {
      const std::string where = "cost.protocols." + p.key();
      rejectUnknown(*p, {"efficiency", "baseLatencyUs", "hopLatencyUs", "tbCapGBps"}, where);
      auto protocol = parseProtocol(p.key());
      if (!protocol) throw std::invalid_argument("unknown protocol '" + p.key() + "' (LL, LL128, Simple)");
      ProtocolCost& cost = model.protocols[static_cast<int>(*protocol)];
      cost.efficiency = number(*p, "efficiency", cost.efficiency, 1e-6, where);
      if (cost.efficiency > 1.0) throw std::invalid_argument(where + ".efficiency must be at most 1");
      cost.baseLatencyUs = number(*p, "baseLatencyUs", cost.baseLatencyUs, 0, where);
      cost.tbCapGBps = number(*p, "tbCapGBps", cost.tbCapGBps, 0, where);
      if (auto hops = p->find("hopLatencyUs"); hops != p->end()) {
        rejectUnknown(*hops, {"nvlink", "pcie", "network"}, where + ".hopLatencyUs");
        for (int h = 0; h < kHopClasses; ++h)
          cost.hopLatencyUs[h] = number(*hops, kHopClassNames[h], cost.hopLatencyUs[h], 0, where + ".hopLatencyUs");
      }
    }
  }
  // 0 would mean "no per-thread cap": a file says a rate, so it must be one.
  model.perThreadGBps = number(document, "perThreadGBps", model.perThreadGBps, 0, "cost", /*minExcluded=*/true);
  model.networkTbGBps = number(document, "networkTbGBps", model.networkTbGBps, 0, "cost");
  model.syncOverheadUs = number(document, "syncOverheadUs", model.syncOverheadUs, 0, "cost");
  model.contentionGamma = number(document, "contentionGamma", model.contentionGamma, 0, "cost");
  model.contentionFloor = number(document, "contentionFloor", model.contentionFloor, 1e-6, "cost");
  if (model.contentionFloor > 1.0) throw std::invalid_argument("cost.contentionFloor must be at most 1");
  // Integers: bounded before the conversion (a double beyond the type's range does not convert).
  auto atMost = [](double value, double most, const char* key) {
    if (value > most) throw std::invalid_argument(std::string("cost.") + key + " must be at most " + humanNumber(most));
    return value;
  };
  model.stagingBufferBytes = static_cast<int64_t>(atMost(
      number(document, "stagingBufferBytes", static_cast<double>(model.stagingBufferBytes), 1, "cost"),
      kMostStagingBytes, "stagingBufferBytes"));
  model.maxStagingSlots = static_cast<int32_t>(
      atMost(number(document, "maxStagingSlots", model.maxStagingSlots, 1, "cost"), kMostStagingSlots, "maxStagingSlots"));
  model.localGBps = number(document, "localGBps", model.localGBps, 0, "cost");
  model.cacheBytes = number(document, "cacheBytes", model.cacheBytes, 0, "cost");
  model.cacheSpeedup = number(document, "cacheSpeedup", model.cacheSpeedup, 1, "cost");
  if (auto it = document.find("hardwareClass"); it != document.end()) {
    if (!it->is_string()) throw std::invalid_argument("cost.hardwareClass must be a string");
    model.hardwareClass = it->get<std::string>();
  }
  if (auto it = document.find("sources"); it != document.end()) {
    if (!it->is_object()) throw std::invalid_argument("cost.sources must be an object of strings");
    model.sources.clear();
    for (auto source = it->begin(); source != it->end(); ++source) {
      if (!source->is_string()) throw std::invalid_argument("cost.sources." + source.key() + " must be a string");
      model.sources[source.key()] = source->get<std::string>();
    }
  }
  return model;
}

std::string writeCostModelJson(const CostModel& model) { return costModelToJson(model).dump(1) + "\n"; }

Expected<CostModel> readCostModelJson(const SourceText& source, const CostModel& base) {
  Expected<json> document = parseJsonText(source);
  if (!document) return document.status();
  return interpretJson(source, [&] { return costModelFromJson(*document, base); });
}

}  // namespace tuccl
