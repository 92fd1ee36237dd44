#include "agent/volumes/volume_table.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "agent/devices/ublk_provisioner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace blk::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

// Fault injection the real kernel cannot do on demand: devices that fail to
// come up, devices that are open, a provisioning call that hangs; and a fake
// kernel (device id -> state) for reconciling at start.
struct FakeDeviceState {
  bool open = false;
  bool stopped = false;
  BackendFaults faults;
  std::string lost;       // backend_lost()
  std::string shortfall;  // backing_shortfall() while the volume is larger than backing_bytes
  uint64_t backing_bytes = 0;
  uint32_t rq_affinity = 1;  // the kernel's default for a new device
  int rq_affinity_writes = 0;
  absl::Status rq_affinity_error;  // what writing it fails with
  bool redirected = false;
  server::IoLimits limits;  // what the device came up with (DeviceConfig::limits), then SetLimits
  int limits_writes = 0;
  absl::Status limits_error;  // what SetLimits fails with
  server::ThrottleCounts throttled;
  uint64_t size_bytes = 0;  // the kernel's capacity: the spec's, then what Resize set
  int resizes = 0;
  absl::Status resize_error;  // what Resize fails with (a kernel without UPDATE_SIZE)
  // When valid, Stop, Detach and Resize announce themselves on `slow_entered` and wait for
  // `slow_gate`.
  std::shared_future<void> slow_gate;
  std::promise<void> slow_entered;
};

class FakeProvisioner;

class FakeDevice final : public VolumeDevice {
 public:
  FakeDevice(int id, std::shared_ptr<FakeDeviceState> state, FakeProvisioner& provisioner)
      : id_(id), state_(std::move(state)), provisioner_(provisioner) {}
  int id() const override { return id_; }
  std::string block_path() const override { return "/dev/ublkb" + std::to_string(id_); }
  BackendFaults backend_faults() const override { return state_->faults; }
  std::string backend_lost() const override { return state_->lost; }
  std::string backing_shortfall(uint64_t volume_bytes) const override {
    return volume_bytes > state_->backing_bytes ? state_->shortfall : "";
  }
  absl::StatusOr<uint32_t> RqAffinity() const override { return state_->rq_affinity; }
  absl::Status SetRqAffinity(uint32_t value) override {
    if (!state_->rq_affinity_error.ok()) return state_->rq_affinity_error;
    ++state_->rq_affinity_writes;
    state_->rq_affinity = value;
    return absl::OkStatus();
  }
  bool RqAffinityRedirected() const override { return state_->redirected; }
  absl::Status SetLimits(const server::IoLimits& limits) override {
    if (!state_->limits_error.ok()) return state_->limits_error;
    ++state_->limits_writes;
    state_->limits = limits;
    return absl::OkStatus();
  }
  server::ThrottleCounts throttle_counts() const override { return state_->throttled; }
  absl::Status Resize(uint64_t size_bytes) override {
    WaitAtGate();
    if (!state_->resize_error.ok()) return state_->resize_error;
    ++state_->resizes;
    state_->size_bytes = size_bytes;
    return absl::OkStatus();
  }
  absl::Status Stop(bool force) override;
  absl::Status Detach() override;

 private:
  void WaitAtGate() {
    if (!state_->slow_gate.valid()) return;
    state_->slow_entered.set_value();
    state_->slow_gate.wait();
  }

  int id_;
  std::shared_ptr<FakeDeviceState> state_;
  FakeProvisioner& provisioner_;
};

class FakeProvisioner final : public DeviceProvisioner {
 public:
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Provision(const v1::Volume& spec, int device_id,
                                                          bool fresh) override {
    WaitAtGate();
    if (during_provision) during_provision();
    std::lock_guard lock(mutex);
    ++calls;
    fresh_calls.push_back(fresh);
    if (!fail_with.ok()) return fail_with;
    if (device_id >= 0 && kernel.contains(device_id)) {
      return absl::AlreadyExistsError("ublk ADD_DEV: File exists");
    }
    int id = kernel_chooses_id.value_or(device_id);
    while (id < 0 || kernel.contains(id)) ++id;
    kernel[id] = KernelDeviceState::kLive;
    return NewDevice(spec, id);
  }
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Recover(const v1::Volume& spec,
                                                        int device_id) override {
    WaitAtGate();
    std::lock_guard lock(mutex);
    ++recovered;
    if (!fail_with.ok()) return fail_with;
    auto it = kernel.find(device_id);
    if (it == kernel.end()) return absl::NotFoundError("no such device");
    it->second = KernelDeviceState::kLive;
    return NewDevice(spec, device_id);
  }
  KernelDeviceState StateOf(int device_id) override {
    std::lock_guard lock(mutex);
    auto it = kernel.find(device_id);
    return it == kernel.end() ? KernelDeviceState::kAbsent : it->second;
  }
  std::vector<int> KernelDeviceIds() override {
    std::lock_guard lock(mutex);
    std::vector<int> ids;
    for (const auto& [id, state] : kernel) ids.push_back(id);
    return ids;
  }
  absl::Status DeleteKernelDevice(int device_id, bool force) override {
    std::lock_guard lock(mutex);
    if (!force && open_kernel_devices.count(device_id) > 0) {
      return absl::FailedPreconditionError(absl::StrCat("/dev/ublkb", device_id, " is in use"));
    }
    kernel.erase(device_id);
    deleted.push_back(device_id);
    return absl::OkStatus();
  }
  // The first call after `gate` is set announces itself on `entered` and waits for the gate.
  void WaitAtGate() {
    if (!gate.valid()) return;
    std::shared_future<void> mine = std::exchange(gate, {});
    entered.set_value();
    mine.wait();
  }
  void SetFailure(absl::Status status) {
    std::lock_guard lock(mutex);
    fail_with = std::move(status);
  }
  // What a kill -9 of the agent does to every device it served.
  void KillServer() {
    std::lock_guard lock(mutex);
    for (auto& [id, state] : kernel) {
      if (state == KernelDeviceState::kLive) state = KernelDeviceState::kQuiesced;
    }
  }

  std::mutex mutex;
  int calls = 0;
  std::vector<bool> fresh_calls;  // Provision's `fresh`, call by call
  int recovered = 0;
  absl::Status fail_with;
  std::map<int, KernelDeviceState> kernel;
  std::vector<int> deleted;
  std::set<int> open_kernel_devices;  // held open by an application: refused without force
  std::map<std::string, std::shared_ptr<FakeDeviceState>> devices;
  std::shared_future<void> gate;
  std::promise<void> entered;
  absl::Status rq_affinity_error;  // for the devices made from now on
  // Runs in every Provision, before it succeeds or fails (a fault that strikes meanwhile).
  std::function<void()> during_provision;
  // The id every new device gets, whatever was asked (the kernel's choice).
  std::optional<int> kernel_chooses_id;

 private:
  std::unique_ptr<VolumeDevice> NewDevice(const v1::Volume& spec, int id) {
    auto state = std::make_shared<FakeDeviceState>();
    state->rq_affinity_error = rq_affinity_error;
    state->size_bytes = spec.size_bytes();
    // What UblkProvisioner's DeviceConfigFor hands the device.
    state->limits = DeviceConfigFor(spec).limits;
    devices[spec.id()] = state;
    return std::make_unique<FakeDevice>(id, state, *this);
  }
};

absl::Status FakeDevice::Stop(bool force) {
  WaitAtGate();
  if (state_->open && !force) return absl::FailedPreconditionError("device is open by fio");
  state_->stopped = true;
  std::lock_guard lock(provisioner_.mutex);
  provisioner_.kernel.erase(id_);
  return absl::OkStatus();
}

absl::Status FakeDevice::Detach() {
  WaitAtGate();
  std::lock_guard lock(provisioner_.mutex);
  provisioner_.kernel[id_] = KernelDeviceState::kQuiesced;
  return absl::OkStatus();
}

class VolumeTableTest : public ::testing::Test {
 protected:
  VolumeTable& Table() {
    if (!table_) {
      auto registry = VolumeRegistry::Open(dir_.path());
      EXPECT_TRUE(registry.ok());
      table_ = std::make_unique<VolumeTable>(
          std::move(*registry), provisioner_,
          [this](const std::string& uri) {
            probed_uris_.push_back(uri);
            return export_size_;
          },
          [this](const std::string& path) {
            probed_namespaces_.push_back(path);
            return namespace_;
          },
          limits_, file_dirs_);
    }
    return *table_;
  }
  std::vector<std::string> Restart() {
    table_.reset();
    return Table().Restore();
  }
  // An agent killed with -9: nothing is stopped, the kernel quiesces its devices.
  std::vector<std::string> KillAndRestart() {
    provisioner_.KillServer();
    return Restart();
  }
  VolumeRegistry Registry() {
    auto registry = VolumeRegistry::Open(dir_.path());
    EXPECT_TRUE(registry.ok());
    return std::move(*registry);
  }
  static v1::Volume NullVolume(const std::string& id, uint64_t size = 64 << 20) {
    v1::Volume volume;
    volume.set_id(id);
    volume.set_size_bytes(size);
    volume.mutable_null();
    return volume;
  }

  static v1::Volume NbdVolume(const std::string& id, uint64_t size = 0) {
    v1::Volume volume;
    volume.set_id(id);
    volume.set_size_bytes(size);
    volume.mutable_nbd()->set_uri("nbd://127.0.0.1:10809/exp");
    return volume;
  }

