#include "agent/volumes/volume_table.h"

#include <algorithm>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "agent/devices/reconcile.h"
#include "agent/devices/volume_io_limits.h"
#include "agent/volumes/backing_conflict.h"
#include "agent/volumes/fabric_paths.h"
#include "agent/volumes/volume_validation.h"
#include "blk/v1/volume_state_name.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/nbd/storage.h"
#include "spdlog/spdlog.h"

namespace blk::agent {
namespace {

using google::protobuf::util::MessageDifferencer;

// What makes two CreateVolume requests the same volume: the spec without the
// tunables, which UpdateVolume changes.
v1::Volume IdentityOf(const v1::Volume& volume) {
  v1::Volume identity = SpecOf(volume);
  identity.clear_rq_affinity();
  identity.clear_limits();
  // Placement too, though only creation sets it: a CreateVolume that leaves it to the default
  // must find a volume made under an older default (hctx before node).
  identity.clear_placement();
  // A fabric volume's head and marks are the agent's outputs.
  if (identity.nvme().has_fabric()) {
    identity.mutable_nvme()->clear_path();
    identity.mutable_nvme()->mutable_fabric()->clear_agent_connected_paths();
  }
  return identity;
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

absl::Status InProgress(const std::string& id) {
  return absl::AbortedError(
      absl::StrCat("an operation on volume '", id, "' is already in progress; retry later"));
}

absl::Status InvalidId(const std::string& id) {
  return absl::InvalidArgumentError(absl::StrCat("id: '", id, "' is not a valid volume id"));
}

absl::Status NotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("volume '", id, "' does not exist"));
}

absl::Status RecordOnly(const std::string& id, const v1::Volume& volume) {
  return absl::FailedPreconditionError(absl::StrCat("volume '", id, "' is not fully deleted (",
                                                    volume.status().message(),
                                                    "): delete it again first"));
}

// A new volume comes up as asked or not at all; an existing one keeps serving I/O and GetVolume
// shows the value it has.
absl::Status ApplyRqAffinity(const v1::Volume& spec, VolumeDevice& device, bool fresh) {
  if (!spec.has_rq_affinity()) return absl::OkStatus();
  absl::Status applied = device.SetRqAffinity(spec.rq_affinity());
  if (applied.ok()) return applied;
  if (fresh) {
    return absl::Status(applied.code(),
                        absl::StrCat("volume.rq_affinity: cannot apply: ", applied.message()));
  }
  spdlog::warn("volume {}: cannot apply rq_affinity {}: {}", spec.id(), spec.rq_affinity(),
               applied.ToString());
  return absl::OkStatus();
}

// Unset stays unset, so that a volume whose limits were lifted reads (and is recorded) as one that
// never had any.
void CopyLimits(const v1::Volume& from, v1::Volume& to) {
  if (from.has_limits()) {
    *to.mutable_limits() = from.limits();
  } else {
    to.clear_limits();
  }
}

}  // namespace

VolumeTable::VolumeTable(VolumeRegistry registry, DeviceProvisioner& provisioner,
                         NbdSizeProbe probe, NvmeNamespaceProbe nvme_probe, VolumeLimits limits,
                         FileDirs file_dirs)
    : registry_(std::move(registry)),
      provisioner_(provisioner),
      resolver_(std::move(probe), std::move(nvme_probe)),
      limits_(limits),
      file_dirs_(std::move(file_dirs)),
      reconciler_(provisioner),
      retrier_([this](const std::string& id) { return RetryDegraded(id); }) {}

VolumeTable::~VolumeTable() { retrier_.Stop(); }

