// KubeletPaths on a real directory tree: what it refuses, what it creates, and that no symbolic
// link leads it out of the kubelet root.
#include "csi/kubelet_paths.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace blk::csi {
namespace {

namespace fs = std::filesystem;

class KubeletPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "kubelet-paths.XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    base_ = dir;
    root_ = base_ + "/kubelet";
    outside_ = base_ + "/outside";
    fs::create_directories(root_ + "/pods");
    fs::create_directories(outside_);
    fs::create_directory_symlink(outside_, root_ + "/pods/link");
  }
  void TearDown() override { fs::remove_all(base_); }

  bool OutsideIsEmpty() const { return fs::is_empty(outside_); }

  std::string base_, root_, outside_;
};

TEST_F(KubeletPathsTest, AcceptsOnlyNormalAbsolutePathsBelowTheRoot) {
  const KubeletPaths paths(root_ + "/");
  EXPECT_TRUE(paths.Check(root_ + "/pods/a/mount", "target_path").ok());
  for (const std::string& bad :
       {std::string(""), std::string("pods/a"), root_, root_ + "/", root_ + "x/a",
        root_ + "/pods/../../outside", root_ + "/pods/./a", root_ + "//pods", base_ + "/outside/a",
        std::string("/etc/passwd")}) {
    absl::Status status = paths.Check(bad, "target_path");
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(status.message().find("target_path"), std::string::npos) << status;
  }
}

TEST_F(KubeletPathsTest, CreatesDirectoriesAndFilesWithTheirParents) {
  const KubeletPaths paths(root_);
  ASSERT_TRUE(paths.Create(root_ + "/pods/a/b/mount", /*as_file=*/false).ok());
  EXPECT_TRUE(fs::is_directory(root_ + "/pods/a/b/mount"));
  ASSERT_TRUE(paths.Create(root_ + "/pods/c/dev", /*as_file=*/true).ok());
  EXPECT_TRUE(fs::is_regular_file(root_ + "/pods/c/dev"));
  // Again: what exists already is fine.
  EXPECT_TRUE(paths.Create(root_ + "/pods/a/b/mount", /*as_file=*/false).ok());
  EXPECT_TRUE(paths.Create(root_ + "/pods/c/dev", /*as_file=*/true).ok());
  // The other kind is not.
  EXPECT_EQ(paths.Create(root_ + "/pods/c/dev", /*as_file=*/false).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(paths.Create(root_ + "/pods/a/b/mount", /*as_file=*/true).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(KubeletPathsTest, NeverCreatesThroughASymbolicLink) {
  const KubeletPaths paths(root_);
  for (bool as_file : {false, true}) {
    absl::Status status = paths.Create(root_ + "/pods/link/a/target", as_file);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_NE(status.message().find("symbolic link"), std::string::npos) << status;
    status = paths.Create(root_ + "/pods/link", as_file);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  }
  EXPECT_TRUE(OutsideIsEmpty());
}

TEST_F(KubeletPathsTest, RemovesTheLinkNeverWhatItPointsTo) {
  const KubeletPaths paths(root_);
  ASSERT_TRUE(fs::create_directory(outside_ + "/keep"));
  EXPECT_FALSE(paths.Remove(root_ + "/pods/link/keep").ok());
  EXPECT_TRUE(fs::exists(outside_ + "/keep"));
  ASSERT_TRUE(paths.Remove(root_ + "/pods/link").ok());
  EXPECT_FALSE(fs::exists(fs::symlink_status(root_ + "/pods/link")));
  EXPECT_TRUE(fs::exists(outside_ + "/keep"));
  // A file, an empty directory, and what is not there.
  ASSERT_TRUE(paths.Create(root_ + "/pods/f", /*as_file=*/true).ok());
  EXPECT_TRUE(paths.Remove(root_ + "/pods/f").ok());
  EXPECT_FALSE(fs::exists(root_ + "/pods/f"));
  ASSERT_TRUE(paths.Create(root_ + "/pods/d", /*as_file=*/false).ok());
  EXPECT_TRUE(paths.Remove(root_ + "/pods/d").ok());
  EXPECT_FALSE(fs::exists(root_ + "/pods/d"));
  EXPECT_TRUE(paths.Remove(root_ + "/pods/never/there").ok());
}

}  // namespace
}  // namespace blk::csi
