// The profiler plugin (libnccl-profiler-tuccl.so) loaded as NCCL loads it, driven through its
// entry points without NCCL: v4's init argument order and one-byte event type, what it ignores,
// NULL handles and contexts, a full pool (the sample is lost, nothing blocks), a KernelCh whose
// parent is not its record, and the one warning when the tuner's intake is not loaded. The
// end-to-end path into the tuner is TunerAdaptTest.TheProfilerPluginsDurationsMakeEveryRankSwitchAsReportedOnes.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <string>
#include <vector>

#include "tuccl/nccl_profiler.h"

namespace {

using DescriptorV4 = tucclNcclProfilerEventDescr_v4_t;
using DescriptorV5 = tucclNcclProfilerEventDescr_v5_t;
using Coll = tucclNcclProfilerColl_v4_t;
using ProfilerV4 = tucclNcclProfiler_v4_t;
using ProfilerV5 = tucclNcclProfiler_v5_t;

std::vector<std::string> logged;
void logLine(ncclDebugLogLevel, unsigned long, const char*, int, const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  logged.emplace_back(text);
}

class ProfilerPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TUCCL_ADAPT", "1", 1);
    logged.clear();
    library_ = dlopen(TUCCL_PROFILER_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library_, nullptr) << dlerror();
  }
  void TearDown() override {
    if (library_ != nullptr) dlclose(library_);
    unsetenv("TUCCL_ADAPT");
  }
  template <typename T>
  const T& table(const char* name) {
    const auto* found = static_cast<const T*>(dlsym(library_, name));
    EXPECT_NE(found, nullptr) << name;
    return *found;
  }
  void* library_ = nullptr;
};

DescriptorV4 collV4(const char* func, uint8_t channels) {
  DescriptorV4 d;
  std::memset(&d, 0xab, sizeof d);  // NCCL's v4 adapter leaves the padding after `type` as it was
  d.type = 2;
  d.parentObj = nullptr;
  d.rank = 1;
  d.coll = Coll{7, func, nullptr, nullptr, 1024, -1, "ncclFloat32", channels, 16, "RING", "SIMPLE"};
  return d;
}

TEST_F(ProfilerPlugin, V4TakesCollectivesAndTheirChannelsAndReportsWithoutATunerOnce) {
  const auto& v4 = table<ProfilerV4>("ncclProfiler_v4");
  EXPECT_STREQ(v4.name, "TuCCL");
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(v4.init(&context, &mask, "comm", 0x1234, 1, 4, 1, logLine), 0);
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(mask, 2 | 64) << "Coll | KernelCh";
  for (int call = 0; call < 2; ++call) {
    DescriptorV4 coll = collV4("AllReduce", 1);
    void* collHandle = nullptr;
    ASSERT_EQ(v4.startEvent(context, &collHandle, &coll), 0);
    ASSERT_NE(collHandle, nullptr);
    DescriptorV4 kernel;
    std::memset(&kernel, 0xcd, sizeof kernel);
    kernel.type = 64;
    kernel.parentObj = collHandle;
    kernel.rank = 0;
    kernel.kernelCh.channelId = 3;
    kernel.kernelCh.pTimer = 1000;
    void* kernelHandle = nullptr;
    ASSERT_EQ(v4.startEvent(context, &kernelHandle, &kernel), 0);
    ASSERT_NE(kernelHandle, nullptr);
    tucclNcclProfilerEventStateArgs_v4_t stopTime{};
    stopTime.kernelCh.pTimer = 5000;
    EXPECT_EQ(v4.recordEventState(kernelHandle, tucclNcclProfilerKernelChStop, &stopTime), 0);
    EXPECT_EQ(v4.stopEvent(kernelHandle), 0);
    EXPECT_EQ(v4.stopEvent(collHandle), 0);  // the last reference: reports, finds no tuner
  }
  int warnings = 0;
  for (const std::string& line : logged) warnings += line.find("tuner plugin is not loaded") != std::string::npos;
  EXPECT_EQ(warnings, 1) << "said once, however many samples";
  EXPECT_EQ(v4.finalize(context), 0);
}

