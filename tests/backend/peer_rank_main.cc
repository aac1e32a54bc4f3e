// One rank of the point-to-point tests of libtuccl (tests/backend/peer_test.cc starts several
// with the launcher's environment). Only the C API, like an application; every received byte is
// compared with what its sender's seed produces.
//
//   peer_rank ring BYTES TYPE ROUNDS [stream]
//       each round, in one group: send BYTES (in elements of TYPE: int8, float32, float64) to
//       rank r+1 and receive from rank r-1; with `stream`, on a CPU stream.
//   peer_rank ring-grouped BYTES ROUNDS
//       ROUNDS rounds of the ring in one group (nccl-tests -m): several transfers between the same
//       pair in one group, matched in issue order (sizes BYTES + round, uint8).
//   peer_rank shuffled BYTES
//       one group in which every rank sends to and receives from every rank (itself included),
//       the calls in an order of the rank's own (seeded by the rank): a group never deadlocks
//       whatever the order of its calls.
//   peer_rank alltoallv MAXCOUNT
//       tucclAllToAllv of int32 with counts (i -> j) drawn from a seed every rank shares, packed
//       displacements, zero counts included.
//   peer_rank gather-scatter COUNT
//       tucclGather to every root, then tucclScatter from every root (float32).
//   peer_rank mixed COUNT
//       one group holding an AllReduce and a ring exchange.
//   peer_rank mismatch DONE_FILE
//       rank 0 sends 4096 bytes to rank 1, which receives 2048: rank 1's receive must fail
//       (tucclInvalidArgument, the reason naming the disagreement); exit 0 when it does. Rank 1
//       then creates DONE_FILE, which rank 0 waits for (60 s at most) before it leaves, so its
//       exit is not what stops rank 1.
// Exit 0 when everything matched; each mismatch is printed.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "api_check.h"
#include "tuccl/tuccl.h"

namespace {

int failures = 0;


// Byte i of what rank `from` sends to rank `to` in round `round`.
uint8_t byteOf(int from, int to, int round, size_t i) {
  uint64_t h = (static_cast<uint64_t>(from + 1) * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(to + 7) << 20) ^
               (static_cast<uint64_t>(round) << 40) ^ (i * 0xBF58476D1CE4E5B9ull);
  h ^= h >> 29;
  return static_cast<uint8_t>(h * 0x94D049BB133111EBull >> 56);
}

std::vector<uint8_t> payload(int from, int to, int round, size_t bytes) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = byteOf(from, to, round, i);
  return data;
}

void expectFrom(const std::vector<uint8_t>& got, int from, int to, int round, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != byteOf(from, to, round, i)) {
      std::fprintf(stderr, "%s: byte %zu from rank %d is %u, expected %u\n", what.c_str(), i, from, got[i],
                   byteOf(from, to, round, i));
      ++failures;
      return;
    }
  }
}

struct TypeInfo {
  tucclDataType_t type;
  size_t size;
};

TypeInfo typeNamed(const std::string& name) {
  if (name == "int8") return {tucclInt8, 1};
  if (name == "float64") return {tucclFloat64, 8};
  if (name == "uint64") return {tucclUint64, 8};
  return {tucclFloat32, 4};
}

struct Comm {
  tucclComm_t comm = nullptr;
  int rank = 0;
  int n = 1;
};

Comm init() {
  Comm c;
  CHECK_OK(tucclCommInitFromEnv(&c.comm));
  CHECK_OK(tucclCommUserRank(c.comm, &c.rank));
  CHECK_OK(tucclCommCount(c.comm, &c.n));
  return c;
}

// `rounds` rounds of the ring in ONE group (nccl-tests -m): several sends to the same peer, and
// receives from the same peer, inside one group, matched in issue order.
void runRingInOneGroup(const Comm& c, size_t bytes, int rounds) {
  const int next = (c.rank + 1) % c.n, prev = (c.rank + c.n - 1) % c.n;
  std::vector<std::vector<uint8_t>> sends, receives;
  for (int round = 0; round < rounds; ++round) {
    sends.push_back(payload(c.rank, next, round, bytes + static_cast<size_t>(round)));
    receives.emplace_back(bytes + static_cast<size_t>(round), 0);
  }
  CHECK_OK(tucclGroupStart());
  for (int round = 0; round < rounds; ++round) {
    CHECK_OK(tucclRecv(receives[round].data(), receives[round].size(), tucclUint8, prev, c.comm, nullptr));
    CHECK_OK(tucclSend(sends[round].data(), sends[round].size(), tucclUint8, next, c.comm, nullptr));
  }
  CHECK_OK(tucclGroupEnd());
  for (int round = 0; round < rounds; ++round) {
    expectFrom(receives[round], prev, c.rank, round, "grouped ring round " + std::to_string(round));
  }
}

