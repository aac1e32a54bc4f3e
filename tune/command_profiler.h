// The command profiler: runs a benchmark command per configuration — how users tune real
// clusters (docs/tuning.md, "--profiler command"), e.g.
//   mpirun -np 16 all_reduce_perf -b {bytes} -e {bytes} -n {iters} -N {reps} -w 5 -c 0
// The configuration goes in as NCCL environment variables (ncclEnvironmentFor), the placeholders
// {bytes} / {size} (the workload size), {reps} (the resource r: repetitions, one result row each —
// nccl-tests' -N run cycles), {iters} (iterations per repetition; the resource r itself in a
// template without {reps}) and {<dimension>} (a value of the configuration) are substituted, and
// the nccl-tests output is parsed for time and busbw.
//
// In:  CommandProfilerOptions (template, size, iterations, timeout, extra environment).
// Out: Measurements — one sample per result row of the size: exactly r rows with {reps}; without
//      it, usually one. A failing command, a timeout (the process group is
//      ended), output without the result rows, or #wrong > 0 are failed Measurements whose error
//      quotes the tail of the output. profileDefault runs the command with no configuration
//      set (defaultEnvironment only): the system's own choice.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tune/profiler.h"

namespace tuccl {

struct CommandProfilerOptions {
  std::string commandTemplate;
  uint64_t bytes = 0;
  double timeoutSeconds = 300;
  bool inPlace = false;  ///< read the in-place half instead of the out-of-place one
  /// Set before the configuration's variables (which win on a clash).
  std::vector<std::pair<std::string, std::string>> environment;
  size_t maxOutputBytes = 8u << 20;  ///< output beyond this is dropped (the tail is kept)
  std::string shell = "/bin/sh";
  /// {iters} of a template that has {reps}: timed iterations per repetition (nccl-tests' -n).
  int64_t iterations = 20;
  /// The environment a configuration runs with; unset: ncclEnvironmentFor (NCCL's variables).
  std::function<std::vector<std::pair<std::string, std::string>>(const SearchSpace&, const Configuration&)>
      environmentFor;
  /// The environment of profileDefault's run (after `environment`); unset: nothing more.
  std::function<std::vector<std::pair<std::string, std::string>>()> defaultEnvironment;
};

/// NCCL's buffer for a protocol that makes NCCL's own chunk `chunkBytes`, so the chunk measured
/// through the buffer is the chunk the table serves as the v6 chunkSize. NCCL's chunk is
/// BUFFSIZE / NCCL_STEPS × chunkSteps of data (NCCL enqueue.cc computeColl; ecosystem-formats.md
/// "Simple: buffSize/8 × 4"): NCCL_STEPS 8 (nccl-net-abi.md); chunkSteps NCCL_STEPS/2 for Simple
/// ring, 1 otherwise; LL lines carry 8 data bytes in 16, LL128 lines 120 in 128. Rounded up.
uint64_t ncclBufferForChunk(Protocol protocol, bool ring, uint64_t chunkBytes);

/// The chunk sizes the command profiler may measure, per protocol, as search-space constraints:
/// at most the chunk of NCCL's default buffer (nccl-tuner-abi.md: Simple 4 MiB, LL 512 KiB, LL128
/// 4,915,200 B), since NCCL clamps a served chunkSize to the job's buffer; at least the chunk of a
/// 64th of it (NCCL documents no minimum buffer; this keeps each buffer at least 1/64 of its
/// default, far from a 256 B buffer NCCL may not run with). `ring`: every algorithm searched is
/// NCCL's ring (Simple ring chunks span 4 steps, so they may be 4 times larger).
std::vector<Constraint> ncclChunkConstraints(bool ring);

/// The NCCL environment of a configuration, in a fixed order:
///   protocol   -> NCCL_PROTO
///   algorithm  -> NCCL_ALGO, only for NCCL's own names (ring, tree, collnet_direct, collnet_chain,
///                 nvls, nvls_tree, pat; any case) — TuCCL algorithm programs mean nothing to NCCL
///   nChannels  -> NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS
///   nThreads   -> NCCL_LL128_NTHREADS for LL128, NCCL_NTHREADS otherwise
///   chunkBytes -> the protocol's buffer giving that chunk (ncclBufferForChunk): NCCL_LL_BUFFSIZE,
///                 NCCL_LL128_BUFFSIZE, NCCL_BUFFSIZE
/// Other dimensions (scheduler, ...) are not NCCL settings and reach the command only through
/// their {placeholders}.
std::vector<std::pair<std::string, std::string>> ncclEnvironmentFor(const SearchSpace& space,
                                                                   const Configuration& config);

/// libtuccl's environment of a configuration (the libtuccl profiler, tuccl-tune --profiler tuccl):
///   algorithm  -> TUCCL_ALGO (a built-in algorithm: ring, chain, binomial, direct)
///   protocol   -> TUCCL_PROTO
///   nChannels  -> TUCCL_NCHANNELS
///   chunkBytes -> TUCCL_CHUNK_SIZE
/// on top of tucclDefaultEnvironment.
std::vector<std::pair<std::string, std::string>> tucclEnvironmentFor(const SearchSpace& space,
                                                                    const Configuration& config);
/// libtuccl's built-in defaults: every setting above and a tuning table or runtime phase of the
/// caller's environment cleared (TUCCL_TUNER_TABLE, TUCCL_ADAPT=0; libtuccl reads an empty
/// variable as unset), and TUCCL_DEVICE=cpu unless the caller's environment names a device.
std::vector<std::pair<std::string, std::string>> tucclDefaultEnvironment();

/// Replaces every {name} by values.at(name); throws std::invalid_argument for an unknown or
/// unterminated placeholder.
std::string expandCommandTemplate(std::string_view text, const std::map<std::string, std::string>& values);

/// What running a shell command produced.
struct CommandRun {
  bool started = false;
  bool timedOut = false;
  int exitStatus = -1;  ///< when it exited
  int signal = 0;       ///< when a signal ended it
  std::string output;   ///< stdout and stderr, interleaved
  std::string error;    ///< why it could not start
  bool succeeded() const { return started && !timedOut && signal == 0 && exitStatus == 0; }
};
/// Runs `command` with `shell -c` in its own process group, with `environment` added to this
/// process's. The group is ended — SIGTERM, then SIGKILL after a grace of 3 s — after
/// `timeoutSeconds`, when the command exits (whatever it left running), and when this process gets
/// SIGINT, SIGTERM or SIGHUP while the command runs: the handler, installed only while commands
/// run, ends every running group and then lets the signal end this process as it would have.
CommandRun runShellCommand(const std::string& shell, const std::string& command,
                           const std::vector<std::pair<std::string, std::string>>& environment,
                           double timeoutSeconds, size_t maxOutputBytes);

class CommandProfiler : public Profiler {
 public:
  explicit CommandProfiler(CommandProfilerOptions options);
  std::string_view name() const override { return "command"; }
  Measurement profile(const SearchSpace& space, const Configuration& config, int64_t resource) override;
  bool hasDefault() const override { return true; }
  Measurement profileDefault(int64_t resource) override;

 private:
  Measurement measure(const std::map<std::string, std::string>& values,
                      const std::vector<std::pair<std::string, std::string>>& environment, int64_t resource);
  CommandProfilerOptions options_;
  bool repetitions_ = false;  ///< the template has {reps}
};

}  // namespace tuccl
