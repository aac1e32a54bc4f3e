// The shared-memory staging transport (staging_transport.h).
#include "transport/staging_transport.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "transport/shm_segment.h"

namespace tuccl::transport {
namespace {

/// A private anonymous mapping: a remote rank's shadow segment.
class ShadowSegment {
 public:
  ShadowSegment() = default;
  static Expected<ShadowSegment> create(size_t bytes) {
    void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (data == MAP_FAILED) {
      return makeError(ErrorCode::ResourceExhausted,
                       "cannot map a shadow segment of " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
    }
    ShadowSegment segment;
    segment.data_ = static_cast<char*>(data);
    segment.size_ = bytes;
    return segment;
  }
  ~ShadowSegment() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  ShadowSegment(ShadowSegment&& other) noexcept : data_(other.data_), size_(other.size_) { other.data_ = nullptr; }
  ShadowSegment& operator=(ShadowSegment&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  char* data() const { return data_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

class SharedMemoryTransport final : public StagingTransport {
 public:
  SharedMemoryTransport(int32_t rank, int32_t nRanks, std::vector<bool> remote)
      : rank_(rank), nRanks_(nRanks), remote_(std::move(remote)) {
    remote_.resize(static_cast<size_t>(nRanks), false);
  }

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
    shadows_.resize(exports.size());
    bases_.assign(exports.size(), nullptr);
    for (size_t r = 0; r < exports.size(); ++r) {
      if (static_cast<int32_t>(r) == rank_) {
        bases_[r] = own_.data();
        continue;
      }
      if (remote_[r]) {
        Expected<ShadowSegment> shadow = ShadowSegment::create(own_.size());
        if (!shadow) return shadow.status();
        shadows_[r] = std::move(*shadow);
        bases_[r] = shadows_[r].data();
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
  std::vector<bool> remote_;
  SharedSegment own_;
  std::vector<SharedSegment> peers_;    // by rank: the mapped segments of this host's other ranks
  std::vector<ShadowSegment> shadows_;  // by rank: the shadows of other hosts' ranks
  std::vector<char*> bases_;
};

}  // namespace

std::unique_ptr<StagingTransport> makeSharedMemoryTransport(int32_t rank, int32_t nRanks, std::vector<bool> remote) {
  return std::make_unique<SharedMemoryTransport>(rank, nRanks, std::move(remote));
}

}  // namespace tuccl::transport
