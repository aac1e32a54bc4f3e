// The per-communicator index: match order, wildcards, per-call filters, and agreement with a
// brute-force scan of the table on random tables.
#include "table/table_index.h"

#include <gtest/gtest.h>

#include <random>

#include "table/table_io.h"

namespace tuccl {
namespace {

const std::string kData = std::string(TUCCL_SOURCE_DIR) + "/tests/data/table/";

LookupTable loadTestTable(const std::string& name) {
  Expected<LoadedTable> loaded = loadTableFile(kData + name);
  EXPECT_TRUE(loaded.ok()) << formatTableError(loaded.status());
  return loaded.ok() ? loaded->table : LookupTable{};
}

/// The definition the index must agree with: the first entry in match order whose key matches.
int bruteForce(const LookupTable& table, const CommKey& comm, int coll, uint64_t bytes, int pipeOps,
               int regBuff) {
  for (uint32_t i : entriesInMatchOrder(table)) {
    const TableEntry& e = table.entries[i];
    if (static_cast<int>(e.collective) != coll || bytes < e.minBytes || bytes > e.maxBytes) continue;
    if (!keyMatches(e.nNodes, e.nRanks, e.topology, comm)) continue;
    if (e.numPipeOps >= 0 && e.numPipeOps != pipeOps) continue;
    if (e.regBuff >= 0 && e.regBuff != regBuff) continue;
    return static_cast<int>(i);
  }
  return -1;
}

int indexed(const CommIndex& index, int coll, uint64_t bytes, int pipeOps, int regBuff) {
  const CompiledDecision* d = index.lookup(coll, bytes, pipeOps, regBuff);
  return d == nullptr ? -1 : static_cast<int>(d->entryIndex);
}

constexpr int kAllReduce = static_cast<int>(Collective::AllReduce);

TEST(CommIndex, SpecificEntriesBeatWildcards) {
  LookupTable table = loadTestTable("valid.json");
  CommIndex index = CommIndex::build(table, {2, 16, ""});
  EXPECT_EQ(indexed(index, kAllReduce, 0, 1, 0), 0);
  EXPECT_EQ(indexed(index, kAllReduce, 65536, 1, 0), 0);
  EXPECT_EQ(indexed(index, kAllReduce, 65537, 1, 0), 1);
  EXPECT_EQ(indexed(index, kAllReduce, 4 << 20, 1, 0), 1);
  EXPECT_EQ(indexed(index, kAllReduce, (4 << 20) + 1, 1, 0), 2);
  EXPECT_EQ(indexed(index, kAllReduce, UINT64_MAX, 1, 0), 2);
  // Another size: only the wildcard entry applies.
  CommIndex other = CommIndex::build(table, {4, 32, ""});
  EXPECT_EQ(indexed(other, kAllReduce, 100, 1, 0), 3);
  EXPECT_EQ(indexed(other, kAllReduce, UINT64_MAX, 1, 0), 3);
  // The single-node entry shadows the wildcard up to 1M only.
  CommIndex single = CommIndex::build(table, {1, 8, ""});
  EXPECT_EQ(indexed(single, kAllReduce, 1 << 20, 1, 0), 8);
  EXPECT_EQ(indexed(single, kAllReduce, (1 << 20) + 1, 1, 0), 3);
}

TEST(CommIndex, TopologyEntriesNeedTheSignature) {
  LookupTable table = loadTestTable("valid.json");
  constexpr int kBroadcast = static_cast<int>(Collective::Broadcast);
  EXPECT_EQ(indexed(CommIndex::build(table, {2, 16, ""}), kBroadcast, 10, 1, 0), -1);
  EXPECT_EQ(indexed(CommIndex::build(table, {2, 16, "dgx-a100"}), kBroadcast, 10, 1, 0), -1);
  EXPECT_EQ(indexed(CommIndex::build(table, {2, 16, "dgx-h100"}), kBroadcast, 10, 1, 0), 6);
  EXPECT_EQ(indexed(CommIndex::build(table, {2, 16, "dgx-h100"}), kBroadcast, (1 << 20) + 1, 1, 0), -1);
}

TEST(CommIndex, NoMatchOutsideRangesAndForUnknownCollectives) {
  LookupTable table = loadTestTable("valid.json");
  CommIndex index = CommIndex::build(table, {2, 16, ""});
  constexpr int kReduce = static_cast<int>(Collective::Reduce);
  EXPECT_EQ(indexed(index, kReduce, 1023, 1, 0), -1);
  EXPECT_EQ(indexed(index, kReduce, 1024, 1, 0), 7);
  EXPECT_EQ(indexed(index, kReduce, 2048, 1, 0), 7);
  EXPECT_EQ(indexed(index, kReduce, 2049, 1, 0), -1);
  EXPECT_EQ(indexed(index, 5, 100, 1, 0), -1) << "SendRecv is not a tuner collective";
  EXPECT_EQ(indexed(index, -3, 100, 1, 0), -1);
  EXPECT_EQ(indexed(index, 1000, 100, 1, 0), -1);
}

TEST(CommIndex, CsvIsFirstMatchInFileOrderWithPerCallFilters) {
  LookupTable table = loadTestTable("valid.csv");
  CommIndex index = CommIndex::build(table, {2, 16, ""});
  // Line 3 (nNodes 1) does not match 2 nodes; line 4 (wildcards) does.
  EXPECT_EQ(indexed(index, kAllReduce, 100, 1, 0), 1);
  EXPECT_EQ(indexed(CommIndex::build(table, {1, 8, ""}), kAllReduce, 100, 1, 0), 0);
  // 2M: line 7 needs numPipeOps 1, line 8 regBuff 1, line 9 anything.
  EXPECT_EQ(indexed(index, kAllReduce, 2 << 20, 1, 0), 3);
  EXPECT_EQ(indexed(index, kAllReduce, 2 << 20, 2, 1), 4);
  EXPECT_EQ(indexed(index, kAllReduce, 2 << 20, 2, 0), 5);
  EXPECT_EQ(indexed(index, kAllReduce, 2 << 20, 2, -1), 5)
      << "unknown regBuff (v2/v3): filtered entries skip";
  EXPECT_EQ(indexed(index, kAllReduce, 2 << 20, -1, -1), 5);
}

TEST(CommIndex, EnvironmentRecommendationMostSpecificFirst) {
  LookupTable table = loadTestTable("valid.json");
  const EnvRecommendation* exact = recommendEnvironment(table, {2, 16, ""});
  ASSERT_NE(exact, nullptr);
  EXPECT_EQ(exact->origin, 0u);
  const EnvRecommendation* fallback = recommendEnvironment(table, {8, 64, ""});
  ASSERT_NE(fallback, nullptr);
  EXPECT_EQ(fallback->origin, 1u);
  EXPECT_EQ(recommendEnvironment(LookupTable{}, {2, 16, ""}), nullptr);
}

TEST(CommIndex, EmptyTableMatchesNothing) {
  CommIndex index = CommIndex::build(LookupTable{}, {2, 16, ""});
  EXPECT_EQ(index.candidateEntries(), 0u);
  for (int coll = 0; coll < kTunerCollectives; ++coll) EXPECT_EQ(indexed(index, coll, 100, 1, 0), -1);
}

/// Random tables with overlapping ranges, wildcards, topology and per-call filters: the index
/// gives exactly the brute-force answer at every range boundary and at random sizes.
TEST(CommIndex, AgreesWithBruteForceOnRandomTables) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 60; ++round) {
    LookupTable table;
    table.matchOrder = round % 2 ? MatchOrder::FileOrder : MatchOrder::SpecificFirst;
    int entries = 1 + static_cast<int>(rng() % 60);
    std::vector<uint64_t> probes = {0, 1, UINT64_MAX, UINT64_MAX - 1};
    for (int i = 0; i < entries; ++i) {
      TableEntry e;
      e.collective = static_cast<Collective>(rng() % kTunerCollectives);
      uint64_t a = rng() % 5000;
      uint64_t b = rng() % 6 == 0 ? UINT64_MAX : a + rng() % 3000;
      e.minBytes = a;
      e.maxBytes = b;
      e.nNodes = rng() % 3 == 0 ? -1 : static_cast<int32_t>(1 + rng() % 2);
      e.nRanks = rng() % 3 == 0 ? -1 : static_cast<int32_t>(8 * (1 + rng() % 2));
      e.topology = rng() % 5 == 0 ? "sig" : "";
      e.numPipeOps = rng() % 4 == 0 ? static_cast<int32_t>(1 + rng() % 3) : -1;
      e.regBuff = rng() % 5 == 0 ? static_cast<int32_t>(rng() % 2) : -1;
      e.origin = static_cast<uint32_t>(i);
      table.entries.push_back(e);
      for (uint64_t p : {a, a - 1, a + 1, b, b + 1, b - 1}) probes.push_back(p);
    }
    for (int i = 0; i < 200; ++i) probes.push_back(rng() % 9000);
    for (CommKey comm : {CommKey{1, 8, ""}, CommKey{2, 16, "sig"}, CommKey{2, 8, "other"}}) {
      CommIndex index = CommIndex::build(table, comm);
      for (int coll = 0; coll < kTunerCollectives; ++coll) {
        for (uint64_t bytes : probes) {
          for (int pipeOps : {-1, 1, 2, 3, 4}) {
            for (int regBuff : {-1, 0, 1}) {
              ASSERT_EQ(indexed(index, coll, bytes, pipeOps, regBuff),
                        bruteForce(table, comm, coll, bytes, pipeOps, regBuff))
                  << "round " << round << " coll " << coll << " bytes " << bytes << " pipeOps " << pipeOps
                  << " regBuff " << regBuff;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tuccl
