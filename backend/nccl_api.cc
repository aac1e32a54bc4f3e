// libtuccl-nccl.so: NCCL's C API on top of libtuccl, so an NCCL program runs on TuCCL by
// LD_PRELOAD or by linking it in place of libnccl (design.md "libtuccl").
//
// Every function of the nccl.h it is built against (NCCL 2.28: 40 functions) is exported twice,
// as ncclX and as its profiling twin pncclX (NCCL's PROFAPI scheme, nccl-api.md), both the same
// code. Communicators are TuCCL's; a TuCCL handle never reaches the real NCCL. Each function is
//
// - served by libtuccl: unique ids, every init (ncclCommInitRankConfig and ...Scalable keep
//   ncclConfig_t's blocking, commName and splitShare; its tuning fields are TuCCL's to decide),
//   ncclCommSplit, ncclCommShrink, ncclCommFinalize, destroy, abort, the queries and errors;
//   reductions (AllReduce, ReduceScatter, Reduce) of every datatype (kTucclReducedTypes: all 12,
//   fp8 included) with every operator, PreMulSum ones included (ncclRedOpCreatePreMulSum and
//   ncclRedOpDestroy make and end libtuccl's, per communicator); data movement (AllGather,
//   Broadcast, Bcast, AlltoAll, Gather, Scatter, Send, Recv) of every datatype; groups.
//   ncclCommRevoke stops the communicator's work (TuCCL's abort) and keeps the handle for
//   ncclCommDestroy. Registration and windows are accepted hints (TuCCL copies through its staging:
//   a NULL handle or window). ncclMemAlloc/ncclMemFree take device memory from the CUDA driver.
//   ncclGroupSimulateEnd ends the group (see there);
// - forwarded to the real NCCL, by the user's choice only: TUCCL_NCCL_FORWARD lists NCCL datatype
//   names (int8 ... float8e5m2) whose reductions, and/or premulsum, whose operators (create,
//   destroy and the reductions using them), go there, for a job that wants NCCL's own arithmetic
//   (NCCL's avg of half, bfloat16 and fp8 scales by 1/n before summing, TuCCL divides the sum). A
//   value naming anything else refuses every call that consults it (the reductions and the
//   PreMulSum functions) with ncclInvalidArgument naming the variable and the value. Data movement
//   never forwards. The real NCCL is the library named by TUCCL_NCCL_LIBRARY, else libnccl.so.2
//   (never this library), reached through its pncclX entry points with a real communicator, the
//   twin, made beside TuCCL's when a forwarded call first needs it: rank 0's real unique id
//   travels over TuCCL's bootstrap, and every rank gets a twin or none does;
// - refused with ncclInvalidUsage and the reason (ncclGetLastError, and the log at
//   TUCCL_DEBUG=WARN) when it would be forwarded and no twin can be made (no real NCCL, a CPU
//   communicator without TUCCL_NCCL_LIBRARY) or TUCCL_NCCL_FALLBACK=0 turned forwarding off (the
//   reason names both variables).
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda_driver.h"
#include "support/environment.h"
#include "support/log.h"
#include "support/raw_value.h"
#include "tuccl/tuccl.h"

// This library's marker: the real-NCCL finder refuses a library that exports it (ourselves).
extern "C" {
__attribute__((visibility("default"))) int tucclNcclShimMarker = 1;
}

namespace {

// ncclConfig_t as libtuccl takes it, owning the name its commName points at.
struct OwnedConfig {
  tucclConfig_t config = TUCCL_CONFIG_INITIALIZER;
  std::optional<std::string> name;
  tucclConfig_t* get() {
    config.commName = name ? name->c_str() : nullptr;
    return &config;
  }
};

// The ranks of one ncclCommInitAll, which one thread may drive: their twins are made together by
// the real ncclCommInitAll.
struct Clique {
  std::mutex mutex;
  bool tried = false;
  std::string why;               // why there are no twins
  std::vector<ncclComm_t> real;  // rank i's twin, until rank i takes it
  std::optional<std::vector<int>> devices;
};

enum class Twin { Untried, Made, Refused };

}  // namespace

struct ncclComm {
  // libtuccl's communicator; NULL until the end of the group it was made in, and once revoked.
  tucclComm_t tuccl = nullptr;
  bool revoked = false;
  OwnedConfig config;  // what split and shrink inherit when given no config
  std::mutex twinMutex;
  Twin twin = Twin::Untried;
  ncclComm_t real = nullptr;  // the real NCCL's communicator, once made
  std::string noTwin;         // why there is none
  std::shared_ptr<Clique> clique;
  int cliqueRank = -1;
};