  static v1::Volume NvmeVolume(const std::string& id, uint64_t offset = 0, uint64_t size = 0) {
    v1::Volume volume;
    volume.set_id(id);
    volume.set_size_bytes(size);
    volume.mutable_nvme()->set_path("/dev/ng0n1");
    volume.mutable_nvme()->set_offset_bytes(offset);
    return volume;
  }

  testing::TempDir dir_;
  FakeProvisioner provisioner_;
  VolumeLimits limits_;
  FileDirs file_dirs_;
  absl::StatusOr<server::NvmeNamespaceInfo> namespace_ =
      server::NvmeNamespaceInfo{uint64_t{1} << 30, 4096, true};
  std::vector<std::string> probed_namespaces_;
  absl::StatusOr<uint64_t> export_size_ = uint64_t{256} << 20;
  std::vector<std::string> probed_uris_;
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

TEST_F(VolumeTableTest, GetAndListShowTheBackendFaultCountsOfTheRunningDevice) {
  ASSERT_TRUE(Table().Create(NbdVolume("r1", 64 << 20)).ok());
  provisioner_.devices.at("r1")->faults = {.reconnects = 4,
                                           .server_errors = 3,
                                           .protocol_errors = 2,
                                           .io_timeouts = 1,
                                           .unflushed_losses = 5};
  auto volume = Table().Get("r1");
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->status().reconnects(), 4u);
  EXPECT_EQ(volume->status().server_errors(), 3u);
  EXPECT_EQ(volume->status().protocol_errors(), 2u);
  EXPECT_EQ(volume->status().io_timeouts(), 1u);
  EXPECT_EQ(volume->status().unflushed_losses(), 5u);
  std::vector<v1::Volume> listed = Table().List();
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_EQ(listed[0].status().server_errors(), 3u);
}

TEST_F(VolumeTableTest, AVolumeWhoseBackendIsLostIsFailedWithTheReasonAndCanBeDeleted) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  provisioner_.devices.at("v1")->lost = "NVMe namespace /dev/ng1n1 is gone";
  auto volume = Table().Get("v1");
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_FAILED);
  EXPECT_EQ(volume->status().message(), "NVMe namespace /dev/ng1n1 is gone");
  EXPECT_EQ(volume->status().device_path(), "/dev/ublkb0");
  std::vector<v1::Volume> listed = Table().List();
  ASSERT_THAT(listed, SizeIs(1));
  EXPECT_EQ(listed[0].status().state(), v1::VOLUME_STATE_FAILED);

  provisioner_.devices.at("v1")->open = true;
  ASSERT_TRUE(Table().Delete("v1", /*force=*/true).ok());
  EXPECT_TRUE(provisioner_.devices.at("v1")->stopped);
  EXPECT_EQ(Table().Get("v1").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(VolumeTableTest, AVolumeWhoseBackingIsShortIsDegradedUntilTheBackingIsBack) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  FakeDeviceState& device = *provisioner_.devices.at("v1");
  device.shortfall = "backing file /pool/v1 has 4096 bytes: 2 reads past its end failed with EIO";
  device.backing_bytes = 4096;
  auto volume = Table().Get("v1");
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_DEGRADED);
  EXPECT_EQ(volume->status().message(), device.shortfall);
  EXPECT_EQ(volume->status().device_path(), "/dev/ublkb0");  // it still serves the rest
  EXPECT_EQ(Table().List()[0].status().state(), v1::VOLUME_STATE_DEGRADED);

  device.backing_bytes = volume->size_bytes();  // the file was extended back
  volume = Table().Get("v1");
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_LIVE);
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

TEST_F(VolumeTableTest, AVolumeBeyondMaxVolumesIsResourceExhaustedNamingTheLimitAndChangesNothing) {
  limits_.max_volumes = 2;
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  ASSERT_TRUE(Table().Create(NullVolume("v2")).ok());
  auto third = Table().Create(NullVolume("v3"));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("--max-volumes 2"));
  EXPECT_EQ(provisioner_.calls, 2);
  EXPECT_THAT(Table().List(), SizeIs(2));
  EXPECT_TRUE(Table().Create(NullVolume("v1")).ok()) << "a repeated create is no new volume";
  Restart();
  EXPECT_THAT(Table().List(), SizeIs(2));

  ASSERT_TRUE(Table().Delete("v1", /*force=*/false).ok());
  EXPECT_TRUE(Table().Create(NullVolume("v3")).ok());
}

TEST_F(VolumeTableTest, AVolumeBeyondMaxQueueThreadsIsResourceExhaustedNamingTheLimit) {
  limits_.max_queue_threads = 6;
  v1::Volume four_queues = NullVolume("v1");
  four_queues.set_queues(4);
  ASSERT_TRUE(Table().Create(four_queues).ok());
  four_queues.set_id("v2");
  auto refused = Table().Create(four_queues);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--max-queue-threads 6"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("needs 4"));
  EXPECT_EQ(Table().Get("v2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Registry().LoadAll().records, SizeIs(1));
  v1::Volume two_queues = NullVolume("v3");
  two_queues.set_queues(2);
  EXPECT_TRUE(Table().Create(two_queues).ok());
}

TEST_F(VolumeTableTest, RestoreTakesBackEveryPersistedVolumeWhateverTheLimits) {
  for (const char* id : {"v1", "v2", "v3"}) ASSERT_TRUE(Table().Create(NullVolume(id)).ok());
  limits_.max_volumes = 2;
  EXPECT_THAT(KillAndRestart(), SizeIs(0));
  EXPECT_THAT(Table().List(), SizeIs(3));
  EXPECT_EQ(Table().Create(NullVolume("v4")).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(VolumeTableTest, ARestoreStoppedByTheAgentStoppingLeavesTheRestForTheNextAgent) {
  for (const char* id : {"v1", "v2"}) ASSERT_TRUE(Table().Create(NullVolume(id)).ok());
  provisioner_.KillServer();
  table_.reset();
  Table().StopRestoring();
  EXPECT_THAT(Table().Restore(), ElementsAre(HasSubstr("2 volume(s) left for the next agent")));
  EXPECT_THAT(Table().List(), SizeIs(0));
  EXPECT_THAT(Restart(), SizeIs(0));  // the next agent takes them back
  EXPECT_THAT(Table().List(), SizeIs(2));
}

TEST_F(VolumeTableTest, InvalidSpecIsRejectedBeforeAnythingHappens) {
  auto volume = Table().Create(NullVolume("v1", 0));
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(provisioner_.calls, 0);
  EXPECT_THAT(Table().List(), SizeIs(0));
  Restart();
  EXPECT_THAT(Table().List(), SizeIs(0));
}

TEST_F(VolumeTableTest, AnNbdVolumeWithoutASizeTakesTheExportsAndPersistsIt) {
  auto volume = Table().Create(NbdVolume("r1"));
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->size_bytes(), uint64_t{256} << 20);
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_THAT(probed_uris_, ::testing::ElementsAre("nbd://127.0.0.1:10809/exp"));
  Restart();
  auto restored = Table().Get("r1");
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->size_bytes(), uint64_t{256} << 20);
}

TEST_F(VolumeTableTest, AnExportSizeOffTheBlockSizeIsRoundedDown) {
  export_size_ = (uint64_t{1} << 20) + 1000;
  v1::Volume spec = NbdVolume("r1");
  spec.set_logical_block_size(4096);
  auto volume = Table().Create(spec);
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->size_bytes(), uint64_t{1} << 20);
}

TEST_F(VolumeTableTest, AnExportSmallerThanOneBlockIsInvalidArgumentNamingIt) {
  export_size_ = 511;
  auto volume = Table().Create(NbdVolume("r1"));
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("nbd://127.0.0.1:10809/exp"));
  EXPECT_EQ(provisioner_.calls, 0);
  EXPECT_THAT(Table().List(), SizeIs(0));
}

TEST_F(VolumeTableTest, AnUnreachableExportIsUnavailableAndPersistsNothing) {
  export_size_ = absl::UnavailableError("connect: Connection refused");
  auto volume = Table().Create(NbdVolume("r1"));
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("nbd://127.0.0.1:10809/exp"));
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("Connection refused"));
  EXPECT_EQ(provisioner_.calls, 0);
  EXPECT_THAT(Table().List(), SizeIs(0));
  Restart();
  EXPECT_THAT(Table().List(), SizeIs(0));
}

TEST_F(VolumeTableTest, RepeatingACreateWithoutASizeReturnsTheExistingNbdVolume) {
  ASSERT_TRUE(Table().Create(NbdVolume("r1")).ok());
  export_size_ = uint64_t{512} << 20;  // the export grew: the volume keeps its size
  auto again = Table().Create(NbdVolume("r1"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->size_bytes(), uint64_t{256} << 20);
  EXPECT_EQ(again->status().device_path(), "/dev/ublkb0");
  EXPECT_EQ(provisioner_.calls, 1);
  EXPECT_THAT(probed_uris_, SizeIs(1));
}

TEST_F(VolumeTableTest, AnExplicitSizeMatchingTheResolvedOneReturnsTheExistingVolume) {
  ASSERT_TRUE(Table().Create(NbdVolume("r1")).ok());
  auto again = Table().Create(NbdVolume("r1", uint64_t{256} << 20));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(provisioner_.calls, 1);
}

TEST_F(VolumeTableTest, ADifferentExplicitSizeThanTheResolvedOneIsAlreadyExists) {
  ASSERT_TRUE(Table().Create(NbdVolume("r1")).ok());
  auto other = Table().Create(NbdVolume("r1", uint64_t{64} << 20));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(other.status().message()), HasSubstr("size_bytes"));
}

