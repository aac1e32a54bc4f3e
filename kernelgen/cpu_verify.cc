// CPU verification of a plan (cpu_verify.h): static checks, host build, random inputs, the
// reference, the host executor and the comparison, composed.
#include "kernelgen/cpu_verify.h"

#include <cmath>
#include <random>
#include <sstream>

#include "kernelgen/collective_reference.h"
#include "kernelgen/compile.h"
#include "kernelgen/element_values.h"
#include "kernelgen/host_executor.h"
#include "kernelgen/output_compare.h"
#include "support/text_values.h"

#include <unistd.h>

namespace tuccl {
namespace {

Status unsupported(std::string message) { return makeError(ErrorCode::Unsupported, std::move(message)); }

uint64_t physicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long pageSize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0) return uint64_t{8} << 30;  // unknown: assume a small machine
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize);
}

CollectiveCall callOf(const Plan& plan, const KernelLayout& layout, const VerifyOptions& options) {
  return CollectiveCall{layout.collective, plan.nRanks,  plan.root,      options.dataType,
                        options.op,        options.count, options.inPlace};
}

// The host memory a verification holds: every rank's buffers in the datatype, and the inputs and
// reference outputs as doubles. Refused, before anything is allocated, when it exceeds
// verifyMemoryLimit(): a count a user typed must end in a message, not in the allocator.
Status checkVerifyMemory(const Plan& plan, const KernelLayout& layout, const CollectiveCall& call) {
  const long double es = static_cast<long double>(dataTypeSize(call.dataType));
  const RankBufferElements unit = planBufferElements(plan, layout, 1);
  const long double perCount = (static_cast<long double>(unit.input) + unit.output + unit.scratch) * es +
                               (static_cast<long double>(unit.input) + unit.output) * sizeof(double);
  const long double needed = perCount * static_cast<long double>(call.count) * call.nRanks;
  const uint64_t limit = verifyMemoryLimit();
  if (needed <= static_cast<long double>(limit)) return {};
  const auto largest = static_cast<int64_t>(static_cast<long double>(limit) / (perCount * call.nRanks));
  return makeError(ErrorCode::InvalidArgument,
                   "verifying " + formatNumberForPeople(static_cast<double>(call.count)) + " elements on " +
                       std::to_string(call.nRanks) + " ranks needs " +
                       (needed >= 1.8e19L ? std::string("more than 16 EiB")
                                          : formatBytesForPeople(static_cast<uint64_t>(needed))) +
                       " of host memory; the CPU verification uses at most " + formatBytesForPeople(limit) +
                       " (half of this machine's memory): use a count of at most " +
                       formatNumberForPeople(static_cast<double>(largest)));
}

// Calls the executor can run and the reference can judge.
Status checkVerifiable(const Plan& plan, const KernelLayout& layout, const CollectiveCall& call) {
  if (Status status = checkCall(call); !status) return status;
  if (call.inPlace && !plan.inPlace) return unsupported("an in-place call of an out-of-place plan is not supported");
  if (!call.inPlace && plan.inPlace && call.collective == Collective::ReduceScatter) {
    return unsupported("an out-of-place call of an in-place ReduceScatter plan is not supported (docs/kernels.md)");
  }
  const RankBufferElements elements = planBufferElements(plan, layout, 1);
  CollectiveCall unit = call;
  unit.count = 1;
  if (elements.input != inputElements(unit) || elements.output != outputElements(unit)) {
    return unsupported("the plan's buffers (" + std::to_string(elements.input) + " input and " +
                       std::to_string(elements.output) + " output units) are not NCCL's for " + std::string(collectiveName(plan.collective)));
  }
  return checkVerifyMemory(plan, layout, call);
}

uint64_t freshSeed() { return (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}(); }

