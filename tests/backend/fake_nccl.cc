// A stand-in for the real NCCL, for the drop-in's forwarding test: libtuccl-fake-nccl.so exports
// the pncclX entry points libtuccl-nccl.so forwards to, and appends one line per call to the file
// named by TUCCL_FAKE_NCCL_LOG ("init nranks=3 rank=1 id=<hex of the first 8 id bytes>",
// "allreduce count=4 datatype=10 op=0 twin=1", ...), so the test sees what reached "the real
// NCCL", when, and with which communicator (a communicator the fake did not make is logged as
// "twin=foreign"). It moves no data.
#include <nccl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

struct ncclComm {
  unsigned magic = 0xfa4e7ccc;  // marks the fake's own communicators
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

// The twin's rank, or "foreign" for a handle the fake did not make (a TuCCL one must never come here).
std::string twinOf(ncclComm_t comm) {
  if (comm == nullptr) return "-1";
  return comm->magic == 0xfa4e7ccc ? std::to_string(comm->rank) : "foreign";
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
  *comm = new ncclComm{0xfa4e7ccc, rank, nranks};
  logLine("init nranks=" + std::to_string(nranks) + " rank=" + std::to_string(rank) +
          " id=" + hexOf(id.internal, 8));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
  for (int i = 0; i < ndev; ++i) comms[i] = new ncclComm{0xfa4e7ccc, i, ndev};
  logLine("initAll ndev=" + std::to_string(ndev));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  logLine("finalize twin=" + twinOf(comm));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  logLine("destroy rank=" + twinOf(comm));
  delete comm;
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclCommAbort(ncclComm_t comm) {
  logLine("abort rank=" + twinOf(comm));
  delete comm;
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclSend(const void*, size_t count, ncclDataType_t, int peer, ncclComm_t comm,
                                cudaStream_t) {
  logLine("send peer=" + std::to_string(peer) + " count=" + std::to_string(count) + " twin=" + twinOf(comm));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclRecv(void*, size_t count, ncclDataType_t, int peer, ncclComm_t comm,
                                cudaStream_t) {
  logLine("recv peer=" + std::to_string(peer) + " count=" + std::to_string(count) + " twin=" + twinOf(comm));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclAllReduce(const void*, void*, size_t count, ncclDataType_t datatype,
                                     ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  logLine("allreduce count=" + std::to_string(count) + " datatype=" + std::to_string(datatype) +
          " op=" + std::to_string(op) + " twin=" + twinOf(comm));
  return ncclSuccess;
}

// Operators numbered from ncclNumOps, as NCCL hands out its dynamic ones.
FAKE_API ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                ncclScalarResidence_t residence, ncclComm_t comm) {
  *op = ncclNumOps;
  const double value = datatype == ncclFloat32 && residence == ncclScalarHostImmediate
                           ? static_cast<double>(*static_cast<float*>(scalar))
                           : 0.0;
  logLine("premulsum op=" + std::to_string(*op) + " scalar=" + std::to_string(value) +
          " twin=" + twinOf(comm));
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  logLine("redOpDestroy op=" + std::to_string(op) + " twin=" + twinOf(comm));
  return ncclSuccess;
}

FAKE_API const char* pncclGetLastError(ncclComm_t) { return "the fake NCCL failed"; }

FAKE_API ncclResult_t pncclGroupStart() {
  logLine("groupStart");
  return ncclSuccess;
}

FAKE_API ncclResult_t pncclGroupEnd() {
  logLine("groupEnd");
  return ncclSuccess;
}
