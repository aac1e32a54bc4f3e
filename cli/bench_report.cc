// nccl-tests' command line and output (bench_report.h).
#include "cli/bench_report.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>

#include <unistd.h>

#include "support/bus_bandwidth.h"
#include "support/text_values.h"

namespace tuccl::bench {
namespace {

/// What -d all runs, in nccl-tests' order: the datatypes libtuccl's kernels support but fp8, whose
/// sums of the check data (bench_check.h) round beyond the check's tolerance (-d f8e4m3 and
/// -d f8e5m2 run them alone).
constexpr std::array<DataType, 10> kAllTypes = {DataType::Int8,    DataType::Uint8,   DataType::Int32,
                                                DataType::Uint32,  DataType::Int64,   DataType::Uint64,
                                                DataType::Float16, DataType::Float32, DataType::Float64,
                                                DataType::BFloat16};
/// nccl-tests' order of -o all.
constexpr std::array<ReduceOp, 5> kAllOps = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min,
                                             ReduceOp::Avg};

/// What COLLECTIVE may be, for the errors.
constexpr std::string_view kCollectiveChoices =
    "allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv or alltoallv";

/// A flag of nccl-tests' command line (its getopt_long table).
struct Flag {
  char shortName;
  std::string_view longName;
  bool takesValue;
};
constexpr std::array<Flag, 17> kFlags = {{{'t', "nthreads", true},
                                          {'g', "ngpus", true},
                                          {'b', "minbytes", true},
                                          {'e', "maxbytes", true},
                                          {'i', "stepbytes", true},
                                          {'f', "stepfactor", true},
                                          {'n', "iters", true},
                                          {'m', "agg_iters", true},
                                          {'w', "warmup_iters", true},
                                          {'c', "check", true},
                                          {'o', "op", true},
                                          {'d', "datatype", true},
                                          {'r', "root", true},
                                          {'z', "blocking", true},
                                          {'a', "average", true},
                                          {'N', "run_cycles", true},
                                          {'h', "help", false}}};

const Flag* findShort(char name) {
  for (const Flag& flag : kFlags)
    if (flag.shortName == name) return &flag;
  return nullptr;
}

const Flag* findLong(std::string_view name) {
  for (const Flag& flag : kFlags)
    if (flag.longName == name) return &flag;
  return nullptr;
}

std::string flagLabel(const Flag& flag) {
  return "-" + std::string(1, flag.shortName) + " (--" + std::string(flag.longName) + ")";
}

Status flagError(const Flag& flag, std::string_view value, std::string_view why) {
  return makeError(ErrorCode::InvalidArgument, "option " + flagLabel(flag) + ": invalid value '" +
                                                   std::string(value) + "': " + std::string(why));
}

Expected<int64_t> parseInteger(const Flag& flag, std::string_view text, int64_t min, int64_t max) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return flagError(flag, text, "not an integer");
  }
  if (value < min || value > max) {
    const std::string range = max >= std::numeric_limits<int32_t>::max()
                                  ? "at least " + std::to_string(min)
                                  : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    return flagError(flag, text, "must be " + range);
  }
  return value;
}

/// The largest message a size flag takes: beyond any GPU's or host's buffer (the buffers are
/// allocated from it).
constexpr uint64_t kMaxBenchBytes = uint64_t{1} << 40;
/// The most sizes one run walks (each is a line of output and a benchmark loop).
constexpr uint64_t kMaxBenchSizes = 65'536;

Expected<uint64_t> parseSize(const Flag& flag, std::string_view text) {
  Expected<uint64_t> bytes = parseByteSizeInRange(text, 0, kMaxBenchBytes);
  if (!bytes) return flagError(flag, text, bytes.status().message());
  return bytes;
}