std::vector<std::string> VolumeTable::Restore() {
  VolumeRegistry::Loaded loaded = registry_.LoadAll();
  std::vector<std::string> problems = std::move(loaded.problems);
  std::set<int> ours;
  for (const VolumeRegistry::Record& record : loaded.records) {
    if (record.device_id >= 0) ours.insert(record.device_id);
  }
  for (int id : reconciler_.UnknownKernelDevices(ours)) {
    problems.push_back(
        absl::StrCat("ublk device ", id, " is not in this agent's registry; leaving it alone"));
  }
  for (size_t i = 0; i < loaded.records.size(); ++i) {
    if (restore_stopped_.load(std::memory_order_relaxed)) {
      problems.push_back(absl::StrCat("stopping: ", loaded.records.size() - i,
                                      " volume(s) left for the next agent, not restored"));
      break;
    }
    const VolumeRegistry::Record& record = loaded.records[i];
    const v1::Volume spec = NormalizeVolumeSpec(record.spec);
    std::optional<BusyClaim> claim;
    {
      absl::MutexLock lock(&mutex_);
      VolumeEntry& entry = entries_[spec.id()];
      entry.volume = spec;
      entry.device_id = record.device_id;
      SetVolumeState(entry.volume, v1::VOLUME_STATE_CREATING);
      claim.emplace(mutex_, entries_, spec.id());
    }
    absl::StatusOr<v1::Volume> volume =
        BringUp(spec, record.device_id, /*degrade=*/true, /*fresh=*/false, *claim);
    if (!volume.ok()) {
      problems.push_back(absl::StrCat("volume ", spec.id(), ": ", volume.status().message()));
    }
  }
  return problems;
}

std::vector<int> VolumeTable::UnknownKernelDevices() const {
  std::set<int> ours;
  {
    absl::MutexLock lock(&mutex_);
    ours = ClaimedIdsLocked();
    for (const auto& [id, entry] : entries_) {
      if (entry.device) ours.insert(entry.device->id());
    }
  }
  return UnknownDevices(provisioner_.KernelDeviceIds(), ours);
}

absl::Status VolumeTable::AdmitBacking(const v1::Volume& spec) const {
  if (!spec.has_file()) return absl::OkStatus();
  return file_dirs_.Admit(spec.file().path());
}

std::set<int> VolumeTable::ClaimedIdsLocked() const {
  std::set<int> claimed;
  for (const auto& [id, entry] : entries_) {
    if (entry.device_id >= 0) claimed.insert(entry.device_id);
  }
  return claimed;
}

bool VolumeTable::NoneBusyLocked() const {
  for (const auto& [id, entry] : entries_) {
    if (entry.busy) return false;
  }
  return true;
}

absl::StatusOr<int> VolumeTable::ChooseFreeDeviceId(const v1::Volume& spec, int taken_id) {
  absl::MutexLock lock(&mutex_);
  std::set<int> claimed = ClaimedIdsLocked();
  claimed.erase(taken_id);
  const int free_id = FirstFreeDeviceId(provisioner_.KernelDeviceIds(), claimed);
  if (absl::Status saved = registry_.Save(spec, free_id); !saved.ok()) return saved;
  entries_.at(spec.id()).device_id = free_id;
  return free_id;
}

absl::StatusOr<v1::Volume> VolumeTable::BringUp(const v1::Volume& spec, int device_id, bool degrade,
                                                bool fresh, BusyClaim& claim) {
  // Checked again here, not only at create: the directories may have changed since (a restart
  // with another --file-dirs), and a volume they no longer admit is not served.
  absl::StatusOr<std::unique_ptr<VolumeDevice>> device;
  if (absl::Status admitted = AdmitBacking(spec); !admitted.ok()) {
    device = admitted;
  } else {
    device = reconciler_.BringUp(spec, device_id, fresh,
                                 [&](int taken_id) { return ChooseFreeDeviceId(spec, taken_id); });
  }
  if (device.ok() && (*device)->id() != device_id) {
    // The device came up under another id than its record names. The next agent would take it
    // for another program's and leave it alone (and re-create the volume under the recorded
    // id): it stays only if its record can say so.
    if (absl::Status saved = registry_.Save(spec, (*device)->id()); !saved.ok()) {
      (*device)->Stop(/*force=*/true).IgnoreError();
      device = absl::Status(saved.code(),
                            absl::StrCat("ublk device ", (*device)->id(), " came up, but ",
                                         saved.message(), "; the device is removed again"));
    }
  }
  if (device.ok()) {
    if (absl::Status applied = ApplyRqAffinity(spec, **device, fresh); !applied.ok()) {
      (*device)->Stop(/*force=*/true).IgnoreError();
      device = applied;
    }
  }
  absl::MutexLock lock(&mutex_);
  claim.ReleaseLocked(mutex_);
  if (!device.ok()) return RecordFailureLocked(spec.id(), device.status(), degrade);
  return RecordLiveLocked(spec, std::move(*device));
}