namespace {

thread_local std::string shimError;

// ---- The real NCCL ---------------------------------------------------------------------------

struct RealNccl {
  void* handle = nullptr;
  std::string why;  // why there is none
  template <typename F>
  F get(const char* name) const {
    return handle == nullptr ? nullptr : reinterpret_cast<F>(dlsym(handle, name));
  }
};

const RealNccl& realNccl() {
  static RealNccl real = [] {
    RealNccl found;
    const std::string path = tuccl::env::text("TUCCL_NCCL_LIBRARY").value_or("libnccl.so.2");
    void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (handle == nullptr) {
      const char* error = dlerror();
      found.why = "no real NCCL to forward to (" + path + ": " + (error != nullptr ? error : "not found") +
                  "; set TUCCL_NCCL_LIBRARY)";
    } else if (dlsym(handle, "tucclNcclShimMarker") != nullptr) {
      found.why =
          "no real NCCL to forward to (" + path + " is TuCCL's own NCCL library; set TUCCL_NCCL_LIBRARY)";
    } else {
      found.handle = handle;
    }
    return found;
  }();
  return real;
}

// Why forwarding is off (TUCCL_NCCL_FALLBACK=0, or a value the variable does not take); "" when on.
const std::string& forwardingOff() {
  static const std::string why = [] {
    const tuccl::Expected<std::optional<bool>> on = tuccl::env::flag("TUCCL_NCCL_FALLBACK");
    if (!on) return "forwarding to the real NCCL is off: " + on.status().message();
    return on->value_or(true) ? std::string()
                              : std::string("forwarding to the real NCCL is off (TUCCL_NCCL_FALLBACK=0)");
  }();
  return why;
}

// A libtuccl result as NCCL's: the same numbering, but tucclTimeout, which the nccl.h of this
// build may lack (NCCL 2.28 ends at ncclInProgress), becomes ncclSystemError, NCCL's own result
// for a wait that gave up; libtuccl's reason still says "timed out".
ncclResult_t ncclResultOf(tucclResult_t result) {
  return static_cast<int>(result) < static_cast<int>(ncclNumResults) ? static_cast<ncclResult_t>(result)
                                                                      : ncclSystemError;
}

// A libtuccl result as NCCL's; on a failure ncclGetLastError shows libtuccl's reason.
ncclResult_t fromTuccl(tucclResult_t result) {
  if (result != tucclSuccess && result != tucclInProgress) shimError.clear();
  return ncclResultOf(result);
}

ncclResult_t failure(const char* function, ncclResult_t result, const std::string& why) {
  shimError = std::string(function) + ": " + why;
  tuccl::logLine(tuccl::LogLevel::Warn, -1, shimError);
  return result;
}

// What TuCCL neither serves nor can forward: ncclInvalidUsage and the reason, logged once.
ncclResult_t unserved(const char* function, const std::string& why) {
  shimError = std::string(function) + ": " + why;
  tuccl::warnOnce(function, shimError);
  return ncclInvalidUsage;
}

using tuccl::rawValue;

// A value of one of NCCL's enums as libtuccl's same-numbered one, passed as the int it is (libtuccl
// judges values it does not define): datatypes (point-to-point moves the bytes of every one),
// operators (PreMulSum ones from ncclNumOps on), scalar residences.
template <typename Tuccl, typename Nccl>
Tuccl asEnum(const Nccl& value) {
  static_assert(sizeof(Tuccl) == sizeof(int));
  const int raw = rawValue(value);
  Tuccl converted;
  std::memcpy(&converted, &raw, sizeof converted);
  return converted;
}
tucclDataType_t tucclTypeOf(const ncclDataType_t& datatype) { return asEnum<tucclDataType_t>(datatype); }
tucclRedOp_t tucclOpOf(const ncclRedOp_t& op) { return asEnum<tucclRedOp_t>(op); }
static_assert(static_cast<int>(ncclScalarDevice) == static_cast<int>(tucclScalarDevice) &&
                  static_cast<int>(ncclScalarHostImmediate) == static_cast<int>(tucclScalarHostImmediate),
              "ncclScalarResidence_t and tucclScalarResidence_t are numbered alike");
static_assert(static_cast<int>(ncclNumOps) == static_cast<int>(tucclNumOps),
              "PreMulSum operators start at the same value in NCCL and libtuccl");

// The one list of the datatypes libtuccl reduces (with every operator, PreMulSum ones included):
// all of NCCL's. A datatype NCCL defines and this list lacks would forward.
constexpr int kTucclReducedTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                      ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                      ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

bool tucclServes(const ncclDataType_t& datatype) {
  const int type = rawValue(datatype);
  return std::find(std::begin(kTucclReducedTypes), std::end(kTucclReducedTypes), type) !=
         std::end(kTucclReducedTypes);
}

// Values NCCL itself defines: a datatype below ncclNumTypes; an op below ncclNumOps or one of
// the dynamic ones ncclRedOpCreatePreMulSum hands out (whoever made them judges those).
bool ncclKnows(const ncclDataType_t& datatype, const ncclRedOp_t& op) {
  const int type = rawValue(datatype);
  return type >= 0 && type < ncclNumTypes && rawValue(op) >= 0;
}

// ---- What the user forwards: TUCCL_NCCL_FORWARD ------------------------------------------------

// The names TUCCL_NCCL_FORWARD takes for each ncclDataType_t (the first is the one messages use).
struct TypeName {
  const char* name;
  int type;
};
constexpr TypeName kTypeNames[] = {
    {"int8", ncclInt8},         {"uint8", ncclUint8},           {"int32", ncclInt32},
    {"uint32", ncclUint32},     {"int64", ncclInt64},           {"uint64", ncclUint64},
    {"float16", ncclFloat16},   {"half", ncclFloat16},          {"float32", ncclFloat32},
    {"float", ncclFloat32},     {"float64", ncclFloat64},       {"double", ncclFloat64},
    {"bfloat16", ncclBfloat16}, {"float8e4m3", ncclFloat8e4m3}, {"float8e5m2", ncclFloat8e5m2}};

const char* typeName(int type) {
  for (const TypeName& name : kTypeNames) {
    if (name.type == type) return name.name;
  }
  return "?";
}

// TUCCL_NCCL_FORWARD, read once: the datatypes whose reductions and whether the PreMulSum operators
// go to the real NCCL, or why the value is refused.
struct ForwardList {
  bool types[ncclNumTypes] = {};
  bool premulsum = false;
  std::string invalid;  // the variable's error; "" when valid (or unset)
};

const ForwardList& forwardList() {
  static const ForwardList list = [] {
    ForwardList parsed;
    const std::optional<std::string> value = tuccl::env::text("TUCCL_NCCL_FORWARD");
    if (!value) return parsed;
    auto lower = [](std::string text) {
      for (char& c : text) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      return text;
    };
    size_t start = 0;
    while (start <= value->size()) {
      const size_t comma = std::min(value->find(',', start), value->size());
      std::string item = value->substr(start, comma - start);
      const size_t first = item.find_first_not_of(" \t");
      item = first == std::string::npos ? std::string()
                                        : lower(item.substr(first, item.find_last_not_of(" \t") - first + 1));
      start = comma + 1;
      if (item == "premulsum") {
        parsed.premulsum = true;
        continue;
      }
      const auto named = std::find_if(std::begin(kTypeNames), std::end(kTypeNames),
                                      [&](const TypeName& name) { return item == name.name; });
      if (named != std::end(kTypeNames)) {
        parsed.types[named->type] = true;
        continue;
      }
      parsed.invalid =
          tuccl::env::invalid(
              "TUCCL_NCCL_FORWARD", *value,
              "a comma-separated list of NCCL datatype names (int8, uint8, int32, uint32, "
              "int64, uint64, half or float16, float or float32, double or float64, "
              "bfloat16, float8e4m3, float8e5m2) and premulsum" +
                  (item.empty() ? std::string("; a name is empty") : "; '" + item + "' is none of them"))
              .message();
      return parsed;
    }
    return parsed;
  }();
  return list;
}

// A call that consults TUCCL_NCCL_FORWARD (every reduction, ncclRedOpCreatePreMulSum and
// ncclRedOpDestroy) is refused with ncclInvalidArgument while its value is not one it takes, naming
// the variable and the value (logged once): the job stops at its first reduction rather than
// computing on a path its user did not choose.
ncclResult_t checkForwardList(const char* function) {
  const std::string& invalid = forwardList().invalid;
  if (invalid.empty()) return ncclSuccess;
  shimError = std::string(function) + ": " + invalid;
  tuccl::warnOnce("TUCCL_NCCL_FORWARD", shimError);
  return ncclInvalidArgument;
}

constexpr const char* kPreMulSumForwarded = "TUCCL_NCCL_FORWARD sends PreMulSum operators to the real NCCL";

// Why a reduction on (datatype, op) goes to the real NCCL; nullopt when libtuccl serves it. A
// PreMulSum operator's reductions go where the operator lives: the real NCCL when
// TUCCL_NCCL_FORWARD lists premulsum, else libtuccl (its operator table judges the value). A
// built-in operator's go to the real NCCL when TUCCL_NCCL_FORWARD lists the datatype.
std::optional<std::string> forwardedBecause(const ncclDataType_t& datatype, const ncclRedOp_t& op) {
  const ForwardList& list = forwardList();
  if (rawValue(op) >= ncclNumOps) {
    return list.premulsum ? std::optional<std::string>(kPreMulSumForwarded) : std::nullopt;
  }
  const int type = rawValue(datatype);
  if (list.types[type]) {
    return std::string("TUCCL_NCCL_FORWARD sends ") + typeName(type) + " reductions to the real NCCL";
  }
  if (!tucclServes(datatype)) return std::string("this datatype is not reduced by TuCCL");
  return std::nullopt;
}

constexpr ncclRedOp_t kSum = ncclSum;

ncclResult_t unknownValue() {
  shimError = "the datatype or reduction operation is not one NCCL defines";
  return ncclInvalidArgument;
}

// Bytes per element of each ncclDataType_t, ncclInt8 .. ncclFloat8e5m2 (nccl.h).
constexpr size_t kElementBytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
static_assert(std::size(kElementBytes) == ncclNumTypes, "a datatype nccl.h added needs its size here");

// A data-movement collective's elements as libtuccl takes them: the datatype itself where TuCCL
// serves it, else its bytes (nothing is reduced, so every datatype moves). nullopt when the byte
// count overflows.
struct Elements {
  size_t count;
  tucclDataType_t datatype;
};
std::optional<Elements> movedAs(size_t count, const ncclDataType_t& datatype) {
  if (tucclServes(datatype)) return Elements{count, tucclTypeOf(datatype)};
  const size_t bytes = kElementBytes[rawValue(datatype)];
  if (count > SIZE_MAX / bytes) return std::nullopt;
  return Elements{count * bytes, tucclUint8};
}

ncclResult_t tooMany(const char* function) {
  return failure(function, ncclInvalidArgument, "the count's bytes overflow size_t");
}

tucclStream_t streamOf(cudaStream_t stream) { return reinterpret_cast<tucclStream_t>(stream); }

// ---- Groups ------------------------------------------------------------------------------------

// Communicators with a real-NCCL twin: group calls go to the real NCCL too while there are any.
std::atomic<int> twins{0};

// A forwarded call kept for the end of the group: its communicator had no twin yet.
struct Deferred {
  ncclComm* comm;
  std::function<ncclResult_t()> run;
};

// The calling thread's group: its depth, the real NCCL groups opened in it, forwarded calls kept.
struct ThreadGroup {
  int depth = 0;
  int realDepth = 0;
  std::vector<Deferred> deferred;
};
thread_local ThreadGroup group;

ncclResult_t realGroupCall(const char* name) {
  auto call = realNccl().get<decltype(&::pncclGroupStart)>(name);
  return call != nullptr ? call() : ncclSuccess;
}

// Opens real NCCL groups to this thread's depth while twins exist.
ncclResult_t openRealGroups() {
  while (twins.load() > 0 && group.realDepth < group.depth) {
    if (const ncclResult_t result = realGroupCall("pncclGroupStart"); result != ncclSuccess) return result;
    ++group.realDepth;
  }
  return ncclSuccess;
}

// Ends this thread's real NCCL groups down to `depth`.
ncclResult_t closeRealGroups(int depth) {
  ncclResult_t first = ncclSuccess;
  for (; group.realDepth > depth; --group.realDepth) {
    const ncclResult_t result = realGroupCall("pncclGroupEnd");
    if (first == ncclSuccess) first = result;
  }
  return first;
}

// ---- The twin ----------------------------------------------------------------------------------

// Why this rank offers no twin: no real NCCL, or one that cannot serve the communicator's buffers
// (a CPU communicator, unless TUCCL_NCCL_LIBRARY names the library explicitly); "" when it offers.
std::string whyNoOffer(tucclComm_t comm) {
  if (realNccl().handle == nullptr) return realNccl().why;
  tucclDeviceKind_t kind = tucclDeviceCpu;
  if (tucclCommDeviceKind(comm, &kind) != tucclSuccess) return tucclGetLastError(comm);
  if (kind == tucclDeviceCuda || tuccl::env::isSet("TUCCL_NCCL_LIBRARY")) return {};
  return "the communicator runs on the CPU device, whose host buffers the real NCCL cannot reach (set "
         "TUCCL_NCCL_LIBRARY to forward anyway)";
}

// The twin of a rank of ncclCommInitRank: rank 0's real unique id and every rank's readiness
// travel over TuCCL's bootstrap (tucclCommHostAllGather), so every rank reaching the first
// forwarded call gets a twin, or none does.
void makeRankTwin(ncclComm* shim) {
  struct Offer {
    char ready;
    ncclUniqueId id;
  };
  int nranks = 0, rank = 0;
  if (tucclCommCount(shim->tuccl, &nranks) != tucclSuccess ||
      tucclCommUserRank(shim->tuccl, &rank) != tucclSuccess) {
    shim->noTwin = std::string("the communicator's size is unknown: ") + tucclGetLastError(shim->tuccl);
    return;
  }
  const RealNccl& real = realNccl();
  const std::string mine = whyNoOffer(shim->tuccl);
  Offer offer{};
  offer.ready = mine.empty() ? 1 : 0;
  if (offer.ready && rank == 0) {
    auto getId = real.get<decltype(&::pncclGetUniqueId)>("pncclGetUniqueId");
    offer.ready = getId != nullptr && getId(&offer.id) == ncclSuccess ? 1 : 0;
  }
  std::vector<Offer> offers(static_cast<size_t>(nranks));
  if (tucclCommHostAllGather(shim->tuccl, &offer, offers.data(), sizeof(Offer)) != tucclSuccess) {
    shim->noTwin = std::string("the ranks could not agree on a twin: ") + tucclGetLastError(shim->tuccl);
    return;
  }
  for (int r = 0; r < nranks; ++r) {
    if (offers[static_cast<size_t>(r)].ready) continue;
    shim->noTwin =
        !mine.empty() ? mine : "rank " + std::to_string(r) + " has no real NCCL communicator to offer";
    return;
  }
  auto init = real.get<decltype(&::pncclCommInitRank)>("pncclCommInitRank");
  ncclComm_t twin = nullptr;
  const char made = init != nullptr && init(&twin, nranks, offers[0].id, rank) == ncclSuccess ? 1 : 0;
  std::vector<char> madeAll(static_cast<size_t>(nranks));
  const bool agreed = tucclCommHostAllGather(shim->tuccl, &made, madeAll.data(), 1) == tucclSuccess &&
                      std::all_of(madeAll.begin(), madeAll.end(), [](char m) { return m == 1; });
  if (agreed) {
    shim->real = twin;
    return;
  }
  shim->noTwin = "the real NCCL communicator could not be made on every rank";
  if (twin != nullptr) {
    if (auto abortTwin = real.get<decltype(&::pncclCommAbort)>("pncclCommAbort")) abortTwin(twin);
  }
}

// The twin of a rank of ncclCommInitAll: the real ncclCommInitAll makes the clique's twins at once.
void makeCliqueTwin(ncclComm* shim) {
  Clique& clique = *shim->clique;
  std::lock_guard lock(clique.mutex);
  if (!clique.tried) {
    clique.tried = true;
    clique.why = whyNoOffer(shim->tuccl);
    auto initAll = realNccl().get<decltype(&::pncclCommInitAll)>("pncclCommInitAll");
    if (clique.why.empty() && initAll == nullptr) clique.why = "the real NCCL lacks pncclCommInitAll";
    if (clique.why.empty()) {
      std::vector<ncclComm_t> real(clique.real.size(), nullptr);
      const int ndev = static_cast<int>(real.size());
      if (initAll(real.data(), ndev, clique.devices ? clique.devices->data() : nullptr) == ncclSuccess) {
        clique.real = real;
      } else {
        clique.why = "the real NCCL's ncclCommInitAll failed";
      }
    }
  }
  ncclComm_t& mine = clique.real[static_cast<size_t>(shim->cliqueRank)];
  shim->real = mine;
  mine = nullptr;
  if (shim->real == nullptr) shim->noTwin = clique.why.empty() ? "the clique's twin is gone" : clique.why;
}

// Makes the communicator's twin, once: called by the first forwarded call on it (every rank makes
// that call), outside any real NCCL group of this thread (a real init inside one would only finish
// at its end): groups opened for other twins end here, launching what they held, and reopen at the
// next forwarded call.
void ensureTwin(ncclComm* shim) {
  std::lock_guard lock(shim->twinMutex);
  if (shim->twin != Twin::Untried) return;
  closeRealGroups(0);
  if (shim->clique != nullptr) {
    makeCliqueTwin(shim);
  } else {
    makeRankTwin(shim);
  }
  shim->twin = shim->real != nullptr ? Twin::Made : Twin::Refused;
  if (shim->real != nullptr) ++twins;
}

// Ends the twin with the real NCCL's `name` (pncclCommDestroy or pncclCommAbort), and a clique
// twin nobody took.
void releaseTwin(ncclComm* shim, const char* name) {
  auto end = realNccl().get<decltype(&::pncclCommDestroy)>(name);
  if (shim->clique != nullptr) {
    std::lock_guard lock(shim->clique->mutex);
    ncclComm_t& untaken = shim->clique->real[static_cast<size_t>(shim->cliqueRank)];
    if (untaken != nullptr && end != nullptr) end(untaken);
    untaken = nullptr;
  }
  if (shim->real == nullptr) return;
  if (end != nullptr) end(shim->real);
  shim->real = nullptr;
  --twins;
}

// The reason the real NCCL gives for a failed forwarded call.
void noteRealError(const char* function, ncclComm_t real) {
  auto lastError = realNccl().get<decltype(&::pncclGetLastError)>("pncclGetLastError");
  const char* why = lastError != nullptr ? lastError(real) : nullptr;
  shimError =
      std::string(function) + ": the real NCCL: " + (why != nullptr && *why != 0 ? why : "no reason given");
}

// Runs `call` with the communicator's twin, made now if this is the first forwarded call on it. A
// call that `mayDefer` inside a group, on a communicator with no twin yet, is kept for the end of
// the group: one thread may drive several ranks there, which meet in the twin's agreement.
ncclResult_t forward(ncclComm* comm, const char* function, const std::string& reason, bool mayDefer,
                     std::function<ncclResult_t(ncclComm_t)> call) {
  if (!forwardingOff().empty()) return unserved(function, reason + "; " + forwardingOff());
  if (mayDefer && group.depth > 0) {
    std::unique_lock lock(comm->twinMutex);
    if (comm->twin == Twin::Untried) {
      lock.unlock();
      group.deferred.push_back(Deferred{comm, [=] { return forward(comm, function, reason, false, call); }});
      return ncclSuccess;
    }
  }
  ensureTwin(comm);
  if (comm->real == nullptr) return unserved(function, reason + "; " + comm->noTwin);
  if (const ncclResult_t opened = openRealGroups(); opened != ncclSuccess) return opened;
  const ncclResult_t result = call(comm->real);
  if (result != ncclSuccess && result != ncclInProgress) noteRealError(function, comm->real);
  return result;
}

// Makes the twins the kept calls need, each on its own thread when there are several (a thread
// may drive several ranks, which meet in the agreement), on its communicator's GPU.
void makeTwinsFor(const std::vector<Deferred>& deferred) {
  std::vector<ncclComm*> comms;
  for (const Deferred& call : deferred) {
    if (std::find(comms.begin(), comms.end(), call.comm) == comms.end()) comms.push_back(call.comm);
  }
  if (comms.size() == 1) return ensureTwin(comms[0]);
  auto onDevice = [](ncclComm* comm) {
    int device = -1;
    tuccl::Expected<const tuccl::backend::CudaDriver*> driver = tuccl::backend::loadCudaDriver();
    tuccl::backend::CUcontext context = nullptr;
    tuccl::backend::CUdevice handle = 0;
    const bool bound = comm->tuccl != nullptr && tucclCommCuDevice(comm->tuccl, &device) == tucclSuccess &&
                       device >= 0 && driver && (*driver)->cuDeviceGet(&handle, device) == 0 &&
                       (*driver)->cuDevicePrimaryCtxRetain(&context, handle) == 0 &&
                       (*driver)->cuCtxSetCurrent(context) == 0;
    ensureTwin(comm);
    if (bound) (*driver)->cuDevicePrimaryCtxRelease(handle);
  };
  std::vector<std::thread> threads;
  for (ncclComm* comm : comms) threads.emplace_back(onDevice, comm);
  for (std::thread& thread : threads) thread.join();
}

// Runs the kept forwarded calls at the outermost group end: twins first, then the calls in one real
// NCCL group.
ncclResult_t runDeferred(std::vector<Deferred> deferred) {
  if (deferred.empty()) return ncclSuccess;
  makeTwinsFor(deferred);
  const bool open = twins.load() > 0 && realGroupCall("pncclGroupStart") == ncclSuccess;
  ncclResult_t first = ncclSuccess;
  for (const Deferred& call : deferred) {
    const ncclResult_t result = call.run();
    if (first == ncclSuccess) first = result;
  }
  const ncclResult_t ended = open ? realGroupCall("pncclGroupEnd") : ncclSuccess;
  return first != ncclSuccess ? first : ended;
}

// ---- Communicators -----------------------------------------------------------------------------

// ncclConfig_t's fields TuCCL keeps (blocking, commName, splitShare), the others being TuCCL's to
// decide. A field NCCL_CONFIG_UNDEF_INT / NULL, or beyond the caller's config->size (a program built
// against an older nccl.h), takes NCCL's default.
ncclResult_t translateConfig(const char* function, const ncclConfig_t* config, OwnedConfig* out) {
  if (config == nullptr) return ncclSuccess;
  if (config->magic != 0xcafebeef) {  // nccl.h NCCL_CONFIG_INITIALIZER
    return failure(function, ncclInvalidArgument,
                   "the config was not initialised with NCCL_CONFIG_INITIALIZER");
  }
#define TUCCL_CONFIG_HAS(field) (config->size >= offsetof(ncclConfig_t, field) + sizeof(config->field))
  auto flag = [&](const char* name, int value, int fallback, int* into) {
    if (value == NCCL_CONFIG_UNDEF_INT) value = fallback;
    if (value != 0 && value != 1) {
      return failure(function, ncclInvalidArgument,
                     std::string("config->") + name + " is " + std::to_string(value) + ": expected 0 or 1");
    }
    *into = value;
    return ncclSuccess;
  };
  const int blocking = TUCCL_CONFIG_HAS(blocking) ? config->blocking : NCCL_CONFIG_UNDEF_INT;
  const int splitShare = TUCCL_CONFIG_HAS(splitShare) ? config->splitShare : NCCL_CONFIG_UNDEF_INT;
  if (const ncclResult_t r = flag("blocking", blocking, 1, &out->config.blocking); r != ncclSuccess) return r;
  if (const ncclResult_t r = flag("splitShare", splitShare, 0, &out->config.splitShare); r != ncclSuccess)
    return r;
  if (TUCCL_CONFIG_HAS(commName) && config->commName != nullptr) out->name = config->commName;
#undef TUCCL_CONFIG_HAS
  return ncclSuccess;
}

// The ncclComm of a communicator that `make` asks libtuccl for; its twin waits for the first
// forwarded call. libtuccl writes the handle where `make` says: at once, or at the end of the group
// the call is in, so the place is the ncclComm's own (NCCL hands out the communicator at once).
// A rank that joins none (a NOCOLOR split, an excluded rank) gets NULL, and libtuccl a place of
// this thread to write its NULL to.
ncclResult_t makeComm(ncclComm_t* out, bool joins, const OwnedConfig& config,
                      const std::function<tucclResult_t(tucclComm_t*)>& make) {
  *out = nullptr;
  if (!joins) {
    thread_local tucclComm_t none = nullptr;
    return fromTuccl(make(&none));
  }
  auto* shim = new ncclComm();
  shim->config = config;
  const tucclResult_t result = make(&shim->tuccl);
  const bool made = result == tucclSuccess || result == tucclInProgress;
  if (!made || (shim->tuccl == nullptr && group.depth == 0)) {
    delete shim;
    return fromTuccl(result);
  }
  *out = shim;
  return fromTuccl(result);
}

// The error of a NULL, revoked or never made communicator; ncclSuccess for one libtuccl serves.
ncclResult_t usable(const ncclComm* comm, const char* function) {
  if (comm == nullptr) return failure(function, ncclInvalidArgument, "comm is NULL");
  if (comm->revoked) {
    return unserved(function,
                    "the communicator was revoked (TuCCL ended its part at ncclCommRevoke): it can only "
                    "be destroyed");
  }
  if (comm->tuccl == nullptr) {
    return failure(function, ncclInvalidUsage,
                   "the communicator was not made (its init in a group failed at ncclGroupEnd, or the group "
                   "has not ended)");
  }
  return ncclSuccess;
}

// Ends a communicator: its twin, then TuCCL's part (unless revoked), then the handle.
ncclResult_t endComm(ncclComm_t comm, bool abort) {
  releaseTwin(comm, abort ? "pncclCommAbort" : "pncclCommDestroy");
  tucclComm_t tuccl = comm->tuccl;
  delete comm;
  if (tuccl == nullptr) return ncclSuccess;
  return fromTuccl(abort ? tucclCommAbort(tuccl) : tucclCommDestroy(tuccl));
}

// ---- The CUDA driver, for ncclMemAlloc ---------------------------------------------------------

// The process's CUDA driver (backend/cuda_driver.h: TUCCL_CUDA_DRIVER, else libcuda.so.1) with a
// context current on this thread: the caller's, else device 0's primary context, as the CUDA runtime
// would pick (kept retained for the process, as the runtime keeps it).
tuccl::Expected<const tuccl::backend::CudaDriver*> driverWithContext() {
  using namespace tuccl::backend;
  using tuccl::Status;
  tuccl::Expected<const CudaDriver*> driver = loadCudaDriver();
  if (!driver) return driver.status();
  const CudaDriver& cu = **driver;
  CUcontext context = nullptr;
  if (Status status = cudaStatus(cu, cu.cuCtxGetCurrent(&context), "cuCtxGetCurrent"); !status) return status;
  if (context != nullptr) return *driver;
  CUdevice device = 0;
  if (Status status = cudaStatus(cu, cu.cuDeviceGet(&device, 0), "cuDeviceGet", "device 0"); !status)
    return status;
  if (Status status =
          cudaStatus(cu, cu.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
      !status) {
    return status;
  }
  if (Status status = cudaStatus(cu, cu.cuCtxSetCurrent(context), "cuCtxSetCurrent"); !status) return status;
  return *driver;
}

ncclResult_t driverFailure(const char* function, const tuccl::Status& status) {
  const bool noDriver = status.code() == tuccl::ErrorCode::Unsupported;
  return failure(function, noDriver ? ncclSystemError : ncclUnhandledCudaError,
                 (noDriver ? "no CUDA driver to allocate device memory with: " : "") + status.message());
}

}  // namespace

// Defines pncclX and exports ncclX as the same function.
#define TUCCL_NCCL_API(ret, name, ...)                                                       \
  extern "C" __attribute__((visibility("default"))) ret p##name(__VA_ARGS__);                \
  extern "C" __attribute__((visibility("default"), alias("p" #name))) ret name(__VA_ARGS__); \
  extern "C" ret p##name(__VA_ARGS__)

// Forwards NCCL's `name` to the real NCCL with the twin (`real` in the arguments), or refuses with
// the reason; a collective (mayDefer) inside a group waits for the group's end when the twin is yet
// to be made.
#define TUCCL_FORWARD(name, comm, reason, mayDefer, ...)                                              \
  return forward(comm, #name, reason, mayDefer, [=](ncclComm_t real) -> ncclResult_t {                \
    auto fn = realNccl().get<decltype(&::p##name)>("p" #name);                                        \
    if (fn == nullptr) return unserved(#name, std::string(reason) + "; the real NCCL lacks p" #name); \
    return fn(__VA_ARGS__);                                                                           \
  })

TUCCL_NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;  // the API this library implements (its nccl.h)
  return ncclSuccess;
}

TUCCL_NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  static_assert(sizeof(ncclUniqueId) == sizeof(tucclUniqueId));
  return fromTuccl(tucclGetUniqueId(reinterpret_cast<tucclUniqueId*>(uniqueId)));
}

TUCCL_NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId,
               int rank, ncclConfig_t* config) {
  if (comm == nullptr) return failure("ncclCommInitRankConfig", ncclInvalidArgument, "comm is NULL");
  OwnedConfig owned;
  if (const ncclResult_t r = translateConfig("ncclCommInitRankConfig", config, &owned); r != ncclSuccess)
    return r;
  tucclUniqueId id;
  std::memcpy(id.internal, commId.internal, sizeof(id.internal));
  return makeComm(comm, true, owned, [&](tucclComm_t* made) {
    return tucclCommInitRankConfig(made, nranks, id, rank, owned.get());
  });
}

TUCCL_NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  if (comm == nullptr) return failure("ncclCommInitRank", ncclInvalidArgument, "comm is NULL");
  tucclUniqueId id;
  std::memcpy(id.internal, commId.internal, sizeof(id.internal));
  return makeComm(comm, true, OwnedConfig(),
                  [&](tucclComm_t* made) { return tucclCommInitRank(made, nranks, id, rank); });
}

TUCCL_NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
               ncclUniqueId* commIds, ncclConfig_t* config) {
  if (newcomm == nullptr || commIds == nullptr || nId < 1) {
    return failure("ncclCommInitRankScalable", ncclInvalidArgument, "newcomm or commIds is NULL, or nId < 1");
  }
  OwnedConfig owned;
  if (const ncclResult_t r = translateConfig("ncclCommInitRankScalable", config, &owned); r != ncclSuccess)
    return r;
  std::vector<tucclUniqueId> ids(static_cast<size_t>(nId));
  for (size_t i = 0; i < ids.size(); ++i)
    std::memcpy(ids[i].internal, commIds[i].internal, sizeof(ids[i].internal));
  return makeComm(newcomm, true, owned, [&](tucclComm_t* made) {
    return tucclCommInitRankScalable(made, nranks, myrank, nId, ids.data(), owned.get());
  });
}