// Random inputs, never zero, exactly representable in the type: floats in [0.5, 2) (fp8 prod:
// [0.75, 1.5), so products of 8 ranks stay normal); integers ±[1, 100] (uint8 [1, 255]), or
// ±[1, 3] for prod so products stay meaningful; uint32 anywhere in [1, 2^32) and uint64 in
// [1, 2^53) (exact in float64), so their sums and products wrap.
std::vector<std::vector<double>> randomInputs(const CollectiveCall& call, uint64_t seed) {
  std::mt19937_64 random(seed);
  const DataType type = call.dataType;
  const bool smallValues = call.op == ReduceOp::Prod;
  const bool fp8 = type == DataType::Float8E4M3 || type == DataType::Float8E5M2;
  std::vector<std::vector<double>> inputs(call.nRanks, std::vector<double>(static_cast<size_t>(inputElements(call))));
  unsigned char stored[8];
  for (auto& rankInput : inputs) {
    for (double& v : rankInput) {
      if (type == DataType::Uint32 || type == DataType::Uint64) {
        const int bits = type == DataType::Uint32 ? 32 : 53;
        v = static_cast<double>(1 + random() % ((uint64_t{1} << bits) - 1));
      } else if (fp8 && smallValues) {
        writeElement(type, stored, 0.75 + 0.75 * std::ldexp(static_cast<double>(random() >> 11), -53));
        v = readElement(type, stored);
      } else if (isIntegerType(type)) {
        const int64_t magnitude = 1 + static_cast<int64_t>(random() % (smallValues ? 3 : 100));
        const bool negative = type != DataType::Uint8 && (random() & 1);
        v = static_cast<double>(negative ? -magnitude : magnitude);
        if (type == DataType::Uint8 && !smallValues) v = static_cast<double>(1 + random() % 255);
      } else {
        writeElement(type, stored, 0.5 + 1.5 * std::ldexp(static_cast<double>(random() >> 11), -53));
        v = readElement(type, stored);  // the value the type stores
      }
    }
  }
  return inputs;
}

// Poisoned host buffers with canaries, laid out as NCCL's call would: in place, AllGather's input
// is block `rank` of the output, ReduceScatter's output block `rank` of the input, and every other
// collective's input is its output.
struct VerifyBuffers {
  std::vector<HostBuffer> input, output, scratch;
  std::vector<RankBuffers> pointers;
};

VerifyBuffers allocateBuffers(const Plan& plan, const KernelLayout& layout, const CollectiveCall& call,
                              const std::vector<std::vector<double>>& inputs) {
  const int64_t es = dataTypeSize(call.dataType);
  const bool storageIsInput = call.inPlace && call.collective == Collective::ReduceScatter;
  const bool separateInput = !call.inPlace || storageIsInput;
  const int64_t scratchElems = planBufferElements(plan, layout, call.count).scratch;
  VerifyBuffers buffers;
  for (int32_t r = 0; r < call.nRanks; ++r) {
    buffers.input.emplace_back(separateInput ? static_cast<size_t>(inputElements(call) * es) : 0);
    buffers.output.emplace_back(storageIsInput ? 0 : static_cast<size_t>(outputElements(call) * es));
    buffers.scratch.emplace_back(static_cast<size_t>(scratchElems * es));
    RankBuffers& b = buffers.pointers.emplace_back();
    const int64_t blockOffset = r * call.count * es;
    auto* in = separateInput ? buffers.input[r].data()
                             : buffers.output[r].data() + (call.collective == Collective::AllGather ? blockOffset : 0);
    b.input = in;
    b.output = storageIsInput ? in + blockOffset : buffers.output[r].data();
    b.scratch = buffers.scratch[r].data();
    for (size_t i = 0; i < inputs[r].size(); ++i) writeElement(call.dataType, in + i * es, inputs[r][i]);
  }
  return buffers;
}

void recordRun(CpuVerifyReport& report, const HostRun& run, const HostStaging& staging) {
  report.runSeconds = run.runSeconds;
  report.hang = run.hang;
  report.orderMismatch = run.orderMismatch;
  for (const StoppedTb& tb : run.stopped) report.blocked.push_back(tb.description);
  for (int32_t ring : staging.overrunRings()) {
    report.blocked.push_back("ring " + std::to_string(ring) + ": wrote past the end of the staging buffer");
  }
}

// Per rank: the output against the reference (only when the run completed: a run that stopped is
// reported by its stopped TBs, not by element noise), the canaries and, out of place, the input.
void checkRanks(CpuVerifyReport& report, const CollectiveCall& call, const RankOutputs& expected,
                const VerifyBuffers& buffers, const std::vector<std::vector<double>>& inputs, bool completed) {
  std::vector<const void*> outputs;
  for (const RankBuffers& b : buffers.pointers) outputs.push_back(b.output);
  const std::vector<RankComparison> compared =
      completed ? compareOutputs(call, expected, outputs) : std::vector<RankComparison>(inputs.size());
  for (int32_t r = 0; r < call.nRanks; ++r) {
    RankVerifyReport& rank = report.ranks.emplace_back();
    rank.rank = r;
    rank.compared = expected[r].has_value();
    rank.mismatches = compared[r].mismatches.count;
    rank.firstMismatches = compared[r].mismatches.first;
    auto flag = [&](const std::string& problem) {
      ++rank.mismatches;
      rank.firstMismatches.push_back(problem);
    };
    if (!buffers.input[r].canaryIntact()) flag("wrote past the end of the input buffer");
    if (!buffers.output[r].canaryIntact()) flag("wrote past the end of the output buffer");
    if (!buffers.scratch[r].canaryIntact()) flag("wrote past the end of the scratch buffer");
    if (!call.inPlace) {
      const ElementMismatches changed = compareElements(call.dataType, 0, inputs[r], buffers.pointers[r].input, "input", 0);
      if (changed.count > 0) flag("the input buffer was modified (input[" + std::to_string(changed.firstIndex) + "])");
    }
    rank.ok = completed && rank.mismatches == 0;
  }
}