absl::StatusOr<v1::Volume> VolumeTable::RecordLiveLocked(const v1::Volume& spec,
                                                         std::unique_ptr<VolumeDevice> device) {
  VolumeEntry& entry = entries_.at(spec.id());
  entry.device = std::move(device);
  entry.device_id = entry.device->id();  // recorded by BringUp
  SetVolumeState(entry.volume, v1::VOLUME_STATE_LIVE);
  entry.volume.mutable_status()->set_copy_mode(entry.device->copy_mode());
  entry.volume.mutable_status()->set_io_mode(entry.device->io_mode());
  entry.volume.mutable_status()->set_device_path(entry.device->block_path());
  entry.volume.mutable_status()->set_device_id(entry.device->id());
  retrier_.Forget(spec.id());
  spdlog::info("volume {}: live at {}", spec.id(), entry.device->block_path());
  return WithLiveCounters(entry);
}

absl::Status VolumeTable::RecordFailureLocked(const std::string& id, const absl::Status& failure,
                                              bool degrade) {
  if (degrade) {
    const std::chrono::milliseconds backoff = retrier_.Schedule(id);
    spdlog::warn("volume {}: degraded (retry in {} ms): {}", id, backoff.count(),
                 failure.ToString());
    SetVolumeState(entries_.at(id).volume, v1::VOLUME_STATE_DEGRADED, failure.message());
    return failure;
  }
  // A volume that could not be created leaves nothing behind.
  spdlog::warn("volume {}: create failed: {}", id, failure.ToString());
  if (absl::Status removed = registry_.Remove(id); !removed.ok()) {
    // Unless its record stays: then so does the volume, listed FAILED until a Delete removes
    // the record, rather than a restarted agent bringing back, unseen, a volume whose create
    // failed.
    spdlog::error("volume {}: {}", id, removed.ToString());
    VolumeEntry& entry = entries_.at(id);
    entry.record_only = true;
    SetVolumeState(entry.volume, v1::VOLUME_STATE_FAILED,
                   absl::StrCat("its create failed (", failure.message(),
                                ") and its record stays: ", removed.message()));
    return absl::Status(failure.code(), absl::StrCat(failure.message(), "; and ", removed.message(),
                                                     ": delete the volume to remove it"));
  }
  entries_.erase(id);
  return failure;
}

DegradedRetrier::Attempt VolumeTable::RetryDegraded(const std::string& id) {
  std::optional<BusyClaim> claim;
  v1::Volume spec;
  int device_id = -1;
  {
    absl::MutexLock lock(&mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second.volume.status().state() != v1::VOLUME_STATE_DEGRADED) {
      return DegradedRetrier::Attempt::kHandled;
    }
    if (it->second.busy) return DegradedRetrier::Attempt::kBusy;
    claim.emplace(mutex_, entries_, id);
    spec = SpecOf(it->second.volume);
    device_id = it->second.device_id;
  }
  BringUp(spec, device_id, /*degrade=*/true, /*fresh=*/false, *claim).IgnoreError();
  return DegradedRetrier::Attempt::kHandled;
}

void VolumeTable::StartRetrying(std::chrono::milliseconds initial_backoff,
                                std::chrono::milliseconds max_backoff) {
  retrier_.Start(initial_backoff, max_backoff);
}