// One name, a comma-separated list of distinct names, or "all": what -d and -o run, in the
// order given ("all": `every`).
template <typename T, typename ParseOne>
Expected<std::vector<T>> parseNameList(const Flag& flag, std::string_view text, std::span<const T> every,
                                       ParseOne parseOne, const std::string& choices) {
  if (equalsIgnoreCase(text, "all")) return std::vector<T>(every.begin(), every.end());
  Expected<std::vector<std::string>> names = splitDistinctList(text);
  if (!names) return flagError(flag, text, names.status().message() + "; " + choices);
  std::vector<T> values;
  for (const std::string& name : *names) {
    std::optional<T> value = parseOne(name);
    if (!value) return flagError(flag, text, "'" + name + "' is not one; " + choices);
    if (std::find(values.begin(), values.end(), *value) != values.end()) {
      return flagError(flag, text, "'" + name + "' names one already listed");
    }
    values.push_back(*value);
  }
  return values;
}

Expected<std::vector<DataType>> parseTypes(const Flag& flag, std::string_view text) {
  std::string names;
  for (DataType type : kAllTypes) names += std::string(ncclTestsTypeName(type)) + ", ";
  names += std::string(ncclTestsTypeName(DataType::Float8E4M3)) + ", " +
           std::string(ncclTestsTypeName(DataType::Float8E5M2)) + ", ";
  return parseNameList<DataType>(flag, text, kAllTypes, parseDataType,
                                 "libtuccl's datatypes are " + names + "a comma-separated list of them, or all " +
                                     "(all but fp8)");
}

Expected<std::vector<ReduceOp>> parseOps(const Flag& flag, std::string_view text) {
  return parseNameList<ReduceOp>(flag, text, kAllOps, parseReduceOp,
                                 "the operations are sum, prod, max, min, avg, a comma-separated list of them, or all");
}

/// Applies one flag and its value to `options`.
Status applyFlag(const Flag& flag, std::string_view value, BenchOptions& options) {
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  auto setInt = [&](int32_t& field, int64_t min, int64_t max) -> Status {
    Expected<int64_t> parsed = parseInteger(flag, value, min, max);
    if (!parsed) return parsed.status();
    field = static_cast<int32_t>(*parsed);
    return {};
  };
  auto setSize = [&](uint64_t& field) -> Status {
    Expected<uint64_t> parsed = parseSize(flag, value);
    if (!parsed) return parsed.status();
    field = *parsed;
    return {};
  };
  switch (flag.shortName) {
    case 't':
    case 'g': {
      Expected<int64_t> parsed = parseInteger(flag, value, 1, kIntMax);
      if (!parsed) return parsed.status();
      if (*parsed != 1)
        return flagError(flag, value, "one rank per process (launch more processes): only 1 is supported");
      return {};
    }
    case 'b':
      return setSize(options.minBytes);
    case 'e':
      return setSize(options.maxBytes);
    case 'i':
      return setSize(options.stepBytes);
    case 'f': {
      Expected<int64_t> factor = parseInteger(flag, value, 1, kIntMax);
      if (!factor) return factor.status();
      options.stepFactor = static_cast<uint64_t>(*factor);
      return {};
    }
    case 'n':
      return setInt(options.iters, 1, kIntMax);
    case 'm':
      return setInt(options.aggIters, 1, kIntMax);
    case 'N': {
      Expected<int64_t> cycles = parseInteger(flag, value, 0, kIntMax);
      if (!cycles) return cycles.status();
      if (*cycles == 0)
        return flagError(flag, value, "0 (nccl-tests' endless run) is not supported: give the number of cycles");
      options.runCycles = static_cast<int32_t>(*cycles);
      return {};
    }
    case 'w':
      return setInt(options.warmupIters, 0, kIntMax);
    case 'c':
      return setInt(options.checkIters, 0, kIntMax);
    case 'o': {
      Expected<std::vector<ReduceOp>> ops = parseOps(flag, value);
      if (!ops) return ops.status();
      options.ops = std::move(ops).value();
      return {};
    }
    case 'd': {
      Expected<std::vector<DataType>> types = parseTypes(flag, value);
      if (!types) return types.status();
      options.types = std::move(types).value();
      return {};
    }
    case 'r':
      if (equalsIgnoreCase(value, "all")) {
        options.root = -1;
        return {};
      }
      return setInt(options.root, -1, kIntMax);
    case 'z': {
      int32_t blocking = 0;
      if (Status status = setInt(blocking, 0, 1); !status) return status;
      options.blocking = blocking != 0;
      return {};
    }
    case 'a': {
      int32_t average = 0;
      if (Status status = setInt(average, 0, 3); !status) return status;
      options.average = static_cast<TimeAverage>(average);
      return {};
    }
    default:
      break;
  }
  options.help = true;  // -h
  return {};
}

