// NVRTC results on disk (nvrtc.h: compileWithNvrtcCached). An entry is named by the hash of
// everything the compilation reads; its content is sealed (support/cache_files.h) so a truncated
// or damaged file is recompiled rather than handed to a GPU.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "kernelgen/device_headers.h"
#include "kernelgen/host_build.h"
#include "kernelgen/nvrtc.h"
#include "support/cache_files.h"
#include "support/hash.h"

namespace tuccl {
namespace {

// Part of every entry's name: a change of the entry format starts new entries.
constexpr std::string_view kEntryFormat = "tuccl-nvrtc-cache 1";

uint64_t entryHash(const GeneratedKernel& kernel, std::string_view arch, const NvrtcOptions& options) {
  uint64_t hash = fnv1a64(kEntryFormat);
  auto add = [&hash](std::string_view part) {
    hash = fnv1a64(std::to_string(part.size()) + ":", hash);
    hash = fnv1a64(part, hash);
  };
  add(nvrtcVersionText());
  add(arch);
  add(kernel.fileName);
  add(kernel.source);
  for (const EmbeddedFile& header : deviceHeaders()) {
    add(header.name);
    add(header.text);
  }
  add(options.dataType ? dataTypeName(*options.dataType) : "any type");
  add(options.op ? reduceOpName(*options.op) : "any op");
  for (const std::string& option : nvrtcDefaultOptions(options)) add(option);
  for (const std::string& extra : options.extraOptions) add(extra);
  return hash;
}

// "cubin <bytes>\n<cubin><ptx>"
std::string serializeResult(const NvrtcOutput& result) {
  std::string out = "cubin " + std::to_string(result.cubin.size()) + "\n";
  out.append(result.cubin.data(), result.cubin.size());
  out += result.ptx;
  return out;
}

bool parseResult(std::string_view body, NvrtcOutput& result) {
  constexpr std::string_view kPrefix = "cubin ";
  const size_t newline = body.find('\n');
  if (body.substr(0, kPrefix.size()) != kPrefix || newline == std::string_view::npos) return false;
  size_t size = 0;
  const char* begin = body.data() + kPrefix.size();
  const auto [end, ec] = std::from_chars(begin, body.data() + newline, size);
  if (ec != std::errc() || end != body.data() + newline || size == 0 || size > body.size() - newline - 1) return false;
  const std::string_view cubin = body.substr(newline + 1, size);
  result.cubin.assign(cubin.begin(), cubin.end());
  result.ptx = std::string(body.substr(newline + 1 + size));
  return !result.ptx.empty();
}

}  // namespace

Expected<NvrtcOutput> compileWithNvrtcCached(const GeneratedKernel& kernel, std::string_view arch,
                                             const NvrtcOptions& options, const std::string& cacheDir,
                                             bool* fromCache) {
  if (fromCache != nullptr) *fromCache = false;
  if (!nvrtcAvailable()) return compileWithNvrtc(kernel, arch, options);
  const std::filesystem::path entry =
      kernelCacheRoot(cacheDir) / "nvrtc" / (hashFileName(entryHash(kernel, arch, options)) + ".entry");
  if (Expected<std::string> bytes = readWholeFile(entry); bytes.ok()) {
    if (std::optional<std::string_view> body = unsealCacheEntry(*bytes)) {
      NvrtcOutput cached;
      cached.fileName = kernel.fileName;
      cached.arch = std::string(arch);
      if (parseResult(*body, cached)) {
        if (fromCache != nullptr) *fromCache = true;
        return cached;
      }
    }
  }
  Expected<NvrtcOutput> result = compileWithNvrtc(kernel, arch, options);
  if (result) {
    std::error_code ignored;
    std::filesystem::create_directories(entry.parent_path(), ignored);
    (void)writeFileAtomically(entry, sealCacheEntry(serializeResult(*result)));  // a cache: best effort
  }
  return result;
}

Expected<std::vector<NvrtcOutput>> compileKernelsWithNvrtc(const std::vector<const GeneratedKernel*>& kernels,
                                                           std::string_view arch, const NvrtcOptions& options,
                                                           const std::string& cacheDir, size_t workers,
                                                           size_t* fromCache) {
  std::vector<std::optional<Expected<NvrtcOutput>>> results(kernels.size());
  if (workers == 0) workers = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<size_t> next{0};
  std::atomic<size_t> cached{0};
  auto work = [&] {
    for (size_t i = next++; i < kernels.size(); i = next++) {
      bool hit = false;
      results[i].emplace(compileWithNvrtcCached(*kernels[i], arch, options, cacheDir, &hit));
      if (hit) ++cached;
    }
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < std::min(workers, kernels.size()); ++w) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  if (fromCache != nullptr) *fromCache = cached;
  std::vector<NvrtcOutput> outputs;
  for (std::optional<Expected<NvrtcOutput>>& result : results) {
    if (!*result) return result->status();
    outputs.push_back(std::move(**result));
  }
  return outputs;
}

}  // namespace tuccl