void runRing(const Comm& c, size_t bytes, const TypeInfo& type, int rounds, bool onStream) {
  tucclStream_t stream = nullptr;
  if (onStream) CHECK_OK(tucclStreamCreate(&stream));
  const int next = (c.rank + 1) % c.n, prev = (c.rank + c.n - 1) % c.n;
  const size_t count = bytes / type.size;
  std::vector<std::vector<uint8_t>> sends, receives;
  for (int round = 0; round < rounds; ++round) {
    sends.push_back(payload(c.rank, next, round, count * type.size));
    receives.emplace_back(count * type.size, 0);
    CHECK_OK(tucclGroupStart());
    CHECK_OK(tucclSend(sends.back().data(), count, type.type, next, c.comm, stream));
    CHECK_OK(tucclRecv(receives.back().data(), count, type.type, prev, c.comm, stream));
    CHECK_OK(tucclGroupEnd());
  }
  if (onStream) {
    CHECK_OK(tucclStreamSynchronize(stream));
    CHECK_OK(tucclStreamDestroy(stream));
  }
  for (int round = 0; round < rounds; ++round) {
    expectFrom(receives[round], prev, c.rank, round, "ring round " + std::to_string(round));
  }
}

void runShuffled(const Comm& c, size_t bytes) {
  struct Op {
    bool send;
    int peer;
  };
  std::vector<Op> ops;
  for (int peer = 0; peer < c.n; ++peer) {
    ops.push_back({true, peer});
    ops.push_back({false, peer});
  }
  std::mt19937 rng(static_cast<unsigned>(c.rank) * 7919u + 1);
  std::shuffle(ops.begin(), ops.end(), rng);
  std::vector<std::vector<uint8_t>> sent(static_cast<size_t>(c.n)), received(static_cast<size_t>(c.n));
  // Sizes differ per pair, so a receive matched with the wrong send would be caught.
  auto sizeOf = [&](int from, int to) { return bytes + static_cast<size_t>(from * 131 + to * 17); };
  CHECK_OK(tucclGroupStart());
  for (const Op& op : ops) {
    if (op.send) {
      sent[op.peer] = payload(c.rank, op.peer, 0, sizeOf(c.rank, op.peer));
      CHECK_OK(tucclSend(sent[op.peer].data(), sent[op.peer].size(), tucclUint8, op.peer, c.comm, nullptr));
    } else {
      received[op.peer].assign(sizeOf(op.peer, c.rank), 0);
      CHECK_OK(tucclRecv(received[op.peer].data(), received[op.peer].size(), tucclUint8, op.peer, c.comm, nullptr));
    }
  }
  CHECK_OK(tucclGroupEnd());
  for (int peer = 0; peer < c.n; ++peer) expectFrom(received[peer], peer, c.rank, 0, "shuffled");
}

void runAllToAllv(const Comm& c, size_t maxCount) {
  // counts[i][j]: int32 elements rank i sends rank j, from a seed every rank shares.
  std::mt19937 shared(12345);
  std::vector<std::vector<size_t>> counts(static_cast<size_t>(c.n), std::vector<size_t>(static_cast<size_t>(c.n)));
  for (auto& row : counts) {
    for (size_t& count : row) count = shared() % 4 == 0 ? 0 : shared() % (maxCount + 1);
  }
  std::vector<size_t> sendCounts(c.n), sendDispls(c.n), recvCounts(c.n), recvDispls(c.n);
  size_t sendTotal = 0, recvTotal = 0;
  for (int j = 0; j < c.n; ++j) {
    sendCounts[j] = counts[c.rank][j];
    sendDispls[j] = sendTotal;
    sendTotal += sendCounts[j];
    recvCounts[j] = counts[j][c.rank];
    recvDispls[j] = recvTotal;
    recvTotal += recvCounts[j];
  }
  std::vector<uint8_t> send(sendTotal * 4), recv(recvTotal * 4, 0);
  for (int j = 0; j < c.n; ++j) {
    const std::vector<uint8_t> part = payload(c.rank, j, 0, sendCounts[j] * 4);
    std::copy(part.begin(), part.end(), send.begin() + static_cast<std::ptrdiff_t>(sendDispls[j] * 4));
  }
  CHECK_OK(tucclAllToAllv(send.data(), sendCounts.data(), sendDispls.data(), recv.data(), recvCounts.data(),
                          recvDispls.data(), tucclInt32, c.comm, nullptr));
  for (int i = 0; i < c.n; ++i) {
    const auto begin = recv.begin() + static_cast<std::ptrdiff_t>(recvDispls[i] * 4);
    expectFrom(std::vector<uint8_t>(begin, begin + static_cast<std::ptrdiff_t>(recvCounts[i] * 4)), i, c.rank, 0,
               "alltoallv");
  }
}

