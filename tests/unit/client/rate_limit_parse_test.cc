#include "client/rate_limit_parse.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::client {
namespace {

using ::testing::HasSubstr;

TEST(ParseIopsLimit, TakesARateAndAnOptionalBurst) {
  absl::StatusOr<blk::v1::RateLimit> limit = ParseIopsLimit("1000");
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->rate(), 1000u);
  EXPECT_EQ(limit->burst(), 0u);
  limit = ParseIopsLimit("1000:100");
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->rate(), 1000u);
  EXPECT_EQ(limit->burst(), 100u);
  limit = ParseIopsLimit("0");  // unlimited
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->rate(), 0u);
}

TEST(ParseIopsLimit, RefusesNegativeMalformedAndOversizedNumbers) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c :
       {Case{"-5", "invalid count '-5': negative"}, Case{"", "invalid count ''"},
        Case{"1k", "invalid count '1k'"}, Case{"+5", "invalid count '+5'"},
        Case{" 5", "invalid count ' 5'"}, Case{"1.5", "invalid count '1.5'"},
        Case{"100:-1", "burst: invalid count '-1': negative"},
        Case{"100:", "burst: invalid count ''"}, Case{"1:2:3", "burst: invalid count '2:3'"},
        Case{"18446744073709551616", "invalid count"}}) {
    absl::StatusOr<blk::v1::RateLimit> limit = ParseIopsLimit(c.text);
    EXPECT_EQ(limit.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(limit.status().message()), HasSubstr(c.message)) << c.text;
    EXPECT_THAT(std::string(limit.status().message()), HasSubstr("N[:BURST]")) << c.text;
  }
}

TEST(ParseBytesLimit, TakesSizesLikeSizeDoes) {
  absl::StatusOr<blk::v1::RateLimit> limit = ParseBytesLimit("50M");
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->rate(), 50u << 20);
  EXPECT_EQ(limit->burst(), 0u);
  limit = ParseBytesLimit("1GiB:2g");
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->rate(), 1u << 30);
  EXPECT_EQ(limit->burst(), 2u << 30);
  limit = ParseBytesLimit("4096:512K");
  ASSERT_TRUE(limit.ok()) << limit.status();
  EXPECT_EQ(limit->rate(), 4096u);
  EXPECT_EQ(limit->burst(), 512u << 10);
}

TEST(ParseBytesLimit, RefusesNegativeAndMalformedSizes) {
  for (const char* text : {"-50M", "50MB", "fast", "", "1G:-1", "1G:", "1.5G"}) {
    absl::StatusOr<blk::v1::RateLimit> limit = ParseBytesLimit(text);
    EXPECT_EQ(limit.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(limit.status().message()), HasSubstr("SIZE[:BURST]")) << text;
  }
  EXPECT_THAT(std::string(ParseBytesLimit("-50M").status().message()), HasSubstr("negative"));
  EXPECT_THAT(std::string(ParseBytesLimit("1G:-1").status().message()),
              HasSubstr("burst: invalid size '-1': negative"));
}

}  // namespace
}  // namespace blk::client