absl::StatusOr<v1::Volume> VolumeTable::Create(const v1::Volume& requested, bool size_is_minimum) {
  v1::Volume spec = NormalizeVolumeSpec(requested);
  if (absl::Status valid = ValidateVolumeSpec(spec); !valid.ok()) return valid;
  if (absl::Status admitted = AdmitBacking(spec); !admitted.ok()) return admitted;
  std::optional<v1::Volume> existing;
  {
    absl::MutexLock lock(&mutex_);
    auto it = entries_.find(spec.id());
    if (it != entries_.end()) existing = it->second.volume;
  }
  // Probes run without the lock: a handshake may take as long as the connect timeout. A probe's
  // connection is kept for this create's device, and ends with the call if that did not take it.
  const absl::Cleanup end_probe = [&spec] {
    if (spec.has_nbd()) server::nbd::EndProbe(spec.nbd().uri());
  };
  if (absl::Status resolved =
          resolver_.Resolve(spec, existing ? &*existing : nullptr, size_is_minimum);
      !resolved.ok()) {
    return resolved;
  }
  // Controllers the resolver connected for a new fabric volume are disconnected again unless
  // the volume comes up.
  std::vector<std::string> connected_now;
  if (!existing && spec.has_nvme()) {
    const auto& paths = spec.nvme().fabric().agent_connected_paths();
    connected_now.assign(paths.begin(), paths.end());
  }
  bool created = false;
  const absl::Cleanup disconnect = [&] {
    if (!created) DisconnectFabricPaths(spec.nvme().fabric(), connected_now);
  };

  std::optional<BusyClaim> claim;
  int device_id = -1;
  bool degrade = false;
  bool fresh = false;
  {
    absl::MutexLock lock(&mutex_);
    auto it = entries_.find(spec.id());
    if (it != entries_.end()) {
      VolumeEntry& entry = it->second;
      if (entry.busy) return InProgress(spec.id());
      if (entry.record_only) return RecordOnly(spec.id(), entry.volume);
      const v1::Volume identity = IdentityOf(entry.volume);
      if (!MessageDifferencer::Equals(identity, IdentityOf(spec))) {
        return absl::AlreadyExistsError(
            absl::StrCat("volume '", spec.id(), "' already exists with a different spec (",
                         DescribeDifference(identity, IdentityOf(spec)), ")"));
      }
      if (entry.volume.status().state() == v1::VOLUME_STATE_LIVE) return WithLiveCounters(entry);
      // The tunables stay as they are; UpdateVolume changes them.
      spec = SpecOf(entry.volume);
      // Same spec, but the device is not up (it failed at restore): try again.
      degrade = entry.volume.status().state() == v1::VOLUME_STATE_DEGRADED;
      device_id = entry.device_id;
      SetVolumeState(entry.volume, v1::VOLUME_STATE_CREATING);
      claim.emplace(mutex_, entries_, spec.id());
    } else {
      if (absl::Status free = CheckBackingIsFree(spec, entries_); !free.ok()) return free;
      if (absl::Status fits = CheckVolumeFits(spec, entries_, limits_); !fits.ok()) return fits;
      InheritConnectedPaths(spec, entries_);
      // The id is chosen and recorded before ADD_DEV: an agent killed in between leaves a
      // device the next start recognizes as half-created.
      device_id = FirstFreeDeviceId(provisioner_.KernelDeviceIds(), ClaimedIdsLocked());
      fresh = true;
      if (absl::Status saved = registry_.Save(spec, device_id); !saved.ok()) {
        // A save that failed after its rename (the directory's fsync) leaves the record.
        if (absl::Status removed = registry_.Remove(spec.id()); !removed.ok()) {
          spdlog::error("volume {}: {}", spec.id(), removed.ToString());
        }
        return saved;
      }
      VolumeEntry& entry = entries_[spec.id()];
      entry.volume = spec;
      entry.device_id = device_id;
      SetVolumeState(entry.volume, v1::VOLUME_STATE_CREATING);
      claim.emplace(mutex_, entries_, spec.id());
    }
  }
  absl::StatusOr<v1::Volume> up = BringUp(spec, device_id, degrade, fresh, *claim);
  created = up.ok();
  return up;
}

absl::Status VolumeTable::StopOrRemoveDevice(VolumeDevice* device, int device_id, bool force) {
  if (device != nullptr) return device->Stop(force);
  if (device_id >= 0 && provisioner_.StateOf(device_id) != KernelDeviceState::kAbsent) {
    // A degraded volume's device a previous agent left: nothing serves it, but it may be in use.
    return provisioner_.DeleteKernelDevice(device_id, force);
  }
  return absl::OkStatus();
}

