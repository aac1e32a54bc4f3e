// How a rank reaches the staging memory of the other ranks of its communicator — the seam between
// a device and the movers of bytes (design.md "libtuccl": within a node the kernel writes
// straight into the peer's staging ring; between nodes it writes into a local ring that a proxy
// hands to a net plugin, and the receiving proxy fills the peer's ring).
//
// Every rank exports one segment, the exports are exchanged (the communicator's bootstrap), every
// rank imports all of them, and base(r) is then where rank r's segment lies in this process. The
// shared-memory transport maps the segments of the ranks of one host. A network transport
// implements the same calls for ranks on other hosts: it gives them a local shadow segment whose
// rings a proxy thread moves through the net plugin, so the kernels and the placement of rings
// (backend/staging_layout.h) stay the same on one node or many.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/status.h"

namespace tuccl::transport {

class StagingTransport {
 public:
  virtual ~StagingTransport() = default;
  /// Creates this rank's zero-filled segment of `bytes`; returns what the peers need to reach it.
  virtual Expected<std::string> exportSegment(size_t bytes) = 0;
  /// Makes every rank's segment reachable (`exports` by rank, this rank's included).
  virtual Status importSegments(const std::vector<std::string>& exports) = 0;
  /// Every rank imported every segment: names and handles may go.
  virtual void shared() = 0;
  /// Rank `rank`'s segment in this process (after importSegments).
  virtual char* base(int32_t rank) const = 0;
  virtual size_t segmentBytes() const = 0;
};

/// POSIX shared memory (shm_segment.h) for the ranks of this host. A rank marked in `remote`
/// (another host's) gets a private, zero-filled shadow of its segment instead (anonymous memory,
/// committed as it is touched): this rank's kernel writes its side of their rings there and the
/// inter-node proxy (backend/net_proxy.h) carries them across. Empty `remote`: every rank is local.
std::unique_ptr<StagingTransport> makeSharedMemoryTransport(int32_t rank, int32_t nRanks,
                                                            std::vector<bool> remote = {});

}  // namespace tuccl::transport
