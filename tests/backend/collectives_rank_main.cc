// One rank of the multi-process tests of libtuccl (tests/backend/collectives_test.cc starts
// several with the launcher's environment). It uses only the C API, like an application.
//
//   collectives_rank matrix COUNTS TYPES OPS ALLOPS_TYPE
//       every collective x datatype x op x in/out of place x count; every element of the output
//       compared with the reference (kernelgen/collective_reference.h), out-of-place inputs
//       checked unchanged; ALLOPS_TYPE runs every op for that type. Exit 0 when all matched.
//   collectives_rank repeat CALLS COUNT
//       AllReduce (sum) of COUNT floats CALLS times, every element of every call checked (rank r
//       sends (r + 1) * (i % 7 + 1) + call); exit 0 when all matched.
//   collectives_rank loop
//       AllReduce of 4 MiB in a loop, printing "ready" after the first; exits 0 when a call fails
//       with an error code (the fault tests kill a peer), 1 if it never fails.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernelgen/collective_reference.h"
#include "kernelgen/element_values.h"
#include "kernelgen/output_compare.h"
#include "support/text_values.h"
#include "tuccl/tuccl.h"

namespace {

using tuccl::Collective;
using tuccl::DataType;
using tuccl::ReduceOp;

tucclDataType_t apiType(DataType type) {
  switch (type) {
    case DataType::Float32: return tucclFloat32;
    case DataType::Float16: return tucclFloat16;
    case DataType::BFloat16: return tucclBfloat16;
    case DataType::Float64: return tucclFloat64;
    case DataType::Int32: return tucclInt32;
    case DataType::Int64: return tucclInt64;
    case DataType::Uint8: return tucclUint8;
  }
  return tucclFloat32;
}

tucclRedOp_t apiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return tucclSum;
    case ReduceOp::Prod: return tucclProd;
    case ReduceOp::Max: return tucclMax;
    case ReduceOp::Min: return tucclMin;
    case ReduceOp::Avg: return tucclAvg;
  }
  return tucclSum;
}

// Small integers, exact in every type (bfloat16 included) after a reduction over 8 ranks; products
// stay within 2^8.
double inputValue(int rank, int64_t index, ReduceOp op, uint32_t seed) {
  const uint64_t h = (static_cast<uint64_t>(rank + 1) * 2654435761u) ^ (static_cast<uint64_t>(index) * 40503u) ^ seed;
  if (op == ReduceOp::Prod) return static_cast<double>(1 + (h >> 7) % 2);
  return static_cast<double>((h >> 5) % 17);
}


struct Matrix {
  std::vector<int64_t> counts;
  std::vector<DataType> types;
  std::vector<ReduceOp> ops;
  std::vector<DataType> allOpsTypes;
};

int failures = 0;
int cases = 0;

void report(const std::string& what) {
  ++failures;
  std::fprintf(stderr, "%s\n", what.c_str());
}

tucclResult_t issue(const tuccl::CollectiveCall& call, const void* send, void* recv, tucclComm_t comm) {
  const tucclDataType_t type = apiType(call.dataType);
  const auto count = static_cast<size_t>(call.count);
  switch (call.collective) {
    case Collective::AllReduce: return tucclAllReduce(send, recv, count, type, apiOp(call.op), comm, nullptr);
    case Collective::AllGather: return tucclAllGather(send, recv, count, type, comm, nullptr);
    case Collective::ReduceScatter: return tucclReduceScatter(send, recv, count, type, apiOp(call.op), comm, nullptr);
    case Collective::Broadcast: return tucclBroadcast(send, recv, count, type, call.root, comm, nullptr);
    case Collective::Reduce: return tucclReduce(send, recv, count, type, apiOp(call.op), call.root, comm, nullptr);
    case Collective::AllToAll: return tucclAllToAll(send, recv, count, type, comm, nullptr);
  }
  return tucclInternalError;
}

