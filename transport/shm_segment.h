// POSIX shared memory segments for the intra-node staging rings of the CPU device (design.md
// "libtuccl": within a node the kernel writes straight into the peer's staging ring).
//
// A segment is named "/tuccl-<pid>-<random>" after the process that created it. Its creator
// unlinks the name as soon as every peer mapped it (the mapping lives on while any process holds
// it), so nothing outlives the processes once setup is done; a crash during setup leaves a name
// whose pid is dead, and removeStaleSegments (run by every creator first) deletes those.
// Memory is reserved with posix_fallocate, so a full /dev/shm is an error here rather than a
// SIGBUS at first touch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace tuccl::transport {

class SharedSegment {
 public:
  SharedSegment() = default;
  /// Creates and maps a zero-filled segment of `bytes` (rounded up to the page size).
  static Expected<SharedSegment> create(size_t bytes);
  /// Maps an existing segment by name (as returned by name()); its size is read from the object.
  static Expected<SharedSegment> open(const std::string& name);
  ~SharedSegment();
  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  const std::string& name() const { return name_; }
  char* data() const { return data_; }
  size_t size() const { return size_; }
  bool valid() const { return data_ != nullptr; }
  /// Removes the name (idempotent; only the creator's call unlinks). The mapping stays.
  void unlinkName();

 private:
  std::string name_;
  char* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;   ///< created here: the destructor unlinks a name still linked
  bool linked_ = false;
};

/// Deletes /dev/shm/tuccl-<pid>-* whose pid is no longer alive (a crashed run's leftovers);
/// returns the names removed.
std::vector<std::string> removeStaleSegments();

}  // namespace tuccl::transport
