// The helpers every tool shares (cli/cli.h): output files checked before any work, never
// replaced without --force, and errors that say why.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

namespace {

namespace fs = std::filesystem;
using tuccl::Status;

class CliOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tuccl_cli_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code error;
    fs::permissions(dir_ / "locked", fs::perms::owner_all, error);
    fs::remove_all(dir_, error);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string contents(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::path dir_;
};

TEST_F(CliOutputTest, AnExistingFileIsRefusedWithoutForce) {
  std::ofstream(path("out.csv")) << "old";
  Status refused = tuccl::cli::checkOutputFree(path("out.csv"), false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("exists; pass --force to overwrite it"), std::string::npos) << refused.message();
  EXPECT_TRUE(tuccl::cli::checkOutputFree(path("out.csv"), true).ok());
  EXPECT_TRUE(tuccl::cli::checkOutputFree(path("new.csv"), false).ok());
  EXPECT_TRUE(tuccl::cli::checkOutputFree("", false).ok());   // no output asked for
  EXPECT_TRUE(tuccl::cli::checkOutputFree("-", false).ok());  // standard output
}

TEST_F(CliOutputTest, ADirectoryIsNotAnOutputFile) {
  Status refused = tuccl::cli::checkOutputFree(dir_.string(), true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("is a directory"), std::string::npos) << refused.message();
}

TEST_F(CliOutputTest, AFolderStillToBeMadeIsCheckedAtItsNearestAncestor) {
  EXPECT_TRUE(tuccl::cli::checkOutputFree(path("a/b/c/out.json"), false).ok());
  std::ofstream(path("file")) << "x";
  Status refused = tuccl::cli::checkOutputFree(path("file/out.json"), false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("not a directory"), std::string::npos) << refused.message();
}

TEST_F(CliOutputTest, AnUnwritableFolderIsReportedBeforeAnyWorkWithTheReason) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only folders";
  fs::create_directories(dir_ / "locked");
  fs::permissions(dir_ / "locked", fs::perms::owner_read | fs::perms::owner_exec);
  Status refused = tuccl::cli::checkOutputFree(path("locked/out.csv"), false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("Permission denied"), std::string::npos) << refused.message();
}

TEST_F(CliOutputTest, WriteOutputReplacesTheFileWholeAndSaysWhyItCannot) {
  ASSERT_TRUE(tuccl::cli::writeOutput(path("sub/out.txt"), "first").ok());
  ASSERT_TRUE(tuccl::cli::writeOutput(path("sub/out.txt"), "second").ok());
  EXPECT_EQ(contents(path("sub/out.txt")), "second");
  // No temporary file is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "sub"), fs::directory_iterator()), 1);
  std::ofstream(path("file")) << "x";
  Status failed = tuccl::cli::writeOutput(path("file/out.txt"), "text");
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("cannot "), std::string::npos) << failed.message();
  EXPECT_NE(failed.message().find(": "), std::string::npos) << failed.message();
}

TEST_F(CliOutputTest, AnOutputFolderHoldingTheFilesIsRefusedWithoutForce) {
  std::ofstream(path("plan.json")) << "{}";
  EXPECT_FALSE(tuccl::cli::checkOutputFolder(dir_.string(), {"plan.json", "rank0.cu"}, false).ok());
  EXPECT_TRUE(tuccl::cli::checkOutputFolder(dir_.string(), {"plan.json", "rank0.cu"}, true).ok());
  EXPECT_TRUE(tuccl::cli::checkOutputFolder(path("fresh/dir"), {"plan.json"}, false).ok());
  Status notFolder = tuccl::cli::checkOutputFolder(path("plan.json"), {"plan.json"}, true);
  ASSERT_FALSE(notFolder.ok());
  EXPECT_NE(notFolder.message().find("not a directory"), std::string::npos) << notFolder.message();
}

}  // namespace