// One call on this rank, checked against the reference.
void runCase(tucclComm_t comm, int rank, tuccl::CollectiveCall call, uint32_t seed) {
  ++cases;
  const std::string name = std::string(tuccl::collectiveName(call.collective)) + " " +
                           std::string(tuccl::dataTypeName(call.dataType)) + " " +
                           std::string(tuccl::reduceOpName(call.op)) + " count " + std::to_string(call.count) +
                           " root " + std::to_string(call.root) + (call.inPlace ? " in place" : " out of place");
  const auto es = static_cast<size_t>(tuccl::dataTypeSize(call.dataType));
  const auto inElems = static_cast<size_t>(tuccl::inputElements(call));
  const auto outElems = static_cast<size_t>(tuccl::outputElements(call));
  const tuccl::InputElement input = [&](int32_t q, int64_t j) { return inputValue(q, j, call.op, seed); };
  if (tuccl::Status status = tuccl::checkCall(call); !status) return report(name + ": " + status.toString());
  std::optional<std::vector<double>> expected;
  if (call.collective != Collective::Reduce || rank == call.root) {
    expected.emplace(outElems);
    for (size_t i = 0; i < outElems; ++i) (*expected)[i] = tuccl::referenceElement(call, rank, static_cast<int64_t>(i), input);
  }
  std::vector<double> mineIn(inElems);
  for (size_t i = 0; i < inElems; ++i) mineIn[i] = input(rank, static_cast<int64_t>(i));

  // In place, input and output share one buffer at NCCL's positions.
  const size_t storage = std::max(inElems, outElems) + 1;
  std::vector<char> out(storage * es + 64, 0), in(inElems * es + 64, 0);
  char* recv = out.data();
  char* send = in.data();
  size_t inOffset = 0;
  if (call.inPlace) {
    if (call.collective == Collective::AllGather) inOffset = static_cast<size_t>(rank) * static_cast<size_t>(call.count);
    send = recv + inOffset * es;
    if (call.collective == Collective::ReduceScatter) {
      send = recv;
      recv = send + static_cast<size_t>(rank) * static_cast<size_t>(call.count) * es;
    }
  }
  for (size_t i = 0; i < inElems; ++i) tuccl::writeElement(call.dataType, send + i * es, mineIn[i]);
  const bool rootless = (call.collective == Collective::Reduce) && rank != call.root && !call.inPlace;
  void* recvArg = rootless && (call.count % 2 == 1) ? nullptr : recv;  // non-roots may pass NULL
  const tucclResult_t result = issue(call, send, recvArg, comm);
  if (result != tucclSuccess) {
    return report(name + ": " + tucclGetErrorString(result) + ": " + tucclGetLastError(comm));
  }
  const auto& mine = expected;
  if (mine) {
    const tuccl::ElementMismatches wrong =
        tuccl::compareElements(call.dataType, tuccl::relativeTolerance(call), *mine, recv);
    if (wrong.count > 0) {
      std::string text = name + ": rank " + std::to_string(rank) + " has " + std::to_string(wrong.count) + " wrong";
      for (const std::string& line : wrong.first) text += "\n  " + line;
      report(text);
    }
  }
  if (!call.inPlace) {
    const tuccl::ElementMismatches changed = tuccl::compareElements(call.dataType, 0, mineIn, send, "input");
    if (changed.count > 0) report(name + ": the input was modified");
  }
}

int runMatrix(tucclComm_t comm, const Matrix& matrix) {
  int rank = 0, nRanks = 0;
  tucclCommUserRank(comm, &rank);
  tucclCommCount(comm, &nRanks);
  const Collective collectives[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                    Collective::Broadcast, Collective::Reduce, Collective::AllToAll};
  uint32_t seed = 1;
  for (Collective collective : collectives) {
    const bool reduces = collective == Collective::AllReduce || collective == Collective::ReduceScatter ||
                         collective == Collective::Reduce;
    const bool rooted = collective == Collective::Broadcast || collective == Collective::Reduce;
    for (DataType type : matrix.types) {
      std::vector<ReduceOp> ops = reduces ? matrix.ops : std::vector<ReduceOp>{ReduceOp::Sum};
      for (DataType all : matrix.allOpsTypes) {
        if (all == type && reduces) ops = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg};
      }
      for (ReduceOp op : ops) {
        for (int64_t count : matrix.counts) {
          for (bool inPlace : {false, true}) {
            tuccl::CollectiveCall call{collective, nRanks, rooted ? static_cast<int32_t>(seed % nRanks) : -1, type, op,
                                       count, inPlace};
            runCase(comm, rank, call, seed++);
          }
        }
      }
    }
  }
  std::printf("rank %d: %d cases, %d failed\n", rank, cases, failures);
  return failures == 0 ? 0 : 1;
}

