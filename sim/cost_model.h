// The simulator's cost model: every number the simulation uses, in one overridable structure.
//
// In:  nothing (defaultCostModel), or cost-model JSON (readCostModelJson) overriding any subset.
// Out: a CostModel, read by the simulator (sim/simulator.h).
//
// A transfer of c bytes over a resource path costs alpha + c / bandwidth (design.md, "Simulator"):
//   - the bytes on the wire are c / efficiency(protocol);
//   - the rate is the flow's max-min fair share of every resource on its path (sim/fair_share.h),
//     capped by what one thread block can push (tbCapGBps);
//   - a resource pushed by more TBs than it can absorb loses capacity (contentionFactor, ResCCL
//     Eq. 1 and Figure 4);
//   - alpha is the path's wire latency plus the protocol's per-hop latency; it delays the arrival,
//     not the sender;
//   - every primitive invocation (one micro-batch of one entry) costs the TB syncOverheadUs.
// Each default is cited in cost_model.cc; docs/simulator.md explains the model.
#pragma once

#include <array>
#include <map>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "support/source_text.h"
#include "support/status.h"
#include "support/vocabulary.h"

namespace tuccl {

/// NCCL's latency classes of a hop (cost-model.md, per-hop table).
enum class HopClass : uint8_t { NVLink, Pcie, Network };
inline constexpr int kHopClasses = 3;


struct ProtocolCost {
  double efficiency = 1.0;     ///< payload bytes per wire byte
  double baseLatencyUs = 0;    ///< once per collective (kernel launch and setup)
  std::array<double, kHopClasses> hopLatencyUs{};  ///< per transfer, by hop class
  double tbCapGBps = 0;        ///< per-TB ceiling of the protocol; 0 = none beyond the threads
};

struct CostModel {
  std::array<ProtocolCost, kProtocols> protocols{};  ///< indexed by Protocol
  double perThreadGBps = 0;       ///< a TB's rate is nThreads × this (before the protocol cap)
  double networkTbGBps = 0;       ///< what one TB pushes through a NIC; 0 = no extra cap
  double syncOverheadUs = 0;      ///< per primitive invocation (flag wait, fence, flag post)
  double contentionGamma = 0;     ///< ResCCL Eq. 1 γ: capacity loss per unit of oversubscription z-1
  double contentionFloor = 0;     ///< the factor never drops below this
  int64_t stagingBufferBytes = 0; ///< per connection (NCCL_BUFFSIZE)
  int32_t maxStagingSlots = 0;    ///< per connection (NCCL_STEPS)
  double localGBps = 0;           ///< copy/reduce rate of one TB on its own GPU; 0 = the TB cap
  /// The memory hierarchy: a call whose message is well below cacheBytes moves its TBs' bytes
  /// (perThreadGBps, localGBps) cacheSpeedup times faster, falling smoothly to 1 above it
  /// (costModelForMessage). 0: no such regime (the defaults).
  double cacheBytes = 0;
  double cacheSpeedup = 1;
  /// What the numbers describe ("ampere", "hopper", "cpu (calibrated)"); empty: unsaid.
  std::string hardwareClass;
  /// Where each number comes from, by its JSON key ("perThreadGBps", "protocols.LL128.tbCapGBps").
  std::map<std::string, std::string> sources;

  const ProtocolCost& protocol(Protocol p) const { return protocols[static_cast<int>(p)]; }
};

/// The documented defaults (A100-class numbers; cost-model.md, ResCCL §3).
CostModel defaultCostModel();

/// What one TB of `nThreads` threads can push with `protocol`, in wire GB/s; `network` when the
/// path goes through a NIC.
double tbCapGBps(const CostModel& model, Protocol protocol, int32_t nThreads, bool network);

/// The model a call of `messageBytes` (nccl-tests' size) runs under: perThreadGBps and localGBps
/// times 1 + (cacheSpeedup − 1) / (1 + (messageBytes / cacheBytes)²); the model itself when
/// cacheBytes is 0.
CostModel costModelForMessage(const CostModel& model, int64_t messageBytes);

/// ResCCL Eq. 1 as a capacity factor: z = (sum of the TB caps pushing into a resource) / its
/// capacity. Up to z = 1 the link absorbs every TB (factor 1); beyond, contention costs
/// 1 / (1 + γ (z − 1)), never below contentionFloor.
double contentionFactor(const CostModel& model, double z);

/// Staging slots of one connection for micro-batches of `sliceBytes`:
/// clamp(stagingBufferBytes / sliceBytes, 1, maxStagingSlots).
int32_t stagingSlots(const CostModel& model, double sliceBytes);

/// JSON with every field; fromJson starts from `base` and overrides the fields present. Unknown
/// keys are errors (a typo must not silently keep a default).
nlohmann::json costModelToJson(const CostModel& model);
CostModel costModelFromJson(const nlohmann::json& json, const CostModel& base = defaultCostModel());
std::string writeCostModelJson(const CostModel& model);
/// Throws DiagnosticError (file, line and column for syntax errors) on bad input.
Expected<CostModel> readCostModelJson(const SourceText& source, const CostModel& base = defaultCostModel());

}  // namespace tuccl