/// Cross-flag checks, after every flag was read.
Status checkOptions(const BenchOptions& options) {
  if (options.minBytes > options.maxBytes) {
    return makeError(ErrorCode::InvalidArgument,
                     "option -b (--minbytes): " + std::to_string(options.minBytes) +
                         " is larger than -e (--maxbytes) " + std::to_string(options.maxBytes));
  }
  if (options.stepFactor <= 1 && options.stepBytes == 0 && options.minBytes < options.maxBytes) {
    return makeError(ErrorCode::InvalidArgument,
                     "option -i (--stepbytes): 0 never reaches -e (--maxbytes); give -i > 0 or -f > 1");
  }
  if (options.minBytes < options.maxBytes) {
    // How many sizes the walk makes: (max - min) / step + 1, or log(max / min) / log(factor) + 1.
    const double count =
        options.stepFactor > 1
            ? std::floor(std::log(static_cast<double>(options.maxBytes) / static_cast<double>(std::max<uint64_t>(options.minBytes, 1))) /
                         std::log(static_cast<double>(options.stepFactor))) + 1
            : std::floor(static_cast<double>(options.maxBytes - options.minBytes) / static_cast<double>(options.stepBytes)) + 1;
    if (options.stepFactor <= 1 && count > static_cast<double>(kMaxBenchSizes)) {
      const uint64_t step = (options.maxBytes - options.minBytes + kMaxBenchSizes - 2) / (kMaxBenchSizes - 1);
      return makeError(ErrorCode::InvalidArgument,
                       "option -i (--stepbytes): " + formatBytesForPeople(options.stepBytes) + " steps make " +
                           formatNumberForPeople(count) + " sizes from " + formatBytesForPeople(options.minBytes) +
                           " to " + formatBytesForPeople(options.maxBytes) + "; at most " +
                           formatNumberForPeople(static_cast<double>(kMaxBenchSizes)) +
                           " are allowed: use -i of at least " + std::to_string(step) + " or -f");
    }
  }
  if (options.blocking && options.aggIters > 1) {
    return makeError(ErrorCode::InvalidArgument,
                     "option -z (--blocking): a call cannot be waited for inside a group "
                     "of -m (--agg_iters) " +
                         std::to_string(options.aggIters) + " calls");
  }
  return {};
}

/// Splits one argument into a flag and, when attached (-b8, --minbytes=8), its value.
Expected<std::pair<const Flag*, std::optional<std::string>>> splitFlag(const std::string& arg) {
  const Flag* flag = nullptr;
  std::optional<std::string> attached;
  if (arg.starts_with("--")) {
    const size_t equals = arg.find('=');
    flag = findLong(
        std::string_view(arg).substr(2, equals == std::string::npos ? std::string::npos : equals - 2));
    if (equals != std::string::npos) attached = arg.substr(equals + 1);
  } else {
    flag = findShort(arg[1]);
    if (arg.size() > 2) attached = arg.substr(2);
  }
  if (flag == nullptr)
    return makeError(ErrorCode::InvalidArgument, "unknown option '" + arg + "' (see --help)");
  if (!flag->takesValue && attached) {
    return makeError(ErrorCode::InvalidArgument, "option " + flagLabel(*flag) + " takes no value");
  }
  return std::pair{flag, attached};
}

