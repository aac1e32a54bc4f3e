// Starting the ranks of a multi-process test as child processes with the launcher's environment
// (TUCCL_COMM_ID on a free loopback port, TUCCL_RANK, TUCCL_NRANKS, TUCCL_LOCAL_RANK), waiting for
// them with a deadline, and ending — by pid — only the processes started here.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tuccl::testing {

/// A loopback TCP port nobody listens on right now.
inline int freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

struct RankProcesses {
  std::vector<pid_t> pids;
  std::vector<std::string> logs;  ///< stdout+stderr of each rank
  std::vector<int> status;        ///< waitpid status; -1 while running
};

/// Starts `n` ranks of `argv` with the launcher environment plus `extra` ("NAME=value", replacing
/// a variable of the same name) and, when given, `perRank(r)`'s variables for rank r. What the
/// runtime phase learns stays in `logDir` (TUCCL_ADAPT_FILE, unless `common` names one): tests
/// share the plan cache, not each other's learned choices.
inline RankProcesses startRanks(int n, const std::vector<std::string>& argv, const std::vector<std::string>& common,
                                const std::string& logDir,
                                const std::function<std::vector<std::string>(int)>& perRank = nullptr) {
  RankProcesses ranks;
  const std::string commId = "TUCCL_COMM_ID=127.0.0.1:" + std::to_string(freePort());
  std::vector<std::string> shared = common;
  const bool namesAdaptFile = std::any_of(common.begin(), common.end(), [](const std::string& e) {
    return e.rfind("TUCCL_ADAPT_FILE=", 0) == 0;
  });
  if (!namesAdaptFile) shared.insert(shared.begin(), "TUCCL_ADAPT_FILE=" + logDir + "/adaptation.json");
  for (int r = 0; r < n; ++r) {
    std::vector<std::string> extra = shared;
    if (perRank) {
      for (const std::string& e : perRank(r)) extra.push_back(e);
    }
    std::vector<std::string> env;
    auto overridden = [&](const std::string& entry) {  // `extra` wins over this process's variables
      for (const std::string& e : extra) {
        if (entry.compare(0, e.find('=') + 1, e, 0, e.find('=') + 1) == 0) return true;
      }
      return false;
    };
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (entry.rfind("TUCCL_", 0) == 0 && entry.rfind("TUCCL_CACHE_DIR=", 0) != 0) continue;
      if (overridden(entry)) continue;
      env.push_back(entry);
    }
    env.push_back(commId);
    env.push_back("TUCCL_RANK=" + std::to_string(r));
    env.push_back("TUCCL_NRANKS=" + std::to_string(n));
    env.push_back("TUCCL_LOCAL_RANK=" + std::to_string(r));
    for (const std::string& e : extra) env.push_back(e);
    std::vector<char*> envp, args;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> argCopy = argv;
    for (std::string& a : argCopy) args.push_back(a.data());
    args.push_back(nullptr);
    const std::string log = logDir + "/rank" + std::to_string(r) + ".log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = -1;
    if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data()) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&actions);
    ranks.pids.push_back(pid);
    ranks.logs.push_back(log);
    ranks.status.push_back(-1);
  }
  return ranks;
}

/// Waits until every rank ended or `seconds` passed; ranks still running then are killed (by
/// pid) and reported as not finished. Returns whether all ended by themselves.
inline bool waitRanks(RankProcesses& ranks, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  bool allEnded = false;
  while (!allEnded) {
    allEnded = true;
    for (size_t r = 0; r < ranks.pids.size(); ++r) {
      if (ranks.status[r] != -1 || ranks.pids[r] <= 0) continue;
      int status = 0;
      if (waitpid(ranks.pids[r], &status, WNOHANG) == ranks.pids[r]) {
        ranks.status[r] = status;
      } else {
        allEnded = false;
      }
    }
    if (allEnded) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t r = 0; r < ranks.pids.size(); ++r) {
        if (ranks.status[r] == -1 && ranks.pids[r] > 0) {
          kill(ranks.pids[r], SIGKILL);
          waitpid(ranks.pids[r], nullptr, 0);
        }
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

inline std::string readLog(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Every rank's log, each after a "---- rank r" line.
inline std::string logsOf(const RankProcesses& ranks) {
  std::string text;
  for (size_t r = 0; r < ranks.logs.size(); ++r) text += "---- rank " + std::to_string(r) + "\n" + readLog(ranks.logs[r]);
  return text;
}

/// `path`, emptied (created when missing): the directory of one test's rank logs.
inline std::string freshDirectory(const std::string& path) {
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

}  // namespace tuccl::testing