TEST_F(VolumeTableTest, ACreateWithoutASizeForAnotherUriUnderTheSameIdIsAlreadyExists) {
  ASSERT_TRUE(Table().Create(NbdVolume("r1")).ok());
  v1::Volume other = NbdVolume("r1");
  other.mutable_nbd()->set_uri("nbd://127.0.0.1:10810/exp");
  auto volume = Table().Create(other);
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("uri"));
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

TEST_F(VolumeTableTest, AFileVolumeOutsideTheFileDirsIsRefusedAndNothingIsRecorded) {
  std::filesystem::create_directory(dir_.path() + "/images");
  file_dirs_ = *FileDirs::Parse({dir_.path() + "/images"}, "--file-dirs");
  v1::Volume outside = NullVolume("a");
  outside.mutable_file()->set_path(dir_.path() + "/elsewhere");
  const absl::StatusOr<v1::Volume> refused = Table().Create(outside);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr(dir_.path() + "/elsewhere"));
  EXPECT_EQ(provisioner_.calls, 0);
  EXPECT_THAT(Table().List(), SizeIs(0));
  EXPECT_THAT(Registry().LoadAll().records, SizeIs(0));

  v1::Volume inside = NullVolume("b");
  inside.mutable_file()->set_path(dir_.path() + "/images/b.img");
  EXPECT_TRUE(Table().Create(inside).ok());
}

TEST_F(VolumeTableTest, ARestoredFileVolumeTheFileDirsNoLongerAdmitStaysDegradedSayingWhy) {
  std::filesystem::create_directory(dir_.path() + "/images");
  v1::Volume volume = NullVolume("a");
  volume.mutable_file()->set_path(dir_.path() + "/images/a.img");
  ASSERT_TRUE(Table().Create(volume).ok());
  file_dirs_ = *FileDirs::Parse({dir_.path() + "/other"}, "--file-dirs");
  const int calls = provisioner_.calls;
  KillAndRestart();
  const absl::StatusOr<v1::Volume> restored = Table().Get("a");
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->status().state(), v1::VOLUME_STATE_DEGRADED);
  EXPECT_THAT(restored->status().message(), HasSubstr("outside the agent's file directories"));
  EXPECT_EQ(provisioner_.calls, calls);
}

TEST_F(VolumeTableTest, AnNvmeVolumeTakesTheNamespacesBlockSizeAndTheRestOfItsSize) {
  auto volume = Table().Create(NvmeVolume("n1", 256 << 20));
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->logical_block_size(), 4096u);
  EXPECT_EQ(volume->size_bytes(), uint64_t{768} << 20);
  EXPECT_THAT(probed_namespaces_, ::testing::ElementsAre("/dev/ng0n1"));
  // Repeating the request without size and block size returns the volume, without a probe.
  auto again = Table().Create(NvmeVolume("n1", 256 << 20));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(provisioner_.calls, 1);
  EXPECT_THAT(probed_namespaces_, SizeIs(1));
  Restart();
  ASSERT_TRUE(Table().Get("n1").ok());
  EXPECT_EQ(Table().Get("n1")->size_bytes(), uint64_t{768} << 20);
}

TEST_F(VolumeTableTest, NvmeVolumesAtDisjointOffsetsCoexistButOverlapsAreRefused) {
  ASSERT_TRUE(Table().Create(NvmeVolume("a", 0, 256 << 20)).ok());
  ASSERT_TRUE(Table().Create(NvmeVolume("b", 256 << 20, 256 << 20)).ok());
  absl::StatusOr<v1::Volume> overlap = Table().Create(NvmeVolume("c", 384 << 20, 256 << 20));
  EXPECT_EQ(overlap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(overlap.status().message()), HasSubstr("overlap volume 'b'"));
  // The rest of the namespace, after b: fine.
  ASSERT_TRUE(Table().Create(NvmeVolume("d", 512 << 20)).ok());
  EXPECT_THAT(Table().List(), SizeIs(3));
  EXPECT_EQ(provisioner_.calls, 3);
}

TEST_F(VolumeTableTest, NvmeVolumesThatDoNotFitOrAlignAreInvalidArgumentNamingTheField) {
  struct Case {
    v1::Volume volume;
    const char* field;
  };
  v1::Volume small_blocks = NvmeVolume("e", 0, 1 << 20);
  small_blocks.set_logical_block_size(512);
  for (const Case& c : {Case{NvmeVolume("a", 0, uint64_t{2} << 30), "volume.size_bytes"},
                        Case{NvmeVolume("b", 512 << 20, 768 << 20), "volume.size_bytes"},
                        Case{NvmeVolume("c", 512), "volume.nvme.offset_bytes"},
                        Case{NvmeVolume("d", uint64_t{1} << 30), "volume.nvme.offset_bytes"},
                        Case{small_blocks, "volume.logical_block_size"}}) {
    absl::StatusOr<v1::Volume> refused = Table().Create(c.volume);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << c.volume.id();
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr(c.field)) << refused.status();
  }
  EXPECT_THAT(Table().List(), SizeIs(0));
  EXPECT_EQ(provisioner_.calls, 0);
}

TEST_F(VolumeTableTest, ANamespaceTheProbeCannotUseIsRefusedNamingThePath) {
  namespace_ = absl::FailedPreconditionError("LBA format 1 carries 8 metadata bytes per block");
  absl::StatusOr<v1::Volume> refused = Table().Create(NvmeVolume("n1"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("volume.nvme.path"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("metadata"));
  EXPECT_THAT(Table().List(), SizeIs(0));
}

// Not OK: a mistyped id must not read as a deletion (blk-csi takes NOT_FOUND as done).
TEST_F(VolumeTableTest, DeleteOfAnUnknownVolumeIsNotFoundNamingIt) {
  absl::Status deleted = Table().Delete("nope", false);
  EXPECT_EQ(deleted.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(deleted.message(), "volume 'nope' does not exist");
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

// A slow device operation (an NBD dial, a stop waiting for the kernel) holds only its own
// volume: calls about other volumes, and reads of the same one, answer meanwhile. Without that,
// these calls would wait for the gate, which the test opens only after they answered.
TEST_F(VolumeTableTest, GetAndListAnswerWhileADeviceIsStoppedOrDetached) {
  for (const bool detach : {false, true}) {
    SCOPED_TRACE(detach ? "DetachAll" : "StopAll");
    table_.reset();
    provisioner_.kernel.clear();
    ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
    ASSERT_TRUE(Table().Create(NullVolume("b")).ok());
    FakeDeviceState& a = *provisioner_.devices.at("a");
    std::promise<void> release;
    a.slow_gate = release.get_future().share();
    std::future<void> entered = a.slow_entered.get_future();
    std::thread stopper([&] { detach ? Table().DetachAll() : Table().StopAll(); });
    entered.wait();

    // Bounded only so that a table holding its lock fails the test instead of hanging it.
    auto reads = std::async(std::launch::async, [&] {
      EXPECT_EQ(Table().Get("b")->status().state(), v1::VOLUME_STATE_LIVE);
      EXPECT_TRUE(Table().Get("a").ok());
      EXPECT_THAT(Table().List(), SizeIs(2));
      EXPECT_EQ(Table().Delete("a", true).code(), absl::StatusCode::kAborted);
    });
    EXPECT_EQ(reads.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    release.set_value();
    stopper.join();
    reads.wait();
    for (const char* id : {"a", "b"}) {
      EXPECT_EQ(Table().Get(id)->status().state(), v1::VOLUME_STATE_UNSPECIFIED) << id;
    }
    EXPECT_EQ(provisioner_.devices.at("b")->stopped, !detach);
    EXPECT_EQ(a.stopped, !detach);
  }
}

TEST_F(VolumeTableTest, AVolumeBeingCreatedStaysReadableAndOthersCanBeCreated) {
  std::promise<void> release;
  provisioner_.gate = release.get_future().share();
  std::future<void> entered = provisioner_.entered.get_future();
  std::thread creator([&] { EXPECT_TRUE(Table().Create(NullVolume("a")).ok()); });
  entered.wait();
  auto others = std::async(std::launch::async, [&] {
    EXPECT_TRUE(Table().Create(NullVolume("b")).ok());
    EXPECT_THAT(Table().List(), SizeIs(2));
  });
  EXPECT_EQ(others.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  release.set_value();
  creator.join();
  others.wait();
  EXPECT_EQ(Table().Get("a")->status().state(), v1::VOLUME_STATE_LIVE);
}

// issue 13, item 3: a retry in flight during shutdown must not bring a device up after it.
TEST_F(VolumeTableTest, DetachAllWaitsForARetryInFlightAndDetachesWhatItBroughtUp) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  provisioner_.SetFailure(absl::UnavailableError("backend gone"));
  KillAndRestart();
  ASSERT_EQ(Table().Get("a")->status().state(), v1::VOLUME_STATE_DEGRADED);
  provisioner_.SetFailure(absl::OkStatus());
  std::promise<void> release;
  provisioner_.gate = release.get_future().share();
  std::future<void> entered = provisioner_.entered.get_future();
  Table().StartRetrying(std::chrono::milliseconds(1), std::chrono::milliseconds(5));
  entered.wait();  // the retry thread is recovering the device

  std::promise<void> detaching;
  std::thread stopper([&] {
    detaching.set_value();
    Table().DetachAll();
  });
  detaching.get_future().wait();
  release.set_value();
  stopper.join();

  // The device the retry recovered was detached, not left serving after the agent's exit.
  EXPECT_EQ(provisioner_.kernel.at(0), KernelDeviceState::kQuiesced);
  EXPECT_FALSE(provisioner_.devices.at("a")->stopped);
  EXPECT_EQ(Table().Get("a")->status().state(), v1::VOLUME_STATE_UNSPECIFIED);
  const int recovered = provisioner_.recovered;
  table_.reset();
  EXPECT_EQ(provisioner_.recovered, recovered);
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

TEST_F(VolumeTableTest, AVolumeThatFailsAtRestoreIsListedAsDegradedAndCanBeRetried) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  Table().StopAll();
  provisioner_.fail_with = absl::UnavailableError("backend gone");
  Restart();
  auto failed = Table().Get("a");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->status().state(), v1::VOLUME_STATE_DEGRADED);
  EXPECT_THAT(failed->status().message(), HasSubstr("backend gone"));

  provisioner_.fail_with = absl::OkStatus();
  auto retried = Table().Create(NullVolume("a"));
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->status().state(), v1::VOLUME_STATE_LIVE);
}

TEST_F(VolumeTableTest, TheRecordKeepsTheKernelDeviceId) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  ASSERT_TRUE(Table().Create(NullVolume("b")).ok());
  VolumeRegistry::Loaded loaded = Registry().LoadAll();
  ASSERT_THAT(loaded.records, SizeIs(2));
  EXPECT_EQ(loaded.records[0].device_id, 0);
  EXPECT_EQ(loaded.records[1].device_id, 1);
}

TEST_F(VolumeTableTest, NewVolumesSkipIdsOtherProgramsUse) {
  provisioner_.kernel[0] = KernelDeviceState::kLive;  // not ours
  auto volume = Table().Create(NullVolume("a"));
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->status().device_id(), 1);
}

TEST_F(VolumeTableTest, AKilledAgentsDevicesAreRecoveredKeepingTheirNumbers) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  ASSERT_TRUE(Table().Create(NullVolume("b")).ok());
  for (int kill = 0; kill < 5; ++kill) {
    EXPECT_THAT(KillAndRestart(), SizeIs(0));
    EXPECT_EQ(Table().Get("a")->status().device_id(), 0);
    EXPECT_EQ(Table().Get("b")->status().device_id(), 1);
    EXPECT_EQ(Table().Get("b")->status().state(), v1::VOLUME_STATE_LIVE);
  }
  EXPECT_EQ(provisioner_.recovered, 10);
  EXPECT_EQ(provisioner_.calls, 2);  // never re-created
  EXPECT_THAT(provisioner_.deleted, SizeIs(0));
}

