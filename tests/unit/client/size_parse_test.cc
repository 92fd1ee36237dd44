#include "client/size_parse.h"

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::client {
namespace {

using ::testing::HasSubstr;

struct SizeCase {
  std::string text;
  uint64_t bytes;
};

class ParseSizeAccepts : public ::testing::TestWithParam<SizeCase> {};

TEST_P(ParseSizeAccepts, ReturnsTheByteCount) {
  absl::StatusOr<uint64_t> size = ParseSize(GetParam().text);
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, GetParam().bytes);
}

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;
constexpr uint64_t kTiB = 1024 * kGiB;

INSTANTIATE_TEST_SUITE_P(PlainBytesAndBinarySuffixesInAnyCase, ParseSizeAccepts,
                         ::testing::Values(SizeCase{"0", 0}, SizeCase{"4096", 4096},
                                           SizeCase{"4096B", 4096}, SizeCase{"4096b", 4096},
                                           SizeCase{"1K", kKiB}, SizeCase{"1k", kKiB},
                                           SizeCase{"1KiB", kKiB}, SizeCase{"1kib", kKiB},
                                           SizeCase{"64M", 64 * kMiB}, SizeCase{"64MiB", 64 * kMiB},
                                           SizeCase{"64mIb", 64 * kMiB}, SizeCase{"3G", 3 * kGiB},
                                           SizeCase{"2TiB", 2 * kTiB},
                                           SizeCase{"18446744073709551615", UINT64_MAX},
                                           SizeCase{"16777215T", 16777215 * kTiB}));

struct BadSizeCase {
  std::string text;
  std::string reason;
};

class ParseSizeRejects : public ::testing::TestWithParam<BadSizeCase> {};

TEST_P(ParseSizeRejects, WithAMessageNamingTheInputAndTheReason) {
  absl::StatusOr<uint64_t> size = ParseSize(GetParam().text);
  ASSERT_FALSE(size.ok()) << "parsed '" << GetParam().text << "' as " << *size;
  EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(size.status().message(), HasSubstr("'" + GetParam().text + "'"));
  EXPECT_THAT(size.status().message(), HasSubstr(GetParam().reason));
}

INSTANTIATE_TEST_SUITE_P(
    GarbageNegativeFractionsAndOverflow, ParseSizeRejects,
    ::testing::Values(
        BadSizeCase{"", "empty"}, BadSizeCase{"-1", "negative"}, BadSizeCase{"-64M", "negative"},
        BadSizeCase{"M", "digit"}, BadSizeCase{" 64M", "digit"}, BadSizeCase{"+64", "digit"},
        BadSizeCase{"1.5G", "fractions"}, BadSizeCase{"64X", "unknown suffix 'X'"},
        BadSizeCase{"64 M", "unknown suffix ' M'"}, BadSizeCase{"64Mi", "unknown suffix 'Mi'"},
        BadSizeCase{"64MiBs", "unknown suffix"}, BadSizeCase{"4096BiB", "unknown"},
        BadSizeCase{"64MB", "ambiguous"}, BadSizeCase{"1gb", "ambiguous"},
        BadSizeCase{"18446744073709551616", "too large"},
        BadSizeCase{"99999999999999999999999", "too large"}, BadSizeCase{"16777216T", "too large"},
        BadSizeCase{"18014398509481984K", "too large"}));

TEST(FormatSize, UsesTheLargestExactBinaryUnit) {
  EXPECT_EQ(FormatSize(0), "0B");
  EXPECT_EQ(FormatSize(512), "512B");
  EXPECT_EQ(FormatSize(4096), "4KiB");
  EXPECT_EQ(FormatSize(64 * kMiB), "64MiB");
  EXPECT_EQ(FormatSize(1536 * kMiB), "1.5GiB");
  EXPECT_EQ(FormatSize(2 * kTiB), "2TiB");
  EXPECT_EQ(FormatSize(1000), "1000B");
  EXPECT_EQ(FormatSize(1000000), "976.5KiB");
  EXPECT_EQ(FormatSize(kGiB - 1), "1023.9MiB");
  EXPECT_EQ(FormatSize(UINT64_MAX), "16777215.9TiB");
}

TEST(FormatSize, ExactOutputParsesBackToTheSameSize) {
  for (const uint64_t bytes : {uint64_t{1}, 4 * kKiB, 64 * kMiB, 3 * kGiB, 7 * kTiB}) {
    absl::StatusOr<uint64_t> parsed = ParseSize(FormatSize(bytes));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, bytes);
  }
}

}  // namespace
}  // namespace blk::client