std::string printed(const char* format, auto... values) {
  std::array<char, 512> line{};
  const int n = std::snprintf(line.data(), line.size(), format, values...);
  return std::string(line.data(), static_cast<size_t>(n < 0 ? 0 : std::min<int>(n, line.size() - 1)));
}

}  // namespace

Expected<BenchOptions> parseBenchOptions(std::span<const std::string> args) {
  BenchOptions options;
  bool haveCollective = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      if (haveCollective) return makeError(ErrorCode::InvalidArgument, "unexpected argument '" + arg + "'");
      std::optional<BenchCollective> collective = parseBenchCollective(arg);
      if (!collective) {
        return makeError(ErrorCode::InvalidArgument,
                         "unknown collective '" + arg + "': give " + std::string(kCollectiveChoices));
      }
      options.collective = *collective;
      haveCollective = true;
      continue;
    }
    auto split = splitFlag(arg);
    if (!split) return split.status();
    auto [flag, value] = *split;
    if (flag->takesValue && !value) {
      if (i + 1 == args.size()) {
        return makeError(ErrorCode::InvalidArgument, "option " + flagLabel(*flag) + ": missing value");
      }
      value = args[++i];
    }
    if (Status status = applyFlag(*flag, value.value_or(""), options); !status) return status;
  }
  if (options.help) return options;
  if (!haveCollective) {
    return makeError(ErrorCode::InvalidArgument, "missing COLLECTIVE: " + std::string(kCollectiveChoices));
  }
  if (Status status = checkOptions(options); !status) return status;
  return options;
}

std::string benchUsage(std::string_view program) {
  const std::string p(program);
  return "Usage: " + p +
         " COLLECTIVE [flags]\n"
         "  COLLECTIVE: allreduce | allgather | reducescatter | broadcast | reduce | alltoall |\n"
         "              sendrecv | alltoallv\n"
         "    sendrecv   nccl-tests' sendrecv_perf: in one group each rank r sends count = SIZE / type size\n"
         "               elements to rank (r+1) % n and receives as many from (r-1+n) % n;\n"
         "               algbw = SIZE / time, busbw = algbw\n"
         "    alltoallv  alltoall's sizes (n x count/n elements sent and received per rank, count/n\n"
         "               printed) with counts that vary by pair: ranks i and j exchange part\n"
         "               (i + j) % n of the n x count/n elements split in proportion 1 : 2 : ... : n,\n"
         "               so every rank still sends and receives n x count/n; busbw = algbw x (n-1)/n\n"
         "    In place, sendrecv and alltoallv send from and receive into the one receive buffer; that\n"
         "    half is timed but not checked (#wrong N/A, as nccl-tests' sendrecv). Both ignore -o and -r.\n"
         "Flags (nccl-tests'; sizes accept K, M, G suffixes):\n"
         "  -b, --minbytes SIZE      smallest size (default 32M)\n"
         "  -e, --maxbytes SIZE      largest size (default 32M)\n"
         "  -i, --stepbytes SIZE     increment between sizes (default 1M)\n"
         "  -f, --stepfactor N       multiplication factor between sizes (default: use -i)\n"
         "  -n, --iters N            timed iterations per size (default 20)\n"
         "  -w, --warmup_iters N     untimed warm-up iterations (default 1)\n"
         "  -m, --agg_iters N        calls aggregated per iteration in one group (default 1)\n"
         "  -N, --run_cycles N       run the series of sizes N times, a row per size each time (default 1)\n"
         "  -c, --check N            checked iterations per size; 0 skips the check (default 1)\n"
         "  -o, --op OP              sum, prod, max, min, avg, a list (sum,max) or all (default sum)\n"
         "  -d, --datatype TYPE      uint8, int32, int64, half, float, double, bfloat16, a list\n"
         "                           (float,bfloat16) or all (default float)\n"
         "  -r, --root N             root of broadcast and reduce; -1 or all: every rank (default 0)\n"
         "  -z, --blocking 0|1       wait for completion and barrier after each call (default 0)\n"
         "  -a, --average 0..3       time reported: 0 rank 0, 1 mean, 2 min, 3 max over ranks (default 1)\n"
         "  -t, --nthreads 1         threads per process (only 1)\n"
         "  -g, --ngpus 1            devices per thread (only 1)\n"
         "  -h, --help               this text\n";
}

