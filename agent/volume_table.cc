#include "agent/volume_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/reconcile.h"
#include "agent/volume_validation.h"
#include "blk/v1/volume_state_name.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"

namespace blk::agent {
namespace {

using google::protobuf::util::MessageDifferencer;

v1::Volume SpecOf(const v1::Volume& volume) {
  v1::Volume spec = volume;
  spec.clear_status();
  return spec;
}

// What makes two CreateVolume requests the same volume: the spec without the
// tunables, which UpdateVolume changes.
v1::Volume IdentityOf(const v1::Volume& volume) {
  v1::Volume identity = SpecOf(volume);
  identity.clear_rq_affinity();
  return identity;
}

// The fields UpdateVolume may change.
constexpr const char* kUpdatable[] = {"rq_affinity"};

std::string DescribeDifference(const v1::Volume& existing, const v1::Volume& requested) {
  std::string report;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&report);
  differencer.Compare(existing, requested);
  while (!report.empty() && report.back() == '\n') report.pop_back();
  for (char& c : report) {
    if (c == '\n') c = ';';
  }
  return report;
}

void SetStatus(v1::Volume& volume, v1::VolumeState state, absl::string_view message = {}) {
  v1::VolumeStatus* status = volume.mutable_status();
  status->set_state(state);
  status->set_message(std::string(message));
  if (state != v1::VOLUME_STATE_LIVE && state != v1::VOLUME_STATE_DELETING) {
    status->clear_copy_mode();
    status->clear_device_path();
    status->set_device_id(-1);
  }
}

absl::Status InProgress(const std::string& id) {
  return absl::AbortedError(
      absl::StrCat("an operation on volume '", id, "' is already in progress; retry later"));
}

}  // namespace

VolumeTable::VolumeTable(VolumeRegistry registry, DeviceProvisioner& provisioner,
                         NbdSizeProbe probe, NvmeNamespaceProbe nvme_probe)
    : registry_(std::move(registry)),
      provisioner_(provisioner),
      probe_(std::move(probe)),
      nvme_probe_(std::move(nvme_probe)) {}

VolumeTable::~VolumeTable() {
  {
    std::lock_guard lock(mutex_);
    retry_stop_ = true;
  }
  retry_wake_.notify_all();
  if (retry_thread_.joinable()) retry_thread_.join();
}

std::vector<std::string> VolumeTable::Restore() {
  VolumeRegistry::Loaded loaded = registry_.LoadAll();
  std::vector<std::string> problems = std::move(loaded.problems);
  std::set<int> ours;
  for (const VolumeRegistry::Record& record : loaded.records) {
    if (record.device_id >= 0) ours.insert(record.device_id);
  }
  for (int id : UnknownDevices(provisioner_.KernelDeviceIds(), ours)) {
    problems.push_back(
        absl::StrCat("ublk device ", id, " is not in this agent's registry; leaving it alone"));
  }
  for (const VolumeRegistry::Record& record : loaded.records) {
    v1::Volume spec = NormalizeVolumeSpec(record.spec);
    {
      std::lock_guard lock(mutex_);
      Entry& entry = entries_[spec.id()];
      entry.volume = spec;
      entry.device_id = record.device_id;
      entry.busy = true;
      SetStatus(entry.volume, v1::VOLUME_STATE_CREATING);
    }
    absl::StatusOr<v1::Volume> volume = BringUp(spec, record.device_id, /*degrade=*/true);
    if (!volume.ok()) {
      problems.push_back(absl::StrCat("volume ", spec.id(), ": ", volume.status().message()));
    }
  }
  return problems;
}

std::vector<int> VolumeTable::UnknownKernelDevices() const {
  std::set<int> ours;
  {
    std::lock_guard lock(mutex_);
    ours = ClaimedIdsLocked();
    for (const auto& [id, entry] : entries_) {
      if (entry.device) ours.insert(entry.device->id());
    }
  }
  return UnknownDevices(provisioner_.KernelDeviceIds(), ours);
}