CpuVerifyReport refusedReport(Status refusal) {
  CpuVerifyReport report;
  report.refusal = std::move(refusal);
  return report;
}

// The plan's layout and kernels (after the static checks when asked for), then, for a call it can
// run, its host build.
Expected<CompiledPlan> compileForCall(const Plan& plan, const VerifyOptions& options) {
  Targets targets;
  targets.staticChecks = options.staticChecks;
  targets.kernelGen = options.kernelGen;
  Expected<CompiledPlan> compiled = compilePlan(plan, targets);
  if (!compiled) return compiled;
  const CollectiveCall call = callOf(compiled->plan, compiled->layout, options);
  if (Status status = checkVerifiable(compiled->plan, compiled->layout, call); !status) return status;
  Targets host;
  host.hostKernels = true;
  if (Status status = buildTargets(*compiled, host); !status) return status;
  return compiled;
}

}  // namespace

std::string CpuVerifyReport::summary() const {
  std::ostringstream out;
  if (refused()) {
    out << "refused: " << refusal.message() << "\n";
    return out.str();
  }
  out << (ok ? "ok" : hang ? "HANG" : orderMismatch ? "ORDER MISMATCH" : "MISMATCH") << " (seed " << seed << ", "
      << microBatches << " micro-batches, " << stagingSlots << " staging slots, protocol " << protocolName(protocol)
      << ", " << runSeconds << " s)\n";
  for (const std::string& line : blocked) out << "  " << line << "\n";
  for (const RankVerifyReport& rank : ranks) {
    out << "  rank " << rank.rank << ": " << (rank.ok ? "ok" : rank.mismatches == 0 ? "did not complete" : "FAILED");
    if (!rank.compared) out << " (not the root: its output is unspecified)";
    if (rank.mismatches > 0) out << ", " << rank.mismatches << " wrong elements";
    out << "\n";
    for (const std::string& line : rank.firstMismatches) out << "    " << line << "\n";
  }
  return out.str();
}

uint64_t verifyMemoryLimit() { return physicalMemoryBytes() / 2; }

CpuVerifyReport verifyPlanOnCpu(const Plan& plan, const VerifyOptions& options) {
  Expected<CompiledPlan> compiled = compileForCall(plan, options);
  if (!compiled) return refusedReport(compiled.status());
  const KernelLayout& layout = compiled->layout;
  const CollectiveCall call = callOf(plan, layout, options);
  CpuVerifyReport report;
  report.buildCached = compiled->host->fromCache;

  report.seed = options.seed != 0 ? options.seed : freshSeed();
  const std::vector<std::vector<double>> inputs = randomInputs(call, report.seed);
  Expected<RankOutputs> expected = referenceOutputs(call, inputs);
  if (!expected) return refusedReport(expected.status());
  VerifyBuffers buffers = allocateBuffers(plan, layout, call, inputs);
  HostStaging staging(layout, callGeometry(plan, layout, call, options.chunkSize, options.stagingSlots, options.protocol));
  report.microBatches = staging.geometry().microBatches;
  report.protocol = staging.geometry().protocol;
  report.stagingSlots = staging.geometry().stagingSlots;
  // A buffered order (config.sendAhead) deadlocks on rings shallower than it needs: refused.
  if (int64_t{plan.config.sendAhead} * report.microBatches > report.stagingSlots) {
    return refusedReport(unsupported("the plan sends ahead by " + std::to_string(plan.config.sendAhead) +
                                     " chunk(s) per micro-batch, more than " + std::to_string(report.microBatches) +
                                     " micro-batches on rings of " + std::to_string(report.stagingSlots) +
                                     " slots hold"));
  }

  HostRunOptions runOptions;
  runOptions.timeoutSeconds = options.timeoutSeconds;
  Expected<HostRun> run = runPlanOnHost(*compiled->host, plan, layout, call, buffers.pointers, staging, runOptions);
  if (!run) return refusedReport(run.status());
  recordRun(report, *run, staging);
  checkRanks(report, call, *expected, buffers, inputs, run->completed);
  report.ok = run->completed && staging.overrunRings().empty();
  for (const RankVerifyReport& rank : report.ranks) report.ok = report.ok && rank.ok;
  return report;
}

}  // namespace tuccl