Status checkRoot(const BenchOptions& options, int32_t nRanks) {
  if (!benchHasRoot(options.collective) || options.root < nRanks) return {};
  return makeError(ErrorCode::InvalidArgument, "option -r (--root): root " + std::to_string(options.root) +
                                                   " is not a rank of the " + std::to_string(nRanks) +
                                                   "-rank communicator");
}

std::vector<uint64_t> benchSizes(const BenchOptions& options) {
  std::vector<uint64_t> sizes;
  for (uint64_t size = options.minBytes; size <= options.maxBytes;) {
    sizes.push_back(size);
    const uint64_t step = options.stepFactor > 1 ? size * (options.stepFactor - 1) : options.stepBytes;
    if (step == 0 || size > std::numeric_limits<uint64_t>::max() - step) break;  // 0 B × factor, or overflow
    if (options.stepFactor > 1 && size > std::numeric_limits<uint64_t>::max() / options.stepFactor) break;
    size += step;
  }
  return sizes;
}

std::vector<int32_t> benchRoots(const BenchOptions& options, int32_t nRanks) {
  if (!benchHasRoot(options.collective)) return {-1};
  if (options.root >= 0) return {options.root};
  std::vector<int32_t> roots;
  for (int32_t r = 0; r < nRanks; ++r) roots.push_back(r);
  return roots;
}

std::vector<std::optional<ReduceOp>> benchOps(const BenchOptions& options) {
  if (!benchIsReduction(options.collective)) return {std::nullopt};
  return std::vector<std::optional<ReduceOp>>(options.ops.begin(), options.ops.end());
}

CollectiveCounts collectiveCounts(BenchCollective what, uint64_t bytes, int32_t typeSize, int32_t nRanks) {
  const uint64_t count = bytes / static_cast<uint64_t>(typeSize);
  const auto n = static_cast<uint64_t>(nRanks);
  CollectiveCounts c;
  if (std::optional<PeerPattern> pattern = what.pattern()) {
    switch (*pattern) {
      case PeerPattern::SendRecv:
        c.send = c.recv = c.param = count;
        break;
      case PeerPattern::AllToAllv:
        c.send = c.recv = count / n * n;
        c.param = count / n;
        break;
    }
    return c;
  }
  switch (*what.collective()) {
    case Collective::AllGather:
      c.send = c.param = c.sendInPlaceOffset = count / n;
      c.recv = count / n * n;
      break;
    case Collective::ReduceScatter:
      c.send = count / n * n;
      c.recv = c.param = c.recvInPlaceOffset = count / n;
      break;
    case Collective::AllToAll:
      c.send = c.recv = count / n * n;
      c.param = count / n;
      break;
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::Reduce:
      c.send = c.recv = c.param = count;
      break;
  }
  return c;
}

