#include "agent/metrics/metrics_collector.h"

#include <map>
#include <mutex>
#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "tests/unit/temp_dir.h"

namespace blk::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Devices whose statistics the test sets: the real ones need a kernel with ublk (tests/vm).
struct FakeStats {
  std::mutex mutex;
  std::map<std::string, v1::VolumeStats> by_volume;  // absent: the device keeps none
  std::optional<uint32_t> rq_affinity;               // absent: cannot be read
  bool redirected = false;
  server::ThrottleCounts throttled;
  absl::Status provision_error;  // what Provision fails with
};

class StatsDevice final : public VolumeDevice {
 public:
  StatsDevice(int id, FakeStats& stats) : id_(id), stats_(stats) {}
  int id() const override { return id_; }
  std::string block_path() const override { return "/dev/ublkb" + std::to_string(id_); }
  absl::Status Stop(bool) override { return absl::OkStatus(); }
  absl::Status Detach() override { return absl::OkStatus(); }
  absl::StatusOr<v1::VolumeStats> Stats(const std::string& volume_id) const override {
    std::lock_guard lock(stats_.mutex);
    auto it = stats_.by_volume.find(volume_id);
    if (it == stats_.by_volume.end()) return VolumeDevice::Stats(volume_id);
    return it->second;
  }
  absl::StatusOr<uint32_t> RqAffinity() const override {
    if (!stats_.rq_affinity) return VolumeDevice::RqAffinity();
    return *stats_.rq_affinity;
  }
  bool RqAffinityRedirected() const override { return stats_.redirected; }
  server::ThrottleCounts throttle_counts() const override { return stats_.throttled; }

 private:
  int id_;
  FakeStats& stats_;
};

class StatsProvisioner final : public DeviceProvisioner {
 public:
  explicit StatsProvisioner(FakeStats& stats) : stats_(stats) {}
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Provision(const v1::Volume&, int device_id,
                                                          bool /*fresh*/) override {
    if (!stats_.provision_error.ok()) return stats_.provision_error;
    return std::make_unique<StatsDevice>(device_id, stats_);
  }
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Recover(const v1::Volume&, int) override {
    return absl::NotFoundError("no devices to recover");
  }
  KernelDeviceState StateOf(int) override { return KernelDeviceState::kAbsent; }
  std::vector<int> KernelDeviceIds() override { return {}; }
  absl::Status DeleteKernelDevice(int, bool) override { return absl::OkStatus(); }

 private:
  FakeStats& stats_;
};

// Three reads (one failed) and a write, in two queues.
v1::VolumeStats SomeStats(const std::string& id) {
  v1::VolumeStats stats;
  stats.set_volume_id(id);
  stats.add_latency_bounds_seconds(0.00001);
  stats.add_latency_bounds_seconds(0.001);
  for (const char* name : {"read", "write", "flush", "discard", "write_zeroes"}) {
    v1::IoOpStats* op = stats.add_ops();
    op->set_op(name);
    for (int bucket = 0; bucket < 3; ++bucket) op->add_latency_buckets(0);
  }
  v1::IoOpStats& read = *stats.mutable_ops(0);
  read.set_ios(3);
  read.set_bytes(8192);
  read.set_errors(1);
  read.set_latency_buckets(0, 1);
  read.set_latency_buckets(2, 2);
  read.set_latency_sum_seconds(4.5);
  v1::IoOpStats& write = *stats.mutable_ops(1);
  write.set_ios(1);
  write.set_bytes(512);
  write.set_latency_buckets(1, 1);
  stats.set_inflight_ios(2);
  v1::QueueStats* q0 = stats.add_queues();
  q0->set_queue(0);
  q0->set_hctx_cpus("0");
  q0->set_thread_cpus("0");
  q0->set_local_completions(3);
  v1::QueueStats* q1 = stats.add_queues();
  q1->set_queue(1);
  q1->set_hctx_cpus("1,3");
  q1->set_thread_cpus("0-3");
  q1->set_remote_completions(1);
  return stats;
}

