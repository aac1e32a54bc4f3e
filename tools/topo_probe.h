// tuccl-topo probe: the machine measured instead of described (TuCCL §III-B, the empirical
// topology). Run as every rank of a job (tuccl-run, or any launcher libtuccl reads: TUCCL_RANK,
// TUCCL_NRANKS, TUCCL_COMM_ID, TUCCL_HOSTID), it measures through libtuccl's point-to-point, one
// pair at a time while the others wait:
//   - latency: 8-byte ping-pong, half the round trip (median of the iterations);
//   - bandwidth: a large message each way, answered by an 8-byte acknowledgement, so
//     bandwidth = bytes / (time - the pair's round trip, at least half the time);
// for every pair of ranks on a host and, between hosts, every pair up to kAllPairsRanks ranks, else
// a sample: each rank with one rank of every other host (the same local index), as the paper samples
// NIC pairs. Then, for hosts of two ranks or more, two pairs between the same two hosts at once, to
// expose what they share (the NIC): their bandwidth beside each one's alone.
//
// Rank 0 writes a TuCCL topology JSON (docs/topology-format.md; readable by tuccl-sim --topo) whose
// links carry what was measured: every measured pair of a host is a direct GPU-to-GPU link (kind
// nvlink: the model's direct fabric) with the pair's alpha (latency) and bandwidth (the slower
// direction); each host gets a PCIe switch, one NIC and a link to one ToR whose alpha is half the
// median latency between hosts and whose bandwidth the median bandwidth between hosts. And a report
// (text) with every pair's numbers and flags: "slow" when a pair is below `slowFraction` of its
// class's median (latency: above median / slowFraction), "asymmetric" when one direction is below
// `slowFraction` of the other.
//
// Test hook: TUCCL_TEST_SLOW_PAIR=A,B makes ranks A and B wait `kSlowPairMicros` before each of their
// messages to each other, so a slow pair can be tested on a machine whose pairs are all alike.
//
// On the CPU device the buffers are host memory and the transfers run on the NULL stream; on the
// CUDA device they are device memory (tools/cuda_memory.h) and each transfer is waited for on a
// stream of the communicator's GPU.
#pragma once

#include <string>

namespace tuccl::tools {

struct ProbeOptions {
  std::string output;       ///< the topology JSON (rank 0); required
  std::string report;       ///< the report; empty: standard output (rank 0)
  bool force = false;       ///< replace existing files
  int latencyIters = 200;   ///< ping-pongs per pair
  long long bandwidthBytes = 4 << 20;
  int bandwidthIters = 4;   ///< large messages per direction
  double slowFraction = 0.5;
};

inline constexpr int kAllPairsRanks = 16;
inline constexpr int kSlowPairMicros = 10000;  // far above any pair's latency, even on a loaded host

/// Runs the probe as this process's rank; 0 on success, else the tool's exit status (messages on
/// stderr, naming the rank).
int runProbe(const ProbeOptions& options);

}  // namespace tuccl::tools
