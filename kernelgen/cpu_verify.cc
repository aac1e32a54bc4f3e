// CPU verification of a plan (cpu_verify.h): the host executor and the reference check.
#include "kernelgen/cpu_verify.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <random>
#include <sstream>
#include <thread>

#include "kernelgen/device/datatypes.h"
#include "kernelgen/device/kernel_args.h"
#include "kernelgen/host_build.h"
#include "kernelgen/kernel_layout.h"
#include "plan/plan_validate.h"

namespace tuccl {
namespace {

constexpr size_t kCanaryBytes = 64;
constexpr unsigned char kPoison = 0xA5;
constexpr unsigned char kCanary = 0x5C;

bool isInteger(DataType type) {
  return type == DataType::Int32 || type == DataType::Int64 || type == DataType::Uint8;
}

// Unit roundoff of the type's arithmetic.
double unitRoundoff(DataType type) {
  switch (type) {
    case DataType::Float16: return std::ldexp(1.0, -11);
    case DataType::BFloat16: return std::ldexp(1.0, -8);
    case DataType::Float32: return std::ldexp(1.0, -24);
    case DataType::Float64: return std::ldexp(1.0, -53);
    default: return 0;
  }
}

double decode(DataType type, const unsigned char* p) {
  switch (type) {
    case DataType::Float32: { float v; std::memcpy(&v, p, 4); return v; }
    case DataType::Float64: { double v; std::memcpy(&v, p, 8); return v; }
    case DataType::Float16: { dev::Half h; std::memcpy(&h, p, 2); return dev::toFloat(h); }
    case DataType::BFloat16: { dev::BFloat16 b; std::memcpy(&b, p, 2); return dev::toFloat(b); }
    case DataType::Int32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DataType::Int64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DataType::Uint8: return *p;
  }
  return 0;
}

void encode(DataType type, unsigned char* p, double value) {
  switch (type) {
    case DataType::Float32: { float v = static_cast<float>(value); std::memcpy(p, &v, 4); break; }
    case DataType::Float64: std::memcpy(p, &value, 8); break;
    case DataType::Float16: { dev::Half h = dev::toHalf(static_cast<float>(value)); std::memcpy(p, &h, 2); break; }
    case DataType::BFloat16: { dev::BFloat16 b = dev::toBFloat16(static_cast<float>(value)); std::memcpy(p, &b, 2); break; }
    case DataType::Int32: { int32_t v = static_cast<int32_t>(value); std::memcpy(p, &v, 4); break; }
    case DataType::Int64: { int64_t v = static_cast<int64_t>(value); std::memcpy(p, &v, 8); break; }
    case DataType::Uint8: *p = static_cast<unsigned char>(value); break;
  }
}

// Integers wrap to the type's width, as the kernels compute them.
double wrapInteger(DataType type, int64_t value) {
  switch (type) {
    case DataType::Int32: return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(value)));
    case DataType::Uint8: return static_cast<double>(static_cast<uint8_t>(static_cast<uint64_t>(value)));
    default: return static_cast<double>(value);
  }
}

// Host memory with a canary tail and 64-byte alignment.
class HostBuffer {
 public:
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
  HostBuffer& operator=(HostBuffer&&) = delete;
  HostBuffer(const HostBuffer&) = delete;
  unsigned char* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool canaryIntact() const {
    for (size_t i = 0; i < kCanaryBytes; ++i) {
      if (data_[bytes_ + i] != kCanary) return false;
    }
    return true;
  }

 private:
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
};

std::string formatValue(DataType type, double value) {
  std::ostringstream out;
  if (isInteger(type)) {
    out << static_cast<int64_t>(value);
  } else {
    out.precision(9);
    out << value;
  }
  return out.str();
}

const char* stateName(int32_t state) {
  switch (state) {
    case dev::kTbRunning: return "never finished";
    case dev::kTbTimedOut: return "timed out";
    case dev::kTbAborted: return "stopped after another TB gave up";
    case dev::kTbTagMismatch: return "got a slice of another entry";
    default: return "done";
  }
}