TEST_F(VolumeTableTest, DetachAllLeavesTheDevicesForTheNextAgentToRecover) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  Table().DetachAll();
  EXPECT_EQ(provisioner_.kernel.at(0), KernelDeviceState::kQuiesced);
  EXPECT_FALSE(provisioner_.devices["a"]->stopped);
  Restart();
  EXPECT_EQ(provisioner_.recovered, 1);
  EXPECT_EQ(Table().Get("a")->status().state(), v1::VOLUME_STATE_LIVE);
}

TEST_F(VolumeTableTest, AGoneDeviceIsCreatedAgainUnderItsOldNumber) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  ASSERT_TRUE(Table().Create(NullVolume("b")).ok());
  ASSERT_TRUE(Table().Delete("a", false).ok());
  Table().StopAll();  // the kernel has no device now; id 0 is free
  Restart();
  EXPECT_EQ(Table().Get("b")->status().device_id(), 1);
  EXPECT_EQ(Table().Get("b")->status().state(), v1::VOLUME_STATE_LIVE);
}

TEST_F(VolumeTableTest, AHalfCreatedDeviceIsDeletedAndCreatedAgain) {
  // An agent killed between ADD_DEV and START_DEV: the record names the id, the
  // kernel has the device, never started.
  ASSERT_TRUE(Registry().Save(NullVolume("a"), 3).ok());
  provisioner_.kernel[3] = KernelDeviceState::kDead;
  Restart();
  EXPECT_THAT(provisioner_.deleted, ::testing::ElementsAre(3));
  auto volume = Table().Get("a");
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(volume->status().device_id(), 3);
  auto again = Table().Create(NullVolume("a"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->status().device_id(), 3);
}

TEST_F(VolumeTableTest, WhenTheOldNumberWasTakenMeanwhileAnotherIsChosenAndRecorded) {
  ASSERT_TRUE(Registry().Save(NullVolume("a"), 0).ok());
  // Between the checks the id is taken: the fake refuses id 0 once.
  provisioner_.kernel[0] = KernelDeviceState::kAbsent;
  Restart();
  auto volume = Table().Get("a");
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(volume->status().device_id(), 1);
  EXPECT_EQ(Registry().LoadAll().records.at(0).device_id, 1);
}

TEST_F(VolumeTableTest, KernelDevicesNoRecordClaimsAreReportedAndLeftAlone) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  provisioner_.kernel[7] = KernelDeviceState::kDead;
  std::vector<std::string> problems = KillAndRestart();
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_THAT(problems[0], HasSubstr("ublk device 7"));
  EXPECT_EQ(provisioner_.kernel.at(7), KernelDeviceState::kDead);
  EXPECT_THAT(provisioner_.deleted, SizeIs(0));
}

TEST_F(VolumeTableTest, ADegradedVolumeIsRetriedInTheBackgroundUntilItComesBack) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  provisioner_.SetFailure(absl::NotFoundError("backing file /img: No such file"));
  KillAndRestart();
  EXPECT_EQ(Table().Get("a")->status().state(), v1::VOLUME_STATE_DEGRADED);
  Table().StartRetrying(std::chrono::milliseconds(1), std::chrono::milliseconds(5));
  provisioner_.SetFailure(absl::OkStatus());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Table().Get("a")->status().state() != v1::VOLUME_STATE_LIVE &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(Table().Get("a")->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(Table().Get("a")->status().device_id(), 0);
}

TEST_F(VolumeTableTest, DeletingADegradedVolumeRemovesTheDeviceItsPreviousAgentLeft) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  provisioner_.fail_with = absl::NotFoundError("backend gone");
  KillAndRestart();
  ASSERT_EQ(Table().Get("a")->status().state(), v1::VOLUME_STATE_DEGRADED);
  EXPECT_TRUE(Table().Delete("a", false).ok());
  EXPECT_THAT(provisioner_.deleted, ::testing::ElementsAre(0));
  EXPECT_FALSE(provisioner_.kernel.contains(0));
}

TEST_F(VolumeTableTest, DeletingADegradedVolumeWhoseLeftDeviceIsOpenNeedsForce) {
  ASSERT_TRUE(Table().Create(NullVolume("a")).ok());
  provisioner_.fail_with = absl::NotFoundError("backend gone");
  KillAndRestart();
  ASSERT_EQ(Table().Get("a")->status().state(), v1::VOLUME_STATE_DEGRADED);
  provisioner_.open_kernel_devices.insert(0);
  const absl::Status refused = Table().Delete("a", false);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_TRUE(provisioner_.kernel.contains(0));
  EXPECT_EQ(Table().Get("a")->status().state(), v1::VOLUME_STATE_DEGRADED);
  EXPECT_TRUE(Table().Delete("a", true).ok());
  EXPECT_FALSE(provisioner_.kernel.contains(0));
  EXPECT_FALSE(Table().Get("a").ok());
}

}  // namespace
}  // namespace blk::agent

namespace blk::agent {
namespace {

google::protobuf::FieldMask Mask(std::initializer_list<const char*> paths) {
  google::protobuf::FieldMask mask;
  for (const char* path : paths) mask.add_paths(path);
  return mask;
}

v1::Volume RqAffinityChange(const std::string& id, uint32_t value) {
  v1::Volume changes;
  changes.set_id(id);
  changes.set_rq_affinity(value);
  return changes;
}

class TunablesTest : public VolumeTableTest {};

TEST_F(TunablesTest, CreateAppliesRqAffinityAndGetReadsItBack) {
  v1::Volume spec = NullVolume("v1");
  spec.set_rq_affinity(2);
  auto volume = Table().Create(spec);
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity, 2u);
  EXPECT_EQ(volume->rq_affinity(), 2u);
  ASSERT_TRUE(volume->status().has_rq_affinity());
  EXPECT_EQ(volume->status().rq_affinity(), 2u);
  EXPECT_FALSE(volume->status().rq_affinity_redirected());
  // What GetVolume shows is read from the device, not remembered.
  provisioner_.devices["v1"]->rq_affinity = 0;
  provisioner_.devices["v1"]->redirected = true;
  auto got = Table().Get("v1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->status().rq_affinity(), 0u);
  EXPECT_TRUE(got->status().rq_affinity_redirected());
}

TEST_F(TunablesTest, WithoutRqAffinityTheKernelDefaultIsLeftAlone) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity_writes, 0);
  auto got = Table().Get("v1");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_rq_affinity());
  EXPECT_EQ(got->status().rq_affinity(), 1u);
}

