// A stand-in for the real NCCL, for the drop-in's forwarding test: libtuccl-fake-nccl.so exports
// the pncclX entry points libtuccl-nccl.so forwards to, and appends one line per call to the file
// named by TUCCL_FAKE_NCCL_LOG ("init nranks=3 rank=1 id=<hex of the first 8 id bytes>",
// "send peer=2 count=1 twin=1", ...), so the test sees what reached "the real NCCL" and with which
// communicator. It moves no data.
#include <nccl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

struct ncclComm {
  int rank = -1;
  int nranks = 0;
};

namespace {

std::mutex logMutex;

void logLine(const std::string& line) {
  const char* path = std::getenv("TUCCL_FAKE_NCCL_LOG");
  if (path == nullptr) return;
  std::lock_guard lock(logMutex);
  if (FILE* file = std::fopen(path, "a")) {
    std::fprintf(file, "pid=%d %s\n", static_cast<int>(getpid()), line.c_str());
    std::fclose(file);
  }
}

std::string hexOf(const char* bytes, size_t n) {
  std::string text;
  char digit[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(digit, sizeof(digit), "%02x", static_cast<unsigned char>(bytes[i]));
    text += digit;
  }
  return text;
}

}  // namespace

#define FAKE_API extern "C" __attribute__((visibility("default")))

FAKE_API ncclResult_t pncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof(id->internal));
  const unsigned long long value = 0x5eed0000ull + static_cast<unsigned long long>(getpid());
  std::memcpy(id->internal, &value, sizeof(value));
  logLine("getUniqueId id=" + hexOf(id->internal, 8));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  *comm = new ncclComm{rank, nranks};
  logLine("init nranks=" + std::to_string(nranks) + " rank=" + std::to_string(rank) + " id=" + hexOf(id.internal, 8));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  logLine("destroy rank=" + std::to_string(comm->rank));
  delete comm;
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclCommAbort(ncclComm_t comm) {
  logLine("abort rank=" + std::to_string(comm->rank));
  delete comm;
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclSend(const void*, size_t count, ncclDataType_t, int peer, ncclComm_t comm, cudaStream_t) {
  logLine("send peer=" + std::to_string(peer) + " count=" + std::to_string(count) + " twin=" +
          std::to_string(comm != nullptr ? comm->rank : -1));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclRecv(void*, size_t count, ncclDataType_t, int peer, ncclComm_t comm, cudaStream_t) {
  logLine("recv peer=" + std::to_string(peer) + " count=" + std::to_string(count) + " twin=" +
          std::to_string(comm != nullptr ? comm->rank : -1));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclAllReduce(const void*, void*, size_t count, ncclDataType_t datatype, ncclRedOp_t,
                                     ncclComm_t comm, cudaStream_t) {
  logLine("allreduce count=" + std::to_string(count) + " datatype=" + std::to_string(datatype) + " twin=" +
          std::to_string(comm != nullptr ? comm->rank : -1));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclGroupStart() {
  logLine("groupStart");
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclGroupEnd() {
  logLine("groupEnd");
  return ncclSuccess;
}