TUCCL_NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1)
    return failure("ncclCommInitAll", ncclInvalidArgument, "comms is NULL or ndev < 1");
  std::vector<tucclComm_t> tuccl(static_cast<size_t>(ndev), nullptr);
  const tucclResult_t result = tucclCommInitAll(tuccl.data(), ndev, devlist);
  if (result != tucclSuccess) return fromTuccl(result);
  auto clique = std::make_shared<Clique>();
  clique->real.assign(static_cast<size_t>(ndev), nullptr);
  if (devlist != nullptr) clique->devices.emplace(devlist, devlist + ndev);
  for (int i = 0; i < ndev; ++i) {
    comms[i] = new ncclComm();
    comms[i]->tuccl = tuccl[static_cast<size_t>(i)];
    comms[i]->clique = clique;
    comms[i]->cliqueRank = i;
  }
  return ncclSuccess;
}

TUCCL_NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
               ncclConfig_t* config) {
  if (const ncclResult_t r = usable(comm, "ncclCommSplit"); r != ncclSuccess) return r;
  if (newcomm == nullptr) return failure("ncclCommSplit", ncclInvalidArgument, "newcomm is NULL");
  OwnedConfig owned = comm->config;  // NULL config: the parent's (nccl.h)
  if (const ncclResult_t r = translateConfig("ncclCommSplit", config, &owned); r != ncclSuccess) return r;
  const bool joins = color != NCCL_SPLIT_NOCOLOR;
  return makeComm(newcomm, joins, owned, [&](tucclComm_t* made) {
    return tucclCommSplit(comm->tuccl, joins ? color : TUCCL_SPLIT_NOCOLOR, key, made, owned.get());
  });
}

