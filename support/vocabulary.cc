// Names of the shared vocabulary (vocabulary.h). Each enum has one table of canonical names; the
// parse functions also accept the aliases users and other projects write.
#include "support/vocabulary.h"

#include <array>
#include <cctype>
#include <string>

namespace tuccl {
namespace {

/// Lower case without '_', '-' and ' ', and without a leading "nccl" (ncclFloat32, ncclSum).
std::string normalise(std::string_view text, bool dropNcclPrefix) {
  std::string key;
  key.reserve(text.size());
  for (char c : text) {
    if (c == '_' || c == '-' || c == ' ') continue;
    key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (dropNcclPrefix && key.size() > 4 && key.compare(0, 4, "nccl") == 0) key.erase(0, 4);
  return key;
}

template <size_t N>
std::vector<std::string> allNames(const std::array<std::string_view, N>& names) {
  return {names.begin(), names.end()};
}

template <typename Enum, size_t N>
std::string_view nameIn(const std::array<std::string_view, N>& names, Enum value) {
  const auto index = static_cast<size_t>(value);
  return index < N ? names[index] : std::string_view("?");
}

struct Alias {
  std::string_view key;  ///< normalised spelling
  int value;
};

template <typename Enum, size_t N, size_t M>
std::optional<Enum> lookUp(std::string_view text, const std::array<std::string_view, N>& names,
                           const std::array<Alias, M>& aliases, bool dropNcclPrefix) {
  const std::string key = normalise(text, dropNcclPrefix);
  for (size_t i = 0; i < N; ++i)
    if (normalise(names[i], false) == key) return static_cast<Enum>(i);
  for (const Alias& alias : aliases)
    if (alias.key == key) return static_cast<Enum>(alias.value);
  return std::nullopt;
}

constexpr std::array<std::string_view, kCollectives> kCollectiveNames = {
    "Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "AllToAll"};
constexpr std::array<std::string_view, kProtocols> kProtocolNames = {"LL", "LL128", "Simple"};
constexpr std::array<std::string_view, kNcclAlgorithms> kNcclAlgorithmNames = {
    "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
constexpr std::array<std::string_view, kDataTypes> kDataTypeNames = {
    "float32", "float16", "bfloat16", "float64", "int32",      "int64",
    "uint8",   "int8",    "uint32",   "uint64",  "float8e4m3", "float8e5m2"};
constexpr std::array<int32_t, kDataTypes> kDataTypeSizes = {4, 2, 2, 8, 4, 8, 1, 1, 4, 8, 1, 1};
constexpr std::array<std::string_view, kReduceOps> kReduceOpNames = {"sum", "prod", "min", "max", "avg"};
constexpr std::array<std::string_view, kSchedulers> kSchedulerNames = {"hpds", "rr", "algorithm-level", "stage-level",
                                                                                 "as-written"};
constexpr std::array<std::string_view, kSchedulers> kSchedulerShortNames = {"hpds", "rr", "algorithm", "stage",
                                                                            "as-written"};
constexpr std::array<std::string_view, kExecutionLevels> kExecutionLevelNames = {"task", "stage", "algorithm"};
constexpr std::array<std::string_view, kTbPolicies> kTbPolicyNames = {"connection-based", "state-based", "single"};
constexpr std::array<std::string_view, kTbPolicies> kTbPolicyShortNames = {"connection", "state", "single"};
constexpr std::array<std::string_view, kBufferKinds> kBufferNames = {"input", "output", "scratch"};
constexpr std::array<std::string_view, kMscclStepTypes> kMscclStepTypeNames = {"s",    "r",   "rcs", "rrs", "rrc",
                                                                               "rrcs", "cpy", "re",  "nop"};

constexpr std::array<Alias, 0> kNoAliases{};
// NCCL's and common short spellings (ncclFloat, ncclHalf, ncclBfloat16, ncclDouble, ncclInt,
// ncclChar, ...) and nccl-tests' fp8 names.
constexpr std::array<Alias, 24> kDataTypeAliases = {
    {{"float", 0},  {"fp32", 0},  {"f32", 0},    {"half", 1},       {"fp16", 1},       {"f16", 1},
     {"bf16", 2},   {"double", 3}, {"fp64", 3},  {"f64", 3},        {"int", 4},        {"i32", 4},
     {"i64", 5},    {"u8", 6},    {"char", 7},   {"i8", 7},         {"u32", 8},        {"u64", 9},
     {"f8e4m3", 10}, {"fp8e4m3", 10}, {"e4m3", 10}, {"f8e5m2", 11}, {"fp8e5m2", 11}, {"e5m2", 11}}};
constexpr std::array<Alias, 2> kSchedulerAliases = {{{"roundrobin", 1}, {"msccl", 4}}};

}  // namespace

std::string_view collectiveName(Collective collective) { return nameIn(kCollectiveNames, collective); }
std::optional<Collective> parseCollective(std::string_view name) {
  return lookUp<Collective>(name, kCollectiveNames, kNoAliases, true);
}
bool hasRoot(Collective collective) { return collective == Collective::Broadcast || collective == Collective::Reduce; }
bool isReduction(Collective collective) {
  return collective == Collective::AllReduce || collective == Collective::ReduceScatter ||
         collective == Collective::Reduce;
}

std::string_view protocolName(Protocol protocol) { return nameIn(kProtocolNames, protocol); }
std::optional<Protocol> parseProtocol(std::string_view name) {
  return lookUp<Protocol>(name, kProtocolNames, kNoAliases, true);
}
std::vector<std::string> protocolNames() { return allNames(kProtocolNames); }

std::string_view ncclAlgorithmName(NcclAlgorithm algorithm) { return nameIn(kNcclAlgorithmNames, algorithm); }
std::optional<NcclAlgorithm> parseNcclAlgorithm(std::string_view text) {
  return lookUp<NcclAlgorithm>(text, kNcclAlgorithmNames, kNoAliases, true);
}

std::string_view dataTypeName(DataType type) { return nameIn(kDataTypeNames, type); }
std::optional<DataType> parseDataType(std::string_view name) {
  return lookUp<DataType>(name, kDataTypeNames, kDataTypeAliases, true);
}
std::vector<std::string> dataTypeNames() { return allNames(kDataTypeNames); }
int32_t dataTypeSize(DataType type) {
  const auto index = static_cast<size_t>(type);
  return index < kDataTypeSizes.size() ? kDataTypeSizes[index] : 0;
}

std::string_view reduceOpName(ReduceOp op) { return nameIn(kReduceOpNames, op); }
std::optional<ReduceOp> parseReduceOp(std::string_view name) {
  return lookUp<ReduceOp>(name, kReduceOpNames, kNoAliases, true);
}
std::vector<std::string> reduceOpNames() { return allNames(kReduceOpNames); }

std::string_view schedulerName(Scheduler scheduler) { return nameIn(kSchedulerNames, scheduler); }
std::string_view schedulerShortName(Scheduler scheduler) { return nameIn(kSchedulerShortNames, scheduler); }
std::vector<std::string> schedulerShortNames() { return allNames(kSchedulerShortNames); }
std::optional<Scheduler> parseScheduler(std::string_view name) {
  if (auto scheduler = lookUp<Scheduler>(name, kSchedulerNames, kSchedulerAliases, false)) return scheduler;
  return lookUp<Scheduler>(name, kSchedulerShortNames, kNoAliases, false);
}
ExecutionLevel executionLevelOf(Scheduler scheduler) {
  switch (scheduler) {
    case Scheduler::AlgorithmLevel:
    case Scheduler::AsWritten:
      return ExecutionLevel::Algorithm;
    case Scheduler::StageLevel:
      return ExecutionLevel::Stage;
    case Scheduler::Hpds:
    case Scheduler::RoundRobin:
      break;
  }
  return ExecutionLevel::Task;
}

std::string_view executionLevelName(ExecutionLevel level) { return nameIn(kExecutionLevelNames, level); }
std::optional<ExecutionLevel> parseExecutionLevel(std::string_view name) {
  return lookUp<ExecutionLevel>(name, kExecutionLevelNames, kNoAliases, false);
}

std::string_view tbPolicyName(TbPolicy policy) { return nameIn(kTbPolicyNames, policy); }
std::string_view tbPolicyShortName(TbPolicy policy) { return nameIn(kTbPolicyShortNames, policy); }
std::optional<TbPolicy> parseTbPolicy(std::string_view name) {
  if (auto policy = lookUp<TbPolicy>(name, kTbPolicyNames, kNoAliases, false)) return policy;
  return lookUp<TbPolicy>(name, kTbPolicyShortNames, kNoAliases, false);
}

std::string_view bufferName(BufferKind buffer) { return nameIn(kBufferNames, buffer); }
std::optional<BufferKind> parseBufferKind(std::string_view name) {
  return lookUp<BufferKind>(name, kBufferNames, kNoAliases, false);
}

std::string_view mscclStepTypeName(MscclStepType type) { return nameIn(kMscclStepTypeNames, type); }
std::optional<MscclStepType> parseMscclStepType(std::string_view name) {
  for (size_t i = 0; i < kMscclStepTypeNames.size(); ++i) {  // exact, as the runtimes' parsers compare
    if (name == kMscclStepTypeNames[i]) return static_cast<MscclStepType>(i);
  }
  return std::nullopt;
}

}  // namespace tuccl