TEST_F(TunablesTest, ANewVolumeWhoseRqAffinityCannotBeAppliedIsNotCreated) {
  provisioner_.rq_affinity_error = absl::PermissionDeniedError("read-only sysfs");
  v1::Volume spec = NullVolume("v1");
  spec.set_rq_affinity(2);
  auto volume = Table().Create(spec);
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("volume.rq_affinity"));
  EXPECT_TRUE(provisioner_.devices["v1"]->stopped);
  EXPECT_THAT(Table().List(), SizeIs(0));
  Restart();
  EXPECT_THAT(Table().List(), SizeIs(0));
}

TEST_F(TunablesTest, CreateAgainWithAnotherRqAffinityIsTheSameVolumeAndChangesNothing) {
  v1::Volume spec = NullVolume("v1");
  spec.set_rq_affinity(2);
  ASSERT_TRUE(Table().Create(spec).ok());
  for (std::optional<uint32_t> other : {std::optional<uint32_t>(0), std::optional<uint32_t>()}) {
    v1::Volume again = NullVolume("v1");
    if (other) again.set_rq_affinity(*other);
    auto volume = Table().Create(again);
    ASSERT_TRUE(volume.ok()) << volume.status();
    EXPECT_EQ(volume->rq_affinity(), 2u);
    EXPECT_EQ(volume->status().rq_affinity(), 2u);
  }
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity_writes, 1);
  EXPECT_EQ(provisioner_.calls, 1);
}

TEST_F(TunablesTest, PlacementIsSetAtCreationInCanonicalFormAndNotCompared) {
  v1::Volume spec = NullVolume("v1");
  spec.set_placement("0");
  auto volume = Table().Create(spec);
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->placement(), "0");
  // Creating it again with another placement, or with none (the default), is the same volume,
  // which keeps its placement: a CSI re-stage after an upgrade that changed the default.
  for (const char* again : {"spread", ""}) {
    v1::Volume other = NullVolume("v1");
    other.set_placement(again);
    auto same = Table().Create(other);
    ASSERT_TRUE(same.ok()) << again << ": " << same.status();
    EXPECT_EQ(same->placement(), "0") << again;
  }
  EXPECT_EQ(provisioner_.calls, 1);

  // The default is node, and "" and "node" are the same placement.
  ASSERT_TRUE(Table().Create(NullVolume("v2")).ok());
  auto created = Table().Get("v2");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->placement(), "node");
}

TEST_F(TunablesTest, BadPlacementsAreInvalidArgumentNamingTheField) {
  for (const char* bad : {"everywhere", "0,", "5000", "1023"}) {
    v1::Volume spec = NullVolume("v1");
    spec.set_placement(bad);
    auto volume = Table().Create(spec);
    EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(volume.status().message()), HasSubstr("volume.placement")) << bad;
  }
  EXPECT_EQ(provisioner_.calls, 0);
}

TEST_F(TunablesTest, CreateWithRqAffinityThreeIsInvalidArgument) {
  v1::Volume spec = NullVolume("v1");
  spec.set_rq_affinity(3);
  auto volume = Table().Create(spec);
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("volume.rq_affinity: 3"));
  EXPECT_EQ(provisioner_.calls, 0);
}

TEST_F(TunablesTest, UpdateSetsEachValueOnTheDeviceAndPersistsIt) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  for (uint32_t value : {0u, 1u, 2u}) {
    auto volume = Table().Update(RqAffinityChange("v1", value), Mask({"rq_affinity"}));
    ASSERT_TRUE(volume.ok()) << volume.status();
    EXPECT_EQ(volume->rq_affinity(), value);
    EXPECT_EQ(volume->status().rq_affinity(), value);
    EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity, value);
    VolumeRegistry::Loaded loaded = Registry().LoadAll();
    ASSERT_THAT(loaded.records, SizeIs(1));
    EXPECT_EQ(loaded.records[0].spec.rq_affinity(), value);
  }
}

// Only a new volume's backing may be made: a volume re-created after a reboot, or retried
// after a failed restore, had data, which the provisioner must find (not create empty).
TEST_F(VolumeTableTest, OnlyANewVolumeIsProvisionedFresh) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  provisioner_.KillServer();
  provisioner_.kernel.clear();  // a reboot: the device must be created again
  provisioner_.fail_with = absl::NotFoundError("backing file missing");
  Restart();
  EXPECT_EQ(Table().Get("v1")->status().state(), v1::VOLUME_STATE_DEGRADED);
  provisioner_.fail_with = absl::OkStatus();
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());  // the same spec again: a retry
  EXPECT_EQ(Table().Get("v1")->status().state(), v1::VOLUME_STATE_LIVE);
  ASSERT_TRUE(Table().Create(NullVolume("v2")).ok());
  EXPECT_THAT(provisioner_.fresh_calls, ElementsAre(true, false, false, true));
}

TEST_F(TunablesTest, AnUpdatedRqAffinityIsAppliedAgainWhenTheDeviceIsRecreated) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  ASSERT_TRUE(Table().Update(RqAffinityChange("v1", 0), Mask({"rq_affinity"})).ok());
  provisioner_.KillServer();
  provisioner_.kernel.clear();  // e.g. a reboot: the device must be created again
  Restart();
  auto volume = Table().Get("v1");
  ASSERT_TRUE(volume.ok());
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity, 0u);
  EXPECT_EQ(volume->status().rq_affinity(), 0u);
}

TEST_F(TunablesTest, RqAffinityIsAppliedAgainWhenAKilledAgentRecoversTheDevice) {
  v1::Volume spec = NullVolume("v1");
  spec.set_rq_affinity(2);
  ASSERT_TRUE(Table().Create(spec).ok());
  KillAndRestart();
  EXPECT_EQ(provisioner_.recovered, 1);
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity, 2u);
}

TEST_F(TunablesTest, RefusedUpdatesChangeNothing) {
  v1::Volume spec = NullVolume("v1");
  spec.set_rq_affinity(1);
  ASSERT_TRUE(Table().Create(spec).ok());
  struct Case {
    v1::Volume changes;
    google::protobuf::FieldMask mask;
    absl::StatusCode code;
    const char* message;
  };
  v1::Volume unset;
  unset.set_id("v1");
  v1::Volume resize = RqAffinityChange("v1", 2);
  resize.set_size_bytes(1 << 30);
  const Case cases[] = {
      {RqAffinityChange("v1", 3), Mask({"rq_affinity"}), absl::StatusCode::kInvalidArgument,
       "volume.rq_affinity: 3 is not 0, 1 or 2"},
      {RqAffinityChange("v1", 2), Mask({}), absl::StatusCode::kInvalidArgument,
       "update_mask: names no field"},
      {resize, Mask({"rq_affinity", "size_bytes"}), absl::StatusCode::kInvalidArgument,
       "update_mask: 'size_bytes' cannot be updated (updatable: rq_affinity, limits)"},
      {unset, Mask({"rq_affinity"}), absl::StatusCode::kInvalidArgument,
       "volume.rq_affinity: must be set"},
      {RqAffinityChange("Bad Id", 2), Mask({"rq_affinity"}), absl::StatusCode::kInvalidArgument,
       "volume.id"},
      {RqAffinityChange("nope", 2), Mask({"rq_affinity"}), absl::StatusCode::kNotFound, "nope"},
  };
  for (const Case& c : cases) {
    auto volume = Table().Update(c.changes, c.mask);
    EXPECT_EQ(volume.status().code(), c.code) << c.message;
    EXPECT_THAT(std::string(volume.status().message()), HasSubstr(c.message));
  }
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity, 1u);
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity_writes, 1);
  auto volume = Table().Get("v1");
  ASSERT_TRUE(volume.ok());
  EXPECT_EQ(volume->rq_affinity(), 1u);
  EXPECT_EQ(volume->size_bytes(), uint64_t{64} << 20);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.rq_affinity(), 1u);
}

TEST_F(TunablesTest, AnUpdateTheKernelRefusesIsNotRecorded) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  provisioner_.devices["v1"]->rq_affinity_error = absl::InternalError("write: Invalid argument");
  auto volume = Table().Update(RqAffinityChange("v1", 2), Mask({"rq_affinity"}));
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("volume.rq_affinity"));
  EXPECT_FALSE(Table().Get("v1")->has_rq_affinity());
  EXPECT_FALSE(Registry().LoadAll().records[0].spec.has_rq_affinity());
  // The volume is not left busy.
  provisioner_.devices["v1"]->rq_affinity_error = absl::OkStatus();
  EXPECT_TRUE(Table().Update(RqAffinityChange("v1", 2), Mask({"rq_affinity"})).ok());
}

TEST_F(TunablesTest, ADegradedVolumeTakesTheUpdateWhenItsDeviceComesUp) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  provisioner_.KillServer();
  provisioner_.SetFailure(absl::UnavailableError("backend gone"));
  Restart();
  ASSERT_EQ(Table().Get("v1")->status().state(), v1::VOLUME_STATE_DEGRADED);
  auto volume = Table().Update(RqAffinityChange("v1", 0), Mask({"rq_affinity"}));
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_FALSE(volume->status().has_rq_affinity());  // no device to read it from
  provisioner_.SetFailure(absl::OkStatus());
  Restart();
  EXPECT_EQ(Table().Get("v1")->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity, 0u);
}

v1::Volume LimitsChange(const std::string& id, uint64_t read_iops, uint64_t total_bytes = 0) {
  v1::Volume changes;
  changes.set_id(id);
  if (read_iops != 0) changes.mutable_limits()->mutable_read_iops()->set_rate(read_iops);
  if (total_bytes != 0) {
    changes.mutable_limits()->mutable_total_bytes_per_second()->set_rate(total_bytes);
  }
  return changes;
}

