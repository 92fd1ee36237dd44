#include "server/ublk/placement.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ublk/cpu_list.h"

namespace blk::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseQueuePlacement, KnowsHctxNodeSpreadAndCpuLists) {
  EXPECT_EQ(ParseQueuePlacement("")->kind, QueuePlacement::Kind::kNode);
  EXPECT_EQ(ParseQueuePlacement("node")->kind, QueuePlacement::Kind::kNode);
  EXPECT_EQ(ParseQueuePlacement("hctx")->kind, QueuePlacement::Kind::kHctx);
  EXPECT_EQ(ParseQueuePlacement("spread")->kind, QueuePlacement::Kind::kSpread);
  absl::StatusOr<QueuePlacement> listed = ParseQueuePlacement("3,0-1");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->kind, QueuePlacement::Kind::kCpus);
  EXPECT_THAT(listed->cpus, ElementsAre(0, 1, 3));
}

TEST(ParseQueuePlacement, RefusesAnythingElse) {
  for (const char* bad : {"HCTX", "spreads", "nodes", "all", "0,", "2-1"}) {
    absl::StatusOr<QueuePlacement> parsed = ParseQueuePlacement(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("hctx, node, spread or a CPU list"));
  }
}

TEST(ParseQueuePlacement, SaysWhatIsWrongInsideAListOnlyForWhatLooksLikeOne) {
  EXPECT_THAT(ParseQueuePlacement("2-1").status().message(), HasSubstr("reversed range"));
  EXPECT_EQ(ParseQueuePlacement("all").status().message(),
            "'all' is not hctx, node, spread or a CPU list such as 0,2-3");
}

TEST(FormatQueuePlacement, IsCanonicalSoEqualPlacementsReadTheSame) {
  EXPECT_EQ(FormatQueuePlacement(*ParseQueuePlacement("")), "node");
  EXPECT_EQ(FormatQueuePlacement(*ParseQueuePlacement("hctx")), "hctx");
  EXPECT_EQ(FormatQueuePlacement(*ParseQueuePlacement("node")), "node");
  EXPECT_EQ(FormatQueuePlacement(*ParseQueuePlacement("spread")), "spread");
  EXPECT_EQ(FormatQueuePlacement(*ParseQueuePlacement("1,0,2,3")), "0-3");
}

TEST(QueueThreadCpus, HctxPinsEachQueueToItsHctxSet) {
  const cpu_set_t hctx = CpuSetOf({2, 3});
  EXPECT_THAT(CpusOf(QueueThreadCpus(*ParseQueuePlacement("hctx"), 1, hctx, {0, 1, 2, 3}, {})),
              ElementsAre(2, 3));
}

TEST(QueueThreadCpus, SpreadPutsQueueIOnOneAllowedCpuRoundRobin) {
  const QueuePlacement spread{QueuePlacement::Kind::kSpread, {}};
  const cpu_set_t hctx = CpuSetOf({0});
  const std::vector<int> allowed = {1, 4, 6};
  EXPECT_THAT(CpusOf(QueueThreadCpus(spread, 0, hctx, allowed, {})), ElementsAre(1));
  EXPECT_THAT(CpusOf(QueueThreadCpus(spread, 1, hctx, allowed, {})), ElementsAre(4));
  EXPECT_THAT(CpusOf(QueueThreadCpus(spread, 2, hctx, allowed, {})), ElementsAre(6));
  EXPECT_THAT(CpusOf(QueueThreadCpus(spread, 3, hctx, allowed, {})), ElementsAre(1));
}

TEST(QueueThreadCpus, AListPutsQueueIOnItsIthCpuRoundRobin) {
  const QueuePlacement listed = *ParseQueuePlacement("0,2-3");
  const cpu_set_t hctx = CpuSetOf({1});
  EXPECT_THAT(CpusOf(QueueThreadCpus(listed, 0, hctx, {0, 1, 2, 3}, {})), ElementsAre(0));
  EXPECT_THAT(CpusOf(QueueThreadCpus(listed, 1, hctx, {0, 1, 2, 3}, {})), ElementsAre(2));
  EXPECT_THAT(CpusOf(QueueThreadCpus(listed, 2, hctx, {0, 1, 2, 3}, {})), ElementsAre(3));
  EXPECT_THAT(CpusOf(QueueThreadCpus(listed, 3, hctx, {0, 1, 2, 3}, {})), ElementsAre(0));
}

TEST(QueueThreadCpus, NodeLetsEachQueueRunOnTheAllowedCpusOfItsHctxNodes) {
  const QueuePlacement node{QueuePlacement::Kind::kNode, {}};
  const std::vector<cpu_set_t> nodes = {CpuSetOf({0, 1, 2, 3}), CpuSetOf({4, 5, 6, 7})};
  const std::vector<int> allowed = {1, 2, 3, 4, 5, 6};
  EXPECT_THAT(CpusOf(QueueThreadCpus(node, 0, CpuSetOf({0}), allowed, nodes)),
              ElementsAre(1, 2, 3));
  EXPECT_THAT(CpusOf(QueueThreadCpus(node, 1, CpuSetOf({7}), allowed, nodes)),
              ElementsAre(4, 5, 6));
  // An hctx set across both nodes.
  EXPECT_THAT(CpusOf(QueueThreadCpus(node, 2, CpuSetOf({3, 4}), allowed, nodes)),
              ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(QueueThreadCpus, NodeWithoutNumaInformationIsEveryAllowedCpu) {
  const QueuePlacement node;  // the default
  EXPECT_THAT(CpusOf(QueueThreadCpus(node, 0, CpuSetOf({1}), {0, 1}, {})), ElementsAre(0, 1));
}

TEST(QueueThreadCpus, NodeWithNoAllowedCpuThereKeepsTheHctxSet) {
  const QueuePlacement node{QueuePlacement::Kind::kNode, {}};
  const std::vector<cpu_set_t> nodes = {CpuSetOf({0, 1}), CpuSetOf({2, 3})};
  EXPECT_THAT(CpusOf(QueueThreadCpus(node, 0, CpuSetOf({0}), {2, 3}, nodes)), ElementsAre(0));
}

}  // namespace
}  // namespace blk::server
