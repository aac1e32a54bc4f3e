// The vocabulary every stage shares: collective, protocol, datatype, reduction op, scheduler,
// execution level, TB policy and buffer kind, each one enum with one name function and one parse
// function. Strings live only at the edges (JSON, CSV, CLI, logs); inside, code compares enums. The
// ...Names() functions list the spellings of an enum in enum order, for what offers a choice of them
// (the tools' options, cli/cli.h).
//
// Dependency-free on purpose (only the standard library): the plan, the table, the plugins and
// the runtime all include it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tuccl {

/// The collectives. The first five carry NCCL's ncclFunc_t numbering (the tuner ABI's collType),
/// so a tuner value converts with a cast.
enum class Collective : uint8_t { Broadcast = 0, Reduce = 1, AllGather = 2, ReduceScatter = 3, AllReduce = 4, AllToAll = 5 };
inline constexpr int kCollectives = 6;
/// Collectives NCCL's tuner plugin is asked about (ncclFunc_t 0..4).
inline constexpr int kTunerCollectives = 5;

/// NCCL's protocols, with NCCL_PROTO_LL / LL128 / SIMPLE numbering.
enum class Protocol : uint8_t { LL = 0, LL128 = 1, Simple = 2 };
inline constexpr int kProtocols = 3;

/// NCCL's algorithms, numbered as the first index of the tuner's cost table (nccl-tuner-abi.md).
enum class NcclAlgorithm : uint8_t { Tree = 0, Ring, CollNetDirect, CollNetChain, Nvls, NvlsTree, Pat };
inline constexpr int kNcclAlgorithms = 7;

/// Element types of collective calls.
enum class DataType : uint8_t {
  Float32, Float16, BFloat16, Float64, Int32, Int64, Uint8, Int8, Uint32, Uint64, Float8E4M3, Float8E5M2
};
inline constexpr int kDataTypes = 12;

/// Reduction operations.
enum class ReduceOp : uint8_t { Sum, Prod, Min, Max, Avg };
inline constexpr int kReduceOps = 5;

/// How the pipeline of a plan was built (ResCCL §4.3 and its baselines, docs/scheduling.md).
/// AsWritten: an MSCCL XML file's own thread blocks, channels and step order at algorithm level
/// (scheduler/as_written.h); it needs the file's schedule.
enum class Scheduler : uint8_t { Hpds, RoundRobin, AlgorithmLevel, StageLevel, AsWritten };
inline constexpr int kSchedulers = 5;

/// Task-level: a TB runs one entry for all micro-batches before the next (ResCCL). Stage- and
/// algorithm-level: the TB replays a block of entries per micro-batch (ResCCL Eq. 3, Eq. 4).
enum class ExecutionLevel : uint8_t { Task, Stage, Algorithm };
inline constexpr int kExecutionLevels = 3;

/// Thread-block allocation (ResCCL §4.4); Single: one TB per rank runs all its connections, for
/// small calls on the CPU device, where a TB is a thread and waking many costs more than the data.
enum class TbPolicy : uint8_t { ConnectionBased, StateBased, Single };
inline constexpr int kTbPolicies = 3;

/// The three buffers of a rank.
enum class BufferKind : uint8_t { Input, Output, Scratch };
inline constexpr int kBufferKinds = 3;

/// The step types of MSCCL's interpreter (msccl_kernel.cu): what an MSCCL XML <step> does.
enum class MscclStepType : uint8_t {
  Send, Recv, RecvCopySend, RecvReduceSend, RecvReduceCopy, RecvReduceCopySend, Copy, Reduce, Nop
};
inline constexpr int kMscclStepTypes = 9;

/// "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "AllToAll" (NCCL's spelling).
std::string_view collectiveName(Collective collective);
/// Accepts NCCL, MSCCL and ResCCLang spellings, case-insensitively and ignoring '_', '-' and ' ':
/// "allreduce", "Allreduce", "all_reduce", "reduce_scatter", "AllToAll", ...
std::optional<Collective> parseCollective(std::string_view name);
/// Whether the collective has a root rank (Broadcast, Reduce).
bool hasRoot(Collective collective);
/// Whether the collective combines data of several ranks (AllReduce, ReduceScatter, Reduce).
bool isReduction(Collective collective);

/// "LL", "LL128", "Simple".
std::string_view protocolName(Protocol protocol);
/// Case-insensitive: "LL", "ll128", "SIMPLE", "simple", ...
std::optional<Protocol> parseProtocol(std::string_view name);
/// protocolName of every protocol: "LL", "LL128", "Simple".
std::vector<std::string> protocolNames();

/// "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT" (NCCL's spelling).
std::string_view ncclAlgorithmName(NcclAlgorithm algorithm);
/// The names above, case-insensitively.
std::optional<NcclAlgorithm> parseNcclAlgorithm(std::string_view text);

/// "float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "int8", "uint32",
/// "uint64", "float8e4m3", "float8e5m2".
std::string_view dataTypeName(DataType type);
/// The names above and NCCL's ("float", "half", "bf16", "double", "int", "char", "ncclFloat32",
/// "ncclFloat8e4m3", ...) and nccl-tests' ("f8e4m3", "f8e5m2").
std::optional<DataType> parseDataType(std::string_view name);
/// dataTypeName of every datatype: "float32", ..., "float8e5m2".
std::vector<std::string> dataTypeNames();
/// Bytes of one element.
int32_t dataTypeSize(DataType type);

/// "sum", "prod", "min", "max", "avg".
std::string_view reduceOpName(ReduceOp op);
/// The names above and NCCL's ("ncclSum", ...), case-insensitively.
std::optional<ReduceOp> parseReduceOp(std::string_view name);
/// reduceOpName of every op: "sum", "prod", "min", "max", "avg".
std::vector<std::string> reduceOpNames();

/// "hpds", "rr", "algorithm-level", "stage-level", "as-written".
std::string_view schedulerName(Scheduler scheduler);
/// The spelling the tools' --scheduler takes: "hpds", "rr", "algorithm", "stage", "as-written".
std::string_view schedulerShortName(Scheduler scheduler);
/// schedulerShortName of every scheduler.
std::vector<std::string> schedulerShortNames();
/// Both names above, and "round-robin", "msccl" (as-written).
std::optional<Scheduler> parseScheduler(std::string_view name);
/// The execution level a scheduler's pipeline runs at.
ExecutionLevel executionLevelOf(Scheduler scheduler);

/// "task", "stage", "algorithm".
std::string_view executionLevelName(ExecutionLevel level);
std::optional<ExecutionLevel> parseExecutionLevel(std::string_view name);

/// "connection-based", "state-based", "single".
std::string_view tbPolicyName(TbPolicy policy);
/// The spelling the tools' --tb-alloc takes: "connection", "state", "single".
std::string_view tbPolicyShortName(TbPolicy policy);
/// Both names above.
std::optional<TbPolicy> parseTbPolicy(std::string_view name);

/// "input", "output", "scratch".
std::string_view bufferName(BufferKind buffer);
std::optional<BufferKind> parseBufferKind(std::string_view name);

/// The XML spelling: "s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop" (exact case).
std::string_view mscclStepTypeName(MscclStepType type);
std::optional<MscclStepType> parseMscclStepType(std::string_view name);

}  // namespace tuccl
