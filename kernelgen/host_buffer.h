// Host memory for CPU runs of the generated kernels: 64-byte aligned, poisoned, with a canary
// tail that reveals a write past the end.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <utility>

namespace tuccl {

class HostBuffer {
 public:
  static constexpr size_t kCanaryBytes = 64;
  static constexpr unsigned char kPoison = 0xA5;
  static constexpr unsigned char kCanary = 0x5C;

  HostBuffer() = default;
  explicit HostBuffer(size_t bytes) : bytes_(bytes) {
    data_ = static_cast<unsigned char*>(::operator new(bytes + kCanaryBytes, std::align_val_t{64}));
    std::memset(data_, kPoison, bytes);
    std::memset(data_ + bytes, kCanary, kCanaryBytes);
  }
  ~HostBuffer() {
    if (data_ != nullptr) ::operator delete(data_, std::align_val_t{64});
  }
  HostBuffer(HostBuffer&& other) noexcept : data_(other.data_), bytes_(other.bytes_) { other.data_ = nullptr; }
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  unsigned char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  /// Whether nothing wrote past the end (true for an empty, unallocated buffer).
  bool canaryIntact() const {
    for (size_t i = 0; data_ != nullptr && i < kCanaryBytes; ++i) {
      if (data_[bytes_ + i] != kCanary) return false;
    }
    return true;
  }

 private:
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace tuccl