std::string describeBlocked(const Plan& plan, const KernelLayout& layout, int32_t rank, int32_t tb,
                            const dev::TbReport& report) {
  std::ostringstream out;
  out << "rank " << rank << " tb " << tb;
  if (report.entry >= 0 && report.entry < static_cast<int32_t>(plan.ranks[rank].tbs[tb].entries.size())) {
    const PlanEntry& entry = plan.ranks[rank].tbs[tb].entries[report.entry];
    out << " entry " << report.entry << " (" << primitiveName(entry.kind);
    if (entry.kind != PrimitiveKind::Copy && entry.kind != PrimitiveKind::Reduce) {
      out << (entry.kind == PrimitiveKind::Send ? " to rank " : " from rank ") << entry.peer;
    }
    out << ", op " << entry.op << ") micro-batch " << report.microBatch;
  } else {
    out << " prologue/epilogue";
  }
  out << ": " << stateName(report.state);
  auto ringText = [&](int32_t ring) {
    std::ostringstream r;
    r << "ring " << ring;
    if (ring >= 0 && ring < static_cast<int32_t>(layout.rings.size())) {
      const RingInfo& info = layout.rings[ring];
      r << " (rank " << info.srcRank << " tb " << info.srcTb << " -> rank " << info.dstRank << " tb " << info.dstTb
        << ")";
    }
    return r.str();
  };
  switch (report.wait) {
    case dev::kWaitData:
      if (report.state == dev::kTbTagMismatch) {
        out << ": on " << ringText(report.ring) << " expected op " << (report.expected >> 32) << " slice "
            << (report.expected & 0xffffffffu) << ", received op " << (report.seen >> 32) << " slice "
            << (report.seen & 0xffffffffu);
      } else {
        out << ", waiting for data on " << ringText(report.ring) << ": posted flag is " << report.seen << ", needs "
            << report.expected;
      }
      break;
    case dev::kWaitCredit:
      out << ", waiting for a credit on " << ringText(report.ring) << ": consumed flag is " << report.seen
          << ", needs " << report.expected;
      break;
    case dev::kWaitDependency:
      out << ", waiting for tb " << report.depTb << " entry " << report.depEntry << ": it finished " << report.seen
          << " micro-batches, needs " << report.expected;
      break;
    case dev::kWaitBarrier:
      out << ", waiting at the rank barrier: " << report.seen << " of " << report.expected << " TBs arrived";
      break;
    default:
      break;
  }
  return out.str();
}

}  // namespace

std::string CpuVerifyReport::summary() const {
  std::ostringstream out;
  if (!refused.empty()) {
    out << "refused: " << refused << "\n";
    return out.str();
  }
  out << (ok ? "ok" : hang ? "HANG" : orderMismatch ? "ORDER MISMATCH" : "MISMATCH") << " (seed " << seed << ", "
      << microBatches << " micro-batches, " << stagingSlots << " staging slots, " << runSeconds << " s)\n";
  for (const std::string& line : blocked) out << "  " << line << "\n";
  for (const RankVerifyReport& rank : ranks) {
    out << "  rank " << rank.rank << ": " << (rank.ok ? "ok" : rank.mismatches == 0 ? "did not complete" : "FAILED");
    if (rank.mismatches > 0) out << ", " << rank.mismatches << " wrong elements";
    out << "\n";
    for (const std::string& line : rank.firstMismatches) out << "    " << line << "\n";
  }
  return out.str();
}

