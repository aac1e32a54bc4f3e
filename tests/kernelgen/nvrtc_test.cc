// NVRTC compiles the generated kernels of every example plan for sm_80 and sm_90 (no GPU
// needed); compile errors name the generated file and carry NVRTC's log. nvcc compiles the
// device header library.
#include "kernelgen/nvrtc.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "kernelgen/datatype.h"
#include "kernelgen/device_headers.h"
#include "plan_fixtures.h"

namespace tuccl {
namespace {

TEST(Nvrtc, CompilesEveryExamplePlanForSm80AndSm90) {
  if (!nvrtcAvailable()) GTEST_SKIP() << "built without CUDA";
  for (const std::string& name : testing::exampleAlgorithms()) {
    const auto& example = testing::compileExample(name);
    std::vector<GeneratedKernel> kernels = testing::kernelsOf(example.plan).kernels;
    // Two compilations at a time (CI has two cores); NVRTC programs are independent.
    std::vector<std::future<Expected<NvrtcOutput>>> results;
    for (const GeneratedKernel& kernel : kernels) {
      for (const char* arch : {"sm_80", "sm_90"}) {
        results.push_back(std::async(std::launch::deferred, [&kernel, arch] {
          NvrtcOptions nvrtcOptions;  // specialised like a runtime compiling per call configuration
          nvrtcOptions.dataType = DataType::Float32;
          nvrtcOptions.op = ReduceOp::Sum;
          return compileWithNvrtc(kernel, arch, nvrtcOptions);
        }));
      }
    }
    std::vector<std::optional<Expected<NvrtcOutput>>> done(results.size());
    std::thread helper([&] {
      for (size_t i = 1; i < results.size(); i += 2) done[i].emplace(results[i].get());
    });
    for (size_t i = 0; i < results.size(); i += 2) done[i].emplace(results[i].get());
    helper.join();
    for (const std::optional<Expected<NvrtcOutput>>& compiled : done) {
      ASSERT_TRUE(compiled->ok()) << name << ": " << compiled->status().toString();
      const NvrtcOutput& result = **compiled;
      EXPECT_GT(result.cubin.size(), 1000u);
      ASSERT_GE(result.cubin.size(), 4u);
      EXPECT_EQ(std::string(result.cubin.data() + 1, 3), "ELF");
      EXPECT_NE(result.ptx.find(".entry tuccl_kernel"), std::string::npos);
      EXPECT_NE(result.ptx.find(".target " + std::string(result.arch == "sm_80" ? "sm_80" : "sm_90")), std::string::npos);
    }
  }
}

TEST(Nvrtc, GenericKernelServesEveryDatatype) {
  if (!nvrtcAvailable()) GTEST_SKIP() << "built without CUDA";
  const auto& example = testing::compileExample("hm_allreduce");
  const GeneratedKernels kernels = testing::kernelsOf(example.plan);
  const GeneratedKernel& kernel = kernels.kernelOf(5);
  Expected<NvrtcOutput> generic = compileWithNvrtc(kernel, "sm_90");
  ASSERT_TRUE(generic.ok()) << generic.status().message();
  // ... and every protocol (a run-time value too): LL / LL128 line stores, LL128's warp vote.
  EXPECT_NE(generic->ptx.find("st.volatile.global.v2.u64"), std::string::npos);
  EXPECT_NE(generic->ptx.find("vote.sync.all"), std::string::npos);
  NvrtcOptions floatSum;
  floatSum.dataType = DataType::Float32;
  floatSum.op = ReduceOp::Sum;
  Expected<NvrtcOutput> specialised = compileWithNvrtc(kernel, "sm_90", floatSum);
  ASSERT_TRUE(specialised.ok()) << specialised.status().message();
  EXPECT_GT(generic->ptx.size(), specialised->ptx.size() + 10000) << "the generic kernel holds every datatype";
}

// The datatypes beyond the first seven (int8, uint32, uint64, fp8 e4m3 and e5m2) compile for sm_90
// in a kernel specialised to each (-DTUCCL_ONLY_DTYPE; the runtime's generic kernel, above, holds
// them all), every operation included. fp8 is the same integer code as the host build's (no sm_89
// instruction), so both sides compute the same bits. Every kernel holds the prologue's PreMulSum
// scaling.
TEST(Nvrtc, CompilesTheNewDatatypesForSm90) {
  if (!nvrtcAvailable()) GTEST_SKIP() << "built without CUDA";
  const auto& example = testing::compileExample("ring_allreduce");
  const GeneratedKernel kernel = testing::kernelsOf(example.plan).kernelOf(1);
  for (DataType type : {DataType::Int8, DataType::Uint32, DataType::Uint64, DataType::Float8E4M3, DataType::Float8E5M2}) {
    NvrtcOptions options;
    options.dataType = type;
    const Expected<NvrtcOutput> compiled = compileWithNvrtc(kernel, "sm_90", options);
    ASSERT_TRUE(compiled.ok()) << dataTypeName(type) << ": " << compiled.status().message();
    EXPECT_EQ(std::string(compiled->cubin.data() + 1, 3), "ELF");
    EXPECT_NE(compiled->ptx.find("scaleElements"), std::string::npos) << dataTypeName(type);
  }
}

// Every protocol compiles: a kernel specialised to each (-DTUCCL_ONLY_PROTOCOL, as a runtime
// compiling per plan would) holds that protocol's stores and loads and none of the others'. LL
// and LL128 store lines with 16-byte volatile stores; LL128's receiver checks a line's flag
// across the 8 lanes that loaded it (shuffle and warp vote).
TEST(Nvrtc, CompilesEveryProtocol) {
  if (!nvrtcAvailable()) GTEST_SKIP() << "built without CUDA";
  const auto& example = testing::compileExample("ring_allreduce");
  const GeneratedKernel kernel = testing::kernelsOf(example.plan).kernelOf(1);
  for (Protocol protocol : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
    NvrtcOptions options;
    options.dataType = DataType::Float32;
    options.op = ReduceOp::Sum;
    options.extraOptions.push_back("-DTUCCL_ONLY_PROTOCOL=" + std::to_string(deviceProtocol(protocol)));
    const Expected<NvrtcOutput> compiled = compileWithNvrtc(kernel, "sm_90", options);
    ASSERT_TRUE(compiled.ok()) << protocolName(protocol) << ": " << compiled.status().message();
    const NvrtcOutput& result = *compiled;
    EXPECT_EQ(std::string(result.cubin.data() + 1, 3), "ELF");
    const bool lines = result.ptx.find("st.volatile.global.v2.u64") != std::string::npos;
    const bool warpVote = result.ptx.find("shfl.sync") != std::string::npos && result.ptx.find("vote.sync.all") != std::string::npos;
    EXPECT_EQ(lines, protocol != Protocol::Simple) << protocolName(protocol);
    EXPECT_EQ(warpVote, protocol == Protocol::LL128) << protocolName(protocol);
  }
}

TEST(Nvrtc, ErrorsNameTheFileAndCarryTheLog) {
  if (!nvrtcAvailable()) GTEST_SKIP() << "built without CUDA";
  GeneratedKernel broken;
  broken.fileName = "rank7.cu";
  broken.kernelName = "tuccl_rank7";
  broken.source = "#include \"primitives.h\"\nTUCCL_KERNEL tuccl_rank7(tuccl::dev::KernelArgs args) {\n  undefinedThing(args);\n}\n";
  Expected<NvrtcOutput> result = compileWithNvrtc(broken, "sm_90");
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status().diagnostic().file, "rank7.cu");
  // One line naming the file, then NVRTC's log (which names it too, and the error).
  const std::string message = result.status().message();
  const std::string error = message.substr(0, message.find('\n'));
  const std::string log = message.find('\n') == std::string::npos ? "" : message.substr(message.find('\n') + 1);
  EXPECT_NE(error.find("rank7.cu"), std::string::npos) << error;
  EXPECT_NE(log.find("rank7.cu"), std::string::npos) << log;
  EXPECT_NE(log.find("undefinedThing"), std::string::npos) << log;
}

// A second compilation of the same kernel reads the CUBIN and PTX from the cache; another
// architecture or source is a new entry; a damaged entry is compiled again.
TEST(Nvrtc, CachedCompilationsAreReadBackAndDamagedEntriesRecompiled) {
  if (!nvrtcAvailable()) GTEST_SKIP() << "built without CUDA";
  namespace fs = std::filesystem;
  const fs::path cache = fs::path(TUCCL_BINARY_DIR) / "nvrtc_cache_test";
  fs::remove_all(cache);
  GeneratedKernel kernel;
  kernel.fileName = "rank0.cu";
  kernel.kernelName = "tuccl_rank0";
  kernel.source = "#include \"primitives.h\"\nTUCCL_KERNEL tuccl_rank0(tuccl::dev::KernelArgs args) { (void)args; }\n";
  bool fromCache = true;
  const Expected<NvrtcOutput> first = compileWithNvrtcCached(kernel, "sm_90", {}, cache.string(), &fromCache);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_FALSE(fromCache);
  const Expected<NvrtcOutput> second = compileWithNvrtcCached(kernel, "sm_90", {}, cache.string(), &fromCache);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(fromCache);
  EXPECT_EQ(second->cubin, first->cubin);
  EXPECT_EQ(second->ptx, first->ptx);
  EXPECT_EQ(second->fileName, "rank0.cu");
  // Damage every entry: the next call compiles again and gives the same bytes.
  for (const auto& entry : fs::recursive_directory_iterator(cache)) {
    if (entry.is_regular_file() && entry.path().extension() == ".entry") fs::resize_file(entry.path(), 40);
  }
  const Expected<NvrtcOutput> third = compileWithNvrtcCached(kernel, "sm_90", {}, cache.string(), &fromCache);
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(fromCache);
  EXPECT_EQ(third->cubin, first->cubin);
  fs::remove_all(cache);
}

TEST(Nvrtc, RejectsUnknownArchitecture) {
  GeneratedKernel kernel;
  kernel.fileName = "rank0.cu";
  Expected<NvrtcOutput> result = compileWithNvrtc(kernel, "volta");
  EXPECT_FALSE(result.ok());
  EXPECT_FALSE(result.status().message().empty());
}

#if defined(TUCCL_KERNELGEN_NVCC)
// nvcc builds the device header library: every primitive instantiated in a kernel, for two
// architectures, plus the host pass of nvcc (the headers are also host code there).
TEST(Nvcc, CompilesTheDeviceHeaderLibrary) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(TUCCL_BINARY_DIR) / "kernelgen_nvcc_test";
  fs::create_directories(dir);
  ASSERT_TRUE(writeDeviceHeaders(dir / "device").ok());
  const fs::path source = dir / "device_library.cu";
  std::ofstream(source) << R"(#include "primitives.h"
using namespace tuccl::dev;
TUCCL_KERNEL tuccl_all_primitives(KernelArgs args) {
  Tb t = makeTb(args, static_cast<int32_t>(blockIdx.x));
  TUCCL_TRY(prologue(t, 1, 1, 0));
  for (int64_t mb = 0; mb < t.nMicroBatches; ++mb) {
    TUCCL_TRY(waitEntry(t, 0, 0, 0, mb));
    TUCCL_TRY(send(t, 0, kInput, 0, 0, 1, 0, mb));
    TUCCL_TRY(recv(t, 1, 0, kOutput, 0, 1, 0, mb));
    TUCCL_TRY(recvReduceCopy(t, 1, 0, kOutput, 0, 1, 0, mb));
    TUCCL_TRY(recvCopySend(t, 1, 0, 0, kOutput, 0, 1, 0, 1, mb));
    TUCCL_TRY(recvReduceSend(t, 1, 0, 0, kOutput, 0, 1, 0, 1, mb));
    TUCCL_TRY(copy(t, kInput, 0, kOutput, 0, 1, mb));
    TUCCL_TRY(reduce(t, kInput, 0, kOutput, 0, 1, mb));
    postEntry(t, 0, mb);
  }
  TUCCL_TRY(epilogue(t, 1, kOutput, 0, 1));
}
int main() { return 0; }
)";
  const std::string command = std::string("'") + TUCCL_KERNELGEN_NVCC + "' -std=c++17 -gencode arch=compute_80,code=sm_80 " +
                              "-gencode arch=compute_90,code=sm_90 -I'" + (dir / "device").string() + "' -c '" +
                              source.string() + "' -o '" + (dir / "device_library.o").string() + "' 2>&1";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}
#endif

}  // namespace
}  // namespace tuccl