absl::Status VolumeTable::Delete(const std::string& id, bool force) {
  if (!IsValidVolumeId(id)) return InvalidId(id);
  std::optional<BusyClaim> claim;
  VolumeDevice* device = nullptr;
  int device_id = -1;
  v1::VolumeStatus previous;
  {
    absl::MutexLock lock(&mutex_);
    auto it = entries_.find(id);
    // Not OK: a mistyped id must not read as a deletion. Callers that want CSI's idempotence
    // (blk-csi, blkctl --if-exists) take NOT_FOUND as done.
    if (it == entries_.end()) return NotFound(id);
    VolumeEntry& entry = it->second;
    if (entry.busy) return InProgress(id);
    claim.emplace(mutex_, entries_, id);
    previous = entry.volume.status();
    entry.volume.mutable_status()->set_state(v1::VOLUME_STATE_DELETING);
    device = entry.device.get();
    // A record-only volume has no device: the kernel id it names may be another program's now.
    device_id = entry.record_only ? -1 : entry.device_id;
  }
  // The claim keeps the entry and its device in place while they are stopped without the lock.
  if (absl::Status stopped = StopOrRemoveDevice(device, device_id, force); !stopped.ok()) {
    absl::MutexLock lock(&mutex_);
    *entries_.at(id).volume.mutable_status() = previous;
    return stopped;
  }
  absl::Status removed = registry_.Remove(id);
  std::unique_ptr<VolumeDevice> stopped_device;  // destroyed after the lock is released
  v1::Volume deleted;
  std::vector<std::string> unused_paths;  // disconnected after the lock is released
  const absl::Cleanup disconnect = [&] {
    DisconnectFabricPaths(deleted.nvme().fabric(), unused_paths);
  };
  absl::MutexLock lock(&mutex_);
  claim->ReleaseLocked(mutex_);
  VolumeEntry& entry = entries_.at(id);
  stopped_device = std::move(entry.device);
  if (!removed.ok()) {
    // The device is gone, its record is not. Answering OK would leave the next agent to bring
    // the volume back from its record, unseen. So the call fails and the volume stays listed,
    // FAILED, saying why; the caller's retry removes only the record. An agent restarted before
    // that brings the volume back from its record, with a new device over its untouched backing
    // (a delete never erases data): visible and deletable, neither lost nor silently revived.
    entry.record_only = true;
    SetVolumeState(entry.volume, v1::VOLUME_STATE_FAILED,
                   absl::StrCat("device removed but its record was not: ", removed.message()));
    return absl::Status(removed.code(),
                        absl::StrCat("volume '", id, "': its device is removed, but ",
                                     removed.message(), "; delete it again to remove the record"));
  }
  deleted = std::move(entry.volume);
  entries_.erase(id);
  unused_paths = UnusedConnectedPaths(deleted, entries_);
  retrier_.Forget(id);
  spdlog::info("volume {}: deleted", id);
  return absl::OkStatus();
}

absl::StatusOr<v1::Volume> VolumeTable::Update(const v1::Volume& changes,
                                               const google::protobuf::FieldMask& mask) {
  if (absl::Status valid = ValidateVolumeUpdate(changes, mask); !valid.ok()) return valid;
  const auto names = [&mask](absl::string_view field) {
    return std::find(mask.paths().begin(), mask.paths().end(), field) != mask.paths().end();
  };
  const bool rq_affinity = names("rq_affinity");
  const bool limits = names("limits");

  std::optional<BusyClaim> claim;
  v1::Volume updated;
  VolumeDevice* device = nullptr;
  int device_id = -1;
  {
    absl::MutexLock lock(&mutex_);
    auto it = entries_.find(changes.id());
    if (it == entries_.end()) return NotFound(changes.id());
    VolumeEntry& entry = it->second;
    if (entry.busy) return InProgress(changes.id());
    if (entry.record_only) return RecordOnly(changes.id(), entry.volume);
    claim.emplace(mutex_, entries_, changes.id());
    updated = SpecOf(entry.volume);
    device = entry.device.get();
    device_id = entry.device_id;
  }
  // The device's limits are the spec's: it came up with them (DeviceConfigFor) and only this
  // call changes them.
  const server::IoLimits previous_limits = IoLimitsOf(updated.limits());
  if (rq_affinity) updated.set_rq_affinity(changes.rq_affinity());
  if (limits) CopyLimits(changes, updated);

  // The device first, so a value the kernel refuses is never recorded; a record that cannot be
  // saved puts the device's values back.
  absl::StatusOr<uint32_t> previous = absl::UnavailableError("no device");
  if (device != nullptr && rq_affinity) {
    previous = device->RqAffinity();
    if (absl::Status applied = device->SetRqAffinity(changes.rq_affinity()); !applied.ok()) {
      return absl::Status(applied.code(),
                          absl::StrCat("volume.rq_affinity: cannot apply: ", applied.message()));
    }
  }
  if (device != nullptr && limits) {
    if (absl::Status applied = device->SetLimits(IoLimitsOf(changes.limits())); !applied.ok()) {
      if (previous.ok()) device->SetRqAffinity(*previous).IgnoreError();
      return absl::Status(applied.code(),
                          absl::StrCat("volume.limits: cannot apply: ", applied.message()));
    }
  }
  if (absl::Status saved = registry_.Save(updated, device_id); !saved.ok()) {
    if (previous.ok()) device->SetRqAffinity(*previous).IgnoreError();
    if (device != nullptr && limits) device->SetLimits(previous_limits).IgnoreError();
    return saved;
  }
  absl::MutexLock lock(&mutex_);
  claim->ReleaseLocked(mutex_);
  VolumeEntry& entry = entries_.at(changes.id());
  if (rq_affinity) {
    entry.volume.set_rq_affinity(changes.rq_affinity());
    spdlog::info("volume {}: rq_affinity set to {}", changes.id(), changes.rq_affinity());
  }
  if (limits) {
    CopyLimits(changes, entry.volume);
    const std::string text = changes.limits().ShortDebugString();
    spdlog::info("volume {}: limits set to {}", changes.id(), text.empty() ? "none" : text);
  }
  entry.size_unrecorded = false;  // the record has the grown size too now
  return WithLiveCounters(entry);
}