TUCCL_NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
               ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (const ncclResult_t r = usable(comm, "ncclCommShrink"); r != ncclSuccess) return r;
  if (newcomm == nullptr) return failure("ncclCommShrink", ncclInvalidArgument, "newcomm is NULL");
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    return failure(
        "ncclCommShrink", ncclInvalidArgument,
        "shrinkFlags " + std::to_string(shrinkFlags) + ": expected NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT");
  }
  OwnedConfig owned = comm->config;
  if (const ncclResult_t r = translateConfig("ncclCommShrink", config, &owned); r != ncclSuccess) return r;
  int rank = -1;
  if (const ncclResult_t r = fromTuccl(tucclCommUserRank(comm->tuccl, &rank)); r != ncclSuccess) return r;
  const bool joins = excludeRanksList == nullptr || excludeRanksCount < 1 ||
                     std::find(excludeRanksList, excludeRanksList + excludeRanksCount, rank) ==
                         excludeRanksList + excludeRanksCount;
  const int flags = shrinkFlags == NCCL_SHRINK_ABORT ? 1 : 0;  // tucclCommShrink: 1 aborts the excluded ranks
  return makeComm(newcomm, joins, owned, [&](tucclComm_t* made) {
    return tucclCommShrink(comm->tuccl, excludeRanksList, excludeRanksCount, made, owned.get(), flags);
  });
}

