// Connection-based and state-based TB allocation (ResCCL §4.4), and one TB per rank.
#include "scheduler/tb_allocation.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <stdexcept>

namespace tuccl {

std::string_view directionName(Direction direction) {
  switch (direction) {
    case Direction::Send:
      return "send";
    case Direction::Recv:
      return "recv";
    case Direction::Local:
      return "local";
  }
  return "?";
}

namespace {

// (rank, peer, direction, channel) packed so that integer order is the documented sort order.
uint64_t connectionKey(int32_t rank, int32_t peer, Direction direction, int32_t channel) {
  return (static_cast<uint64_t>(rank) << 42) | (static_cast<uint64_t>(peer) << 20) |
         (static_cast<uint64_t>(direction) << 16) | static_cast<uint64_t>(channel);
}

// Greedy interval colouring of one rank's connections; returns the TB count.
int32_t colourIntervals(std::vector<Connection>& connections, size_t begin, size_t end, std::vector<int32_t>& tbOf) {
  std::vector<size_t> byStart;
  for (size_t c = begin; c < end; ++c) byStart.push_back(c);
  std::stable_sort(byStart.begin(), byStart.end(), [&](size_t a, size_t b) {
    return connections[a].firstSubPipeline < connections[b].firstSubPipeline;
  });
  using Busy = std::pair<int32_t, int32_t>;  // (last sub-pipeline, tb)
  std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
  std::set<int32_t> free;
  int32_t count = 0;
  for (size_t c : byStart) {
    while (!busy.empty() && busy.top().first < connections[c].firstSubPipeline) {
      free.insert(busy.top().second);
      busy.pop();
    }
    int32_t tb;
    if (free.empty()) {
      tb = count++;
    } else {
      tb = *free.begin();
      free.erase(free.begin());
    }
    tbOf[c] = tb;
    busy.emplace(connections[c].lastSubPipeline, tb);
  }
  return count;
}

}  // namespace

TbAllocation allocateThreadBlocks(const Algorithm& algorithm, const Dag& dag, const Pipeline& pipeline,
                                  const TbAllocationOptions& options) {
  const auto& ops = algorithm.ops;
  if (static_cast<int64_t>(ops.size()) != dag.nTasks || static_cast<int64_t>(pipeline.subPipelineOf.size()) != dag.nTasks) {
    throw std::invalid_argument("thread-block allocation: the algorithm, DAG and pipeline disagree on the tasks");
  }
  if (!options.channelOfTask.empty() && options.channelOfTask.size() != ops.size()) {
    throw std::invalid_argument("thread-block allocation: one channel per task is needed");
  }
  if (algorithm.nRanks >= (1 << 22)) throw std::invalid_argument("the algorithm has more than 4,194,304 ranks, more than thread blocks can be numbered for");
  auto channelOf = [&](int32_t t) { return options.channelOfTask.empty() ? 0 : options.channelOfTask[t]; };

  TbAllocation allocation;
  allocation.policy = options.policy;
  std::vector<uint64_t> sendKey(ops.size(), UINT64_MAX);
  std::vector<uint64_t> recvKey(ops.size());
  std::vector<uint64_t> keys;
  keys.reserve(ops.size() * 2);
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    const Operation& op = ops[t];
    const int32_t channel = channelOf(t);
    if (channel < 0 || channel >= 65536) throw std::invalid_argument("a channel number outside 0 to 65,535");
    if (op.isLocal()) {
      recvKey[t] = connectionKey(op.dstRank, op.dstRank, Direction::Local, channel);
    } else {
      sendKey[t] = connectionKey(op.srcRank, op.dstRank, Direction::Send, channel);
      recvKey[t] = connectionKey(op.dstRank, op.srcRank, Direction::Recv, channel);
      keys.push_back(sendKey[t]);
    }
    keys.push_back(recvKey[t]);
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  allocation.connections.resize(keys.size());
  for (size_t c = 0; c < keys.size(); ++c) {
    Connection& connection = allocation.connections[c];
    connection.rank = static_cast<int32_t>(keys[c] >> 42);
    connection.peer = static_cast<int32_t>((keys[c] >> 20) & ((1u << 22) - 1));
    connection.direction = static_cast<Direction>((keys[c] >> 16) & 3);
    connection.channel = static_cast<int32_t>(keys[c] & 0xffff);
    connection.firstSubPipeline = INT32_MAX;
    connection.lastSubPipeline = -1;
  }
  auto indexOf = [&](uint64_t key) {
    return static_cast<int32_t>(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin());
  };
  allocation.sendConnectionOf.assign(ops.size(), -1);
  allocation.recvConnectionOf.assign(ops.size(), -1);
  auto touch = [&](int32_t c, int32_t subPipeline) {
    Connection& connection = allocation.connections[c];
    connection.firstSubPipeline = std::min(connection.firstSubPipeline, subPipeline);
    connection.lastSubPipeline = std::max(connection.lastSubPipeline, subPipeline);
  };
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    if (sendKey[t] != UINT64_MAX) {
      allocation.sendConnectionOf[t] = indexOf(sendKey[t]);
      touch(allocation.sendConnectionOf[t], pipeline.subPipelineOf[t]);
    }
    allocation.recvConnectionOf[t] = indexOf(recvKey[t]);
    touch(allocation.recvConnectionOf[t], pipeline.subPipelineOf[t]);
  }

