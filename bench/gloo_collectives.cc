// Gloo's AllReduce and AllGather over TCP on loopback, timed and checked as tuccl-bench does
// (cli/bench_driver.h): the same flags, loop and nccl-tests output, for
// bench/compare_cpu_collectives.sh.
//
//   tuccl-run -n 4 -- bench_gloo_collectives allreduce -b 1K -e 256M -f 2 [--algorithm NAME]
//
// Ranks are processes: rank and size from TUCCL_RANK / TUCCL_NRANKS (tuccl-run), else
// OMPI_COMM_WORLD_RANK / _SIZE (mpirun). They meet through a gloo FileStore in a directory
// (--store DIR; default /tmp/tuccl-gloo-<TUCCL_COMM_ID or the launcher's pid>), connect a full
// mesh of TCP pairs on 127.0.0.1, and rank 0 removes the directory at the end.
//
// AllReduce algorithms (--algorithm; gloo docs/algorithms.md):
//   halving-doubling  AllreduceHalvingDoubling, recursive halving and doubling: log2(n) steps,
//                     documented as the fast one for small and medium buffers, and the fastest
//                     of the four on 4 ranks over loopback up to 16 MB here (the default)
//   ring              gloo::allreduce, the ring of the options API (what PyTorch's CPU process
//                     group calls), in and out of place
//   bcube             gloo::allreduce with the BCube algorithm
//   ring-chunked      AllreduceRingChunked, the classic pipelined ring
// The classic algorithms (halving-doubling, ring-chunked) reduce one buffer in place: out of
// place, the call copies its input into its output first; an instance is built once per
// buffer, size and type, as their users do, and run for every call. AllGather is
// gloo::allgather (ring). Types: float, double, int32, int64, uint8; ops: sum, prod, max, min.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "support/text_values.h"
#include "cli/bench_driver.h"
#include "support/environment.h"

namespace {

using namespace tuccl;
using namespace tuccl::bench;

constexpr int kExitBadInput = 2;  ///< a bad command line or environment (cli/cli.h's kExitError)

int reportError(const Status& status) {
  std::cerr << "bench_gloo_collectives: error: " << status.message() << "\n";
  return kExitBadInput;
}

enum class Algorithm { Ring, Bcube, HalvingDoubling, RingChunked };

Expected<Algorithm> parseAlgorithm(std::string_view name) {
  if (name == "ring") return Algorithm::Ring;
  if (name == "bcube") return Algorithm::Bcube;
  if (name == "halving-doubling") return Algorithm::HalvingDoubling;
  if (name == "ring-chunked") return Algorithm::RingChunked;
  return makeError(ErrorCode::InvalidArgument, "option --algorithm: invalid value '" + std::string(name) +
                                                   "': give ring, bcube, halving-doubling or ring-chunked");
}

/// The program's own flags, taken out of the command line before nccl-tests' flags are read.
struct GlooFlags {
  Algorithm algorithm = Algorithm::HalvingDoubling;
  std::string storeDir;
  std::vector<std::string> rest;  ///< COLLECTIVE and nccl-tests' flags
};

Expected<GlooFlags> takeGlooFlags(const std::vector<std::string>& args) {
  GlooFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool algorithm = args[i] == "--algorithm";
    if (!algorithm && args[i] != "--store") {
      flags.rest.push_back(args[i]);
      continue;
    }
    if (i + 1 == args.size())
      return makeError(ErrorCode::InvalidArgument, "option " + args[i] + ": missing value");
    const std::string& value = args[++i];
    if (!algorithm) {
      flags.storeDir = value;
      continue;
    }
    Expected<Algorithm> parsed = parseAlgorithm(value);
    if (!parsed) return parsed.status();
    flags.algorithm = *parsed;
  }
  return flags;
}

/// What this benchmark cannot run, named by the flag that asked for it.
Status checkSupported(const BenchOptions& options) {
  if (options.collective != Collective::AllReduce && options.collective != Collective::AllGather) {
    return makeError(ErrorCode::Unsupported, "bench_gloo_collectives runs allreduce and allgather, not " +
                                                 benchCollectiveName(options.collective));
  }
  for (DataType type : options.types) {
    if (type == DataType::Float16 || type == DataType::BFloat16) {
      return makeError(
          ErrorCode::Unsupported,
          "option -d (--datatype): give float, double, int32, int64 or uint8 (Gloo has no half or bfloat16)");
    }
  }
  for (ReduceOp op : options.ops) {
    if (op == ReduceOp::Avg && options.collective == Collective::AllReduce) {
      return makeError(ErrorCode::Unsupported,
                       "option -o (--op): Gloo has no avg; give sum, prod, max or min");
    }
  }
  if (options.aggIters > 1) {
    return makeError(ErrorCode::Unsupported,
                     "option -m (--agg_iters): Gloo's blocking collectives have no groups");
  }
  return {};
}