TUCCL_NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  if (const ncclResult_t r = usable(comm, "ncclCommFinalize"); r != ncclSuccess) return r;
  ncclResult_t real = ncclSuccess;
  if (comm->real != nullptr) {
    if (auto finalize = realNccl().get<decltype(&::pncclCommFinalize)>("pncclCommFinalize"))
      real = finalize(comm->real);
  }
  const ncclResult_t result = fromTuccl(tucclCommFinalize(comm->tuccl));
  return result != ncclSuccess ? result : real;
}

TUCCL_NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return failure("ncclCommDestroy", ncclInvalidArgument, "comm is NULL");
  return endComm(comm, false);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  return endComm(comm, true);
}

// NCCL stops the communicator's in-flight work and keeps it for destroy, split or shrink. libtuccl
// can stop work only by aborting: TuCCL's part (and the twin) end here, the handle stays valid for
// ncclCommDestroy / ncclCommAbort, and any other call on it is refused with the reason.
TUCCL_NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  if (const ncclResult_t r = usable(comm, "ncclCommRevoke"); r != ncclSuccess) return r;
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    return failure("ncclCommRevoke", ncclInvalidArgument, "revokeFlags must be NCCL_REVOKE_DEFAULT (0)");
  }
  releaseTwin(comm, "pncclCommAbort");
  const tucclResult_t result = tucclCommAbort(comm->tuccl);
  comm->tuccl = nullptr;
  comm->revoked = true;
  return fromTuccl(result);
}

