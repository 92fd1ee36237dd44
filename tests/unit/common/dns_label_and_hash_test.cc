#include <string>

#include "common/dns_label.h"
#include "common/fnv1a.h"
#include "gtest/gtest.h"

namespace blk {
namespace {

TEST(IsDnsLabel, TakesLowercaseLettersDigitsAndInnerHyphensUpTo63) {
  EXPECT_TRUE(IsDnsLabel("a"));
  EXPECT_TRUE(IsDnsLabel("pvc-0a1b"));
  EXPECT_TRUE(IsDnsLabel("9"));
  EXPECT_TRUE(IsDnsLabel(std::string(63, 'x')));
  EXPECT_FALSE(IsDnsLabel(""));
  EXPECT_FALSE(IsDnsLabel(std::string(64, 'x')));
  EXPECT_FALSE(IsDnsLabel("-a"));
  EXPECT_FALSE(IsDnsLabel("a-"));
  EXPECT_FALSE(IsDnsLabel("A"));
  EXPECT_FALSE(IsDnsLabel("a.b"));
  EXPECT_FALSE(IsDnsLabel("a_b"));
  EXPECT_FALSE(IsDnsLabel("../a"));
}

// The published FNV-1a 64 test vectors: records written by one build are read by the next.
TEST(Fnv1a64, MatchesTheReferenceValues) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

}  // namespace
}  // namespace blk