std::set<int> VolumeTable::ClaimedIdsLocked() const {
  std::set<int> claimed;
  for (const auto& [id, entry] : entries_) {
    if (entry.device_id >= 0) claimed.insert(entry.device_id);
  }
  return claimed;
}

absl::StatusOr<std::unique_ptr<VolumeDevice>> VolumeTable::Reconcile(const v1::Volume& spec,
                                                                     int& device_id, bool fresh) {
  // A fresh volume's id was just chosen among the free ones: nothing to reconcile.
  const KernelDeviceState state =
      device_id >= 0 && !fresh ? provisioner_.StateOf(device_id) : KernelDeviceState::kAbsent;
  const RestoreAction action = DecideRestore(device_id, state);
  if (action == RestoreAction::kRecover) {
    spdlog::info("volume {}: recovering ublk device {} (kernel state {})", spec.id(), device_id,
                 KernelDeviceStateName(state));
    return provisioner_.Recover(spec, device_id);
  }
  if (action == RestoreAction::kDeleteThenCreate) {
    spdlog::info("volume {}: removing half-created ublk device {}", spec.id(), device_id);
    if (absl::Status deleted = provisioner_.DeleteKernelDevice(device_id); !deleted.ok()) {
      return deleted;
    }
  }
  if (action != RestoreAction::kCreateWithAnyId) {
    absl::StatusOr<std::unique_ptr<VolumeDevice>> device = provisioner_.Provision(spec, device_id);
    if (device.ok() || device.status().code() != absl::StatusCode::kAlreadyExists) return device;
    spdlog::warn("volume {}: ublk device id {} was taken meanwhile; choosing another", spec.id(),
                 device_id);
  }
  // Record the id before ADD_DEV: a crash in between leaves a device the next start recognizes.
  {
    std::lock_guard lock(mutex_);
    std::set<int> claimed = ClaimedIdsLocked();
    claimed.erase(device_id);
    const int id = FirstFreeDeviceId(provisioner_.KernelDeviceIds(), claimed);
    if (absl::Status saved = registry_.Save(spec, id); !saved.ok()) return saved;
    device_id = id;
    entries_.at(spec.id()).device_id = id;
  }
  return provisioner_.Provision(spec, device_id);
}

absl::StatusOr<v1::Volume> VolumeTable::BringUp(const v1::Volume& spec, int device_id, bool degrade,
                                                bool fresh) {
  absl::StatusOr<std::unique_ptr<VolumeDevice>> device = Reconcile(spec, device_id, fresh);
  std::lock_guard lock(mutex_);
  Entry& entry = entries_.at(spec.id());
  entry.busy = false;
  if (!device.ok()) {
    if (degrade) {
      entry.backoff =
          entry.backoff.count() == 0 ? initial_backoff_ : std::min(2 * entry.backoff, max_backoff_);
      entry.next_retry = Clock::now() + entry.backoff;
      spdlog::warn("volume {}: degraded (retry in {} ms): {}", spec.id(), entry.backoff.count(),
                   device.status().ToString());
      SetStatus(entry.volume, v1::VOLUME_STATE_DEGRADED, device.status().message());
      retry_wake_.notify_all();
    } else {
      spdlog::warn("volume {}: create failed: {}", spec.id(), device.status().ToString());
      SetStatus(entry.volume, v1::VOLUME_STATE_FAILED, device.status().message());
    }
    return device.status();
  }
  if (spec.has_rq_affinity()) {
    if (absl::Status applied = (*device)->SetRqAffinity(spec.rq_affinity()); !applied.ok()) {
      if (fresh) {
        // A new volume comes up as asked or not at all.
        (*device)->Stop(/*force=*/true).IgnoreError();
        spdlog::warn("volume {}: create failed: {}", spec.id(), applied.ToString());
        SetStatus(entry.volume, v1::VOLUME_STATE_FAILED, applied.message());
        return absl::Status(applied.code(),
                            absl::StrCat("volume.rq_affinity: cannot apply: ", applied.message()));
      }
      // An existing volume keeps serving I/O; GetVolume shows the value it has.
      spdlog::warn("volume {}: cannot apply rq_affinity {}: {}", spec.id(), spec.rq_affinity(),
                   applied.ToString());
    }
  }
  entry.device = std::move(*device);
  entry.backoff = std::chrono::milliseconds(0);
  if (entry.device->id() != entry.device_id) {
    entry.device_id = entry.device->id();
    if (absl::Status saved = registry_.Save(spec, entry.device_id); !saved.ok()) {
      spdlog::error("volume {}: cannot record device id {}: {}", spec.id(), entry.device_id,
                    saved.ToString());
    }
  }
  SetStatus(entry.volume, v1::VOLUME_STATE_LIVE);
  entry.volume.mutable_status()->set_copy_mode(entry.device->copy_mode());
  entry.volume.mutable_status()->set_device_path(entry.device->block_path());
  entry.volume.mutable_status()->set_device_id(entry.device->id());
  spdlog::info("volume {}: live at {}", spec.id(), entry.device->block_path());
  return WithLiveCounters(entry);
}

