// One rank of the multi-process tests of libtuccl (tests/backend/collectives_test.cc starts
// several with the launcher's environment). It uses only the C API, like an application.
//
//   collectives_rank matrix COUNTS TYPES OPS ALLOPS_TYPE
//       every collective x datatype x op x in/out of place x count; every element of the output
//       compared with the reference (kernelgen/collective_reference.h), out-of-place inputs
//       checked unchanged; ALLOPS_TYPE runs every op for that type. Exit 0 when all matched.
//   collectives_rank premul COUNT
//       PreMulSum operators (tucclRedOpCreatePreMulSum) of float32 and int32 with a host and a
//       device scalar: AllReduce, ReduceScatter and Reduce in and out of place (and one AllReduce
//       in a group), every element compared with the sum of the scaled inputs; a device scalar
//       changed between calls is read again, a host one is not; then the refusals (an unknown
//       operator, a destroyed one, another datatype, a built-in one destroyed, bad arguments).
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
#include <functional>
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
    case DataType::Int8: return tucclInt8;
    case DataType::Uint32: return tucclUint32;
    case DataType::Uint64: return tucclUint64;
    case DataType::Float8E4M3: return tucclFloat8e4m3;
    case DataType::Float8E5M2: return tucclFloat8e5m2;
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
// stay within 2^8. int8, uint32 and uint64 take values from their whole range instead (uint64:
// below 2^53, exact in float64), so sums and products wrap around; fp8 stores the small integers
// rounded (e5m2 holds 3 significant bits), and its reductions round as they go.
double inputValue(int rank, int64_t index, ReduceOp op, uint32_t seed, DataType type) {
  const uint64_t h = (static_cast<uint64_t>(rank + 1) * 2654435761u) ^ (static_cast<uint64_t>(index) * 40503u) ^ seed;
  if (type == DataType::Int8 || type == DataType::Uint32 || type == DataType::Uint64) {
    uint64_t x = h * 0x9E3779B97F4A7C15ull;  // splitmix64's finaliser: every bit counts
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    if (type == DataType::Int8) return static_cast<double>(static_cast<int8_t>(x & 0xff));
    if (type == DataType::Uint32) return static_cast<double>(x & 0xffffffffu);
    return static_cast<double>(x >> 11);
  }
  if (op == ReduceOp::Prod) return static_cast<double>(1 + (h >> 7) % 2);
  return static_cast<double>((h >> 5) % 17);
}

