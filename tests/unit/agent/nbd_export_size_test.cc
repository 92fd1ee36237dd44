#include "agent/volumes/nbd_export_size.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::agent {
namespace {

using ::testing::HasSubstr;

NbdSizeProbe Answering(const absl::StatusOr<uint64_t>& answer) {
  return [answer](const std::string&) { return answer; };
}

TEST(ResolveNbdVolumeSizeTest, AnAlignedExportSizeIsTakenAsIs) {
  auto size = ResolveNbdVolumeSize("r1", "nbd://h/e", 4096, Answering(uint64_t{8} << 20));
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, uint64_t{8} << 20);
}

TEST(ResolveNbdVolumeSizeTest, AnUnalignedExportSizeIsRoundedDownToWholeBlocks) {
  auto size = ResolveNbdVolumeSize("r1", "nbd://h/e", 512, Answering(uint64_t{3000}));
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, 2560u);
}

TEST(ResolveNbdVolumeSizeTest, AnExportSmallerThanOneBlockIsInvalidArgument) {
  auto size = ResolveNbdVolumeSize("r1", "nbd://h/e", 4096, Answering(uint64_t{4095}));
  EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(size.status().message()), HasSubstr("nbd://h/e"));
  EXPECT_THAT(std::string(size.status().message()), HasSubstr("4095 bytes"));
}

TEST(ResolveNbdVolumeSizeTest, AConnectionFailureIsUnavailableNamingTheUri) {
  auto size = ResolveNbdVolumeSize("r1", "nbd://h/e", 512,
                                   Answering(absl::DataLossError("h:10809 is not an NBD server")));
  EXPECT_EQ(size.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(size.status().message()), HasSubstr("nbd://h/e"));
  EXPECT_THAT(std::string(size.status().message()), HasSubstr("is not an NBD server"));
}

TEST(ResolveNbdVolumeSizeTest, AnExportTheServerDoesNotHaveIsFailedPrecondition) {
  auto size =
      ResolveNbdVolumeSize("r1", "nbd://h/e", 512, Answering(absl::NotFoundError("no export 'e'")));
  EXPECT_EQ(size.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(size.status().message()), HasSubstr("nbd://h/e"));
}

}  // namespace
}  // namespace blk::agent
