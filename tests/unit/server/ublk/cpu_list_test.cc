#include "server/ublk/cpu_list.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ParseCpuList, ReadsSinglesAndRangesSortedWithoutDuplicates) {
  EXPECT_THAT(*ParseCpuList("0"), ElementsAre(0));
  EXPECT_THAT(*ParseCpuList("0,2-3"), ElementsAre(0, 2, 3));
  EXPECT_THAT(*ParseCpuList("5,1-2,2,0"), ElementsAre(0, 1, 2, 5));
  EXPECT_THAT(*ParseCpuList("7-7"), ElementsAre(7));
}

TEST(ParseCpuList, RefusesMalformedListsNamingTheItem) {
  for (const char* bad :
       {"", ",", "0,", "a", "1-", "-1", "3-1", "0,,1", " 1", "+1", "1 ", "0-x", "1-2-3", "99999"}) {
    absl::StatusOr<std::vector<int>> parsed = ParseCpuList(bad);
    ASSERT_FALSE(parsed.ok()) << "'" << bad << "'";
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(ParseCpuList("0,3-1").status().message(), HasSubstr("'3-1'"));
  EXPECT_THAT(ParseCpuList("0,x").status().message(), HasSubstr("'x'"));
}

TEST(FormatCpuList, WritesTheKernelsListFormat) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 5}), "0-2,5");
  EXPECT_EQ(FormatCpuList({3}), "3");
  EXPECT_EQ(FormatCpuList({1, 0, 1}), "0-1");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList(*ParseCpuList("0,2-3,4,9")), "0,2-4,9");
}

TEST(CpuSet, ConvertsBothWays) {
  const cpu_set_t set = CpuSetOf({0, 2, 3});
  EXPECT_EQ(CPU_COUNT(&set), 3);
  EXPECT_THAT(CpusOf(set), ElementsAre(0, 2, 3));
  cpu_set_t empty;
  CPU_ZERO(&empty);
  EXPECT_THAT(CpusOf(empty), IsEmpty());
}

TEST(AllowedCpus, IsThisProcessAffinity) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(::sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(AllowedCpus(), CpusOf(set));
  EXPECT_FALSE(AllowedCpus().empty());
}

}  // namespace
}  // namespace blk::server