Bandwidths bandwidths(BenchCollective what, uint64_t paramCount, int32_t typeSize, int32_t nRanks,
                      double seconds) {
  double bytes = static_cast<double>(paramCount) * typeSize;
  // SendRecv moves its count at factor 1 (nccl-tests' SendRecvGetBw); AllToAllv is counted as
  // AllToAll, whose sizes it has.
  const std::optional<Collective> collective = what.pattern() == PeerPattern::AllToAllv
                                                   ? std::optional<Collective>(Collective::AllToAll)
                                                   : what.collective();
  if (collective == Collective::AllGather || collective == Collective::ReduceScatter ||
      collective == Collective::AllToAll) {
    bytes *= nRanks;
  }
  Bandwidths bw;
  if (seconds > 0) bw.algGBps = bytes / 1.0e9 / seconds;
  bw.busGBps = bw.algGBps * (collective ? busBandwidthFactor(*collective, nRanks) : 1.0);
  return bw;
}

uint64_t allToAllvPairCount(uint64_t block, int32_t nRanks, int32_t from, int32_t to) {
  const auto n = static_cast<uint64_t>(nRanks);
  const uint64_t total = block * n;
  const uint64_t s = (static_cast<uint64_t>(from) + static_cast<uint64_t>(to)) % n;
  // F(k) = floor(total × k(k+1) / (n(n+1))), exactly: 128-bit products (k(k+1) < n(n+1) < 2^64).
  __extension__ using Wide = unsigned __int128;
  const Wide whole = static_cast<Wide>(n) * (n + 1);
  auto cumulative = [&](uint64_t k) {
    return static_cast<uint64_t>(static_cast<Wide>(total) * (static_cast<Wide>(k) * (k + 1)) / whole);
  };
  return cumulative(s + 1) - cumulative(s);
}

PeerLayout allToAllvLayout(uint64_t block, int32_t nRanks, int32_t rank) {
  PeerLayout layout;
  size_t at = 0;
  for (int32_t peer = 0; peer < nRanks; ++peer) {
    const auto count = static_cast<size_t>(allToAllvPairCount(block, nRanks, rank, peer));
    layout.sendCounts.push_back(count);
    layout.sendDispls.push_back(at);
    at += count;
  }
  // Symmetric: what a rank receives from a peer is what it sends it, at the same place.
  layout.recvCounts = layout.sendCounts;
  layout.recvDispls = layout.sendDispls;
  return layout;
}

std::string benchCollectiveName(BenchCollective what) {
  if (std::optional<PeerPattern> pattern = what.pattern())
    return *pattern == PeerPattern::SendRecv ? "sendrecv" : "alltoallv";
  return toLowerCase(collectiveName(*what.collective()));
}

std::optional<BenchCollective> parseBenchCollective(std::string_view name) {
  std::string plain;
  for (char c : name)
    if (c != '_') plain += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (plain == "sendrecv") return PeerPattern::SendRecv;
  if (plain == "alltoallv") return PeerPattern::AllToAllv;
  if (std::optional<Collective> collective = parseCollective(name)) return *collective;
  return std::nullopt;
}

bool benchHasRoot(BenchCollective what) { return what.collective() && hasRoot(*what.collective()); }
bool benchIsReduction(BenchCollective what) { return what.collective() && isReduction(*what.collective()); }
bool checksInPlace(BenchCollective what) { return what.collective().has_value(); }

std::string_view ncclTestsTypeName(DataType type) {
  switch (type) {
    case DataType::Float32:
      return "float";
    case DataType::Float16:
      return "half";
    case DataType::BFloat16:
      return "bfloat16";
    case DataType::Float64:
      return "double";
    case DataType::Int32:
      return "int32";
    case DataType::Int64:
      return "int64";
    case DataType::Uint8:
      return "uint8";
    case DataType::Int8:
      return "int8";
    case DataType::Uint32:
      return "uint32";
    case DataType::Uint64:
      return "uint64";
    case DataType::Float8E4M3:
      return "f8e4m3";
    case DataType::Float8E5M2:
      return "f8e5m2";
  }
  return "?";
}

std::string_view ncclTestsOpName(std::optional<ReduceOp> op) { return op ? reduceOpName(*op) : "none"; }

