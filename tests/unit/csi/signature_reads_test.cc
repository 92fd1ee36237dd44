#include "csi/signature_reads.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace blk::csi {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string MakeFile(const std::string& path, uint64_t bytes) {
  { std::ofstream create(path); }
  std::filesystem::resize_file(path, bytes);
  return path;
}

TEST(ReadWhereSignaturesLiveTest, AReadableDeviceOfAnySizeAboveZeroPasses) {
  blk::testing::TempDir dir;
  for (const uint64_t bytes :
       {uint64_t{4096}, kSignatureReadBytes, 3 * kSignatureReadBytes + 512, uint64_t{64} << 20}) {
    SCOPED_TRACE(bytes);
    const absl::Status read = ReadWhereSignaturesLive(MakeFile(dir.path() + "/disk", bytes));
    EXPECT_TRUE(read.ok()) << read;
  }
}

// A read error of a real device (nbdkit failing reads under a ublk device) is VM scenario 69's.
TEST(ReadWhereSignaturesLiveTest, AnEmptyOrMissingDeviceIsUnreadable) {
  blk::testing::TempDir dir;
  const absl::Status empty = ReadWhereSignaturesLive(MakeFile(dir.path() + "/empty", 0));
  EXPECT_TRUE(absl::IsUnavailable(empty)) << empty;
  EXPECT_THAT(empty.message(), HasSubstr("size of 0 bytes"));
  const absl::Status missing = ReadWhereSignaturesLive(dir.path() + "/missing");
  EXPECT_TRUE(absl::IsUnavailable(missing)) << missing;
  EXPECT_THAT(missing.message(), AllOf(HasSubstr("/missing"), HasSubstr("open")));
}

}  // namespace
}  // namespace blk::csi