TUCCL_NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  const int raw = rawValue(result);
  return raw >= 0 && raw < tucclNumResults ? tucclGetErrorString(static_cast<tucclResult_t>(raw))
                                           : "unknown result code";
}

TUCCL_NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  if (!shimError.empty()) return shimError.c_str();
  return tucclGetLastError(comm != nullptr ? comm->tuccl : nullptr);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  if (comm == nullptr || asyncError == nullptr) {
    return failure("ncclCommGetAsyncError", ncclInvalidArgument, "comm or asyncError is NULL");
  }
  if (comm->revoked) {  // quiescent
    *asyncError = ncclSuccess;
    return ncclSuccess;
  }
  if (const ncclResult_t r = usable(comm, "ncclCommGetAsyncError"); r != ncclSuccess) return r;
  tucclResult_t error = tucclSuccess;
  const tucclResult_t result = tucclCommGetAsyncError(comm->tuccl, &error);
  *asyncError = ncclResultOf(error);
  return fromTuccl(result);
}

TUCCL_NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  if (const ncclResult_t r = usable(comm, "ncclCommCount"); r != ncclSuccess) return r;
  return fromTuccl(tucclCommCount(comm->tuccl, count));
}

TUCCL_NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  if (const ncclResult_t r = usable(comm, "ncclCommCuDevice"); r != ncclSuccess) return r;
  return fromTuccl(tucclCommCuDevice(comm->tuccl, device));
}