CpuVerifyReport verifyPlanOnCpu(const Plan& plan, const VerifyOptions& options) {
  CpuVerifyReport report;
  // ---- Static checks: the plan, then races between entries of a rank. -------------------------
  if (Status problem = options.staticChecks ? validatePlan(plan) : Status(); !problem) {
    report.refused = "the plan fails its static check: " + problem.message();
    return report;
  }
  KernelLayout layout;
  try {
    layout = layoutKernels(plan);
  } catch (const std::exception& e) {
    report.refused = e.what();
    return report;
  }
  if (Status race = options.staticChecks ? checkPlanRaceFree(plan) : Status(); !race) {
    report.refused = "the plan fails its race check: " + race.message();
    return report;
  }
  const Collective collective = layout.collective;
  if (collective == Collective::Broadcast || collective == Collective::Reduce) {
    report.refused = "CPU verification of " + std::string(collectiveName(collective)) + " is not supported";
    return report;
  }
  if (options.inPlace && !plan.inPlace) {
    report.refused = "an in-place call of an out-of-place plan is not supported";
    return report;
  }
  if (!options.inPlace && plan.inPlace && collective == Collective::ReduceScatter) {
    report.refused = "an out-of-place call of an in-place ReduceScatter plan is not supported (docs/kernels.md)";
    return report;
  }
  if (options.count < 0) {
    report.refused = "the element count is negative";
    return report;
  }

  // ---- Build. -----------------------------------------------------------------------------------
  std::vector<GeneratedKernel> kernels;
  for (int32_t r = 0; r < plan.nRanks; ++r) kernels.push_back(generateRankKernel(plan, layout, r));
  std::string buildError;
  std::shared_ptr<const HostKernels> host = buildHostKernels(kernels, buildError);
  if (!host) {
    report.refused = buildError;
    return report;
  }
  report.buildCached = host->fromCache;

  // ---- Geometry. --------------------------------------------------------------------------------
  const DataType type = options.dataType;
  const int64_t es = dev::elementSize(deviceDataType(type));
  const int64_t count = options.count;
  const int32_t k = layout.chunksPerUnit;
  const int32_t n = plan.nRanks;
  const int64_t chunkBytes = options.chunkSize > 0 ? options.chunkSize : plan.config.chunkSize;
  const int64_t sliceElems = std::max<int64_t>(1, chunkBytes / es);
  const int64_t chunkElems = (count + k - 1) / k;
  report.microBatches = chunkElems > 0 ? (chunkElems + sliceElems - 1) / sliceElems : 1;
  report.stagingSlots =
      static_cast<int32_t>(std::clamp<int64_t>(std::min<int64_t>(options.stagingSlots, report.microBatches), 1, 64));
  const int64_t slotBytes = (sliceElems * es + 15) / 16 * 16;
  auto blocksOf = [&](BufferKind buffer) {
    return (int64_t{plan.bufferChunks[static_cast<int>(buffer)]} + k - 1) / k;
  };
  const int64_t inElems = blocksOf(BufferKind::Input) * count;
  const int64_t outElems = blocksOf(BufferKind::Output) * count;
  const int64_t scratchElems = blocksOf(BufferKind::Scratch) * count;

  // ---- Inputs (random, never zero, fresh per run) and the reference. ----------------------------
  report.seed = options.seed != 0 ? options.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::mt19937_64 random(report.seed);
  const bool smallValues = options.op == ReduceOp::Prod;
  std::vector<std::vector<double>> inputs(n, std::vector<double>(static_cast<size_t>(inElems)));
  std::vector<unsigned char> scratchValue(static_cast<size_t>(es));
  for (auto& rankInput : inputs) {
    for (double& v : rankInput) {
      if (isInteger(type)) {
        const int64_t magnitude = smallValues ? 1 + static_cast<int64_t>(random() % 3) : 1 + static_cast<int64_t>(random() % 100);
        const bool negative = type != DataType::Uint8 && (random() & 1);
        v = static_cast<double>(negative ? -magnitude : magnitude);
        if (type == DataType::Uint8 && !smallValues) v = static_cast<double>(1 + random() % 255);
      } else {
        const double x = 0.5 + 1.5 * std::ldexp(static_cast<double>(random() >> 11), -53);
        encode(type, scratchValue.data(), x);  // round to the type, keep the exact stored value
        v = decode(type, scratchValue.data());
      }
    }
  }
  auto reduceReference = [&](auto valueOf) {  // valueOf(rank) -> input value; returns the reduction
    if (isInteger(type)) {
      int64_t acc = static_cast<int64_t>(valueOf(0));
      for (int32_t r = 1; r < n; ++r) {
        const int64_t x = static_cast<int64_t>(valueOf(r));
        switch (options.op) {
          case ReduceOp::Prod: acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(x)); break;
          case ReduceOp::Min: acc = std::min(acc, x); break;
          case ReduceOp::Max: acc = std::max(acc, x); break;
          default: acc = static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x)); break;
        }
      }
      double wrapped = wrapInteger(type, acc);
      if (options.op == ReduceOp::Avg) wrapped = static_cast<double>(static_cast<int64_t>(wrapped) / n);
      return wrapped;
    }
    double acc = valueOf(0);
    for (int32_t r = 1; r < n; ++r) {
      const double x = valueOf(r);
      switch (options.op) {
        case ReduceOp::Prod: acc *= x; break;
        case ReduceOp::Min: acc = std::min(acc, x); break;
        case ReduceOp::Max: acc = std::max(acc, x); break;
        default: acc += x; break;
      }
    }
    return options.op == ReduceOp::Avg ? acc / n : acc;
  };
  // expected[r]: the rank's result, `resultElems` elements.
  const int64_t resultElems = collective == Collective::ReduceScatter ? count : outElems;
  std::vector<std::vector<double>> expected(n, std::vector<double>(static_cast<size_t>(resultElems)));
  for (int32_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < resultElems; ++i) {
      double& e = expected[r][i];
      switch (collective) {
        case Collective::AllGather: e = inputs[i / count][i % count]; break;
        case Collective::AllToAll: e = inputs[i / count][r * count + i % count]; break;
        case Collective::ReduceScatter: e = reduceReference([&](int32_t q) { return inputs[q][r * count + i]; }); break;
        default: e = reduceReference([&](int32_t q) { return inputs[q][i]; }); break;
      }
    }
  }

  // ---- Host memory: buffers, rings, flags. ------------------------------------------------------
  const bool storageIsInput = plan.inPlace && collective == Collective::ReduceScatter;
  std::vector<HostBuffer> inputBuffers, outputBuffers, scratchBuffers;
  std::vector<dev::KernelArgs> args(n);
  std::vector<std::vector<uint64_t>> progress(n);
  std::vector<std::vector<uint64_t>> barriers(n, std::vector<uint64_t>(2, 0));
  std::vector<std::vector<dev::TbReport>> tbReports(n);
  int32_t abortFlag = 0;
  for (int32_t r = 0; r < n; ++r) {
    const bool separateInput = !options.inPlace || storageIsInput;
    inputBuffers.emplace_back(separateInput ? static_cast<size_t>(inElems * es) : 0);
    outputBuffers.emplace_back(storageIsInput ? 0 : static_cast<size_t>(outElems * es));
    scratchBuffers.emplace_back(static_cast<size_t>(scratchElems * es));
    unsigned char* in = nullptr;
    if (separateInput) {
      in = inputBuffers.back().data();
    } else {
      in = outputBuffers.back().data() + (collective == Collective::AllGather ? r * count * es : 0);
    }
    for (int64_t i = 0; i < inElems; ++i) encode(type, in + i * es, inputs[r][i]);
    dev::KernelArgs& a = args[r];
    a.input = in;
    a.output = storageIsInput ? in + r * count * es : outputBuffers.back().data();
    a.scratch = scratchBuffers.back().data();
    a.count = count;
    a.sliceElems = sliceElems;
    a.dtype = deviceDataType(type);
    a.op = deviceReduceOp(options.op);
    a.rank = r;
    a.nRanks = n;
    a.chunksPerUnit = k;
    a.inPlaceCall = options.inPlace ? 1 : 0;
    progress[r].assign(static_cast<size_t>(std::max(1, layout.progressCounters[r])), 0);
    tbReports[r].assign(plan.ranks[r].tbs.size(), dev::TbReport{});
    a.progress = progress[r].data();
    a.barrier = barriers[r].data();
    a.reports = tbReports[r].data();
    a.abort = &abortFlag;
  }
  // Staging is receiver memory on a GPU; here it is all one address space.
  const size_t nRings = layout.rings.size();
  std::vector<HostBuffer> staging;
  std::vector<uint64_t> counters(nRings * 4 + 1, 0);
  std::vector<std::vector<uint64_t>> tags(nRings);
  std::vector<dev::RingDevice> rings(nRings);
  for (size_t i = 0; i < nRings; ++i) {
    staging.emplace_back(static_cast<size_t>(slotBytes * report.stagingSlots));
    tags[i].assign(static_cast<size_t>(report.stagingSlots), ~uint64_t{0});
    dev::RingDevice& ring = rings[i];
    ring.staging = reinterpret_cast<char*>(staging.back().data());
    ring.tags = tags[i].data();
    ring.posted = &counters[i * 4 + 0];
    ring.consumed = &counters[i * 4 + 1];
    ring.sendCount = &counters[i * 4 + 2];
    ring.recvCount = &counters[i * 4 + 3];
    ring.slotBytes = slotBytes;
    ring.nSlots = report.stagingSlots;
  }
  const auto start = std::chrono::steady_clock::now();
  const int64_t deadline = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               (start + std::chrono::duration<double>(options.timeoutSeconds)).time_since_epoch())
                               .count();
  for (dev::KernelArgs& a : args) {
    a.rings = rings.data();
    a.deadlineNs = deadline;
  }

  // ---- Run: every TB of every rank is a thread. -------------------------------------------------
  {
    std::vector<std::thread> threads;
    for (int32_t r = 0; r < n; ++r) {
      for (size_t tb = 0; tb < plan.ranks[r].tbs.size(); ++tb) {
        threads.emplace_back([&host, &args, r, tb] {
          host->setBlock(static_cast<unsigned>(tb));
          host->ranks[r](args[r]);
        });
      }
    }
    for (std::thread& thread : threads) thread.join();
  }
  report.runSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // ---- Diagnose stopped TBs. --------------------------------------------------------------------
  bool allDone = true;
  for (int32_t r = 0; r < n; ++r) {
    for (size_t tb = 0; tb < tbReports[r].size(); ++tb) {
      const dev::TbReport& tbReport = tbReports[r][tb];
      if (tbReport.state == dev::kTbDone) continue;
      allDone = false;
      if (tbReport.state == dev::kTbTimedOut) report.hang = true;
      if (tbReport.state == dev::kTbTagMismatch) report.orderMismatch = true;
      report.blocked.push_back(describeBlocked(plan, layout, r, static_cast<int32_t>(tb), tbReport));
    }
  }

  // ---- Compare every element of every rank. -----------------------------------------------------
  const double tolerance = (n + 2) * unitRoundoff(type);
  bool allOk = allDone;
  for (int32_t r = 0; r < n; ++r) {
    RankVerifyReport rankReport;
    rankReport.rank = r;
    const unsigned char* result = static_cast<const unsigned char*>(args[r].output);
    // A run that did not complete is reported by its stopped TBs, not by element noise.
    for (int64_t i = 0; allDone && i < resultElems; ++i) {
      const double got = decode(type, result + i * es);
      const double want = expected[r][i];
      const bool equal = isInteger(type) ? got == want
                                         : std::isfinite(got) && std::fabs(got - want) <= tolerance * std::fabs(want) + 1e-300;
      if (equal) continue;
      if (++rankReport.mismatches <= 4) {
        rankReport.firstMismatches.push_back("result[" + std::to_string(i) + "]: expected " + formatValue(type, want) +
                                             ", got " + formatValue(type, got));
      }
    }
    auto flag = [&](const std::string& problem) {
      ++rankReport.mismatches;
      rankReport.firstMismatches.push_back(problem);
    };
    if (!inputBuffers[r].canaryIntact()) flag("wrote past the end of the input buffer");
    if (!outputBuffers[r].canaryIntact()) flag("wrote past the end of the output buffer");
    if (!scratchBuffers[r].canaryIntact()) flag("wrote past the end of the scratch buffer");
    if (!options.inPlace) {
      for (int64_t i = 0; i < inElems; ++i) {
        if (decode(type, inputBuffers[r].data() + i * es) != inputs[r][i]) {
          flag("the input buffer was modified (input[" + std::to_string(i) + "])");
          break;
        }
      }
    }
    rankReport.ok = allDone && rankReport.mismatches == 0;
    allOk = allOk && rankReport.ok;
    report.ranks.push_back(std::move(rankReport));
  }
  for (size_t i = 0; i < nRings; ++i) {
    if (!staging[i].canaryIntact()) {
      allOk = false;
      report.blocked.push_back("ring " + std::to_string(i) + ": wrote past the end of the staging buffer");
    }
  }
  report.ok = allOk;
  return report;
}

}  // namespace tuccl