// `value` as the type stores it.
double storedValue(DataType type, double value) {
  unsigned char element[8];
  tuccl::writeElement(type, element, value);
  return tuccl::readElement(type, element);
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

// `op` is the call's operation as the C API takes it (a PreMulSum operator's value, or call.op's).
tucclResult_t issue(const tuccl::CollectiveCall& call, tucclRedOp_t op, const void* send, void* recv,
                    tucclComm_t comm) {
  const tucclDataType_t type = apiType(call.dataType);
  const auto count = static_cast<size_t>(call.count);
  switch (call.collective) {
    case Collective::AllReduce: return tucclAllReduce(send, recv, count, type, op, comm, nullptr);
    case Collective::AllGather: return tucclAllGather(send, recv, count, type, comm, nullptr);
    case Collective::ReduceScatter: return tucclReduceScatter(send, recv, count, type, op, comm, nullptr);
    case Collective::Broadcast: return tucclBroadcast(send, recv, count, type, call.root, comm, nullptr);
    case Collective::Reduce: return tucclReduce(send, recv, count, type, op, call.root, comm, nullptr);
    case Collective::AllToAll: return tucclAllToAll(send, recv, count, type, comm, nullptr);
  }
  return tucclInternalError;
}

// One call on this rank, checked against the reference: `input` gives every rank's input as the
// call's reduction sees it, `stored` this rank's input as it is written to its buffer (they differ
// for PreMulSum, `op`, whose reduction sees the scaled inputs).
void checkCase(tucclComm_t comm, int rank, const tuccl::CollectiveCall& call, tucclRedOp_t op, const std::string& name,
               const tuccl::InputElement& input, const std::function<double(int64_t)>& stored) {
  const auto es = static_cast<size_t>(tuccl::dataTypeSize(call.dataType));
  const auto inElems = static_cast<size_t>(tuccl::inputElements(call));
  const auto outElems = static_cast<size_t>(tuccl::outputElements(call));
  if (tuccl::Status status = tuccl::checkCall(call); !status) return report(name + ": " + status.toString());
  std::optional<std::vector<double>> expected;
  if (call.collective != Collective::Reduce || rank == call.root) {
    expected.emplace(outElems);
    for (size_t i = 0; i < outElems; ++i) (*expected)[i] = tuccl::referenceElement(call, rank, static_cast<int64_t>(i), input);
  }
  std::vector<double> mineIn(inElems);
  for (size_t i = 0; i < inElems; ++i) mineIn[i] = stored(static_cast<int64_t>(i));

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
  const tucclResult_t result = issue(call, op, send, recvArg, comm);
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

std::string caseName(const tuccl::CollectiveCall& call, const std::string& op) {
  return std::string(tuccl::collectiveName(call.collective)) + " " + std::string(tuccl::dataTypeName(call.dataType)) +
         " " + op + " count " + std::to_string(call.count) + " root " + std::to_string(call.root) +
         (call.inPlace ? " in place" : " out of place");
}

// One call of the matrix on this rank, checked against the reference.
void runCase(tucclComm_t comm, int rank, const tuccl::CollectiveCall& call, uint32_t seed) {
  ++cases;
  const tuccl::InputElement input = [&](int32_t q, int64_t j) {
    return storedValue(call.dataType, inputValue(q, j, call.op, seed, call.dataType));
  };
  checkCase(comm, rank, call, apiOp(call.op), caseName(call, std::string(tuccl::reduceOpName(call.op))), input,
            [&](int64_t j) { return input(rank, j); });
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

// ---- PreMulSum ----

// Rank q's input element j for the PreMulSum cases: float32 positive (no sum cancels, so the
// relative tolerance holds), int32 anywhere in its range (products and sums wrap).
double preMulInput(DataType type, int32_t q, int64_t j, uint32_t seed) {
  uint64_t x = (static_cast<uint64_t>(q + 1) << 40) ^ static_cast<uint64_t>(j) ^ (static_cast<uint64_t>(seed) << 20);
  x *= 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 29)) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  if (type == DataType::Float32) return static_cast<double>(1 + x % 4000) / 16;
  return static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(x)));
}

// x * s as the kernels compute it: in float for float32, wrapped to 32 bits for int32.
double scaledInput(DataType type, double s, double x) {
  if (type == DataType::Float32) return static_cast<double>(static_cast<float>(s) * static_cast<float>(x));
  const uint64_t product = static_cast<uint64_t>(static_cast<int64_t>(s)) * static_cast<uint64_t>(static_cast<int64_t>(x));
  return static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(product)));
}

// The reducing collectives, in and out of place, with PreMulSum operator `op` whose scalar is now
// `s`: every element against the sum of the scaled inputs.
void runPreMulCases(tucclComm_t comm, int rank, int nRanks, DataType type, tucclRedOp_t op, double s, int64_t count,
                    uint32_t& seed, const std::string& what) {
  for (Collective collective : {Collective::AllReduce, Collective::ReduceScatter, Collective::Reduce}) {
    for (bool inPlace : {false, true}) {
      ++cases;
      const uint32_t mySeed = seed++;
      tuccl::CollectiveCall call{collective, nRanks, collective == Collective::Reduce ? static_cast<int32_t>(mySeed % nRanks) : -1,
                                 type, ReduceOp::Sum, count, inPlace};
      const tuccl::InputElement scaled = [&](int32_t q, int64_t j) {
        return scaledInput(type, s, preMulInput(type, q, j, mySeed));
      };
      checkCase(comm, rank, call, op, caseName(call, what), scaled,
                [&](int64_t j) { return preMulInput(type, rank, j, mySeed); });
    }
  }
}