void VolumeTable::StartRetrying(std::chrono::milliseconds initial_backoff,
                                std::chrono::milliseconds max_backoff) {
  std::lock_guard lock(mutex_);
  if (retry_thread_.joinable()) return;
  initial_backoff_ = initial_backoff;
  max_backoff_ = max_backoff;
  retry_thread_ = std::thread([this] { RetryLoop(); });
}

void VolumeTable::RetryLoop() {
  std::unique_lock lock(mutex_);
  while (!retry_stop_) {
    const Clock::time_point now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    std::vector<std::pair<v1::Volume, int>> due;
    for (auto& [id, entry] : entries_) {
      if (entry.busy || entry.volume.status().state() != v1::VOLUME_STATE_DEGRADED) continue;
      if (entry.next_retry <= now) {
        entry.busy = true;
        due.emplace_back(SpecOf(entry.volume), entry.device_id);
      } else {
        next = std::min(next, entry.next_retry);
      }
    }
    if (due.empty()) {
      if (next == Clock::time_point::max()) {
        retry_wake_.wait(lock);
      } else {
        retry_wake_.wait_until(lock, next);
      }
      continue;
    }
    lock.unlock();
    for (const auto& [spec, device_id] : due) {
      spdlog::info("volume {}: retrying", spec.id());
      BringUp(spec, device_id, /*degrade=*/true).IgnoreError();
    }
    lock.lock();
  }
}