TEST_F(ProfilerPlugin, IgnoresWhatItDoesNotTimeAndToleratesNulls) {
  const auto& v5 = table<ProfilerV5>("ncclProfiler_v5");
  const auto& v6 = table<ProfilerV5>("ncclProfiler_v6");
  EXPECT_EQ(v5.startEvent, v6.startEvent) << "one set of functions for v5 and v6";
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(v6.init(&context, 42, &mask, nullptr, 1, 2, 0, nullptr), 0);
  ASSERT_NE(context, nullptr);
  void* handle = reinterpret_cast<void*>(0x1);
  for (uint64_t type : {1u, 4u, 8u, 16u, 32u, 128u, 256u, 512u, 1024u, 2048u, 4096u}) {
    DescriptorV5 other{};
    other.type = type;
    handle = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(v6.startEvent(context, &handle, &other), 0);
    EXPECT_EQ(handle, nullptr) << "type " << type;
  }
  for (const char* func : std::vector<const char*>{"AlltoAll", "SendRecv", "Send", nullptr}) {
    DescriptorV5 coll{};
    coll.type = 2;
    coll.coll.common = Coll{0, func, nullptr, nullptr, 64, -1, "ncclInt8", 1, 16, "RING", "SIMPLE"};
    handle = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(v6.startEvent(context, &handle, &coll), 0);
    EXPECT_EQ(handle, nullptr) << (func != nullptr ? func : "(null)");
  }
  // A KernelCh whose parent is not a record of this plugin.
  int notOurs = 0;
  DescriptorV5 kernel{};
  kernel.type = 64;
  kernel.parentObj = &notOurs;
  EXPECT_EQ(v6.startEvent(context, &handle, &kernel), 0);
  EXPECT_EQ(handle, nullptr);
  // NULLs everywhere NCCL may pass them.
  EXPECT_EQ(v6.startEvent(nullptr, &handle, &kernel), 0);
  EXPECT_EQ(handle, nullptr);
  EXPECT_EQ(v6.stopEvent(nullptr), 0);
  EXPECT_EQ(v6.recordEventState(nullptr, 22, nullptr), 0);
  EXPECT_EQ(v6.finalize(nullptr), 0);
  EXPECT_EQ(v6.finalize(context), 0);
}

TEST_F(ProfilerPlugin, AFullPoolLosesTheSampleAndFinalizeTakesEveryRecordBack) {
  const auto& v6 = table<ProfilerV5>("ncclProfiler_v6");
  void* context = nullptr;
  int mask = 0;
  ASSERT_EQ(v6.init(&context, 7, &mask, nullptr, 1, 2, 0, logLine), 0);
  std::vector<void*> handles;
  for (int i = 0; i < 300; ++i) {  // never stopped, as an aborted communicator leaves them
    DescriptorV5 coll{};
    coll.type = 2;
    coll.coll.common = Coll{static_cast<uint64_t>(i), "AllGather", nullptr, nullptr, 64, -1, "ncclInt8", 2, 16, "RING", "LL"};
    void* handle = nullptr;
    ASSERT_EQ(v6.startEvent(context, &handle, &coll), 0);
    if (handle != nullptr) handles.push_back(handle);
  }
  EXPECT_EQ(handles.size(), 256u) << "the records of one communicator";
  EXPECT_EQ(v6.finalize(context), 0);
  bool said = false;
  for (const std::string& line : logged) said = said || line.find("44 collective(s)") != std::string::npos;
  EXPECT_TRUE(said) << "finalize says how many were not timed";
}

TEST_F(ProfilerPlugin, WithoutTheRuntimePhaseACommunicatorOptsOut) {
  setenv("TUCCL_ADAPT", "0", 1);
  const auto& v6 = table<ProfilerV5>("ncclProfiler_v6");
  void* context = reinterpret_cast<void*>(0x1);
  int mask = 0;
  EXPECT_EQ(v6.init(&context, 7, &mask, nullptr, 1, 2, 0, logLine), 0) << "init never fails";
  EXPECT_EQ(context, nullptr);
  EXPECT_EQ(mask, 0) << "no events asked for";
}

}  // namespace
