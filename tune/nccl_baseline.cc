#include "tune/nccl_baseline.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "scheduler/plan_builder.h"
#include "sim/simulator.h"
#include "support/bus_bandwidth.h"
#include "synth/generators.h"
#include "topo/sketch.h"

namespace tuccl {

namespace {

// reference/nccl-data-path.md 1.3: per-step data of each protocol's buffer, and NCCL_P2P_NVL_CHUNKSIZE
// (512 KiB) / NCCL_P2P_NET_CHUNKSIZE (128 KiB).
constexpr int64_t kSimpleStepBytes = 512 * 1024;
constexpr int64_t kLLStepBytes = 32 * 1024;
constexpr int64_t kLL128StepBytes = 576'000;
constexpr int64_t kP2pNvlChunkBytes = 512 * 1024;
constexpr int64_t kP2pNetChunkBytes = 128 * 1024;
// reference/nccl-data-path.md 1.1: bytes per thread below which NCCL drops a channel.
constexpr uint64_t kSimpleThreadThreshold = 64;
constexpr uint64_t kLLThreadThreshold = 8;
// reference/nccl-data-path.md 1.1: MAXCHANNELS.
constexpr int32_t kNcclMaxChannels = 64;

// The generator of NCCL's plan: p2p for AllToAll whatever the algorithm, else its ring or trees.
const char* generatorOf(Collective collective, NcclAlgorithm algorithm) {
  if (collective == Collective::AllToAll) return "direct";
  return algorithm == NcclAlgorithm::Tree ? "double-binary-tree" : "ring";
}

bool splitsRingChunks(Collective collective) {
  return collective == Collective::AllReduce || collective == Collective::AllGather ||
         collective == Collective::ReduceScatter;
}

}  // namespace

int64_t ncclChunkBytes(NcclAlgorithm algorithm, Protocol protocol, Collective collective, bool p2p, bool multiNode) {
  if (p2p) return multiNode ? kP2pNetChunkBytes : kP2pNvlChunkBytes;
  switch (protocol) {
    case Protocol::LL:
      return kLLStepBytes;
    case Protocol::LL128:
      return kLL128StepBytes;
    case Protocol::Simple:
      break;
  }
  // Ring Simple AllReduce/AllGather/ReduceScatter: chunkSteps 4, sliceSteps 2 -> 1 MiB slices.
  if (algorithm == NcclAlgorithm::Ring && splitsRingChunks(collective)) return 2 * kSimpleStepBytes;
  return kSimpleStepBytes;
}

int32_t ncclThreads(NcclAlgorithm algorithm, Protocol protocol) {
  if (algorithm == NcclAlgorithm::Tree || protocol == Protocol::LL128) return 640;
  return 512;
}

int64_t ncclTreeLL128ChunkBytes(int64_t chunk, uint64_t bytes, int32_t nChannels, int32_t nRanks, int32_t nNodes) {
  // reference/nccl-data-path.md 1.3 (calcCollChunking): with ppn ranks per node and
  // s = 1 + log2(nodes) + 0.1 ppn, halve while a channel's chunks number fewer than 64 s / ppn
  // (down to 128 KiB), then fewer than 16 s / ppn (down to 32 KiB).
  const double ppn = static_cast<double>(nRanks) / std::max(1, nNodes);
  const double s = 1 + std::floor(std::log2(std::max(1, nNodes))) + 0.1 * ppn;
  auto chunksPerChannel = [&] { return static_cast<double>(bytes) / (static_cast<double>(std::max(1, nChannels)) * chunk); };
  while (chunksPerChannel() < 64 * s / ppn && chunk > 128 * 1024) chunk /= 2;
  while (chunksPerChannel() < 16 * s / ppn && chunk > 32 * 1024) chunk /= 2;
  return chunk;
}

NcclLaunch ncclLaunch(const NcclGraph& graph, NcclAlgorithm algorithm, Protocol protocol, uint64_t bytes) {
  NcclLaunch launch;
  // The communicator runs twice the graph's channels: the second half repeats the rings and
  // carries the second tree (reference/nccl-data-path.md 1.1, connect.cc), at most 64.
  launch.nChannels = std::clamp(2 * graph.nChannels, 1, kNcclMaxChannels);
  launch.nThreads = ncclThreads(algorithm, protocol);
  uint64_t threshold = protocol == Protocol::Simple ? kSimpleThreadThreshold : kLLThreadThreshold;
  if (protocol == Protocol::LL && algorithm == NcclAlgorithm::Ring) threshold *= std::max(1, graph.nRanks);
  auto tooFew = [&] { return bytes < static_cast<uint64_t>(launch.nChannels) * launch.nThreads * threshold; };
  while (launch.nChannels > 1 && tooFew()) --launch.nChannels;
  while (launch.nThreads % 128 == 0 && launch.nThreads > 128 && tooFew()) launch.nThreads /= 2;
  return launch;
}

NcclBaseline::NcclBaseline(const Topology& topology, const Network& network, const CostModel& cost)
    : topology_(topology), network_(network), cost_(cost), graph_(searchNcclGraph(topology)) {}

Expected<Plan> NcclBaseline::plan(Collective collective, int64_t bytes, NcclAlgorithm algorithm, Protocol protocol) {
  const bool p2p = collective == Collective::AllToAll;
  if (p2p) algorithm = NcclAlgorithm::Ring;
  const uint64_t size = static_cast<uint64_t>(std::max<int64_t>(0, bytes));
  const NcclLaunch launch = ncclLaunch(graph_, algorithm, protocol, size);
  int64_t chunk = ncclChunkBytes(algorithm, protocol, collective, p2p, graph_.nNodes > 1);
  if (algorithm == NcclAlgorithm::Tree && protocol == Protocol::LL128)
    chunk = ncclTreeLL128ChunkBytes(chunk, size, launch.nChannels, graph_.nRanks, graph_.nNodes);
  const auto key = std::make_tuple(static_cast<int>(collective), static_cast<int>(algorithm), static_cast<int>(protocol),
                                   launch.nChannels, launch.nThreads, chunk);
  if (auto found = plans_.find(key); found != plans_.end()) return found->second;

  GeneratorOptions options;
  Sketch sketch;  // none: every pair allowed, one rail
  // NCCL's kernels fold the out-of-place copy into their first primitive (directCopySend,
  // recvReduceCopy from the input): the in-place plan moves the bytes NCCL moves.
  options.inPlace = !p2p;
  const std::string generator = generatorOf(collective, algorithm);
  int32_t replicas = 1;
  if (generator == "double-binary-tree") {
    // Channels [0, n) run tree 0 and [n, 2n) tree 1, channel c's trees through the NIC of the
    // tree graph's channel c: the generator's two trees in n parts, part q through rails 2q and
    // 2q + 1 of the sketch (every NIC of a node is a rail).
    options.parts = std::max(1, launch.nChannels / 2);
    sketch = buildSketch(topology_, SketchVariant::FullMesh);
  } else if (generator == "ring") {
    // Channel c runs ring c mod the rings. Rings of one order (every ring of an NVSwitch) are
    // separate channels, each with its own block and connections: one ring per order, and the
    // channels over the orders as replicas.
    std::vector<std::vector<int32_t>> orders;
    for (const std::vector<int32_t>& ring : graph_.rings)
      if (std::find(orders.begin(), orders.end(), ring) == orders.end()) orders.push_back(ring);
    const int32_t used = std::min(std::max<int32_t>(1, static_cast<int32_t>(orders.size())), launch.nChannels);
    replicas = std::max(1, launch.nChannels / used);
    if (!orders.empty()) options.rings.assign(orders.begin(), orders.begin() + used);
  }
  if (collective == Collective::Broadcast || collective == Collective::Reduce) options.root = 0;
  Expected<Algorithm> algo = generateAlgorithm(generator, collective, topology_, sketch, options);
  if (!algo) return algo.status();

  PlanRequest request;
  if (generator == "ring") {
    // One block per channel replays the ring's primitive sequence per chunk (algorithm level)
    // and serves its two connections with fused primitives.
    request.scheduler = Scheduler::AlgorithmLevel;
    request.tbAllocation.policy = TbPolicy::StateBased;
  } else {
    // The tree's block runs reduce-up and broadcast-down as two concurrent thread groups, each
    // streaming the chunks through its connections; p2p runs every peer's transfers at once:
    // task-level execution with a TB per connection. Every tree channel has its own connections:
    // an operation's channel is its chunk's tree part.
    request.scheduler = Scheduler::Hpds;
    request.tbAllocation.policy = TbPolicy::ConnectionBased;
    if (!p2p) {
      const int32_t k = std::max(1, algo->chunksPerRank());
      for (const Operation& op : algo->ops) request.tbAllocation.channelOfOperation.push_back(op.dstIndex % k);
    }
  }
  request.config.protocol = protocol;
  request.config.nThreads = launch.nThreads;
  request.config.chunkSize = chunk;
  request.config.nChannels = replicas;
  Expected<Plan> built = buildPlan(*algo, request);
  if (!built) return built.status();
  built->algorithm = p2p ? "nccl-p2p" : algorithm == NcclAlgorithm::Tree ? "nccl-tree" : "nccl-ring";
  plans_.emplace(key, *built);
  return built;
}

Expected<NcclSimulated> NcclBaseline::evaluate(Collective collective, int64_t bytes, NcclAlgorithm algorithm,
                                               Protocol protocol) {
  Expected<NcclChoice> model = evaluateNcclChoice(graph_, collective, static_cast<uint64_t>(bytes), algorithm, protocol);
  if (!model) return model.status();
  Expected<Plan> p = plan(collective, bytes, algorithm, protocol);
  if (!p) return p.status();
  SimOptions options;
  options.messageBytes = bytes;
  options.cost = cost_;
  Expected<SimResult> result = simulatePlan(*p, network_, options);
  if (!result) return result.status();
  NcclSimulated simulated;
  simulated.model = *model;
  simulated.choice = *model;
  simulated.choice.nChannels = ncclLaunch(graph_, model->p2p ? NcclAlgorithm::Ring : algorithm, protocol,
                                          static_cast<uint64_t>(std::max<int64_t>(0, bytes)))
                                   .nChannels;
  simulated.choice.timeUs = result->timeUs;
  simulated.choice.algBwGBs = result->timeUs > 0 ? static_cast<double>(bytes) / (1000 * result->timeUs) : 0;
  simulated.choice.busBwGBs = simulated.choice.algBwGBs * busBandwidthFactor(collective, graph_.nRanks);
  simulated.generator = generatorOf(collective, algorithm);
  return simulated;
}

Expected<NcclSimulated> NcclBaseline::evaluate(Collective collective, int64_t bytes) {
  const NcclChoice model = ncclModelChoice(graph_, collective, static_cast<uint64_t>(bytes));
  return evaluate(collective, bytes, model.algorithm, model.protocol);
}

}  // namespace tuccl