void runGatherScatter(const Comm& c, size_t count) {
  const size_t bytes = count * 4;
  for (int root = 0; root < c.n; ++root) {
    const std::vector<uint8_t> mine = payload(c.rank, root, 1, bytes);
    std::vector<uint8_t> all(c.rank == root ? bytes * static_cast<size_t>(c.n) : 0, 0);
    CHECK_OK(tucclGather(mine.data(), all.empty() ? nullptr : all.data(), count, tucclFloat32, root, c.comm, nullptr));
    if (c.rank == root) {
      for (int r = 0; r < c.n; ++r) {
        const auto begin = all.begin() + static_cast<std::ptrdiff_t>(bytes * r);
        expectFrom(std::vector<uint8_t>(begin, begin + static_cast<std::ptrdiff_t>(bytes)), r, root, 1, "gather");
      }
    }
    std::vector<uint8_t> blocks;
    if (c.rank == root) {
      for (int r = 0; r < c.n; ++r) {
        const std::vector<uint8_t> block = payload(root, r, 2, bytes);
        blocks.insert(blocks.end(), block.begin(), block.end());
      }
    }
    std::vector<uint8_t> got(bytes, 0);
    CHECK_OK(tucclScatter(blocks.empty() ? nullptr : blocks.data(), got.data(), count, tucclFloat32, root, c.comm,
                          nullptr));
    expectFrom(got, root, c.rank, 2, "scatter from root " + std::to_string(root));
  }
}

void runMixed(const Comm& c, size_t count) {
  std::vector<float> values(count, static_cast<float>(c.rank + 1)), sums(count, 0);
  const int next = (c.rank + 1) % c.n, prev = (c.rank + c.n - 1) % c.n;
  const std::vector<uint8_t> send = payload(c.rank, next, 3, count * 4);
  std::vector<uint8_t> recv(count * 4, 0);
  CHECK_OK(tucclGroupStart());
  CHECK_OK(tucclRecv(recv.data(), count, tucclFloat32, prev, c.comm, nullptr));
  CHECK_OK(tucclAllReduce(values.data(), sums.data(), count, tucclFloat32, tucclSum, c.comm, nullptr));
  CHECK_OK(tucclSend(send.data(), count, tucclFloat32, next, c.comm, nullptr));
  CHECK_OK(tucclGroupEnd());
  const auto expected = static_cast<float>(c.n * (c.n + 1) / 2);
  for (size_t i = 0; i < count; ++i) {
    if (sums[i] != expected) {
      std::fprintf(stderr, "mixed: AllReduce element %zu is %g, expected %g\n", i, sums[i], expected);
      ++failures;
      break;
    }
  }
  expectFrom(recv, prev, c.rank, 3, "mixed");
}

int runMismatch(const Comm& c, const std::string& doneFile) {
  std::vector<uint8_t> buffer(4096, 1);
  if (c.rank == 0) {
    CHECK_OK(tucclSend(buffer.data(), 4096, tucclUint8, 1, c.comm, nullptr));
    for (int i = 0; i < 6000 && access(doneFile.c_str(), F_OK) != 0; ++i) usleep(10000);
    return 0;
  }
  if (c.rank != 1) return 0;
  const tucclResult_t result = tucclRecv(buffer.data(), 2048, tucclUint8, 0, c.comm, nullptr);
  const std::string why = tucclGetLastError(c.comm);
  std::fprintf(stderr, "receive: %s: %s\n", tucclGetErrorString(result), why.c_str());
  if (FILE* done = std::fopen(doneFile.c_str(), "w")) std::fclose(done);
  return result == tucclInvalidArgument && why.find("disagree on the size") != std::string::npos ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: peer_rank ring|shuffled|alltoallv|gather-scatter|mixed|mismatch ...\n");
    return 2;
  }
  const std::string mode = argv[1];
  Comm c = init();
  int exitCode = 0;
  if (mode == "ring" && argc >= 5) {
    runRing(c, std::strtoull(argv[2], nullptr, 10), typeNamed(argv[3]), std::atoi(argv[4]),
            argc > 5 && std::string(argv[5]) == "stream");
  } else if (mode == "ring-grouped" && argc == 4) {
    runRingInOneGroup(c, std::strtoull(argv[2], nullptr, 10), std::atoi(argv[3]));
  } else if (mode == "shuffled" && argc == 3) {
    runShuffled(c, std::strtoull(argv[2], nullptr, 10));
  } else if (mode == "alltoallv" && argc == 3) {
    runAllToAllv(c, std::strtoull(argv[2], nullptr, 10));
  } else if (mode == "gather-scatter" && argc == 3) {
    runGatherScatter(c, std::strtoull(argv[2], nullptr, 10));
  } else if (mode == "mixed" && argc == 3) {
    runMixed(c, std::strtoull(argv[2], nullptr, 10));
  } else if (mode == "mismatch" && argc == 3) {
    exitCode = runMismatch(c, argv[2]);
    // The communicator stopped on the mismatch: leave without the peers.
    tucclCommAbort(c.comm);
    return exitCode;
  } else {
    std::fprintf(stderr, "peer_rank: bad arguments for %s\n", mode.c_str());
    return 2;
  }
  CHECK_OK(tucclCommDestroy(c.comm));
  if (failures > 0) std::fprintf(stderr, "%d mismatches\n", failures);
  return failures == 0 ? 0 : 1;
}
