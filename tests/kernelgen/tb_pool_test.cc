// The TB pool, the one CPU runner of TBs (the host executor's and the CPU device's): every block
// of every launch runs once, at once, with its blockIdx; the caller runs block 0 unless it
// watches; the watchdog raises the abort flag of TBs still running at its time; the threads
// serve call after call.
#include "kernelgen/tb_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

namespace tuccl {
namespace {

thread_local unsigned currentBlock = 0;
void setBlock(unsigned block) { currentBlock = block; }

std::mutex seenMutex;
std::set<std::pair<int32_t, unsigned>> seen;  // (rank, block) of every TB run
std::set<std::thread::id> threads;
std::atomic<int32_t> arrived{0};

void resetRecords() {
  std::lock_guard lock(seenMutex);
  seen.clear();
  threads.clear();
  arrived.store(0);
}

std::atomic<bool> apart{false};  // a TB waited 10 s for the others: they did not run at once

// Records its TB, then waits until every TB of the run (args.nRanks of them) arrived: the TBs
// must run at once.
void recordingKernel(dev::KernelArgs args) {
  {
    std::lock_guard lock(seenMutex);
    seen.emplace(args.rank, currentBlock);
    threads.insert(std::this_thread::get_id());
  }
  ++arrived;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (arrived.load() < args.nRanks && !apart.load()) {
    if (std::chrono::steady_clock::now() > deadline) apart.store(true);
    std::this_thread::yield();
  }
}

// Spins until the abort flag is raised.
void spinningKernel(dev::KernelArgs args) {
  while (std::atomic_ref<int32_t>(*args.abort).load() == 0) std::this_thread::yield();
}

HostKernels hostKernels() {
  HostKernels kernels;
  kernels.setBlock = &setBlock;
  return kernels;
}

TEST(TbPool, RunsEveryBlockOfEveryLaunchAtOnce) {
  const HostKernels kernels = hostKernels();
  TbPool pool;
  for (int call = 0; call < 3; ++call) {  // the same threads, call after call
    resetRecords();
    dev::KernelArgs rank0, rank1;
    rank0.rank = 0;
    rank1.rank = 1;
    rank0.nRanks = rank1.nRanks = 5;  // every TB of the call
    const HostLaunch launches[] = {{&recordingKernel, &rank0, 3}, {&recordingKernel, &rank1, 2}};
    Expected<bool> ran = pool.run(kernels, launches);
    ASSERT_TRUE(ran.ok()) << ran.status().message();
    EXPECT_FALSE(*ran);
    const std::set<std::pair<int32_t, unsigned>> expected = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}};
    EXPECT_EQ(seen, expected);
    EXPECT_FALSE(apart.load()) << "the TBs ran at once";
    EXPECT_EQ(threads.size(), 5u);
    EXPECT_EQ(threads.count(std::this_thread::get_id()), 1u) << "block 0 runs on the caller";
  }
}

TEST(TbPool, TheWatchdogAbortsTbsStillRunning) {
  const HostKernels kernels = hostKernels();
  TbPool pool;
  int32_t abort = 0;
  dev::KernelArgs args;
  args.abort = &abort;
  const HostLaunch launch{&spinningKernel, &args, 2};
  const TbWatchdog watchdog{&abort, std::chrono::steady_clock::now() + std::chrono::milliseconds(100)};
  Expected<bool> ran = pool.run(kernels, std::span(&launch, 1), &watchdog);
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  EXPECT_TRUE(*ran) << "the watchdog fired";
  EXPECT_EQ(abort, 1);
}

TEST(TbPool, NoBlocksRunNothing) {
  const HostKernels kernels = hostKernels();
  TbPool pool;
  Expected<bool> ran = pool.run(kernels, {});
  ASSERT_TRUE(ran.ok());
  EXPECT_FALSE(*ran);
}

}  // namespace
}  // namespace tuccl
