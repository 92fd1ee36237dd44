#include "common/percent_decode.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk {
namespace {

using ::testing::HasSubstr;

TEST(PercentDecode, PlainTextStaysAsItIs) {
  for (const char* text : {"", "/var/lib/a.img", "a+b", "é", "?socket=&x"}) {
    absl::StatusOr<std::string> decoded = PercentDecode(text);
    ASSERT_TRUE(decoded.ok()) << text << ": " << decoded.status();
    EXPECT_EQ(*decoded, text);
  }
}

TEST(PercentDecode, EscapesBecomeTheirBytesInEitherCase) {
  absl::StatusOr<std::string> decoded = PercentDecode("a%20b%3fc%3F%25%2f%C3%A9%ff%01");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, "a b?c?%/\xc3\xa9\xff\x01");
}

TEST(PercentDecode, ADecodedPercentIsNotDecodedAgain) {
  absl::StatusOr<std::string> decoded = PercentDecode("%2541");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, "%41");
}

struct Malformed {
  std::string text;
  std::string escape;
};

class PercentDecodeRejectsMalformedEscape : public ::testing::TestWithParam<Malformed> {};

TEST_P(PercentDecodeRejectsMalformedEscape, NamingTheEscapeAndTheText) {
  absl::StatusOr<std::string> decoded = PercentDecode(GetParam().text);
  ASSERT_FALSE(decoded.ok()) << "accepted '" << GetParam().text << "' as '" << *decoded << "'";
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("'" + GetParam().escape + "'"));
  EXPECT_THAT(decoded.status().message(), HasSubstr("'" + GetParam().text + "'"));
  EXPECT_THAT(decoded.status().message(), HasSubstr("two hex digits"));
}

INSTANTIATE_TEST_SUITE_P(Escapes, PercentDecodeRejectsMalformedEscape,
                         ::testing::Values(Malformed{"%", "%"}, Malformed{"a%4", "%4"},
                                           Malformed{"%zz", "%zz"}, Malformed{"a%4gb", "%4g"},
                                           Malformed{"%g4", "%g4"}, Malformed{"a% 20", "% 2"},
                                           Malformed{"ok%20then%", "%"}));

TEST(PercentDecode, RefusesAnEncodedNul) {
  for (const char* text : {"%00", "/run/nbd.sock%00.evil", "a%20%00"}) {
    absl::StatusOr<std::string> decoded = PercentDecode(text);
    ASSERT_FALSE(decoded.ok()) << "accepted '" << text << "'";
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(decoded.status().message(), HasSubstr(std::string("'") + text + "'"));
    EXPECT_THAT(decoded.status().message(), HasSubstr("%00"));
  }
}

TEST(PercentDecode, RefusesANulInTheTextItself) {
  absl::StatusOr<std::string> decoded = PercentDecode(std::string("/a\0/b", 5));
  ASSERT_FALSE(decoded.ok()) << "accepted a NUL byte";
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(decoded.status().message(), HasSubstr("'/a\\x00/b'"));
  EXPECT_THAT(decoded.status().message(), HasSubstr("NUL"));
}

}  // namespace
}  // namespace blk