absl::Status VolumeTable::CheckNoConflictLocked(const v1::Volume& spec) const {
  if (spec.has_nvme()) {
    for (const auto& [id, entry] : entries_) {
      if (!NvmeVolumesOverlap(spec, entry.volume)) continue;
      const uint64_t start = spec.nvme().offset_bytes();
      const uint64_t other = entry.volume.nvme().offset_bytes();
      return absl::FailedPreconditionError(absl::StrCat(
          "volume.nvme: bytes [", start, ", ", start + spec.size_bytes(), ") of ",
          spec.nvme().path(), " overlap volume '", id, "' (bytes [", other, ", ",
          other + entry.volume.size_bytes(), ") of ", entry.volume.nvme().path(), ")"));
    }
    return absl::OkStatus();
  }
  if (spec.backend_case() != v1::Volume::kFile) return absl::OkStatus();
  for (const auto& [id, entry] : entries_) {
    if (entry.volume.backend_case() == v1::Volume::kFile &&
        entry.volume.file().path() == spec.file().path()) {
      return absl::FailedPreconditionError(absl::StrCat("volume.file.path: '", spec.file().path(),
                                                        "' is already used by volume '", id, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status VolumeTable::ResolveNbdSize(v1::Volume& spec) {
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(spec.id());
    if (it != entries_.end()) {
      // "Whatever size it has": any other difference is still reported by the comparison.
      spec.set_size_bytes(it->second.volume.size_bytes());
      return absl::OkStatus();
    }
  }
  // The handshake runs without the lock: it may take as long as the connect timeout.
  absl::StatusOr<uint64_t> size =
      ResolveNbdVolumeSize(spec.id(), spec.nbd().uri(), spec.logical_block_size(), probe_);
  if (!size.ok()) return size.status();
  spec.set_size_bytes(*size);
  return ValidateVolumeSpec(spec);
}

absl::Status VolumeTable::ResolveNvme(v1::Volume& spec) {
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(spec.id());
    if (it != entries_.end()) {
      // A repeated request gets the existing volume; any other difference is still reported.
      const v1::Volume& existing = it->second.volume;
      if (spec.size_bytes() == 0) spec.set_size_bytes(existing.size_bytes());
      if (spec.logical_block_size() == 0) {
        spec.set_logical_block_size(existing.logical_block_size());
      }
      return absl::OkStatus();
    }
  }
  // Identify runs without the lock: it is a device command.
  if (absl::Status resolved = ResolveNvmeVolume(spec, nvme_probe_); !resolved.ok()) {
    return resolved;
  }
  return ValidateVolumeSpec(spec);
}

absl::StatusOr<v1::Volume> VolumeTable::Create(const v1::Volume& requested) {
  v1::Volume spec = NormalizeVolumeSpec(requested);
  if (absl::Status valid = ValidateVolumeSpec(spec); !valid.ok()) return valid;
  if (spec.has_nvme()) {
    if (absl::Status resolved = ResolveNvme(spec); !resolved.ok()) return resolved;
  } else if (spec.size_bytes() == 0) {
    if (absl::Status resolved = ResolveNbdSize(spec); !resolved.ok()) return resolved;
  }

  int device_id = -1;
  bool degrade = false;
  bool fresh = false;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(spec.id());
    if (it != entries_.end()) {
      Entry& entry = it->second;
      if (entry.busy) return InProgress(spec.id());
      const v1::Volume existing = IdentityOf(entry.volume);
      if (!MessageDifferencer::Equals(existing, IdentityOf(spec))) {
        return absl::AlreadyExistsError(
            absl::StrCat("volume '", spec.id(), "' already exists with a different spec (",
                         DescribeDifference(existing, IdentityOf(spec)), ")"));
      }
      if (entry.volume.status().state() == v1::VOLUME_STATE_LIVE) return WithLiveCounters(entry);
      // The tunables stay as they are; UpdateVolume changes them.
      spec = SpecOf(entry.volume);
      // Same spec, but the device is not up (it failed at restore): try again.
      degrade = entry.volume.status().state() == v1::VOLUME_STATE_DEGRADED;
      device_id = entry.device_id;
      entry.busy = true;
      SetStatus(entry.volume, v1::VOLUME_STATE_CREATING);
    } else {
      if (absl::Status free = CheckNoConflictLocked(spec); !free.ok()) return free;
      // The id is chosen and recorded before ADD_DEV: an agent killed in between leaves a
      // device the next start recognizes as half-created.
      device_id = FirstFreeDeviceId(provisioner_.KernelDeviceIds(), ClaimedIdsLocked());
      fresh = true;
      Entry& entry = entries_[spec.id()];
      entry.volume = spec;
      entry.device_id = device_id;
      entry.busy = true;
      SetStatus(entry.volume, v1::VOLUME_STATE_CREATING);
      if (absl::Status saved = registry_.Save(spec, device_id); !saved.ok()) {
        entries_.erase(spec.id());
        return saved;
      }
    }
  }
  absl::StatusOr<v1::Volume> volume = BringUp(spec, device_id, degrade, fresh);
  if (!volume.ok()) {
    // A new volume that could not be created leaves nothing behind.
    std::lock_guard lock(mutex_);
    auto it = entries_.find(spec.id());
    if (it != entries_.end() && !it->second.device && !degrade) {
      if (absl::Status removed = registry_.Remove(spec.id()); !removed.ok()) {
        spdlog::error("volume {}: {}", spec.id(), removed.ToString());
      }
      entries_.erase(it);
    }
  }
  return volume;
}

absl::Status VolumeTable::Delete(const std::string& id, bool force) {
  if (!IsValidVolumeId(id)) {
    return absl::InvalidArgumentError(absl::StrCat("id: '", id, "' is not a valid volume id"));
  }
  VolumeDevice* device = nullptr;
  int device_id = -1;
  v1::VolumeStatus previous;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return absl::OkStatus();
    Entry& entry = it->second;
    if (entry.busy) return InProgress(id);
    entry.busy = true;
    previous = entry.volume.status();
    entry.volume.mutable_status()->set_state(v1::VOLUME_STATE_DELETING);
    device = entry.device.get();
    device_id = entry.device_id;
  }
  if (device == nullptr && device_id >= 0 &&
      provisioner_.StateOf(device_id) != KernelDeviceState::kAbsent) {
    // A degraded volume's device a previous agent left: nothing serves it, remove it.
    if (absl::Status deleted = provisioner_.DeleteKernelDevice(device_id); !deleted.ok()) {
      std::lock_guard lock(mutex_);
      Entry& entry = entries_.at(id);
      *entry.volume.mutable_status() = previous;
      entry.busy = false;
      return deleted;
    }
  }
  if (device != nullptr) {
    if (absl::Status stopped = device->Stop(force); !stopped.ok()) {
      std::lock_guard lock(mutex_);
      Entry& entry = entries_.at(id);
      *entry.volume.mutable_status() = previous;
      entry.busy = false;
      return stopped;
    }
  }
  absl::Status removed = registry_.Remove(id);
  std::lock_guard lock(mutex_);
  if (!removed.ok()) {
    Entry& entry = entries_.at(id);
    entry.device.reset();
    entry.busy = false;
    SetStatus(entry.volume, v1::VOLUME_STATE_FAILED,
              absl::StrCat("device removed but its record was not: ", removed.message()));
    return removed;
  }
  entries_.erase(id);
  spdlog::info("volume {}: deleted", id);
  return absl::OkStatus();
}

v1::Volume VolumeTable::WithLiveCounters(const Entry& entry) {
  v1::Volume volume = entry.volume;
  if (!entry.device) return volume;
  const BackendFaults faults = entry.device->backend_faults();
  v1::VolumeStatus& status = *volume.mutable_status();
  status.set_reconnects(faults.reconnects);
  status.set_server_errors(faults.server_errors);
  status.set_protocol_errors(faults.protocol_errors);
  status.set_io_timeouts(faults.io_timeouts);
  absl::StatusOr<uint32_t> rq_affinity = entry.device->RqAffinity();
  if (rq_affinity.ok()) status.set_rq_affinity(*rq_affinity);
  status.set_rq_affinity_redirected(entry.device->RqAffinityRedirected());
  // The device stays (delete-volume removes it) but serves nothing: failed, not retried.
  if (std::string lost = entry.device->backend_lost();
      !lost.empty() && status.state() == v1::VOLUME_STATE_LIVE) {
    status.set_state(v1::VOLUME_STATE_FAILED);
    status.set_message(std::move(lost));
  }
  return volume;
}

absl::StatusOr<v1::Volume> VolumeTable::Update(const v1::Volume& changes,
                                               const google::protobuf::FieldMask& mask) {
  if (!IsValidVolumeId(changes.id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume.id: '", changes.id(), "' is not a valid volume id"));
  }
  if (mask.paths_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update_mask: names no field (updatable: ", absl::StrJoin(kUpdatable, ", "), ")"));
  }
  for (const std::string& path : mask.paths()) {
    if (std::find_if(std::begin(kUpdatable), std::end(kUpdatable), [&](const char* updatable) {
          return path == updatable;
        }) == std::end(kUpdatable)) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_mask: '", path,
                       "' cannot be updated (updatable: ", absl::StrJoin(kUpdatable, ", "), ")"));
    }
  }
  if (!changes.has_rq_affinity()) {
    return absl::InvalidArgumentError(
        "volume.rq_affinity: must be set (0, 1 or 2) when update_mask names it");
  }
  if (absl::Status valid = ValidateRqAffinity(changes); !valid.ok()) return valid;

  v1::Volume updated;
  VolumeDevice* device = nullptr;
  int device_id = -1;
  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(changes.id());
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("volume '", changes.id(), "' does not exist"));
    }
    Entry& entry = it->second;
    if (entry.busy) return InProgress(changes.id());
    entry.busy = true;
    updated = SpecOf(entry.volume);
    device = entry.device.get();
    device_id = entry.device_id;
  }
  auto release = [&](absl::Status status) {
    std::lock_guard lock(mutex_);
    entries_.at(changes.id()).busy = false;
    return status;
  };
  updated.set_rq_affinity(changes.rq_affinity());

  // The device first, so a value the kernel refuses is never recorded; a record that cannot be
  // saved puts the device's value back.
  absl::StatusOr<uint32_t> previous = absl::UnavailableError("no device");
  if (device != nullptr) {
    previous = device->RqAffinity();
    if (absl::Status applied = device->SetRqAffinity(changes.rq_affinity()); !applied.ok()) {
      return release(absl::Status(
          applied.code(), absl::StrCat("volume.rq_affinity: cannot apply: ", applied.message())));
    }
  }
  if (absl::Status saved = registry_.Save(updated, device_id); !saved.ok()) {
    if (previous.ok()) device->SetRqAffinity(*previous).IgnoreError();
    return release(saved);
  }
  std::lock_guard lock(mutex_);
  Entry& entry = entries_.at(changes.id());
  entry.busy = false;
  entry.volume.set_rq_affinity(changes.rq_affinity());
  spdlog::info("volume {}: rq_affinity set to {}", changes.id(), changes.rq_affinity());
  return WithLiveCounters(entry);
}

