#include "agent/volume_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "temp_dir.h"

namespace blk::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

// Fault injection the real kernel cannot do on demand: devices that fail to
// come up, devices that are open, a provisioning call that hangs.
struct FakeDeviceState {
  bool open = false;
  bool stopped = false;
};

class FakeDevice final : public VolumeDevice {
 public:
  FakeDevice(int id, std::shared_ptr<FakeDeviceState> state) : id_(id), state_(std::move(state)) {}
  int id() const override { return id_; }
  std::string block_path() const override { return "/dev/ublkb" + std::to_string(id_); }
  absl::Status Stop(bool force) override {
    if (state_->open && !force) return absl::FailedPreconditionError("device is open by fio");
    state_->stopped = true;
    return absl::OkStatus();
  }

 private:
  int id_;
  std::shared_ptr<FakeDeviceState> state_;
};

class FakeProvisioner final : public DeviceProvisioner {
 public:
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Provision(const v1::Volume& spec) override {
    ++calls;
    if (gate.valid()) {
      entered.set_value();
      gate.wait();
    }
    if (!fail_with.ok()) return fail_with;
    auto state = std::make_shared<FakeDeviceState>();
    devices[spec.id()] = state;
    return std::make_unique<FakeDevice>(next_id++, state);
  }

  int calls = 0;
  int next_id = 0;
  absl::Status fail_with;
  std::map<std::string, std::shared_ptr<FakeDeviceState>> devices;
  std::shared_future<void> gate;
  std::promise<void> entered;
};

class VolumeTableTest : public ::testing::Test {
 protected:
  VolumeTable& Table() {
    if (!table_) {
      auto registry = VolumeRegistry::Open(dir_.path());
      EXPECT_TRUE(registry.ok());
      table_ = std::make_unique<VolumeTable>(std::move(*registry), provisioner_);
    }
    return *table_;
  }
  void Restart() {
    table_.reset();
    Table().Restore();
  }
  static v1::Volume NullVolume(const std::string& id, uint64_t size = 64 << 20) {
    v1::Volume volume;
    volume.set_id(id);
    volume.set_size_bytes(size);
    volume.mutable_null();
    return volume;
  }

  testing::TempDir dir_;
  FakeProvisioner provisioner_;
  std::unique_ptr<VolumeTable> table_;
};

TEST_F(VolumeTableTest, CreateReturnsALiveVolumeWithItsDevice) {
  auto volume = Table().Create(NullVolume("v1"));
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(volume->status().device_path(), "/dev/ublkb0");
  EXPECT_EQ(volume->status().device_id(), 0);
  EXPECT_EQ(volume->queues(), 1u);
}

TEST_F(VolumeTableTest, CreatingTheSameSpecAgainReturnsTheExistingVolume) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  auto again = Table().Create(NullVolume("v1"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->status().device_path(), "/dev/ublkb0");
  EXPECT_EQ(provisioner_.calls, 1);
}

TEST_F(VolumeTableTest, ADifferentSpecUnderTheSameIdIsAlreadyExistsAndChangesNothing) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  auto other = Table().Create(NullVolume("v1", 128 << 20));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("size_bytes"));
  auto kept = Table().Get("v1");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->size_bytes(), uint64_t{64} << 20);
  EXPECT_EQ(kept->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_FALSE(provisioner_.devices["v1"]->stopped);
}

TEST_F(VolumeTableTest, InvalidSpecIsRejectedBeforeAnythingHappens) {
  auto volume = Table().Create(NullVolume("v1", 0));
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(provisioner_.calls, 0);
  EXPECT_THAT(Table().List(), SizeIs(0));
  Restart();
  EXPECT_THAT(Table().List(), SizeIs(0));
}