template <typename T, typename Parse>
std::vector<T> parseList(const char* text, Parse parse) {
  std::vector<T> values;
  for (const std::string& item : tuccl::splitList(text)) values.push_back(parse(item));
  return values;
}

tucclComm_t initFromEnv() {
  tucclComm_t comm = nullptr;
  const tucclResult_t result = tucclCommInitFromEnv(&comm);
  if (result != tucclSuccess) {
    std::fprintf(stderr, "init failed: %s: %s\n", tucclGetErrorString(result), tucclGetLastError(nullptr));
    std::exit(3);
  }
  return comm;
}

int runLoop() {
  tucclComm_t comm = initFromEnv();
  const size_t count = 1 << 20;
  std::vector<float> send(count, 1), recv(count);
  for (int i = 0;; ++i) {
    const tucclResult_t result = tucclAllReduce(send.data(), recv.data(), count, tucclFloat32, tucclSum, comm, nullptr);
    if (result != tucclSuccess) {
      std::printf("error %d: %s\n", static_cast<int>(result), tucclGetLastError(comm));
      std::fflush(stdout);
      tucclCommAbort(comm);
      return 0;
    }
    if (i == 0) {
      std::printf("ready\n");
      std::fflush(stdout);
    }
  }
}

int runRepeat(int calls, size_t count) {
  tucclComm_t comm = initFromEnv();
  int rank = 0, nRanks = 0;
  tucclCommUserRank(comm, &rank);
  tucclCommCount(comm, &nRanks);
  std::vector<float> send(count), recv(count);
  int status = 0;
  for (int call = 0; call < calls && status == 0; ++call) {
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1) + call);
    const tucclResult_t result = tucclAllReduce(send.data(), recv.data(), count, tucclFloat32, tucclSum, comm, nullptr);
    if (result != tucclSuccess) {
      std::fprintf(stderr, "call %d failed: %s\n", call, tucclGetLastError(comm));
      status = 1;
      break;
    }
    for (size_t i = 0; i < count; ++i) {
      const float expected = static_cast<float>(nRanks * (nRanks + 1) / 2 * static_cast<int>(i % 7 + 1) + nRanks * call);
      if (recv[i] != expected) {
        std::fprintf(stderr, "call %d element %zu: %g, expected %g\n", call, i, recv[i], expected);
        status = 1;
        break;
      }
    }
  }
  if (tucclCommDestroy(comm) != tucclSuccess) {
    std::fprintf(stderr, "destroy failed: %s\n", tucclGetLastError(nullptr));
    return 1;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: collectives_rank matrix|loop ...\n");
    return 2;
  }
  const std::string mode = argv[1];
  if (mode == "loop") return runLoop();
  if (mode == "repeat" && argc == 4) return runRepeat(std::atoi(argv[2]), static_cast<size_t>(std::atoll(argv[3])));
  if (mode == "matrix" && argc == 6) {
    Matrix matrix;
    matrix.counts = parseList<int64_t>(argv[2], [](const std::string& s) { return std::stoll(s); });
    matrix.types = parseList<DataType>(argv[3], [](const std::string& s) { return *tuccl::parseDataType(s); });
    matrix.ops = parseList<ReduceOp>(argv[4], [](const std::string& s) { return *tuccl::parseReduceOp(s); });
    matrix.allOpsTypes = parseList<DataType>(argv[5], [](const std::string& s) { return *tuccl::parseDataType(s); });
    tucclComm_t comm = initFromEnv();
    const int status = runMatrix(comm, matrix);
    const tucclResult_t destroyed = tucclCommDestroy(comm);
    if (destroyed != tucclSuccess) {
      std::fprintf(stderr, "destroy failed: %s\n", tucclGetLastError(nullptr));
      return 1;
    }
    return status;
  }
  std::fprintf(stderr, "collectives_rank: bad arguments\n");
  return 2;
}