TUCCL_NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  if (const ncclResult_t r = usable(comm, "ncclCommUserRank"); r != ncclSuccess) return r;
  return fromTuccl(tucclCommUserRank(comm->tuccl, rank));
}

// ---- Registration and memory -------------------------------------------------------------------

TUCCL_NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* /*buff*/, size_t /*size*/,
               void** handle) {
  // Registration is a hint: TuCCL copies through its staging rings either way.
  if (const ncclResult_t r = usable(comm, "ncclCommRegister"); r != ncclSuccess) return r;
  if (handle == nullptr) return failure("ncclCommRegister", ncclInvalidArgument, "handle is NULL");
  *handle = nullptr;
  return ncclSuccess;
}

TUCCL_NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* /*handle*/) {
  return usable(comm, "ncclCommDeregister");
}

TUCCL_NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* /*buff*/, size_t /*size*/,
               ncclWindow_t* win, int /*winFlags*/) {
  // A window is a hint too (symmetric kernels are NCCL's): TuCCL copies through its staging.
  if (const ncclResult_t r = usable(comm, "ncclCommWindowRegister"); r != ncclSuccess) return r;
  if (win == nullptr) return failure("ncclCommWindowRegister", ncclInvalidArgument, "win is NULL");
  *win = nullptr;
  return ncclSuccess;
}

TUCCL_NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t /*win*/) {
  return usable(comm, "ncclCommWindowDeregister");
}

TUCCL_NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  if (ptr == nullptr || size == 0)
    return failure("ncclMemAlloc", ncclInvalidArgument, "ptr is NULL or size is 0");
  tuccl::Expected<const tuccl::backend::CudaDriver*> driver = driverWithContext();
  if (!driver) return driverFailure("ncclMemAlloc", driver.status());
  const tuccl::backend::CudaDriver& cu = **driver;
  tuccl::backend::CUdeviceptr pointer = 0;
  const tuccl::Status status = tuccl::backend::cudaStatus(cu, cu.cuMemAlloc(&pointer, size), "cuMemAlloc",
                                                          std::to_string(size) + " bytes");
  if (!status) return driverFailure("ncclMemAlloc", status);
  *ptr = reinterpret_cast<void*>(pointer);
  return ncclSuccess;
}

TUCCL_NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  tuccl::Expected<const tuccl::backend::CudaDriver*> driver = tuccl::backend::loadCudaDriver();
  if (!driver) return driverFailure("ncclMemFree", driver.status());
  const tuccl::backend::CudaDriver& cu = **driver;
  const tuccl::Status status = tuccl::backend::cudaStatus(
      cu, cu.cuMemFree(reinterpret_cast<tuccl::backend::CUdeviceptr>(ptr)), "cuMemFree");
  return status ? ncclSuccess : driverFailure("ncclMemFree", status);
}

// ---- Reductions --------------------------------------------------------------------------------