class MetricsCollectorTest : public ::testing::Test {
 protected:
  MetricsCollectorTest() {
    auto registry = VolumeRegistry::Open(dir_.path());
    EXPECT_TRUE(registry.ok()) << registry.status();
    table_ = std::make_unique<VolumeTable>(std::move(*registry), provisioner_);
  }
  void Create(const std::string& id, uint32_t queues = 2, const v1::VolumeLimits& limits = {}) {
    v1::Volume volume;
    volume.set_id(id);
    volume.set_size_bytes(64 << 20);
    volume.set_queues(queues);
    volume.mutable_null();
    *volume.mutable_limits() = limits;
    ASSERT_TRUE(table_->Create(volume).ok());
  }
  // A new agent over the same records.
  void Restart() {
    table_.reset();
    auto registry = VolumeRegistry::Open(dir_.path());
    ASSERT_TRUE(registry.ok()) << registry.status();
    table_ = std::make_unique<VolumeTable>(std::move(*registry), provisioner_);
    table_->Restore();
  }
  std::string Scrape() {
    MetricsCollector collector(*table_, v1::GetNodeInfoResponse());
    return prometheus::TextSerializer().Serialize(collector.Collect());
  }

  testing::TempDir dir_;
  FakeStats stats_;
  StatsProvisioner provisioner_{stats_};
  std::unique_ptr<VolumeTable> table_;
};

TEST_F(MetricsCollectorTest, IoCountersPerVolumeAndOp) {
  stats_.by_volume["v1"] = SomeStats("v1");
  Create("v1");
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("blk_volume_ios_total{volume=\"v1\",op=\"read\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_ios_total{volume=\"v1\",op=\"write_zeroes\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_bytes_total{volume=\"v1\",op=\"read\"} 8192\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_errors_total{volume=\"v1\",op=\"read\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_ios_total{volume=\"v1\",op=\"write\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_inflight_ios{volume=\"v1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_queues{volume=\"v1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_queue_depth{volume=\"v1\"} 128\n"));
}

