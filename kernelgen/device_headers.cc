// The embedded device headers (device_headers.h); the bytes are generated into
// <build>/kernelgen/device_headers_data.cc by cmake/EmbedFiles.cmake.
#include "kernelgen/device_headers.h"

#include <fstream>

namespace tuccl {

extern const EmbeddedFile kDeviceHeaders[];
extern const std::size_t kDeviceHeadersCount;

std::span<const EmbeddedFile> deviceHeaders() { return {kDeviceHeaders, kDeviceHeadersCount}; }

Status writeDeviceHeaders(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return makeError(ErrorCode::IoError, "cannot create " + dir.string() + ": " + ec.message());
  for (const EmbeddedFile& header : deviceHeaders()) {
    const std::filesystem::path path = dir / header.name;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(header.text.data(), static_cast<std::streamsize>(header.text.size()));
    if (!out.flush()) return makeError(ErrorCode::IoError, "cannot write " + path.string());
  }
  return {};
}

}  // namespace tuccl