/// Rank and size from the launcher's environment.
Expected<std::pair<int, int>> launchRank() {
  for (const auto& [rankVar, sizeVar] :
       {std::pair{"TUCCL_RANK", "TUCCL_NRANKS"}, std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}}) {
    const std::optional<std::string> rank = tuccl::env::text(rankVar);
    const std::optional<std::string> size = tuccl::env::text(sizeVar);
    if (rank && size) return std::pair{std::atoi(rank->c_str()), std::atoi(size->c_str())};
  }
  return makeError(ErrorCode::InvalidArgument,
                   "no rank in the environment: start it with tuccl-run (TUCCL_RANK, TUCCL_NRANKS) or mpirun "
                   "(OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)");
}

/// The rendezvous directory every rank of one launch computes alike.
std::string defaultStoreDir() {
  std::string id = tuccl::env::text("TUCCL_COMM_ID").value_or(std::to_string(getppid()));
  for (char& c : id)
    if (c == ':' || c == '/') c = '_';
  return "/tmp/tuccl-gloo-" + id;
}

/// The element type of a DataType, for gloo's templates.
template <typename F>
void withElementType(DataType type, F&& f) {
  switch (type) {
    case DataType::Float32:
      f(float{});
      return;
    case DataType::Float64:
      f(double{});
      return;
    case DataType::Int32:
      f(int32_t{});
      return;
    case DataType::Int64:
      f(int64_t{});
      return;
    case DataType::Uint8:
      f(uint8_t{});
      return;
    case DataType::Int8:
      f(int8_t{});
      return;
    case DataType::Uint32:
      f(uint32_t{});
      return;
    case DataType::Uint64:
      f(uint64_t{});
      return;
    case DataType::Float16:
    case DataType::BFloat16:
    case DataType::Float8E4M3:
    case DataType::Float8E5M2:
      break;
  }
  throwIfError(
      makeError(ErrorCode::Unsupported, "no Gloo element type for " + std::string(dataTypeName(type))));
}

template <typename T>
gloo::AllreduceOptions::Func reduceFunction(ReduceOp op) {
  using Fn = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case ReduceOp::Prod:
      return static_cast<Fn>(&gloo::product<T>);
    case ReduceOp::Max:
      return static_cast<Fn>(&gloo::max<T>);
    case ReduceOp::Min:
      return static_cast<Fn>(&gloo::min<T>);
    default:
      return static_cast<Fn>(&gloo::sum<T>);
  }
}

template <typename T>
const gloo::ReductionFunction<T>* classicReduction(ReduceOp op) {
  switch (op) {
    case ReduceOp::Prod:
      return gloo::ReductionFunction<T>::product;
    case ReduceOp::Max:
      return gloo::ReductionFunction<T>::max;
    case ReduceOp::Min:
      return gloo::ReductionFunction<T>::min;
    default:
      return gloo::ReductionFunction<T>::sum;
  }
}

class GlooBackend final : public BenchBackend {
 public:
  GlooBackend(std::shared_ptr<gloo::Context> context, Algorithm algorithm)
      : context_(std::move(context)), algorithm_(algorithm) {}
  int32_t rank() const override { return context_->rank; }
  int32_t nRanks() const override { return context_->size; }

  void allGatherBytes(const void* mine, void* all, size_t bytes) override {
    gloo::AllgatherOptions options(context_);
    options.setInput(static_cast<uint8_t*>(const_cast<void*>(mine)), bytes);
    options.setOutput(static_cast<uint8_t*>(all), bytes * context_->size);
    gloo::allgather(options);
  }

  void start(const BenchCall& b) override {
    withElementType(b.call.dataType, [&](auto element) {
      using T = decltype(element);
      if (b.call.collective == Collective::AllGather) {
        allGather<T>(b);
      } else if (algorithm_ == Algorithm::Ring || algorithm_ == Algorithm::Bcube) {
        allReduce<T>(b);
      } else {
        classicAllReduce<T>(b);
      }
    });
  }

  void complete() override {}

  void barrier() override {
    gloo::BarrierOptions options(context_);
    gloo::barrier(options);
  }

  double combineTime(double seconds, TimeAverage average) override {
    if (average == TimeAverage::Rank0) {
      gloo::BroadcastOptions options(context_);
      options.setOutput(&seconds, 1);
      options.setRoot(0);
      gloo::broadcast(options);
      return seconds;
    }
    const ReduceOp op = average == TimeAverage::Min   ? ReduceOp::Min
                        : average == TimeAverage::Max ? ReduceOp::Max
                                                      : ReduceOp::Sum;
    double combined = seconds;
    reduceInPlace(&combined, op);
    return average == TimeAverage::Mean ? combined / context_->size : combined;
  }

