#include "agent/volumes/file_dirs.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace blk::agent {
namespace {

using ::testing::HasSubstr;

class FileDirsTest : public ::testing::Test {
 protected:
  FileDirsTest() {
    std::filesystem::create_directory(images_);
    std::filesystem::create_directory(outside_);
    std::ofstream(outside_ + "/secret") << "x";
    dirs_ = *FileDirs::Parse({images_}, "--file-dirs");
  }

  testing::TempDir dir_;
  const std::string images_ = dir_.path() + "/images";
  const std::string outside_ = dir_.path() + "/outside";
  FileDirs dirs_;
};

TEST_F(FileDirsTest, WithoutDirectoriesEveryPathIsAdmitted) {
  EXPECT_FALSE(FileDirs().confined());
  EXPECT_TRUE(FileDirs().Admit("/etc/shadow").ok());
}

TEST_F(FileDirsTest, ADirectoryMustBeAbsolute) {
  const absl::StatusOr<FileDirs> parsed = FileDirs::Parse({"images"}, "--file-dirs");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("--file-dirs: 'images'"));
}

TEST_F(FileDirsTest, NewAndExistingFilesInsideAreAdmitted) {
  EXPECT_TRUE(dirs_.Admit(images_ + "/new.img").ok());
  std::ofstream(images_ + "/old.img") << "x";
  EXPECT_TRUE(dirs_.Admit(images_ + "/old.img").ok());
  std::filesystem::create_directory(images_ + "/sub");
  EXPECT_TRUE(dirs_.Admit(images_ + "/sub/deeper.img").ok());
}

TEST_F(FileDirsTest, APathOutsideIsRefusedNamingItAndTheDirectories) {
  const absl::Status refused = dirs_.Admit(outside_ + "/secret");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("'" + outside_ + "/secret'"));
  EXPECT_THAT(refused.message(), HasSubstr("--file-dirs: " + images_));
}

TEST_F(FileDirsTest, ASiblingSharingTheDirectorysPrefixIsOutside) {
  std::filesystem::create_directory(images_ + "-evil");
  EXPECT_FALSE(dirs_.Admit(images_ + "-evil/a.img").ok());
}

TEST_F(FileDirsTest, DotDotThatLeavesTheDirectoryIsRefused) {
  EXPECT_FALSE(dirs_.Admit(images_ + "/../outside/secret").ok());
  EXPECT_FALSE(dirs_.Admit(images_ + "/../outside/new.img").ok());
}

TEST_F(FileDirsTest, ASymlinkThatLeadsOutIsRefusedByItsRealPath) {
  std::filesystem::create_symlink(outside_ + "/secret", images_ + "/link.img");
  const absl::Status refused = dirs_.Admit(images_ + "/link.img");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("really '" + outside_ + "/secret'"));
  std::filesystem::create_directory_symlink(outside_, images_ + "/door");
  EXPECT_FALSE(dirs_.Admit(images_ + "/door/new.img").ok());
}

TEST_F(FileDirsTest, ADanglingSymlinkIsRefusedSinceOpeningItWouldCreateItsTarget) {
  std::filesystem::create_symlink(outside_ + "/not-yet", images_ + "/dangling.img");
  const absl::Status refused = dirs_.Admit(images_ + "/dangling.img");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("dangling symlink"));
}

TEST_F(FileDirsTest, ASymlinkedDirectoryAdmitsWhatLiesUnderItsTarget) {
  std::filesystem::create_directory_symlink(images_, dir_.path() + "/images-link");
  const FileDirs linked = *FileDirs::Parse({dir_.path() + "/images-link"}, "--file-dirs");
  EXPECT_TRUE(linked.Admit(images_ + "/a.img").ok());
  EXPECT_TRUE(linked.Admit(dir_.path() + "/images-link/a.img").ok());
}

TEST_F(FileDirsTest, AMissingDirectoryAdmitsNothingUntilItExists) {
  const FileDirs later = *FileDirs::Parse({dir_.path() + "/later"}, "--file-dirs");
  std::filesystem::create_directory(dir_.path() + "/later-not");
  EXPECT_FALSE(later.Admit(dir_.path() + "/later-not/a.img").ok());
  std::filesystem::create_directory(dir_.path() + "/later");
  EXPECT_TRUE(later.Admit(dir_.path() + "/later/a.img").ok());
}

}  // namespace
}  // namespace blk::agent
