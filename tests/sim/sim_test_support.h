// Shared helpers of the sim tests: small topologies as JSON and hand-made plans (no scheduler).
#pragma once

#include <string>
#include <vector>

#include "plan/plan.h"
#include "sim/cost_model.h"
#include "sim/network.h"

namespace tuccl::testing {

inline std::string examplePath(const std::string& name) {
  return std::string(TUCCL_SOURCE_DIR) + "/examples/algorithms/" + name + ".resccl";
}

/// n GPUs on one NVSwitch, every GPU port `gbps` per direction and `alphaUs` per hop.
inline Network nvswitchBox(int n, double gbps, double alphaUs) {
  std::string gpus, links;
  for (int g = 0; g < n; ++g) {
    gpus += std::string(g ? "," : "") + "{\"node\": 0}";
    links += std::string(g ? "," : "") + "{\"a\": \"gpu:" + std::to_string(g) +
             "\", \"b\": \"switch:0\", \"kind\": \"nvlink\", \"alpha_us\": " + std::to_string(alphaUs) +
             ", \"bandwidth_gbps\": " + std::to_string(gbps) + "}";
  }
  const std::string text = "{\"format\": \"tuccl-topology\", \"version\": 1, \"name\": \"box\", \"nodes\": 1, \"gpus\": [" +
                           gpus + "], \"nics\": [], \"switches\": [{\"kind\": \"nvswitch\", \"node\": 0}], \"links\": [" +
                           links + "]}";
  return networkFromTopologyJson(SourceText("box.json", text)).value();
}

/// Two nodes, two GPUs each behind one PCIe switch with one NIC of `nicGBps` (PCIe 100 GB/s), all
/// NICs on one ToR. GPU 0 and 1 share NIC 0; GPU 2 and 3 share NIC 1.
inline Network twoNodesSharedNic(double nicGBps) {
  const std::string text = R"({"format": "tuccl-topology", "version": 1, "name": "shared-nic", "nodes": 2,
    "gpus": [{"node": 0}, {"node": 0}, {"node": 1}, {"node": 1}],
    "nics": [{"node": 0, "bandwidth_gbps": )" + std::to_string(nicGBps) + R"(}, {"node": 1, "bandwidth_gbps": )" +
                           std::to_string(nicGBps) + R"(}],
    "switches": [{"kind": "pcie-switch", "node": 0}, {"kind": "pcie-switch", "node": 1}, {"kind": "tor"}],
    "links": [
      {"a": "gpu:0", "b": "switch:0", "kind": "pcie", "alpha_us": 0.5, "bandwidth_gbps": 100},
      {"a": "gpu:1", "b": "switch:0", "kind": "pcie", "alpha_us": 0.5, "bandwidth_gbps": 100},
      {"a": "nic:0", "b": "switch:0", "kind": "pcie", "alpha_us": 0.5, "bandwidth_gbps": 100},
      {"a": "gpu:2", "b": "switch:1", "kind": "pcie", "alpha_us": 0.5, "bandwidth_gbps": 100},
      {"a": "gpu:3", "b": "switch:1", "kind": "pcie", "alpha_us": 0.5, "bandwidth_gbps": 100},
      {"a": "nic:1", "b": "switch:1", "kind": "pcie", "alpha_us": 0.5, "bandwidth_gbps": 100},
      {"a": "nic:0", "b": "switch:2", "kind": "network", "alpha_us": 0.85, "bandwidth_gbps": )" +
                           std::to_string(nicGBps) + R"(},
      {"a": "nic:1", "b": "switch:2", "kind": "network", "alpha_us": 0.85, "bandwidth_gbps": )" +
                           std::to_string(nicGBps) + R"(}]})";
  return networkFromTopologyJson(SourceText("shared-nic.json", text)).value();
}

/// A plan of point-to-point transfers, each (src, dst) pair one op in its own TB on both sides,
/// all concurrent; one chunk per buffer, so the message size is each transfer's size.
inline Plan pointToPointPlan(int32_t nRanks, const std::vector<std::pair<int32_t, int32_t>>& transfers,
                             int64_t chunkSize) {
  Plan plan;
  plan.collective = Collective::AllGather;
  plan.algorithm = "p2p";
  plan.nRanks = nRanks;
  plan.bufferChunks = {1, 1, 0};
  plan.config.chunkSize = chunkSize;
  plan.scheduler = Scheduler::Hpds;
  plan.executionLevel = ExecutionLevel::Task;
  plan.tbAllocation = TbPolicy::ConnectionBased;
  plan.subPipelines = 1;
  plan.ranks.resize(nRanks);
  for (int32_t r = 0; r < nRanks; ++r) plan.ranks[r].rank = r;
  for (size_t i = 0; i < transfers.size(); ++i) {
    const auto [src, dst] = transfers[i];
    PlanEntry send;
    send.kind = PrimitiveKind::Send;
    send.peer = dst;
    send.op = static_cast<int32_t>(i);
    PlanEntry recv = send;
    recv.kind = PrimitiveKind::Recv;
    recv.peer = src;
    PlanTb sendTb;
    sendTb.id = static_cast<int32_t>(plan.ranks[src].tbs.size());
    sendTb.sendPeer = dst;
    sendTb.entries.push_back(send);
    plan.ranks[src].tbs.push_back(sendTb);
    PlanTb recvTb;
    recvTb.id = static_cast<int32_t>(plan.ranks[dst].tbs.size());
    recvTb.recvPeer = src;
    recvTb.entries.push_back(recv);
    plan.ranks[dst].tbs.push_back(recvTb);
  }
  return plan;
}

/// A cost model with nothing but the topology: no launch, hop or sync latency, no TB caps, no
/// contention, Simple efficiency 1.
inline CostModel bareCostModel() {
  CostModel model = defaultCostModel();
  for (ProtocolCost& protocol : model.protocols) {
    protocol.baseLatencyUs = 0;
    protocol.hopLatencyUs = {0, 0, 0};
    protocol.tbCapGBps = 0;
  }
  model.perThreadGBps = 0;
  model.networkTbGBps = 0;
  model.syncOverheadUs = 0;
  model.contentionGamma = 0;
  return model;
}

}  // namespace tuccl::testing
