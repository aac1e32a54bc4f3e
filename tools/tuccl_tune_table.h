// tuccl-tune's table writer: the tuned winners as plain data in, the plugin's JSON table (read back
// with the plugin's own reader before it is returned) and NCCL's CSV out. Kept apart from the
// search side of the tool so that the table format is touched in one place.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tuccl::tune_tool {

/// One byte range of the table and its winner.
struct TunedEntry {
  std::string collective;  ///< "allreduce", "allgather"
  uint64_t minBytes = 0;
  uint64_t maxBytes = UINT64_MAX;
  std::string ncclAlgorithm;  ///< "ring", ...; empty: any (a TuCCL program NCCL does not have)
  std::string protocol;       ///< "LL", "LL128", "Simple"; empty: any
  int32_t nChannels = 0;
  uint64_t chunkSize = 0;
  std::string comment;
};

struct TunedTable {
  int32_t nNodes = -1;
  int32_t nRanks = -1;
  std::string topology;  ///< signature key of every entry; empty: none
  std::vector<TunedEntry> entries;
  std::vector<std::pair<std::string, std::string>> environment;  ///< NCCL_NTHREADS, ...
  std::string generator;
  std::string description;
  nlohmann::ordered_json metadata;
  std::string csvHeader;  ///< a '#' comment line for the CSV
};

struct RenderedTable {
  std::string json;
  std::string csv;
  std::vector<std::string> csvDropped;  ///< what NCCL's CSV cannot hold
};

/// The JSON table (schema version 1, read back with the plugin's reader before it is returned)
/// and NCCL's CSV. Throws std::runtime_error naming what failed.
RenderedTable renderTunedTable(const TunedTable& table, const std::string& jsonName);

/// "1M", "1536K" (the plugin's byte-size spelling).
std::string formatTableBytes(uint64_t bytes);

}  // namespace tuccl::tune_tool
