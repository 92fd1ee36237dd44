#include "agent/volume_table.h"

#include <absl/strings/str_cat.h>
#include <google/protobuf/util/message_differencer.h>
#include <spdlog/spdlog.h>

#include "agent/volume_validation.h"

namespace blk::agent {
namespace {

using google::protobuf::util::MessageDifferencer;

v1::Volume SpecOf(const v1::Volume& volume) {
  v1::Volume spec = volume;
  spec.clear_status();
  return spec;
}

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
    status->clear_device_path();
    status->set_device_id(-1);
  }
}

absl::Status InProgress(const std::string& id) {
  return absl::AbortedError(
      absl::StrCat("an operation on volume '", id, "' is already in progress; retry later"));
}

}  // namespace

VolumeTable::VolumeTable(VolumeRegistry registry, DeviceProvisioner& provisioner)
    : registry_(std::move(registry)), provisioner_(provisioner) {}

std::vector<std::string> VolumeTable::Restore() {
  VolumeRegistry::Loaded loaded = registry_.LoadAll();
  std::vector<std::string> problems = std::move(loaded.problems);
  for (const v1::Volume& stored : loaded.volumes) {
    v1::Volume spec = NormalizeVolumeSpec(stored);
    {
      std::lock_guard lock(mutex_);
      Entry& entry = entries_[spec.id()];
      entry.volume = spec;
      entry.busy = true;
      SetStatus(entry.volume, v1::VOLUME_STATE_CREATING);
    }
    absl::StatusOr<v1::Volume> volume = BringUp(spec);
    if (!volume.ok()) {
      problems.push_back(absl::StrCat("volume ", spec.id(), ": ", volume.status().message()));
    }
  }
  return problems;
}

absl::Status VolumeTable::CheckNoConflictLocked(const v1::Volume& spec) const {
  if (spec.backend_case() != v1::Volume::kFile) return absl::OkStatus();
  for (const auto& [id, entry] : entries_) {
    if (entry.volume.backend_case() == v1::Volume::kFile &&
        entry.volume.file().path() == spec.file().path()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume.file.path: '", spec.file().path(), "' is already used by volume '", id, "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Volume> VolumeTable::Create(const v1::Volume& requested) {
  const v1::Volume spec = NormalizeVolumeSpec(requested);
  if (absl::Status valid = ValidateVolumeSpec(spec); !valid.ok()) return valid;

  {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(spec.id());
    if (it != entries_.end()) {
      Entry& entry = it->second;
      if (entry.busy) return InProgress(spec.id());
      const v1::Volume existing = SpecOf(entry.volume);
      if (!MessageDifferencer::Equals(existing, spec)) {
        return absl::AlreadyExistsError(
            absl::StrCat("volume '", spec.id(), "' already exists with a different spec (",
                         DescribeDifference(existing, spec), ")"));
      }
      if (entry.volume.status().state() == v1::VOLUME_STATE_LIVE) return entry.volume;
      // Same spec, but the device is not up (it failed at restore): try again.
      entry.busy = true;
      SetStatus(entry.volume, v1::VOLUME_STATE_CREATING);
    } else {
      if (absl::Status free = CheckNoConflictLocked(spec); !free.ok()) return free;
      Entry& entry = entries_[spec.id()];
      entry.volume = spec;
      entry.busy = true;
      SetStatus(entry.volume, v1::VOLUME_STATE_CREATING);
      if (absl::Status saved = registry_.Save(spec); !saved.ok()) {
        entries_.erase(spec.id());
        return saved;
      }
    }
  }
  absl::StatusOr<v1::Volume> volume = BringUp(spec);
  if (!volume.ok()) {
    // A new volume that could not be created leaves nothing behind.
    std::lock_guard lock(mutex_);
    auto it = entries_.find(spec.id());
    if (it != entries_.end() && !it->second.device) {
      if (absl::Status removed = registry_.Remove(spec.id()); !removed.ok()) {
        spdlog::error("volume {}: {}", spec.id(), removed.ToString());
      }
      entries_.erase(it);
    }
  }
  return volume;
}

absl::StatusOr<v1::Volume> VolumeTable::BringUp(const v1::Volume& spec) {
  absl::StatusOr<std::unique_ptr<VolumeDevice>> device = provisioner_.Provision(spec);
  std::lock_guard lock(mutex_);
  Entry& entry = entries_.at(spec.id());
  entry.busy = false;
  if (!device.ok()) {
    spdlog::warn("volume {}: create failed: {}", spec.id(), device.status().ToString());
    SetStatus(entry.volume, v1::VOLUME_STATE_FAILED, device.status().message());
    return device.status();
  }
  entry.device = std::move(*device);
  SetStatus(entry.volume, v1::VOLUME_STATE_LIVE);
  entry.volume.mutable_status()->set_device_path(entry.device->block_path());
  entry.volume.mutable_status()->set_device_id(entry.device->id());
  spdlog::info("volume {}: live at {}", spec.id(), entry.device->block_path());
  return entry.volume;
}

absl::Status VolumeTable::Delete(const std::string& id, bool force) {
  if (!IsValidVolumeId(id)) {
    return absl::InvalidArgumentError(absl::StrCat("id: '", id, "' is not a valid volume id"));
  }
  VolumeDevice* device = nullptr;
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

absl::StatusOr<v1::Volume> VolumeTable::Get(const std::string& id) const {
  if (!IsValidVolumeId(id)) {
    return absl::InvalidArgumentError(absl::StrCat("id: '", id, "' is not a valid volume id"));
  }
  std::lock_guard lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("volume '", id, "' does not exist"));
  }
  return it->second.volume;
}

std::vector<v1::Volume> VolumeTable::List() const {
  std::lock_guard lock(mutex_);
  std::vector<v1::Volume> volumes;
  volumes.reserve(entries_.size());
  for (const auto& [id, entry] : entries_) volumes.push_back(entry.volume);
  return volumes;
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

}  // namespace blk::agent