// The calls a rank refuses alone (nothing is launched, so no peer waits): `result` must be
// tucclInvalidArgument with `words` in the reason.
void expectRefused(tucclResult_t result, const std::string& words, const std::string& what) {
  ++cases;
  const std::string reason = tucclGetLastError(nullptr);
  if (result != tucclInvalidArgument || reason.find(words) == std::string::npos) {
    report(what + ": " + tucclGetErrorString(result) + " (" + reason + "), expected invalid argument naming '" +
           words + "'");
  }
}

int runPreMul(int64_t count) {
  tucclComm_t comm = initFromEnv();
  int rank = 0, nRanks = 0;
  tucclCommUserRank(comm, &rank);
  tucclCommCount(comm, &nRanks);
  uint32_t seed = 1;
  auto create = [&](tucclRedOp_t* op, void* scalar, tucclDataType_t type, tucclScalarResidence_t residence) {
    const tucclResult_t made = tucclRedOpCreatePreMulSum(op, scalar, type, residence, comm);
    if (made != tucclSuccess) report(std::string("tucclRedOpCreatePreMulSum: ") + tucclGetLastError(comm));
    return made == tucclSuccess;
  };

  // float32: a host scalar is read when the operator is made, a device one (host memory on the
  // CPU device) at every call.
  float hostFloat = 1.25f, deviceFloat = 0.75f;
  tucclRedOp_t hostOp = tucclSum, deviceOp = tucclSum;
  if (!create(&hostOp, &hostFloat, tucclFloat32, tucclScalarHostImmediate)) return 1;
  if (hostOp != tucclNumOps) report("the first PreMulSum operator is " + std::to_string(hostOp) + ", not tucclNumOps");
  hostFloat = 100;  // not read again
  if (!create(&deviceOp, &deviceFloat, tucclFloat32, tucclScalarDevice)) return 1;
  runPreMulCases(comm, rank, nRanks, DataType::Float32, hostOp, 1.25, count, seed, "premulsum(host 1.25)");
  runPreMulCases(comm, rank, nRanks, DataType::Float32, deviceOp, 0.75, count, seed, "premulsum(device 0.75)");
  deviceFloat = -0.375f;
  runPreMulCases(comm, rank, nRanks, DataType::Float32, deviceOp, -0.375, count, seed, "premulsum(device -0.375)");

  // In a group: the operator's scalar is the one of the call's issue (host) or of its run (device).
  {
    ++cases;
    std::vector<float> send(static_cast<size_t>(count)), recv(static_cast<size_t>(count), 0);
    const uint32_t mySeed = seed++;
    for (int64_t j = 0; j < count; ++j) send[j] = static_cast<float>(preMulInput(DataType::Float32, rank, j, mySeed));
    tucclGroupStart();
    const tucclResult_t issued = tucclAllReduce(send.data(), recv.data(), send.size(), tucclFloat32, deviceOp, comm, nullptr);
    const tucclResult_t ended = tucclGroupEnd();
    if (issued != tucclSuccess || ended != tucclSuccess) {
      report(std::string("AllReduce with a PreMulSum operator in a group: ") + tucclGetLastError(comm));
    } else {
      tuccl::CollectiveCall call{Collective::AllReduce, nRanks, -1, DataType::Float32, ReduceOp::Sum, count, false};
      std::vector<double> expected(static_cast<size_t>(count));
      const tuccl::InputElement scaled = [&](int32_t q, int64_t j) {
        return scaledInput(DataType::Float32, -0.375, preMulInput(DataType::Float32, q, j, mySeed));
      };
      for (int64_t j = 0; j < count; ++j) expected[j] = tuccl::referenceElement(call, rank, j, scaled);
      const tuccl::ElementMismatches wrong =
          tuccl::compareElements(DataType::Float32, tuccl::relativeTolerance(call), expected, recv.data());
      if (wrong.count > 0) report("AllReduce with a PreMulSum operator in a group: " + std::to_string(wrong.count) + " wrong");
    }
  }

  // int32: products and sums wrap.
  int32_t hostInt = 7, deviceInt = -3;
  tucclRedOp_t hostIntOp = tucclSum, deviceIntOp = tucclSum;
  if (!create(&hostIntOp, &hostInt, tucclInt32, tucclScalarHostImmediate)) return 1;
  if (!create(&deviceIntOp, &deviceInt, tucclInt32, tucclScalarDevice)) return 1;
  hostInt = 0;
  runPreMulCases(comm, rank, nRanks, DataType::Int32, hostIntOp, 7, count, seed, "premulsum(host 7)");
  runPreMulCases(comm, rank, nRanks, DataType::Int32, deviceIntOp, -3, count, seed, "premulsum(device -3)");
  deviceInt = 123456789;
  runPreMulCases(comm, rank, nRanks, DataType::Int32, deviceIntOp, 123456789, count, seed, "premulsum(device 123456789)");

  // Refusals.
  float buffer[4] = {1, 2, 3, 4};
  int32_t ints[4] = {1, 2, 3, 4};
  const auto unknown = static_cast<tucclRedOp_t>(tucclNumOps + 1000);
  expectRefused(tucclAllReduce(buffer, buffer, 4, tucclFloat32, unknown, comm, nullptr), "PreMulSum", "an unknown operator");
  expectRefused(tucclAllReduce(ints, ints, 4, tucclInt32, deviceOp, comm, nullptr), "datatype float32",
                "a float32 operator on int32");
  expectRefused(tucclReduceScatter(buffer, buffer, 1, tucclFloat32, deviceIntOp, comm, nullptr), "datatype int32",
                "an int32 operator on float32");
  if (tucclRedOpDestroy(hostOp, comm) != tucclSuccess) report(std::string("destroy: ") + tucclGetLastError(comm));
  expectRefused(tucclAllReduce(buffer, buffer, 4, tucclFloat32, hostOp, comm, nullptr), "PreMulSum", "a destroyed operator");
  expectRefused(tucclReduce(buffer, buffer, 4, tucclFloat32, hostOp, 0, comm, nullptr), "PreMulSum",
                "a destroyed operator (Reduce)");
  expectRefused(tucclRedOpDestroy(hostOp, comm), "PreMulSum", "a second destroy");
  expectRefused(tucclRedOpDestroy(tucclSum, comm), "PreMulSum", "destroying a built-in operator");
  expectRefused(tucclRedOpDestroy(unknown, comm), "PreMulSum", "destroying an unknown operator");
  tucclRedOp_t refused = tucclSum;
  expectRefused(tucclRedOpCreatePreMulSum(&refused, nullptr, tucclFloat32, tucclScalarHostImmediate, comm), "scalar",
                "a NULL scalar");
  expectRefused(tucclRedOpCreatePreMulSum(nullptr, &hostFloat, tucclFloat32, tucclScalarHostImmediate, comm), "op",
                "a NULL op");
  expectRefused(tucclRedOpCreatePreMulSum(&refused, &hostFloat, tucclFloat32, static_cast<tucclScalarResidence_t>(7), comm),
                "residence", "a bad residence");
  expectRefused(tucclRedOpCreatePreMulSum(&refused, &hostFloat, static_cast<tucclDataType_t>(42), tucclScalarHostImmediate,
                                          comm),
                "datatype", "a bad datatype");
  expectRefused(tucclRedOpCreatePreMulSum(&refused, &hostFloat, tucclFloat32, tucclScalarHostImmediate, nullptr), "comm",
                "a NULL comm");
  // A new operator never takes a destroyed one's value.
  tucclRedOp_t fresh = tucclSum;
  if (create(&fresh, &hostFloat, tucclFloat32, tucclScalarHostImmediate) && fresh <= deviceIntOp) {
    report("a new operator got value " + std::to_string(fresh) + ", not above the earlier ones");
  }
  for (tucclRedOp_t op : {deviceOp, hostIntOp, deviceIntOp, fresh}) {
    if (tucclRedOpDestroy(op, comm) != tucclSuccess) report(std::string("destroy: ") + tucclGetLastError(comm));
  }
  std::printf("rank %d: %d cases, %d failed\n", rank, cases, failures);
  if (tucclCommDestroy(comm) != tucclSuccess) {
    std::fprintf(stderr, "destroy failed: %s\n", tucclGetLastError(nullptr));
    return 1;
  }
  return failures == 0 ? 0 : 1;
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
  if (mode == "premul" && argc == 3) return runPreMul(std::atoll(argv[2]));
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