  allocation.connectionBegin.assign(static_cast<size_t>(algorithm.nRanks) + 1, 0);
  for (const Connection& connection : allocation.connections) ++allocation.connectionBegin[connection.rank + 1];
  for (int32_t r = 0; r < algorithm.nRanks; ++r) allocation.connectionBegin[r + 1] += allocation.connectionBegin[r];
  allocation.tbOfConnection.assign(allocation.connections.size(), -1);
  allocation.tbCount.assign(static_cast<size_t>(algorithm.nRanks), 0);
  for (int32_t r = 0; r < algorithm.nRanks; ++r) {
    const auto begin = static_cast<size_t>(allocation.connectionBegin[r]);
    const auto end = static_cast<size_t>(allocation.connectionBegin[r + 1]);
    switch (options.policy) {
      case TbPolicy::ConnectionBased:
        for (size_t c = begin; c < end; ++c) allocation.tbOfConnection[c] = static_cast<int32_t>(c - begin);
        allocation.tbCount[r] = static_cast<int32_t>(end - begin);
        break;
      case TbPolicy::StateBased:
        allocation.tbCount[r] = colourIntervals(allocation.connections, begin, end, allocation.tbOfConnection);
        break;
      case TbPolicy::Single:
        for (size_t c = begin; c < end; ++c) allocation.tbOfConnection[c] = 0;
        allocation.tbCount[r] = begin < end ? 1 : 0;
        break;
    }
  }
  return allocation;
}

std::vector<int32_t> channelsByForwarding(const Algorithm& algorithm, const Dag& dag) {
  std::vector<int32_t> channels(algorithm.ops.size(), 0);
  if (algorithm.ranksPerNode <= 0) return channels;
  const SlotNumbering numbering(algorithm);
  auto interNode = [&](const Operation& op) {
    return op.srcRank / algorithm.ranksPerNode != op.dstRank / algorithm.ranksPerNode;
  };
  for (int32_t t = 0; t < dag.nTasks; ++t) {
    const Operation& op = algorithm.ops[t];
    if (op.isLocal() || interNode(op)) continue;
    const int64_t first = numbering.slot(op.srcRank, op.srcBuffer, op.srcIndex);
    for (int32_t p : dag.predecessors(t)) {
      const Operation& pred = algorithm.ops[p];
      if (!interNode(pred) || pred.dstRank != op.srcRank) continue;
      const int64_t written = numbering.slot(pred.dstRank, pred.dstBuffer, pred.dstIndex);
      if (written < first + op.count && first < written + pred.count) {
        channels[t] = 1;
        break;
      }
    }
  }
  return channels;
}

TbUsage measureTbUsage(const Algorithm& algorithm, const Pipeline& pipeline, const TbAllocation& allocation) {
  TbUsage usage;
  const int32_t n = algorithm.nRanks;
  std::vector<int64_t> tbBase(static_cast<size_t>(n) + 1, 0);
  for (int32_t r = 0; r < n; ++r) tbBase[r + 1] = tbBase[r] + allocation.tbCount[r];
  const int64_t totalTbs = tbBase[n];
  std::vector<int32_t> lastBusy(static_cast<size_t>(totalTbs), -1);
  std::vector<int64_t> busy(static_cast<size_t>(totalTbs), 0);
  std::vector<int32_t> rankFirst(static_cast<size_t>(n), INT32_MAX);
  std::vector<int32_t> rankLast(static_cast<size_t>(n), -1);
  auto mark = [&](int32_t connection, int32_t subPipeline) {
    if (connection < 0) return;
    const Connection& c = allocation.connections[connection];
    const int64_t tb = tbBase[c.rank] + allocation.tbOfConnection[connection];
    if (lastBusy[tb] != subPipeline) {
      lastBusy[tb] = subPipeline;
      ++busy[tb];
    }
    rankFirst[c.rank] = std::min(rankFirst[c.rank], subPipeline);
    rankLast[c.rank] = std::max(rankLast[c.rank], subPipeline);
  };
  for (int32_t t : pipeline.order) {  // sub-pipelines in increasing order
    mark(allocation.sendConnectionOf[t], pipeline.subPipelineOf[t]);
    mark(allocation.recvConnectionOf[t], pipeline.subPipelineOf[t]);
  }
  usage.totalTbs = totalTbs;
  usage.minTbs = n > 0 ? INT32_MAX : 0;
  double busySum = 0;
  for (int32_t r = 0; r < n; ++r) {
    usage.minTbs = std::min(usage.minTbs, allocation.tbCount[r]);
    usage.maxTbs = std::max(usage.maxTbs, allocation.tbCount[r]);
    const double lifetime = rankLast[r] >= rankFirst[r] ? rankLast[r] - rankFirst[r] + 1 : 1;
    for (int64_t tb = tbBase[r]; tb < tbBase[r + 1]; ++tb) {
      const double fraction = static_cast<double>(busy[tb]) / lifetime;
      busySum += fraction;
      usage.maxIdle = std::max(usage.maxIdle, 1.0 - fraction);
    }
  }
  usage.meanTbs = n > 0 ? static_cast<double>(totalTbs) / n : 0;
  usage.busyFraction = totalTbs > 0 ? busySum / static_cast<double>(totalTbs) : 0;
  usage.meanIdle = totalTbs > 0 ? 1.0 - usage.busyFraction : 0;
  return usage;
}

}  // namespace tuccl