absl::StatusOr<v1::Volume> VolumeTable::Resize(const std::string& id, uint64_t size_bytes) {
  if (!IsValidVolumeId(id)) return InvalidId(id);
  std::optional<BusyClaim> claim;
  v1::Volume resized;
  VolumeDevice* device = nullptr;
  int device_id = -1;
  {
    absl::MutexLock lock(&mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return NotFound(id);
    VolumeEntry& entry = it->second;
    if (entry.busy) return InProgress(id);
    const uint64_t block_size = entry.volume.logical_block_size();
    if (size_bytes == 0 || size_bytes % block_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "size_bytes: must be a positive multiple of the volume's logical block size ", block_size,
          ", got ", size_bytes));
    }
    if (size_bytes == entry.volume.size_bytes() && !entry.size_unrecorded) {
      return WithLiveCounters(entry);
    }
    if (size_bytes < entry.volume.size_bytes()) {
      return absl::InvalidArgumentError(
          absl::StrCat("size_bytes: volume '", id, "' has ", entry.volume.size_bytes(),
                       " bytes; shrinking it to ", size_bytes,
                       " would cut off data (only growing is supported)"));
    }
    if (!entry.device) {
      return absl::FailedPreconditionError(
          absl::StrCat("volume '", id, "' has no device serving it (state ",
                       v1::VolumeStateName(entry.volume.status().state()), ")"));
    }
    resized = SpecOf(entry.volume);
    resized.set_size_bytes(size_bytes);
    if (absl::Status free = CheckGrowthIsFree(resized, entries_); !free.ok()) {
      return absl::Status(free.code(), absl::StrCat("size_bytes: growing volume '", id, "' to ",
                                                    size_bytes, ": ", free.message()));
    }
    claim.emplace(mutex_, entries_, id);
    entry.growing_to_bytes = size_bytes;
    device = entry.device.get();
    device_id = entry.device_id;
  }

  // The kernel first, the record after. Killed in between, the next agent recovers the device at
  // the kernel's new size while the record keeps the old one: the device keeps working, and the
  // caller, who got no answer, asks again and the record catches up. The other order could leave
  // a record larger than the device, and a repeated request would then find nothing to do.
  const absl::Status grown = device->Resize(size_bytes);
  const absl::Status saved = grown.ok() ? registry_.Save(resized, device_id) : absl::OkStatus();
  absl::MutexLock lock(&mutex_);
  claim->ReleaseLocked(mutex_);
  VolumeEntry& entry = entries_.at(id);
  entry.growing_to_bytes = 0;
  if (!grown.ok()) {
    return absl::Status(grown.code(), absl::StrCat("volume '", id, "': ", grown.message()));
  }
  // The device has the new size even when the record could not say so (a grown device cannot be
  // shrunk back): the table keeps the kernel's truth (conflict checks need it), the caller
  // learns of the failed save, and the same resize again records the size.
  entry.volume.set_size_bytes(size_bytes);
  entry.size_unrecorded = !saved.ok();
  if (!saved.ok()) {
    return absl::Status(
        saved.code(),
        absl::StrCat("volume '", id, "' grew to ", size_bytes, " bytes, but ", saved.message(),
                     "; repeat the resize to record the new size (until then a restarted agent "
                     "knows only the old one)"));
  }
  spdlog::info("volume {}: resized to {} bytes", id, size_bytes);
  return WithLiveCounters(entry);
}

