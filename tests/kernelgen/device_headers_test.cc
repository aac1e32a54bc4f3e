// The device headers embedded in tuccl_kernelgen are exactly kernelgen/device/*.h of the source
// tree, and writeDeviceHeaders reproduces them byte for byte.
#include "kernelgen/device_headers.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace tuccl {
namespace {

namespace fs = std::filesystem;

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::map<std::string, std::string> filesIn(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir)) files[entry.path().filename().string()] = readFile(entry.path());
  return files;
}

TEST(DeviceHeaders, AreTheSourceTreeHeadersInFileNameOrder) {
  const std::map<std::string, std::string> expected = filesIn(fs::path(TUCCL_SOURCE_DIR) / "kernelgen" / "device");
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(deviceHeaders().size(), expected.size());
  auto it = expected.begin();
  for (const EmbeddedFile& header : deviceHeaders()) {
    EXPECT_EQ(header.name, it->first);
    EXPECT_TRUE(header.text == it->second) << header.name << " differs from the source tree";
    ++it;
  }
}

TEST(DeviceHeaders, WriteReproducesThemAndReplacesStaleFiles) {
  const fs::path dir = fs::path(TUCCL_BINARY_DIR) / "device_headers_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "primitives.h") << "stale";
  ASSERT_TRUE(writeDeviceHeaders(dir).ok());
  const std::map<std::string, std::string> written = filesIn(dir);
  ASSERT_EQ(written.size(), deviceHeaders().size());
  for (const EmbeddedFile& header : deviceHeaders()) EXPECT_TRUE(written.at(std::string(header.name)) == header.text);
  fs::remove_all(dir);
}

TEST(DeviceHeaders, WriteReportsAnUnwritableDirectory) {
  const fs::path file = fs::path(TUCCL_BINARY_DIR) / "device_headers_test_file";
  std::ofstream(file) << "not a directory";
  const Status status = writeDeviceHeaders(file / "device");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::IoError);
  EXPECT_NE(status.message().find(file.string()), std::string::npos) << status.message();
  fs::remove(file);
}

}  // namespace
}  // namespace tuccl