v1::Volume WithReadIops(v1::Volume spec, uint64_t rate, uint64_t burst = 0) {
  spec.mutable_limits()->mutable_read_iops()->set_rate(rate);
  spec.mutable_limits()->mutable_read_iops()->set_burst(burst);
  return spec;
}

class LimitsTest : public VolumeTableTest {};

TEST_F(LimitsTest, ANewDeviceComesUpWithTheSpecsLimits) {
  auto volume = Table().Create(WithReadIops(NullVolume("v1"), 1000, 100));
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(provisioner_.devices["v1"]->limits.read_iops, (server::RateLimit{1000, 100}));
  EXPECT_EQ(provisioner_.devices["v1"]->limits_writes, 0);  // no SetLimits needed
  EXPECT_EQ(volume->limits().read_iops().rate(), 1000u);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.limits().read_iops().burst(), 100u);
}

TEST_F(LimitsTest, StatusShowsWhatTheLimitsHeldBack) {
  ASSERT_TRUE(Table().Create(WithReadIops(NullVolume("v1"), 10)).ok());
  provisioner_.devices["v1"]->throttled = {.requests = 7, .wait_ns = 1'500'000'000};
  auto volume = Table().Get("v1");
  ASSERT_TRUE(volume.ok());
  EXPECT_EQ(volume->status().throttled_requests(), 7u);
  EXPECT_EQ(volume->status().throttled_nanoseconds(), 1'500'000'000u);
}

TEST_F(LimitsTest, CreateAgainWithOtherLimitsIsTheSameVolumeAndChangesNothing) {
  ASSERT_TRUE(Table().Create(WithReadIops(NullVolume("v1"), 1000)).ok());
  for (const v1::Volume& again : {WithReadIops(NullVolume("v1"), 5), NullVolume("v1")}) {
    auto volume = Table().Create(again);
    ASSERT_TRUE(volume.ok()) << volume.status();
    EXPECT_EQ(volume->limits().read_iops().rate(), 1000u);
  }
  EXPECT_EQ(provisioner_.devices["v1"]->limits.read_iops.rate, 1000u);
  EXPECT_EQ(provisioner_.devices["v1"]->limits_writes, 0);
  EXPECT_EQ(provisioner_.calls, 1);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.limits().read_iops().rate(), 1000u);
}

TEST_F(LimitsTest, AnUpdateReplacesTheWholeSetOnTheLiveDeviceAndPersistsIt) {
  ASSERT_TRUE(Table().Create(WithReadIops(NullVolume("v1"), 1000)).ok());
  auto volume = Table().Update(LimitsChange("v1", 0, 50 << 20), Mask({"limits"}));
  ASSERT_TRUE(volume.ok()) << volume.status();
  // read_iops, left out of the new limits, is lifted.
  EXPECT_FALSE(volume->limits().has_read_iops());
  EXPECT_EQ(volume->limits().total_bytes_per_second().rate(), 50u << 20);
  const server::IoLimits& device = provisioner_.devices["v1"]->limits;
  EXPECT_EQ(device.read_iops, server::RateLimit{});
  EXPECT_EQ(device.total_bytes.rate, 50u << 20);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.limits().total_bytes_per_second().rate(),
            50u << 20);
  EXPECT_EQ(Table().Get("v1")->limits().total_bytes_per_second().rate(), 50u << 20);

  // Unset limits lift them all.
  v1::Volume none;
  none.set_id("v1");
  ASSERT_TRUE(Table().Update(none, Mask({"limits"})).ok());
  EXPECT_TRUE(provisioner_.devices["v1"]->limits.unlimited());
  EXPECT_FALSE(Table().Get("v1")->has_limits());
  EXPECT_FALSE(Registry().LoadAll().records[0].spec.has_limits());
}

TEST_F(LimitsTest, AnUpdateOfLimitsLeavesRqAffinityAloneAndBothMayChangeAtOnce) {
  v1::Volume spec = NullVolume("v1");
  spec.set_rq_affinity(2);
  ASSERT_TRUE(Table().Create(spec).ok());
  ASSERT_TRUE(Table().Update(LimitsChange("v1", 100), Mask({"limits"})).ok());
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity_writes, 1);
  EXPECT_EQ(Table().Get("v1")->rq_affinity(), 2u);

  v1::Volume both = LimitsChange("v1", 200);
  both.set_rq_affinity(0);
  auto volume = Table().Update(both, Mask({"rq_affinity", "limits"}));
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity, 0u);
  EXPECT_EQ(provisioner_.devices["v1"]->limits.read_iops.rate, 200u);
  const v1::Volume recorded = Registry().LoadAll().records[0].spec;
  EXPECT_EQ(recorded.rq_affinity(), 0u);
  EXPECT_EQ(recorded.limits().read_iops().rate(), 200u);

  // An rq_affinity update keeps the limits.
  ASSERT_TRUE(Table().Update(RqAffinityChange("v1", 1), Mask({"rq_affinity"})).ok());
  EXPECT_EQ(provisioner_.devices["v1"]->limits.read_iops.rate, 200u);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.limits().read_iops().rate(), 200u);
}

TEST_F(LimitsTest, InvalidLimitsChangeNothing) {
  ASSERT_TRUE(Table().Create(WithReadIops(NullVolume("v1"), 1000)).ok());
  v1::Volume bad = LimitsChange("v1", 20'000'000);
  bad.set_rq_affinity(0);
  auto volume = Table().Update(bad, Mask({"rq_affinity", "limits"}));
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("volume.limits.read_iops.rate"));
  EXPECT_EQ(provisioner_.devices["v1"]->limits.read_iops.rate, 1000u);
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity_writes, 0);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.limits().read_iops().rate(), 1000u);

  auto created = Table().Create(WithReadIops(NullVolume("v2"), 100, /*burst=*/UINT64_MAX));
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(created.status().message()), HasSubstr("volume.limits.read_iops.burst"));
  EXPECT_EQ(provisioner_.calls, 1);
}

TEST_F(LimitsTest, LimitsTheDeviceRefusesAreNotRecordedAndRqAffinityIsPutBack) {
  v1::Volume spec = WithReadIops(NullVolume("v1"), 1000);
  spec.set_rq_affinity(1);
  ASSERT_TRUE(Table().Create(spec).ok());
  provisioner_.devices["v1"]->limits_error = absl::InternalError("no limiter");
  v1::Volume both = LimitsChange("v1", 5);
  both.set_rq_affinity(2);
  auto volume = Table().Update(both, Mask({"rq_affinity", "limits"}));
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(volume.status().message()),
              HasSubstr("volume.limits: cannot apply: no limiter"));
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity, 1u);
  EXPECT_EQ(provisioner_.devices["v1"]->limits.read_iops.rate, 1000u);
  const v1::Volume recorded = Registry().LoadAll().records[0].spec;
  EXPECT_EQ(recorded.rq_affinity(), 1u);
  EXPECT_EQ(recorded.limits().read_iops().rate(), 1000u);
  EXPECT_EQ(Table().Get("v1")->limits().read_iops().rate(), 1000u);
  // The volume is not left busy.
  provisioner_.devices["v1"]->limits_error = absl::OkStatus();
  EXPECT_TRUE(Table().Update(both, Mask({"rq_affinity", "limits"})).ok());
}

TEST_F(LimitsTest, UpdatedLimitsComeBackWhenAKilledAgentRecoversTheDevice) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  ASSERT_TRUE(Table().Update(LimitsChange("v1", 300), Mask({"limits"})).ok());
  KillAndRestart();
  EXPECT_EQ(provisioner_.recovered, 1);
  EXPECT_EQ(provisioner_.devices["v1"]->limits.read_iops.rate, 300u);
  EXPECT_EQ(Table().Get("v1")->limits().read_iops().rate(), 300u);
}

TEST_F(LimitsTest, UpdatedLimitsComeBackWhenTheDeviceIsRecreated) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  ASSERT_TRUE(Table().Update(LimitsChange("v1", 0, 1 << 20), Mask({"limits"})).ok());
  provisioner_.KillServer();
  provisioner_.kernel.clear();  // a reboot: the device must be created again
  Restart();
  EXPECT_EQ(Table().Get("v1")->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(provisioner_.devices["v1"]->limits.total_bytes.rate, 1u << 20);
}

TEST_F(LimitsTest, ADegradedVolumeTakesNewLimitsWhenItsDeviceComesUp) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  provisioner_.KillServer();
  provisioner_.SetFailure(absl::UnavailableError("backend gone"));
  Restart();
  ASSERT_EQ(Table().Get("v1")->status().state(), v1::VOLUME_STATE_DEGRADED);
  auto volume = Table().Update(LimitsChange("v1", 42), Mask({"limits"}));
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->limits().read_iops().rate(), 42u);
  EXPECT_EQ(volume->status().throttled_requests(), 0u);  // no device to count them
  provisioner_.SetFailure(absl::OkStatus());
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());  // the same spec again: a retry
  EXPECT_EQ(Table().Get("v1")->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(provisioner_.devices["v1"]->limits.read_iops.rate, 42u);
  EXPECT_EQ(Table().Get("v1")->limits().read_iops().rate(), 42u);
}

class ResizeTest : public VolumeTableTest {};