TUCCL_NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclAllReduce"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, op)) return unknownValue();
  if (const ncclResult_t r = checkForwardList("ncclAllReduce"); r != ncclSuccess) return r;
  if (const std::optional<std::string> why = forwardedBecause(datatype, op)) {
    TUCCL_FORWARD(ncclAllReduce, comm, *why, true, sendbuff, recvbuff, count, datatype, op, real, stream);
  }
  return fromTuccl(tucclAllReduce(sendbuff, recvbuff, count, tucclTypeOf(datatype), tucclOpOf(op),
                                  comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclReduceScatter"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, op)) return unknownValue();
  if (const ncclResult_t r = checkForwardList("ncclReduceScatter"); r != ncclSuccess) return r;
  if (const std::optional<std::string> why = forwardedBecause(datatype, op)) {
    TUCCL_FORWARD(ncclReduceScatter, comm, *why, true, sendbuff, recvbuff, recvcount, datatype, op, real,
                  stream);
  }
  return fromTuccl(tucclReduceScatter(sendbuff, recvbuff, recvcount, tucclTypeOf(datatype), tucclOpOf(op),
                                      comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclReduce"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, op)) return unknownValue();
  if (const ncclResult_t r = checkForwardList("ncclReduce"); r != ncclSuccess) return r;
  if (const std::optional<std::string> why = forwardedBecause(datatype, op)) {
    TUCCL_FORWARD(ncclReduce, comm, *why, true, sendbuff, recvbuff, count, datatype, op, root, real, stream);
  }
  return fromTuccl(tucclReduce(sendbuff, recvbuff, count, tucclTypeOf(datatype), tucclOpOf(op), root,
                               comm->tuccl, streamOf(stream)));
}

// PreMulSum operators are libtuccl's, per communicator (libtuccl judges the datatype, the
// residence, a NULL op or scalar, and a communicator still being made). With premulsum in
// TUCCL_NCCL_FORWARD they are the real NCCL's instead: the operator it hands out forwards every
// reduction that uses it, and every rank creates its operator (NCCL's usage), so the first one
// makes the twin.
TUCCL_NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
               ncclScalarResidence_t residence, ncclComm_t comm) {
  if (const ncclResult_t r = usable(comm, "ncclRedOpCreatePreMulSum"); r != ncclSuccess) return r;
  if (const ncclResult_t r = checkForwardList("ncclRedOpCreatePreMulSum"); r != ncclSuccess) return r;
  if (forwardList().premulsum) {
    TUCCL_FORWARD(ncclRedOpCreatePreMulSum, comm, kPreMulSumForwarded, false, op, scalar, datatype, residence,
                  real);
  }
  static_assert(sizeof(ncclRedOp_t) == sizeof(tucclRedOp_t));
  tucclRedOp_t made{};
  const tucclResult_t result =
      tucclRedOpCreatePreMulSum(op != nullptr ? &made : nullptr, scalar, tucclTypeOf(datatype),
                                asEnum<tucclScalarResidence_t>(residence), comm->tuccl);
  if (result == tucclSuccess) *op = asEnum<ncclRedOp_t>(made);
  return fromTuccl(result);
}

TUCCL_NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  if (const ncclResult_t r = usable(comm, "ncclRedOpDestroy"); r != ncclSuccess) return r;
  if (const ncclResult_t r = checkForwardList("ncclRedOpDestroy"); r != ncclSuccess) return r;
  if (!forwardList().premulsum) return fromTuccl(tucclRedOpDestroy(tucclOpOf(op), comm->tuccl));
  if (forwardingOff().empty() && comm->real == nullptr) {  // no twin, so no operator was made
    return unserved("ncclRedOpDestroy",
                    std::string(kPreMulSumForwarded) +
                        "; no PreMulSum operator was made on this communicator (it has no twin there)");
  }
  TUCCL_FORWARD(ncclRedOpDestroy, comm, kPreMulSumForwarded, false, op, real);
}

// ---- Data movement: every datatype, as its bytes where TuCCL does not reduce it ----------------

TUCCL_NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclAllGather"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  const std::optional<Elements> moved = movedAs(sendcount, datatype);
  if (!moved) return tooMany("ncclAllGather");
  return fromTuccl(
      tucclAllGather(sendbuff, recvbuff, moved->count, moved->datatype, comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclBroadcast"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  const std::optional<Elements> moved = movedAs(count, datatype);
  if (!moved) return tooMany("ncclBroadcast");
  return fromTuccl(
      tucclBroadcast(sendbuff, recvbuff, moved->count, moved->datatype, root, comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream) {
  return pncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

TUCCL_NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclAlltoAll"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  const std::optional<Elements> moved = movedAs(count, datatype);
  if (!moved) return tooMany("ncclAlltoAll");
  return fromTuccl(
      tucclAllToAll(sendbuff, recvbuff, moved->count, moved->datatype, comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclGather"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  return fromTuccl(
      tucclGather(sendbuff, recvbuff, count, tucclTypeOf(datatype), root, comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
               ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclScatter"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  return fromTuccl(
      tucclScatter(sendbuff, recvbuff, count, tucclTypeOf(datatype), root, comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
               ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclSend"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  return fromTuccl(tucclSend(sendbuff, count, tucclTypeOf(datatype), peer, comm->tuccl, streamOf(stream)));
}

TUCCL_NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
               ncclComm_t comm, cudaStream_t stream) {
  if (const ncclResult_t r = usable(comm, "ncclRecv"); r != ncclSuccess) return r;
  if (!ncclKnows(datatype, kSum)) return unknownValue();
  return fromTuccl(tucclRecv(recvbuff, count, tucclTypeOf(datatype), peer, comm->tuccl, streamOf(stream)));
}

// ---- Groups ------------------------------------------------------------------------------------

TUCCL_NCCL_API(ncclResult_t, ncclGroupStart) {
  ++group.depth;
  if (const ncclResult_t real = openRealGroups(); real != ncclSuccess) return real;
  return fromTuccl(tucclGroupStart());
}

TUCCL_NCCL_API(ncclResult_t, ncclGroupEnd) {
  if (group.depth == 0) return fromTuccl(tucclGroupEnd());  // libtuccl says why
  --group.depth;
  ncclResult_t real = closeRealGroups(group.depth);
  // TuCCL's part first: a communicator initialised in this group is made there, and the kept
  // forwarded calls may need it for their twins.
  const ncclResult_t result = fromTuccl(tucclGroupEnd());
  if (group.depth == 0) {
    std::vector<Deferred> deferred = std::move(group.deferred);
    group.deferred.clear();
    const ncclResult_t kept = runDeferred(std::move(deferred));
    if (real == ncclSuccess) real = kept;
  }
  return result != ncclSuccess ? result : real;
}

// NCCL prepares the group's calls, estimates their time and launches nothing. libtuccl cannot hold
// back the calls of an open group, and refusing would leave it open; so the group ends as at
// ncclGroupEnd (its calls run) and estimatedTime stays NCCL_UNDEF_FLOAT, which a caller reads as
// "no estimate" (a one-time warning says so). A simInfo not made with NCCL_SIM_INFO_INITIALIZER is
// refused before the group ends, as NCCL does.
TUCCL_NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  if (simInfo != nullptr && simInfo->magic != 0x74685283) {  // nccl.h NCCL_SIM_INFO_INITIALIZER
    return failure("ncclGroupSimulateEnd", ncclInvalidArgument,
                   "simInfo was not initialised with NCCL_SIM_INFO_INITIALIZER");
  }
  tuccl::warnOnce("ncclGroupSimulateEnd",
                  "ncclGroupSimulateEnd: TuCCL cannot simulate a group: it ends the group "
                  "(the calls run) and gives no time estimate (NCCL_UNDEF_FLOAT)");
  if (simInfo != nullptr) simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
  return pncclGroupEnd();
}
