// readLaunchEnvironment (bootstrap.h): rank, size, local rank and rendezvous address from the
// variables a launcher sets.
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "backend/bootstrap.h"
#include "transport/socket.h"
#include "support/environment.h"

namespace tuccl::backend {
namespace {

struct LauncherVariables {
  const char* source;
  const char* rank;
  const char* size;
  const char* localRank;
};

// In the order they are tried: a launcher nested in another (mpirun inside an srun allocation,
// tuccl-run inside anything) sets its own variables beside the outer one's, and the inner wins.
constexpr LauncherVariables kLaunchers[] = {
    {"tuccl-run", "TUCCL_RANK", "TUCCL_NRANKS", "TUCCL_LOCAL_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
};

bool isSet(const char* name) { return env::isSet(name); }

/// The integer in variable `name`; InvalidArgument naming it when the value is not one.
Expected<int64_t> integerVariable(const char* name) {
  const std::string text = env::text(name).value_or("");
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    return makeError(ErrorCode::InvalidArgument, std::string(name) + "='" + std::string(text) + "' is not an integer");
  return value;
}

/// Variable `name` as an integer in [low, high]; `what` says what the bound is.
Expected<int32_t> boundedVariable(const char* name, int64_t low, int64_t high, const std::string& what) {
  Expected<int64_t> value = integerVariable(name);
  if (!value) return value.status();
  if (*value < low || *value > high)
    return makeError(ErrorCode::InvalidArgument, std::string(name) + "=" + std::to_string(*value) + " is out of range (" +
                                                     what + ")");
  return static_cast<int32_t>(*value);
}

Status readRanks(const LauncherVariables& launcher, LaunchEnvironment& environment) {
  if (!isSet(launcher.size))
    return makeError(ErrorCode::NotFound, std::string(launcher.rank) + " is set but " + launcher.size + " is not");
  Expected<int32_t> size = boundedVariable(launcher.size, 1, INT32_MAX, "at least 1");
  if (!size) return size.status();
  const std::string below = "0 to " + std::string(launcher.size) + "-1 = " + std::to_string(*size - 1);
  Expected<int32_t> rank = boundedVariable(launcher.rank, 0, *size - 1, below);
  if (!rank) return rank.status();
  environment.nRanks = *size;
  environment.rank = *rank;
  environment.source = launcher.source;
  if (!isSet(launcher.localRank)) return Status();
  Expected<int32_t> localRank = boundedVariable(launcher.localRank, 0, *size - 1, below);
  if (!localRank) return localRank.status();
  environment.localRank = *localRank;
  return Status();
}

Expected<std::string> readAddress() {
  if (std::optional<std::string> commId = env::text("TUCCL_COMM_ID")) {
    Expected<transport::HostPort> parsed = transport::splitHostPort(*commId);
    if (!parsed) return makeError(ErrorCode::InvalidArgument, "TUCCL_COMM_ID: " + parsed.status().message());
    return *commId;
  }
  const std::optional<std::string> host = env::text("MASTER_ADDR");
  if (!host)
    return makeError(ErrorCode::NotFound,
                     "no rendezvous address: set TUCCL_COMM_ID=host:port (or torchrun's MASTER_ADDR and MASTER_PORT)");
  if (!isSet("MASTER_PORT"))
    return makeError(ErrorCode::NotFound, "MASTER_ADDR is set but MASTER_PORT is not");
  // TuCCL's root listens one port above torchrun's own store.
  Expected<int32_t> port = boundedVariable("MASTER_PORT", 1, 65534, "1 to 65534: TuCCL uses MASTER_PORT+1");
  if (!port) return port.status();
  return transport::joinHostPort(*host, static_cast<uint16_t>(*port + 1));
}

}  // namespace

Expected<LaunchEnvironment> readLaunchEnvironment() {
  LaunchEnvironment environment;
  const LauncherVariables* found = nullptr;
  for (const LauncherVariables& launcher : kLaunchers) {
    if (!isSet(launcher.rank)) continue;
    found = &launcher;
    break;
  }
  if (found == nullptr)
    return makeError(ErrorCode::NotFound,
                     "no launcher's rank variable is set (TUCCL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID, RANK)");
  Status ranks = readRanks(*found, environment);
  if (!ranks.ok()) return ranks;
  Expected<std::string> address = readAddress();
  if (!address) return address.status();
  environment.commId = std::move(address).value();
  return environment;
}

}  // namespace tuccl::backend