TEST_F(ResizeTest, GrowsTheDeviceAndRecordsTheNewSize) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  auto volume = Table().Resize("v1", uint64_t{128} << 20);
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->size_bytes(), uint64_t{128} << 20);
  EXPECT_EQ(volume->status().state(), v1::VOLUME_STATE_LIVE);
  EXPECT_EQ(provisioner_.devices["v1"]->size_bytes, uint64_t{128} << 20);
  EXPECT_EQ(Table().Get("v1")->size_bytes(), uint64_t{128} << 20);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.size_bytes(), uint64_t{128} << 20);
}

TEST_F(ResizeTest, ARestageWithTheOldSizeAsMinimumGetsTheGrownVolume) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  ASSERT_TRUE(Table().Resize("v1", uint64_t{128} << 20).ok());
  // The caller only knows the size the volume was created with (a CSI volume context).
  auto again = Table().Create(NullVolume("v1"), /*size_is_minimum=*/true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->size_bytes(), uint64_t{128} << 20);
  // Without the flag the size is compared exactly, as before.
  EXPECT_EQ(Table().Create(NullVolume("v1")).status().code(), absl::StatusCode::kAlreadyExists);
  v1::Volume larger = NullVolume("v1");
  larger.set_size_bytes(uint64_t{256} << 20);
  EXPECT_EQ(Table().Create(larger, /*size_is_minimum=*/true).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(provisioner_.devices["v1"]->size_bytes, uint64_t{128} << 20);
}

// The device's part of a resize can take as long as the NBD connect timeout (the export is asked
// for its size again): reads of that volume answer meanwhile, and a second write is ABORTED at
// once instead of queueing behind it.
TEST_F(ResizeTest, GetListAndStatsAnswerWhileTheDeviceGrows) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  FakeDeviceState& device = *provisioner_.devices.at("v1");
  std::promise<void> release;
  device.slow_gate = release.get_future().share();
  std::future<void> entered = device.slow_entered.get_future();
  std::thread resizer([&] { EXPECT_TRUE(Table().Resize("v1", uint64_t{128} << 20).ok()); });
  entered.wait();

  // Bounded only so that a table holding its lock fails the test instead of hanging it.
  auto reads = std::async(std::launch::async, [&] {
    auto volume = Table().Get("v1");
    ASSERT_TRUE(volume.ok()) << volume.status();
    EXPECT_EQ(volume->size_bytes(), uint64_t{64} << 20);  // not grown until the device is
    EXPECT_THAT(Table().List(), SizeIs(1));
    // The fake device keeps no statistics: this is its own answer, not a refusal of the table.
    EXPECT_EQ(Table().Stats("v1").status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(Table().Resize("v1", uint64_t{256} << 20).status().code(),
              absl::StatusCode::kAborted);
  });
  EXPECT_EQ(reads.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  release.set_value();
  resizer.join();
  reads.wait();
  EXPECT_EQ(Table().Get("v1")->size_bytes(), uint64_t{128} << 20);
}

TEST_F(ResizeTest, AnNvmeVolumeGrowsUpToItsNeighbourButNotIntoIt) {
  ASSERT_TRUE(Table().Create(NvmeVolume("a", 0, 128 << 20)).ok());
  ASSERT_TRUE(Table().Create(NvmeVolume("b", 256 << 20, 256 << 20)).ok());
  auto grown = Table().Resize("a", uint64_t{256} << 20);
  ASSERT_TRUE(grown.ok()) << grown.status();
  EXPECT_EQ(grown->size_bytes(), uint64_t{256} << 20);

  auto refused = Table().Resize("a", uint64_t{384} << 20);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("overlap volume 'b'"));
  EXPECT_EQ(provisioner_.devices["a"]->size_bytes, uint64_t{256} << 20);
  EXPECT_EQ(provisioner_.devices["a"]->resizes, 1);
  EXPECT_EQ(Table().Get("a")->size_bytes(), uint64_t{256} << 20);
  // The last volume on the namespace is not in anyone's way.
  EXPECT_TRUE(Table().Resize("b", uint64_t{512} << 20).ok());
}

// While an NVMe volume grows, the bytes it grows into are taken: a Create racing the Resize
// (the device resizing, the table's lock free) cannot overlap them; after a failed growth it can.
TEST_F(ResizeTest, ACreateDuringAGrowthCannotTakeTheBytesItGrowsInto) {
  for (const bool growth_fails : {false, true}) {
    SCOPED_TRACE(growth_fails ? "the growth fails" : "the growth succeeds");
    table_.reset();
    provisioner_.kernel.clear();
    ASSERT_TRUE(Table().Create(NvmeVolume("a", 0, 128 << 20)).ok());
    FakeDeviceState& a = *provisioner_.devices.at("a");
    if (growth_fails) a.resize_error = absl::UnavailableError("no UPDATE_SIZE");
    std::promise<void> release;
    a.slow_gate = release.get_future().share();
    std::future<void> entered = a.slow_entered.get_future();
    std::thread resizer(
        [&] { EXPECT_EQ(Table().Resize("a", uint64_t{256} << 20).ok(), !growth_fails); });
    entered.wait();  // the device is growing; the table's lock is free

    // Bounded only so that a table holding its lock fails the test instead of hanging it.
    auto racing = std::async(std::launch::async, [&] {
      absl::StatusOr<v1::Volume> overlap = Table().Create(NvmeVolume("b", 192 << 20, 128 << 20));
      EXPECT_EQ(overlap.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(std::string(overlap.status().message()), HasSubstr("overlap volume 'a'"));
      EXPECT_THAT(std::string(overlap.status().message()), HasSubstr("growing"));
    });
    EXPECT_EQ(racing.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    release.set_value();
    resizer.join();
    racing.wait();
    a.slow_gate = {};  // the table's end detaches the device: no gate there
    EXPECT_EQ(Table().Get("a")->size_bytes(), (growth_fails ? uint64_t{128} : uint64_t{256}) << 20);
    EXPECT_EQ(Table().Create(NvmeVolume("b", 192 << 20, 64 << 20)).ok(), growth_fails);
  }
}

TEST_F(ResizeTest, TheSameSizeAgainChangesNothing) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  ASSERT_TRUE(Table().Resize("v1", uint64_t{128} << 20).ok());
  auto again = Table().Resize("v1", uint64_t{128} << 20);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->size_bytes(), uint64_t{128} << 20);
  EXPECT_EQ(provisioner_.devices["v1"]->resizes, 1);
}

TEST_F(ResizeTest, RefusedResizesChangeNothing) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  struct Case {
    std::string id;
    uint64_t size;
    absl::StatusCode code;
    const char* message;
  };
  const Case cases[] = {
      {"v1", uint64_t{32} << 20, absl::StatusCode::kInvalidArgument, "would cut off data"},
      {"v1", (uint64_t{128} << 20) + 100, absl::StatusCode::kInvalidArgument,
       "multiple of the volume's logical block size 512"},
      {"v1", 0, absl::StatusCode::kInvalidArgument, "size_bytes"},
      {"nope", uint64_t{128} << 20, absl::StatusCode::kNotFound, "nope"},
      {"Bad Id", uint64_t{128} << 20, absl::StatusCode::kInvalidArgument, "id"},
  };
  for (const Case& c : cases) {
    auto volume = Table().Resize(c.id, c.size);
    EXPECT_EQ(volume.status().code(), c.code) << c.message;
    EXPECT_THAT(std::string(volume.status().message()), HasSubstr(c.message));
  }
  EXPECT_EQ(provisioner_.devices["v1"]->resizes, 0);
  EXPECT_EQ(Table().Get("v1")->size_bytes(), uint64_t{64} << 20);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.size_bytes(), uint64_t{64} << 20);
}

TEST_F(ResizeTest, AResizeTheKernelRefusesIsNotRecorded) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  provisioner_.devices["v1"]->resize_error = absl::FailedPreconditionError(
      "this kernel cannot resize a ublk device online: it lacks UBLK_F_UPDATE_SIZE");
  auto volume = Table().Resize("v1", uint64_t{128} << 20);
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("volume 'v1': "));
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("UBLK_F_UPDATE_SIZE"));
  EXPECT_EQ(Table().Get("v1")->size_bytes(), uint64_t{64} << 20);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.size_bytes(), uint64_t{64} << 20);
  // The volume is not left busy.
  provisioner_.devices["v1"]->resize_error = absl::OkStatus();
  EXPECT_TRUE(Table().Resize("v1", uint64_t{128} << 20).ok());
}

TEST_F(ResizeTest, AVolumeWithoutADeviceIsFailedPrecondition) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  provisioner_.KillServer();
  provisioner_.SetFailure(absl::UnavailableError("backend gone"));
  Restart();
  ASSERT_EQ(Table().Get("v1")->status().state(), v1::VOLUME_STATE_DEGRADED);
  auto volume = Table().Resize("v1", uint64_t{128} << 20);
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(volume.status().message()),
              HasSubstr("no device serving it (state degraded)"));
  EXPECT_EQ(Registry().LoadAll().records[0].spec.size_bytes(), uint64_t{64} << 20);
}

TEST_F(ResizeTest, AKilledAgentRecoversTheDeviceAtTheNewSize) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  ASSERT_TRUE(Table().Resize("v1", uint64_t{128} << 20).ok());
  KillAndRestart();
  EXPECT_EQ(provisioner_.recovered, 1);
  EXPECT_EQ(provisioner_.devices["v1"]->size_bytes, uint64_t{128} << 20);
  EXPECT_EQ(Table().Get("v1")->size_bytes(), uint64_t{128} << 20);
}

