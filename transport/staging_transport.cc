// The shared-memory staging transport (staging_transport.h).
#include "transport/staging_transport.h"

#include "transport/shm_segment.h"

namespace tuccl::transport {
namespace {

class SharedMemoryTransport final : public StagingTransport {
 public:
  SharedMemoryTransport(int32_t rank, int32_t nRanks) : rank_(rank), nRanks_(nRanks) {}

  Expected<std::string> exportSegment(size_t bytes) override {
    Expected<SharedSegment> segment = SharedSegment::create(bytes);
    if (!segment) return segment.status();
    own_ = std::move(*segment);
    return own_.name();
  }

  Status importSegments(const std::vector<std::string>& exports) override {
    if (static_cast<int32_t>(exports.size()) != nRanks_ || !own_.valid()) {
      return makeError(ErrorCode::Internal, "shared memory: segments imported before this rank's was created, or " +
                                                std::to_string(exports.size()) + " of them for " +
                                                std::to_string(nRanks_) + " ranks");
    }
    peers_.resize(exports.size());
    bases_.assign(exports.size(), nullptr);
    for (size_t r = 0; r < exports.size(); ++r) {
      if (static_cast<int32_t>(r) == rank_) {
        bases_[r] = own_.data();
        continue;
      }
      Expected<SharedSegment> segment = SharedSegment::open(exports[r]);
      if (!segment) {
        return makeError(segment.status().code(),
                         "rank " + std::to_string(r) + "'s staging segment: " + segment.status().message());
      }
      if (segment->size() != own_.size()) {
        return makeError(ErrorCode::RemoteError, "rank " + std::to_string(r) + "'s staging segment has " +
                                                     std::to_string(segment->size()) + " bytes, this rank's " +
                                                     std::to_string(own_.size()) + " (TUCCL_STAGING_BYTES differs)");
      }
      peers_[r] = std::move(*segment);
      bases_[r] = peers_[r].data();
    }
    return {};
  }

  void shared() override { own_.unlinkName(); }
  char* base(int32_t rank) const override { return bases_.at(static_cast<size_t>(rank)); }
  size_t segmentBytes() const override { return own_.size(); }

 private:
  int32_t rank_;
  int32_t nRanks_;
  SharedSegment own_;
  std::vector<SharedSegment> peers_;  // by rank; this rank's entry stays empty
  std::vector<char*> bases_;
};

}  // namespace

std::unique_ptr<StagingTransport> makeSharedMemoryTransport(int32_t rank, int32_t nRanks) {
  return std::make_unique<SharedMemoryTransport>(rank, nRanks);
}

}  // namespace tuccl::transport