uint64_t rankHostBytes(const BenchOptions& options) {
  const uint64_t largest = std::max<uint64_t>(options.maxBytes, 1);
  return largest > std::numeric_limits<uint64_t>::max() / 2 ? std::numeric_limits<uint64_t>::max() : 2 * largest;
}

uint64_t availableHostBytes() {
  if (std::FILE* info = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, info) != nullptr) {
      found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    }
    std::fclose(info);
    if (found) return static_cast<uint64_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), pageBytes = sysconf(_SC_PAGESIZE);
  return pages > 0 && pageBytes > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageBytes) : 0;
}

Status checkHostMemory(const BenchOptions& options, uint64_t available) {
  const uint64_t need = rankHostBytes(options);
  if (available == 0 || need <= available) return {};
  return makeError(ErrorCode::InvalidArgument,
                   "-e " + formatByteSize(options.maxBytes) + ": one rank's send and receive buffers need " +
                       formatBytesForPeople(need) + " of host memory, and this machine has " +
                       formatBytesForPeople(available) + " available");
}

std::string formatRunHeader(const BenchOptions& options) {
  const bool factor = options.stepFactor > 1;
  std::string text = printed(
      "# nThread %d nGpus %d minBytes %llu maxBytes %llu step: %llu(%s) warmup iters: %d iters: %d agg "
      "iters: %d "
      "validation: %d graph: %d\n",
      options.nThreads, options.nGpus, static_cast<unsigned long long>(options.minBytes),
      static_cast<unsigned long long>(options.maxBytes),
      static_cast<unsigned long long>(factor ? options.stepFactor : options.stepBytes),
      factor ? "factor" : "bytes", options.warmupIters, options.iters, options.aggIters, options.checkIters,
      0);
  if (options.blocking)
    text += "# Blocking Enabled: wait for completion and barrier after each collective \n";
  return text + "#\n";
}

std::string formatDevices(std::span<const RankInfo> ranks) {
  std::string text = "# Using devices\n";
  for (const RankInfo& r : ranks) {
    text += printed("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", r.rank, 0, r.pid,
                    r.host.c_str(), r.device, r.busId.c_str(), r.deviceName.c_str());
  }
  return text + "#\n";
}

std::string formatColumnHeader() {
  return printed(
             "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
             "", "", "", "", "") +
         printed("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
                 "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
                 "#wrong") +
         printed("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)",
                 "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

std::string formatRowStart(uint64_t bytes, uint64_t count, DataType type, std::optional<ReduceOp> op,
                           int32_t root) {
  return printed("%12llu  %12llu  %8s  %6s  %6i", static_cast<unsigned long long>(bytes),
                 static_cast<unsigned long long>(count), std::string(ncclTestsTypeName(type)).c_str(),
                 std::string(ncclTestsOpName(op)).c_str(), root);
}

std::string formatTime(double us) {
  if (us >= 10000.0) return printed("%7.0f", us);
  if (us >= 100.0) return printed("%7.1f", us);
  return printed("%7.2f", us);
}

std::string formatHalf(double timeUs, const Bandwidths& bw, std::optional<int64_t> wrong) {
  const std::string time = formatTime(timeUs);
  if (!wrong) return printed("  %7s  %6.2f  %6.2f  %5s", time.c_str(), bw.algGBps, bw.busGBps, "N/A");
  return printed("  %7s  %6.2f  %6.2f  %5g", time.c_str(), bw.algGBps, bw.busGBps,
                 static_cast<double>(*wrong));
}

void BenchSummary::add(double busGBps, std::optional<int64_t> wrong) {
  busSum_ += busGBps;
  ++halves_;
  wrong_ += wrong.value_or(0);
}

std::string BenchSummary::formatFooter() const {
  return printed("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong_),
                 wrong_ != 0 ? "FAILED" : "OK") +
         printed("# Avg bus bandwidth    : %g \n", averageBusGBps()) + "#\n";
}

}  // namespace tuccl::bench