// A record that cannot be saved or removed (a full, read-only or failing state file system) fails
// the call that needed it, and that call undoes what it did: the records on disk, the table and
// the kernel's devices agree, so the next agent finds what this one had. The faults are real
// system errors, which root meets too: a record's temporary file that is /dev/full (write(2)
// fails with ENOSPC, once: the failed save unlinks it) and a previous version that is a
// directory (unlink(2) fails with EISDIR until it is gone).
class RecordFaultTest : public VolumeTableTest {
 protected:
  std::string RecordPath(const std::string& id) const {
    return dir_.path() + "/volumes/" + id + ".json";
  }
  // The next save of the volume's record fails as on a full disk.
  void FailNextRecordWrite(const std::string& id) const {
    std::filesystem::create_directories(dir_.path() + "/volumes");
    ASSERT_EQ(::symlink("/dev/full", (RecordPath(id) + ".tmp").c_str()), 0) << errno;
  }
  // Every removal of the volume's record fails, until AllowRecordRemoval.
  void BlockRecordRemoval(const std::string& id) const {
    std::filesystem::create_directories(RecordPath(id) + ".prev/blocker");
  }
  void AllowRecordRemoval(const std::string& id) const {
    std::filesystem::remove_all(RecordPath(id) + ".prev");
  }
  std::vector<std::string> StateFiles() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path() + "/volumes")) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }
};

TEST_F(RecordFaultTest, ACreateWhoseRecordCannotBeSavedFailsNamingItAndChangesNothing) {
  FailNextRecordWrite("v1");
  auto volume = Table().Create(NullVolume("v1"));
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInternal) << volume.status();
  EXPECT_THAT(std::string(volume.status().message()),
              HasSubstr("cannot save the record of volume 'v1' (" + RecordPath("v1") + ")"));
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("No space left on device"));
  EXPECT_EQ(provisioner_.calls, 0);
  EXPECT_THAT(Table().List(), SizeIs(0));
  EXPECT_THAT(StateFiles(), SizeIs(0));
  Restart();
  EXPECT_THAT(Table().List(), SizeIs(0));
}

TEST_F(RecordFaultTest, ADeviceThatCameUpUnderAnotherIdIsRecordedUnderIt) {
  provisioner_.kernel_chooses_id = 5;
  auto volume = Table().Create(NullVolume("v1"));
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->status().device_id(), 5);
  ASSERT_THAT(Registry().LoadAll().records, SizeIs(1));
  EXPECT_EQ(Registry().LoadAll().records[0].device_id, 5);
}

// Kept without a record naming it, the device would be foreign to the next agent, which would
// leave it alone and create the volume again beside it.
TEST_F(RecordFaultTest, ADeviceWhoseIdCannotBeRecordedIsRemovedAndTheCreateFails) {
  provisioner_.kernel_chooses_id = 5;
  provisioner_.during_provision = [this] { FailNextRecordWrite("v1"); };
  auto volume = Table().Create(NullVolume("v1"));
  provisioner_.during_provision = nullptr;
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInternal) << volume.status();
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("ublk device 5 came up"));
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr(RecordPath("v1")));
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("removed again"));
  EXPECT_TRUE(provisioner_.devices.at("v1")->stopped);
  EXPECT_THAT(provisioner_.kernel, SizeIs(0));
  EXPECT_THAT(Table().List(), SizeIs(0));
  EXPECT_THAT(StateFiles(), SizeIs(0));
  Restart();
  EXPECT_THAT(Table().List(), SizeIs(0));
  EXPECT_THAT(Table().UnknownKernelDevices(), SizeIs(0));
}

TEST_F(RecordFaultTest, AFailedCreateWhoseRecordCannotBeRemovedStaysListedUntilDeleted) {
  provisioner_.fail_with = absl::InvalidArgumentError("file too small");
  provisioner_.during_provision = [this] { BlockRecordRemoval("v1"); };
  auto volume = Table().Create(NullVolume("v1"));
  provisioner_.during_provision = nullptr;
  provisioner_.fail_with = absl::OkStatus();
  EXPECT_EQ(volume.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(volume.status().message()), HasSubstr("file too small"));
  EXPECT_THAT(std::string(volume.status().message()),
              HasSubstr("cannot remove the record of volume 'v1' (" + RecordPath("v1") + ")"));
  // What the disk says, the table says: a restarted agent would find this volume.
  auto listed = Table().Get("v1");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->status().state(), v1::VOLUME_STATE_FAILED);
  EXPECT_THAT(listed->status().message(), HasSubstr("its record stays"));
  EXPECT_EQ(Table().Create(NullVolume("v1")).status().code(),
            absl::StatusCode::kFailedPrecondition);

  EXPECT_EQ(Table().Delete("v1", false).code(), absl::StatusCode::kInternal);
  AllowRecordRemoval("v1");
  EXPECT_TRUE(Table().Delete("v1", false).ok());
  EXPECT_THAT(Table().List(), SizeIs(0));
  EXPECT_THAT(StateFiles(), SizeIs(0));
  EXPECT_TRUE(Table().Create(NullVolume("v1")).ok());
}

TEST_F(RecordFaultTest, ADeleteWhoseRecordCannotBeRemovedFailsAndItsRetryRemovesOnlyTheRecord) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  BlockRecordRemoval("v1");
  absl::Status deleted = Table().Delete("v1", false);
  EXPECT_EQ(deleted.code(), absl::StatusCode::kInternal) << deleted;
  EXPECT_THAT(std::string(deleted.message()), HasSubstr("its device is removed, but cannot remove "
                                                        "the record of volume 'v1' (" +
                                                        RecordPath("v1") + ")"));
  EXPECT_THAT(std::string(deleted.message()), HasSubstr("Is a directory"));
  EXPECT_THAT(provisioner_.kernel, SizeIs(0));
  auto listed = Table().Get("v1");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->status().state(), v1::VOLUME_STATE_FAILED);
  EXPECT_THAT(listed->status().message(), HasSubstr("device removed but its record was not"));
  // Neither brought back nor changed while half deleted.
  auto created = Table().Create(NullVolume("v1"));
  EXPECT_EQ(created.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(created.status().message()), HasSubstr("delete it again first"));
  EXPECT_EQ(Table().Update(RqAffinityChange("v1", 2), Mask({"rq_affinity"})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(provisioner_.calls, 1);

  // Another program's device took the number meanwhile: the retry must not touch it.
  provisioner_.kernel[0] = KernelDeviceState::kLive;
  AllowRecordRemoval("v1");
  EXPECT_TRUE(Table().Delete("v1", false).ok());
  EXPECT_THAT(provisioner_.deleted, SizeIs(0));
  EXPECT_TRUE(provisioner_.kernel.contains(0));
  EXPECT_THAT(Table().List(), SizeIs(0));
  EXPECT_THAT(StateFiles(), SizeIs(0));
}

// A grown device cannot shrink back: the call fails, and the same resize again records the size
// (rather than finding the volume at that size already and answering OK).
TEST_F(RecordFaultTest, AGrowthWhoseSizeCannotBeRecordedFailsAndTheSameResizeRecordsIt) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  FailNextRecordWrite("v1");
  auto resized = Table().Resize("v1", uint64_t{128} << 20);
  EXPECT_EQ(resized.status().code(), absl::StatusCode::kInternal) << resized.status();
  EXPECT_THAT(std::string(resized.status().message()), HasSubstr("grew to 134217728 bytes"));
  EXPECT_THAT(std::string(resized.status().message()), HasSubstr(RecordPath("v1")));
  EXPECT_EQ(Registry().LoadAll().records[0].spec.size_bytes(), uint64_t{64} << 20);

  auto again = Table().Resize("v1", uint64_t{128} << 20);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->size_bytes(), uint64_t{128} << 20);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.size_bytes(), uint64_t{128} << 20);
  EXPECT_EQ(provisioner_.devices["v1"]->size_bytes, uint64_t{128} << 20);
}

TEST_F(RecordFaultTest, ALimitsUpdateWhoseRecordCannotBeSavedPutsTheDeviceBack) {
  ASSERT_TRUE(Table().Create(WithReadIops(NullVolume("v1"), 1000, 10)).ok());
  FailNextRecordWrite("v1");
  auto updated = Table().Update(LimitsChange("v1", 5), Mask({"limits"}));
  EXPECT_EQ(updated.status().code(), absl::StatusCode::kInternal) << updated.status();
  EXPECT_EQ(provisioner_.devices["v1"]->limits.read_iops, (server::RateLimit{1000, 10}));
  EXPECT_EQ(Table().Get("v1")->limits().read_iops().rate(), 1000u);
  EXPECT_EQ(Registry().LoadAll().records[0].spec.limits().read_iops().rate(), 1000u);
}

TEST_F(RecordFaultTest, AnUpdateWhoseRecordCannotBeSavedPutsTheDeviceBack) {
  ASSERT_TRUE(Table().Create(NullVolume("v1")).ok());
  FailNextRecordWrite("v1");
  auto updated = Table().Update(RqAffinityChange("v1", 2), Mask({"rq_affinity"}));
  EXPECT_EQ(updated.status().code(), absl::StatusCode::kInternal) << updated.status();
  EXPECT_THAT(std::string(updated.status().message()), HasSubstr(RecordPath("v1")));
  EXPECT_EQ(provisioner_.devices["v1"]->rq_affinity, 1u);
  EXPECT_FALSE(Table().Get("v1")->has_rq_affinity());
  EXPECT_FALSE(Registry().LoadAll().records[0].spec.has_rq_affinity());
}

}  // namespace
}  // namespace blk::agent