TEST_F(VolumeTableTest, AFailedCreateLeavesNoVolumeAndNoRecord) {
  provisioner_.fail_with = absl::InvalidArgumentError("file too small");
  auto volume = Table().Create(NullVolume("v1"));
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Table().List(), SizeIs(0));
  provisioner_.fail_with = absl::OkStatus();
  Restart();
  EXPECT_THAT(Table().List(), SizeIs(0));
}

TEST_F(VolumeTableTest, TwoFileVolumesCannotShareAPath) {
  v1::Volume a = NullVolume("a");
  a.mutable_file()->set_path(dir_.path() + "/image");
  v1::Volume b = a;
  b.set_id("b");
  ASSERT_TRUE(Table().Create(a).ok());
  EXPECT_EQ(Table().Create(b).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(VolumeTableTest, DeleteOfUnknownVolumeIsOk) {
  EXPECT_TRUE(Table().Delete("nope", false).ok());
}

TEST_F(VolumeTableTest, DeleteWithAnInvalidIdIsInvalidArgument) {
  EXPECT_EQ(Table().Delete("Not Valid", false).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(VolumeTableTest, DeleteStopsTheDeviceAndForgetsTheVolume) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  ASSERT_TRUE(Table().Delete("v1", false).ok());
  EXPECT_TRUE(provisioner_.devices["v1"]->stopped);
  EXPECT_EQ(Table().Get("v1").status().code(), absl::StatusCode::kNotFound);
  Restart();
  EXPECT_THAT(Table().List(), SizeIs(0));
}

TEST_F(VolumeTableTest, DeleteOfOpenVolumeIsRefusedWithoutForce) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  provisioner_.devices["v1"]->open = true;
  absl::Status refused = Table().Delete("v1", false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  auto volume = Table().Get("v1");
  ASSERT_TRUE(volume.ok());
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(volume->status().device_path(), "/dev/ublkb0");

  EXPECT_TRUE(Table().Delete("v1", true).ok());
  EXPECT_TRUE(provisioner_.devices["v1"]->stopped);
}

TEST_F(VolumeTableTest, ASecondCallWhileOneIsInFlightIsAborted) {
  std::promise<void> release;
  provisioner_.gate = release.get_future().share();
  std::future<void> entered = provisioner_.entered.get_future();
  std::thread creator([&] { EXPECT_TRUE(Table().Create(NullVolume("v1")).ok()); });
  entered.wait();

  EXPECT_EQ(Table().Create(NullVolume("v1")).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Table().Delete("v1", true).code(), absl::StatusCode::kAborted);
  auto creating = Table().Get("v1");
  ASSERT_TRUE(creating.ok());
  EXPECT_EQ(creating->status().state(), v1::VOLUME_STATE_CREATING);

  release.set_value();
  creator.join();
  EXPECT_EQ(Table().Get("v1")->status().state(), v1::VOLUME_STATE_LIVE);
}

TEST_F(VolumeTableTest, ARestartedTableBringsBackEveryPersistedVolume) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  ASSERT_TRUE(Table().Create(NullVolume("b")).ok());
  Table().StopAll();
  Restart();
  std::vector<v1::Volume> volumes = Table().List();
  ASSERT_THAT(volumes, SizeIs(2));
  EXPECT_EQ(volumes[0].id(), "a");
  EXPECT_EQ(volumes[1].status().state(), v1::VOLUME_STATE_LIVE);
}

TEST_F(VolumeTableTest, AVolumeThatFailsAtRestoreIsListedAsFailedAndCanBeRetried) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  Table().StopAll();
  provisioner_.fail_with = absl::UnavailableError("backend gone");
  Restart();
  auto failed = Table().Get("a");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->status().state(), v1::VOLUME_STATE_FAILED);
  EXPECT_THAT(failed->status().message(), HasSubstr("backend gone"));

  provisioner_.fail_with = absl::OkStatus();
  auto retried = Table().Create(NullVolume("a"));
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->status().state(), v1::VOLUME_STATE_LIVE);
}

}  // namespace
}  // namespace blk::agent