TEST_F(MetricsCollectorTest, LatencyIsACumulativeHistogramEndingInPlusInf) {
  stats_.by_volume["v1"] = SomeStats("v1");
  Create("v1");
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("# TYPE blk_volume_io_latency_seconds histogram\n"));
  EXPECT_THAT(text,
              HasSubstr("blk_volume_io_latency_seconds_count{volume=\"v1\",op=\"read\"} 3\n"));
  EXPECT_THAT(text,
              HasSubstr("blk_volume_io_latency_seconds_sum{volume=\"v1\",op=\"read\"} 4.5\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "blk_volume_io_latency_seconds_bucket{volume=\"v1\",op=\"read\",le=\"1e-05\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "blk_volume_io_latency_seconds_bucket{volume=\"v1\",op=\"read\",le=\"0.001\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("blk_volume_io_latency_seconds_bucket{volume=\"v1\",op=\"read\",le=\"+Inf\"} 3\n"));
}

TEST_F(MetricsCollectorTest, CompletionLocalityAndCpusPerQueue) {
  stats_.by_volume["v1"] = SomeStats("v1");
  Create("v1");
  const std::string text = Scrape();
  EXPECT_THAT(
      text,
      HasSubstr("blk_queue_completions_total{volume=\"v1\",queue=\"0\",locality=\"local\"} 3\n"));
  EXPECT_THAT(
      text,
      HasSubstr("blk_queue_completions_total{volume=\"v1\",queue=\"0\",locality=\"remote\"} 0\n"));
  EXPECT_THAT(
      text,
      HasSubstr("blk_queue_completions_total{volume=\"v1\",queue=\"1\",locality=\"remote\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("blk_queue_cpus_info{volume=\"v1\",queue=\"1\",hctx_cpus=\"1,3\","
                              "thread_cpus=\"0-3\"} 1\n"));
}

TEST_F(MetricsCollectorTest, SeriesOfADeletedVolumeAreGoneFromTheNextScrape) {
  stats_.by_volume["v1"] = SomeStats("v1");
  stats_.by_volume["v2"] = SomeStats("v2");
  Create("v1");
  Create("v2");
  ASSERT_THAT(Scrape(), HasSubstr("volume=\"v1\""));
  ASSERT_TRUE(table_->Delete("v1", /*force=*/false).ok());
  const std::string text = Scrape();
  EXPECT_THAT(text, Not(HasSubstr("volume=\"v1\"")));
  EXPECT_THAT(text, HasSubstr("blk_volume_ios_total{volume=\"v2\",op=\"read\"} 3\n"));
}

TEST_F(MetricsCollectorTest, AVolumeWithoutStatisticsHasNoIoSeries) {
  Create("quiet");
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("blk_volume_queues{volume=\"quiet\"} 2\n"));
  EXPECT_THAT(text, Not(HasSubstr("blk_volume_ios_total{volume=\"quiet\"")));
  EXPECT_THAT(text, Not(HasSubstr("blk_queue_completions_total{volume=\"quiet\"")));
}

TEST_F(MetricsCollectorTest, StatsRpcSeesTheSameSnapshot) {
  stats_.by_volume["v1"] = SomeStats("v1");
  Create("v1");
  absl::StatusOr<v1::VolumeStats> stats = table_->Stats("v1");
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->ops(0).ios(), 3u);
  EXPECT_EQ(table_->Stats("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(table_->Stats("nope").status().message(), HasSubstr("'nope' does not exist"));
  EXPECT_EQ(table_->Stats("Bad_Id").status().code(), absl::StatusCode::kInvalidArgument);
  Create("quiet");
  EXPECT_EQ(table_->Stats("quiet").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(MetricsCollectorTest, RqAffinityItsRedirectionAndPlacementPerVolume) {
  stats_.rq_affinity = 2;
  stats_.redirected = true;
  Create("v1");
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("blk_volume_rq_affinity{volume=\"v1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_rq_affinity_redirected{volume=\"v1\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_placement_info{volume=\"v1\",placement=\"node\"} 1\n"));
}

TEST_F(MetricsCollectorTest, WithoutAReadableRqAffinityOnlyThePlacementIsShown) {
  Create("v1");
  const std::string text = Scrape();
  EXPECT_THAT(text, Not(HasSubstr("blk_volume_rq_affinity{volume=\"v1\"}")));
  EXPECT_THAT(text, Not(HasSubstr("blk_volume_rq_affinity_redirected{volume=\"v1\"}")));
  EXPECT_THAT(text, HasSubstr("blk_volume_placement_info{volume=\"v1\",placement=\"node\"} 1\n"));
}

TEST_F(MetricsCollectorTest, ThrottlingCountersAndTheLimitsThatAreSet) {
  stats_.throttled = {.requests = 12, .wait_ns = 2'500'000'000};
  v1::VolumeLimits limits;
  limits.mutable_read_iops()->set_rate(1000);
  limits.mutable_read_iops()->set_burst(100);
  limits.mutable_total_bytes_per_second()->set_rate(50 << 20);
  limits.mutable_write_iops()->set_burst(0);  // present but unlimited: no series
  Create("v1", 1, limits);
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("# TYPE blk_volume_throttled_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_throttled_requests_total{volume=\"v1\"} 12\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE blk_volume_throttled_seconds_total counter\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_throttled_seconds_total{volume=\"v1\"} 2.5\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE blk_volume_limit gauge\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_limit{volume=\"v1\",kind=\"read_iops\"} 1000\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_limit{volume=\"v1\",kind=\"total_bytes\"} 52428800\n"));
  EXPECT_THAT(text, Not(HasSubstr("kind=\"write_iops\"")));
}

TEST_F(MetricsCollectorTest, AnUnlimitedVolumeCountsThrottlingButHasNoLimitSeries) {
  Create("v1");
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("blk_volume_throttled_requests_total{volume=\"v1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("blk_volume_throttled_seconds_total{volume=\"v1\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("blk_volume_limit{")));
}

TEST_F(MetricsCollectorTest, AVolumeWithoutADeviceHasNoThrottlingOrLimitSeries) {
  v1::VolumeLimits limits;
  limits.mutable_read_iops()->set_rate(1000);
  Create("v1", 1, limits);
  stats_.provision_error = absl::UnavailableError("backend gone");
  Restart();
  ASSERT_EQ(table_->Get("v1")->status().state(), v1::VOLUME_STATE_DEGRADED);
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("blk_volume_queues{volume=\"v1\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("blk_volume_throttled_requests_total{volume=\"v1\"}")));
  EXPECT_THAT(text, Not(HasSubstr("blk_volume_limit{volume=\"v1\"")));
}

}  // namespace
}  // namespace blk::agent