  int64_t sumOverRanks(int64_t value) override {
    reduceInPlace(&value, ReduceOp::Sum);
    return value;
  }

 private:
  template <typename T>
  void reduceInPlace(T* value, ReduceOp op) {
    gloo::AllreduceOptions options(context_);
    options.setOutput(value, 1);
    options.setReduceFunction(reduceFunction<T>(op));
    gloo::allreduce(options);
  }

  template <typename T>
  void allGather(const BenchCall& b) {
    gloo::AllgatherOptions options(context_);
    if (!b.call.inPlace)
      options.setInput(static_cast<T*>(b.send), b.counts.param);  // else: at the rank's block
    options.setOutput(static_cast<T*>(b.recv), b.counts.recv);
    gloo::allgather(options);
  }

  template <typename T>
  void allReduce(const BenchCall& b) {
    gloo::AllreduceOptions options(context_);
    options.setAlgorithm(algorithm_ == Algorithm::Bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                                                        : gloo::AllreduceOptions::Algorithm::RING);
    if (!b.call.inPlace) options.setInput(static_cast<T*>(b.send), b.counts.param);
    options.setOutput(static_cast<T*>(b.recv), b.counts.param);
    options.setReduceFunction(reduceFunction<T>(b.call.op));
    gloo::allreduce(options);
  }

  /// A classic algorithm, built once per (buffer, count, type, op) and run in place.
  template <typename T>
  void classicAllReduce(const BenchCall& b) {
    const size_t bytes = b.counts.param * sizeof(T);
    if (!b.call.inPlace) std::memcpy(b.recv, b.send, bytes);
    const Key key{b.recv, b.counts.param, b.call.dataType, b.call.op};
    if (!(key == key_) || classic_ == nullptr) {
      classic_.reset();
      std::vector<T*> buffers{static_cast<T*>(b.recv)};
      const int count = static_cast<int>(b.counts.param);
      const gloo::ReductionFunction<T>* fn = classicReduction<T>(b.call.op);
      if (algorithm_ == Algorithm::HalvingDoubling) {
        classic_ = std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context_, buffers, count, fn);
      } else {
        classic_ = std::make_unique<gloo::AllreduceRingChunked<T>>(context_, buffers, count, fn);
      }
      key_ = key;
    }
    classic_->run();
  }

  struct Key {
    void* buffer = nullptr;
    uint64_t count = 0;
    DataType type = DataType::Float32;
    ReduceOp op = ReduceOp::Sum;
    bool operator==(const Key&) const = default;
  };

  std::shared_ptr<gloo::Context> context_;
  Algorithm algorithm_;
  std::unique_ptr<gloo::Algorithm> classic_;
  Key key_;
};

/// A full mesh of TCP pairs on loopback, met through a FileStore in `storeDir`.
std::shared_ptr<gloo::Context> connect(int rank, int size, const std::string& storeDir) {
  std::filesystem::create_directories(storeDir);
  gloo::rendezvous::FileStore store(storeDir);
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(std::chrono::minutes(5));
  context->connectFullMesh(store, device);
  return context;
}

int run(const std::vector<std::string>& args) {
  Expected<GlooFlags> flags = takeGlooFlags(args);
  if (!flags) return reportError(flags.status());
  Expected<BenchOptions> options = parseBenchOptions(flags->rest);
  if (!options) return reportError(options.status());
  if (options->help) {
    std::cout
        << benchUsage("bench_gloo_collectives")
        << "  --algorithm NAME         allreduce: halving-doubling (default), ring, bcube, ring-chunked\n"
           "  --store DIR              rendezvous directory (default /tmp/tuccl-gloo-<launch>)\n";
    return 0;
  }
  if (Status status = checkSupported(*options); !status) return reportError(status);
  Expected<std::pair<int, int>> launch = launchRank();
  if (!launch) return reportError(launch.status());
  const auto [rank, size] = *launch;
  if (Status status = checkRoot(*options, size); !status) return reportError(status);
  const std::string storeDir = flags->storeDir.empty() ? defaultStoreDir() : flags->storeDir;
  GlooBackend backend(connect(rank, size, storeDir), flags->algorithm);
  const int64_t wrong = runBenchmark(*options, backend, stdout);
  backend.barrier();  // every rank is past the rendezvous
  if (rank == 0 && flags->storeDir.empty()) std::filesystem::remove_all(storeDir);
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const StatusError& error) {
    std::cerr << "bench_gloo_collectives: error: " << error.status().message() << "\n";
  } catch (const std::exception& error) {  // gloo reports failures as exceptions
    std::cerr << "bench_gloo_collectives: error: " << error.what() << "\n";
  }
  return 1;
}
