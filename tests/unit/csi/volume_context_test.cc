#include "csi/volume_context.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace blk::csi {
namespace {

using ::testing::HasSubstr;

TEST(VolumeContextTest, FileBackendWithEveryTunable) {
  const std::map<std::string, std::string> context = {
      {"backend", "file:///var/lib/blk/a.img"},
      {"size", "64Mi"},
      {"queues", "2"},
      {"rqAffinity", "2"},
      {"placement", "spread"},
  };
  absl::StatusOr<blk::v1::Volume> volume = VolumeFromContext("pvc-1", context);
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->id(), "pvc-1");
  EXPECT_EQ(volume->file().path(), "/var/lib/blk/a.img");
  EXPECT_EQ(volume->size_bytes(), 64u << 20);
  EXPECT_EQ(volume->queues(), 2u);
  ASSERT_TRUE(volume->has_rq_affinity());
  EXPECT_EQ(volume->rq_affinity(), 2u);
  EXPECT_EQ(volume->placement(), "spread");
}

TEST(VolumeContextTest, SizesAsKubernetesAndBlkctlWriteThem) {
  for (const auto& [text, bytes] : std::map<std::string, uint64_t>{
           {"1Gi", 1ull << 30}, {"1G", 1ull << 30}, {"1GiB", 1ull << 30}, {"4096", 4096}}) {
    absl::StatusOr<blk::v1::Volume> volume =
        VolumeFromContext("v", {{"backend", "null://"}, {"size", text}});
    ASSERT_TRUE(volume.ok()) << text << ": " << volume.status();
    EXPECT_EQ(volume->size_bytes(), bytes) << text;
  }
}

TEST(VolumeContextTest, NbdWithoutSizeLeavesItToTheExport) {
  absl::StatusOr<blk::v1::Volume> volume =
      VolumeFromContext("v", {{"backend", "nbd://server/export"}});
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->nbd().uri(), "nbd://server/export");
  EXPECT_EQ(volume->size_bytes(), 0u);
  EXPECT_FALSE(volume->has_rq_affinity());
}

TEST(VolumeContextTest, NvmeTcpWithoutSizeLeavesItToTheNamespace) {
  absl::StatusOr<blk::v1::Volume> volume = VolumeFromContext(
      "v", {{"backend",
             "nvme-tcp://10.0.0.5/nqn.2014-08.org.example:array1?nsid=1&path=10.0.1.5&offset=1G"}});
  ASSERT_TRUE(volume.ok()) << volume.status();
  const blk::v1::NvmeFabric& fabric = volume->nvme().fabric();
  EXPECT_EQ(fabric.subsystem_nqn(), "nqn.2014-08.org.example:array1");
  EXPECT_EQ(fabric.nsid(), 1u);
  EXPECT_THAT(fabric.paths(), ::testing::ElementsAre("10.0.0.5:4420", "10.0.1.5:4420"));
  EXPECT_EQ(volume->nvme().offset_bytes(), 1u << 30);
  EXPECT_EQ(volume->size_bytes(), 0u);
}

TEST(VolumeContextTest, LimitsAsBlkctlTakesThemWithKubernetesUnits) {
  absl::StatusOr<blk::v1::Volume> volume = VolumeFromContext("pvc-1", {{"backend", "null://"},
                                                                       {"size", "1Gi"},
                                                                       {"readIops", "5000:500"},
                                                                       {"iops", "8000"},
                                                                       {"writeBps", "50Mi:1Gi"},
                                                                       {"bps", "100M"}});
  ASSERT_TRUE(volume.ok()) << volume.status();
  const blk::v1::VolumeLimits& limits = volume->limits();
  EXPECT_EQ(limits.read_iops().rate(), 5000u);
  EXPECT_EQ(limits.read_iops().burst(), 500u);
  EXPECT_EQ(limits.total_iops().rate(), 8000u);
  EXPECT_EQ(limits.write_bytes_per_second().rate(), uint64_t{50} << 20);
  EXPECT_EQ(limits.write_bytes_per_second().burst(), uint64_t{1} << 30);
  EXPECT_EQ(limits.total_bytes_per_second().rate(), uint64_t{100} << 20);
  EXPECT_FALSE(limits.has_write_iops());
  absl::StatusOr<blk::v1::Volume> bad =
      VolumeFromContext("pvc-1", {{"backend", "null://"}, {"readIops", "-1"}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("readIops='-1'"));
}

TEST(VolumeContextTest, KubernetesKeysAreIgnored) {
  absl::StatusOr<blk::v1::Volume> volume =
      VolumeFromContext("v", {{"backend", "null://"}, {"csi.storage.k8s.io/pv/name", "pv-1"}});
  EXPECT_TRUE(volume.ok()) << volume.status();
}

struct Refusal {
  std::map<std::string, std::string> context;
  std::string message;
};

TEST(VolumeContextTest, RefusesBadContexts) {
  const Refusal refusals[] = {
      {{}, "no 'backend'"},
      {{{"backend", ""}}, "no 'backend'"},
      {{{"backend", "ftp://x"}}, "backend='ftp://x'"},
      {{{"backend", "null://"}, {"size", "1.5G"}}, "size='1.5G'"},
      {{{"backend", "null://"}, {"size", "-1"}}, "size='-1'"},
      {{{"backend", "null://"}, {"queues", "0"}}, "queues='0'"},
      {{{"backend", "null://"}, {"queues", "two"}}, "queues='two'"},
      {{{"backend", "null://"}, {"rqAffinity", "3"}}, "rqAffinity='3'"},
      {{{"backend", "null://"}, {"Size", "1G"}}, "unknown key 'Size'"},
  };
  for (const Refusal& refusal : refusals) {
    absl::StatusOr<blk::v1::Volume> volume = VolumeFromContext("v", refusal.context);
    ASSERT_FALSE(volume.ok()) << refusal.message;
    EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument) << refusal.message;
    EXPECT_THAT(volume.status().message(), HasSubstr(refusal.message));
  }
}

}  // namespace
}  // namespace blk::csi
