// POSIX shared memory segments (shm_segment.h).
#include "transport/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace tuccl::transport {
namespace {

constexpr const char* kPrefix = "tuccl-";

Status systemError(const std::string& what, int error) {
  return makeError(ErrorCode::SystemError, "shared memory: " + what + ": " + std::strerror(error));
}

std::string freshName() {
  std::random_device device;
  const uint64_t random = (static_cast<uint64_t>(device()) << 32) ^ device();
  char text[64];
  std::snprintf(text, sizeof(text), "/%s%d-%016llx", kPrefix, static_cast<int>(getpid()),
                static_cast<unsigned long long>(random));
  return text;
}

size_t pageRounded(size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}

}  // namespace

Expected<SharedSegment> SharedSegment::create(size_t bytes) {
  removeStaleSegments();
  const size_t size = pageRounded(bytes);
  const std::string name = freshName();
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return systemError("cannot create " + name, errno);
  // posix_fallocate reserves the pages now: a full /dev/shm fails here, not with SIGBUS later.
  const int reserved = posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (reserved != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return makeError(ErrorCode::ResourceExhausted, "shared memory: cannot reserve " + std::to_string(size) +
                                                       " bytes for " + name + " in /dev/shm: " + std::strerror(reserved) +
                                                       " (lower TUCCL_STAGING_BYTES or enlarge /dev/shm)");
  }
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int mapError = errno;
  close(fd);
  if (data == MAP_FAILED) {
    shm_unlink(name.c_str());
    return systemError("cannot map " + name, mapError);
  }
  SharedSegment segment;
  segment.name_ = name;
  segment.data_ = static_cast<char*>(data);
  segment.size_ = size;
  segment.owner_ = true;
  segment.linked_ = true;
  return segment;
}

Expected<SharedSegment> SharedSegment::open(const std::string& name) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos) {
    return makeError(ErrorCode::InvalidArgument, "shared memory: '" + name + "' is not a segment name");
  }
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return systemError("cannot open " + name, errno);
  struct stat info {};
  if (fstat(fd, &info) != 0 || info.st_size <= 0) {
    const int error = errno;
    close(fd);
    return systemError("cannot read the size of " + name, error == 0 ? EINVAL : error);
  }
  const auto size = static_cast<size_t>(info.st_size);
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int mapError = errno;
  close(fd);
  if (data == MAP_FAILED) return systemError("cannot map " + name, mapError);
  SharedSegment segment;
  segment.name_ = name;
  segment.data_ = static_cast<char*>(data);
  segment.size_ = size;
  return segment;
}

SharedSegment::~SharedSegment() {
  if (owner_ && linked_) shm_unlink(name_.c_str());
  if (data_ != nullptr) munmap(data_, size_);
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : name_(std::move(other.name_)), data_(other.data_), size_(other.size_), owner_(other.owner_),
      linked_(other.linked_) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.owner_ = false;
  other.linked_ = false;
}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    SharedSegment old(std::move(*this));
    name_ = std::move(other.name_);
    data_ = other.data_;
    size_ = other.size_;
    owner_ = other.owner_;
    linked_ = other.linked_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.owner_ = false;
    other.linked_ = false;
  }
  return *this;
}

void SharedSegment::unlinkName() {
  if (owner_ && linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

std::vector<std::string> removeStaleSegments() {
  std::vector<std::string> removed;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return removed;
  while (const dirent* entry = readdir(dir)) {
    const std::string file = entry->d_name;
    if (file.rfind(kPrefix, 0) != 0) continue;
    const size_t dash = file.find('-', std::strlen(kPrefix));
    if (dash == std::string::npos) continue;
    char* end = nullptr;
    const long pid = std::strtol(file.c_str() + std::strlen(kPrefix), &end, 10);
    if (end != file.c_str() + dash || pid <= 0) continue;
    // kill(pid, 0) fails with ESRCH only when no such process exists (EPERM: alive, not ours).
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (shm_unlink(("/" + file).c_str()) == 0) removed.push_back("/" + file);
  }
  closedir(dir);
  return removed;
}

}  // namespace tuccl::transport