absl::StatusOr<v1::Volume> VolumeTable::Get(const std::string& id) const {
  if (!IsValidVolumeId(id)) return InvalidId(id);
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotFound(id);
  return WithLiveCounters(it->second);
}

std::vector<v1::Volume> VolumeTable::List() const {
  absl::MutexLock lock(&mutex_);
  std::vector<v1::Volume> volumes;
  volumes.reserve(entries_.size());
  for (const auto& [id, entry] : entries_) volumes.push_back(WithLiveCounters(entry));
  return volumes;
}

absl::StatusOr<v1::VolumeStats> VolumeTable::Stats(const std::string& id) const {
  if (!IsValidVolumeId(id)) return InvalidId(id);
  absl::MutexLock lock(&mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotFound(id);
  const VolumeEntry& entry = it->second;
  if (!entry.device) {
    return absl::FailedPreconditionError(
        absl::StrCat("volume '", id, "' has no device serving it (state ",
                     v1::VolumeStateName(entry.volume.status().state()), ")"));
  }
  return entry.device->Stats(id);
}

std::vector<v1::VolumeStats> VolumeTable::AllStats() const {
  absl::MutexLock lock(&mutex_);
  std::vector<v1::VolumeStats> all;
  for (const auto& [id, entry] : entries_) {
    if (!entry.device) continue;
    absl::StatusOr<v1::VolumeStats> stats = entry.device->Stats(id);
    if (stats.ok()) all.push_back(std::move(*stats));
  }
  return all;
}

VolumeTable::ClaimedDevices VolumeTable::ClaimAllDevices(std::list<BusyClaim>& claims) {
  absl::MutexLock lock(&mutex_);
  mutex_.Await(absl::Condition(this, &VolumeTable::NoneBusyLocked));
  ClaimedDevices devices;
  for (auto& [id, entry] : entries_) {
    if (!entry.device) continue;
    claims.emplace_back(mutex_, entries_, id);
    devices.emplace_back(id, std::move(entry.device));
  }
  return devices;
}

void VolumeTable::ReleaseAll(std::list<BusyClaim>& claims, const ClaimedDevices& devices,
                             absl::string_view message) {
  absl::MutexLock lock(&mutex_);
  for (const auto& [id, device] : devices) {
    SetVolumeState(entries_.at(id).volume, v1::VOLUME_STATE_UNSPECIFIED, message);
  }
  for (BusyClaim& claim : claims) claim.ReleaseLocked(mutex_);
}

void VolumeTable::StopAll() {
  retrier_.Stop();
  std::list<BusyClaim> claims;
  ClaimedDevices devices = ClaimAllDevices(claims);
  for (auto& [id, device] : devices) {
    if (absl::Status stopped = device->Stop(/*force=*/true); !stopped.ok()) {
      spdlog::error("volume {}: stop failed: {}", id, stopped.ToString());
    }
  }
  ReleaseAll(claims, devices, "agent stopped");
}

void VolumeTable::DetachAll() {
  retrier_.Stop();
  std::list<BusyClaim> claims;
  ClaimedDevices devices = ClaimAllDevices(claims);
  for (auto& [id, device] : devices) {
    if (absl::Status detached = device->Detach(); !detached.ok()) {
      spdlog::warn("volume {}: detached, but {}", id, detached.ToString());
    }
  }
  ReleaseAll(claims, devices, "agent stopped; device left for the next agent");
}

}  // namespace blk::agent
