// The device header library (kernelgen/device/*.h) as embedded in TuCCL at build time, so that
// compiling generated kernels never reads the source tree: NVRTC receives the headers in memory
// and the host build writes them beside the generated sources in its cache directory.
//
// In:  nothing; the headers are those of this build.
// Out: each header's file name and text; writeDeviceHeaders puts them into a directory.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>

#include "support/status.h"

namespace tuccl {

/// A file embedded by cmake/EmbedFiles.cmake: its file name and its bytes.
struct EmbeddedFile {
  std::string_view name;
  std::string_view text;
};

/// The device headers, by file name ("primitives.h", ...), in file-name order.
std::span<const EmbeddedFile> deviceHeaders();

/// Writes every device header into `dir` (created if missing), replacing files of the same name.
Status writeDeviceHeaders(const std::filesystem::path& dir);

}  // namespace tuccl
