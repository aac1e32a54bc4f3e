// The shared-memory staging transport: every rank reaches every segment, what one rank writes
// another reads, names are gone once shared, and mismatched segments are refused.
#include "transport/staging_transport.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

namespace tuccl::transport {
namespace {

bool named(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

TEST(SharedMemoryTransport, EveryRankReachesEverySegment) {
  const int32_t n = 3;
  std::vector<std::unique_ptr<StagingTransport>> ranks;
  std::vector<std::string> exports;
  for (int32_t r = 0; r < n; ++r) {
    ranks.push_back(makeSharedMemoryTransport(r, n));
    Expected<std::string> exported = ranks.back()->exportSegment(1 << 16);
    ASSERT_TRUE(exported.ok()) << exported.status().toString();
    EXPECT_TRUE(named(*exported));
    exports.push_back(*exported);
  }
  for (auto& rank : ranks) ASSERT_TRUE(rank->importSegments(exports).ok());
  for (auto& rank : ranks) rank->shared();
  for (const std::string& name : exports) EXPECT_FALSE(named(name)) << name;
  // Rank 0 writes into rank 2's segment; rank 2 and rank 1 see it in their own mappings.
  std::memcpy(ranks[0]->base(2) + 100, "staged", 7);
  EXPECT_STREQ(ranks[2]->base(2) + 100, "staged");
  EXPECT_STREQ(ranks[1]->base(2) + 100, "staged");
  EXPECT_EQ(ranks[1]->segmentBytes(), size_t{1} << 16);
  EXPECT_EQ(ranks[1]->base(1)[0], 0);  // zero-filled
}

TEST(SharedMemoryTransport, RefusesImportsItCannotUse) {
  auto early = makeSharedMemoryTransport(0, 2);
  EXPECT_EQ(early->importSegments({"/a", "/b"}).code(), ErrorCode::Internal);  // nothing exported yet

  auto a = makeSharedMemoryTransport(0, 2), b = makeSharedMemoryTransport(1, 2);
  Expected<std::string> small = a->exportSegment(4096);
  Expected<std::string> large = b->exportSegment(1 << 20);
  ASSERT_TRUE(small.ok() && large.ok());
  EXPECT_EQ(a->importSegments({*small, *large}).code(), ErrorCode::RemoteError);  // sizes differ
  EXPECT_EQ(a->importSegments({*small, "/tuccl-no-such-segment"}).code(), ErrorCode::SystemError);
  EXPECT_EQ(a->importSegments({*small}).code(), ErrorCode::Internal);  // one export for two ranks
}

}  // namespace
}  // namespace tuccl::transport