absl::StatusOr<v1::Volume> VolumeTable::Get(const std::string& id) const {
  if (!IsValidVolumeId(id)) {
    return absl::InvalidArgumentError(absl::StrCat("id: '", id, "' is not a valid volume id"));
  }
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("volume '", id, "' does not exist"));
  }
  return WithLiveCounters(it->second);
}

std::vector<v1::Volume> VolumeTable::List() const {
  std::lock_guard lock(mutex_);
  std::vector<v1::Volume> volumes;
  volumes.reserve(entries_.size());
  for (const auto& [id, entry] : entries_) volumes.push_back(WithLiveCounters(entry));
  return volumes;
}

absl::StatusOr<v1::VolumeStats> VolumeTable::Stats(const std::string& id) const {
  if (!IsValidVolumeId(id)) {
    return absl::InvalidArgumentError(absl::StrCat("id: '", id, "' is not a valid volume id"));
  }
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("volume '", id, "' does not exist"));
  }
  const Entry& entry = it->second;
  if (!entry.device) {
    return absl::FailedPreconditionError(
        absl::StrCat("volume '", id, "' has no device serving it (state ",
                     v1::VolumeStateName(entry.volume.status().state()), ")"));
  }
  return entry.device->Stats(id);
}

std::vector<v1::VolumeStats> VolumeTable::AllStats() const {
  std::lock_guard lock(mutex_);
  std::vector<v1::VolumeStats> all;
  for (const auto& [id, entry] : entries_) {
    if (!entry.device) continue;
    absl::StatusOr<v1::VolumeStats> stats = entry.device->Stats(id);
    if (stats.ok()) all.push_back(std::move(*stats));
  }
  return all;
}

void VolumeTable::StopAll() {
  std::lock_guard lock(mutex_);
  for (auto& [id, entry] : entries_) {
    if (!entry.device) continue;
    if (absl::Status stopped = entry.device->Stop(/*force=*/true); !stopped.ok()) {
      spdlog::error("volume {}: stop failed: {}", id, stopped.ToString());
    }
    entry.device.reset();
    SetStatus(entry.volume, v1::VOLUME_STATE_UNSPECIFIED, "agent stopped");
  }
}

void VolumeTable::DetachAll() {
  std::lock_guard lock(mutex_);
  for (auto& [id, entry] : entries_) {
    if (!entry.device) continue;
    entry.device->Detach();
    entry.device.reset();
    SetStatus(entry.volume, v1::VOLUME_STATE_UNSPECIFIED,
              "agent stopped; device left for the next agent");
  }
}

}  // namespace blk::agent
