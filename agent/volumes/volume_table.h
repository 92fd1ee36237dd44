#pragma once

#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/devices/device_reconciler.h"
#include "agent/devices/volume_device.h"
#include "agent/volumes/busy_claim.h"
#include "agent/volumes/degraded_retrier.h"
#include "agent/volumes/file_dirs.h"
#include "agent/volumes/spec_resolver.h"
#include "agent/volumes/volume_entry.h"
#include "agent/volumes/volume_limits.h"
#include "agent/volumes/volume_registry.h"
#include "blk/v1/volume.pb.h"
#include "google/protobuf/field_mask.pb.h"

namespace blk::agent {

// The volumes this agent owns: their specs (persisted), states and devices.
// Semantics follow CSI: Create is idempotent on the id, a second call while one is in flight on
// the same id is ABORTED, and a rejected request changes nothing. Delete of an unknown id is
// NOT_FOUND, which an idempotent caller takes as done.
//
// The table's mutex guards the map only: a device is brought up, stopped or detached with the
// volume claimed (BusyClaim) and the mutex free, so a slow device (an NBD dial) blocks no other
// call.
class VolumeTable {
 public:
  // `probe` learns the size of an NBD export for a volume created without one; `nvme_probe`
  // identifies the namespace of an nvme volume. A create of a new volume beyond `limits` is
  // refused; Restore takes back every persisted volume whatever the limits. A file volume whose
  // path `file_dirs` does not admit is refused at create (nothing is created) and, restored or
  // retried after the directories changed, stays DEGRADED saying why rather than being served.
  VolumeTable(VolumeRegistry registry, DeviceProvisioner& provisioner,
              NbdSizeProbe probe = RealNbdSizeProbe(),
              NvmeNamespaceProbe nvme_probe = RealNvmeNamespaceProbe(), VolumeLimits limits = {},
              FileDirs file_dirs = {});
  ~VolumeTable();  // ends the retry thread; devices are left as they are
  VolumeTable(const VolumeTable&) = delete;
  VolumeTable& operator=(const VolumeTable&) = delete;

  // Reconciles every persisted volume with the kernel (see DecideRestore):
  // recovers devices a previous agent left, re-creates missing ones under
  // their old number, removes half-created ones. Volumes that cannot be served
  // stay listed in state DEGRADED with the reason. Kernel devices no record
  // claims are reported and left alone. Returns the problems found, for the log.
  std::vector<std::string> Restore();
  // The agent is stopping: Restore ends after the volume under way. The volumes it did not reach
  // stay as the previous agent left them (their devices hold their I/O for the next agent).
  void StopRestoring() { restore_stopped_.store(true, std::memory_order_relaxed); }

  // ublk devices the kernel has that no volume of this agent claims: never
  // touched, only reported.
  std::vector<int> UnknownKernelDevices() const;

  // Retries DEGRADED volumes in the background, each with its own backoff
  // (initial_backoff doubling up to max_backoff).
  void StartRetrying(std::chrono::milliseconds initial_backoff = std::chrono::seconds(1),
                     std::chrono::milliseconds max_backoff = std::chrono::seconds(60));

  // An NBD volume requested without a size gets the export's (probed here, on the caller's
  // thread); repeating that request returns the existing volume whatever size it resolved to.
  // `size_is_minimum`: see CreateVolumeRequest.size_is_minimum (SpecResolver::Resolve).
  absl::StatusOr<v1::Volume> Create(const v1::Volume& requested, bool size_is_minimum = false);
  absl::Status Delete(const std::string& id, bool force);
  // Sets the tunables `mask` names (only "rq_affinity" today) to their values
  // in `changes`, on the device and in the registry; see UpdateVolumeRequest.
  absl::StatusOr<v1::Volume> Update(const v1::Volume& changes,
                                    const google::protobuf::FieldMask& mask);
  // Grows the volume's device to `size_bytes` online, then records the new size; see
  // ResizeVolumeRequest.
  absl::StatusOr<v1::Volume> Resize(const std::string& id, uint64_t size_bytes);
  absl::StatusOr<v1::Volume> Get(const std::string& id) const;
  std::vector<v1::Volume> List() const;
  // The volume's I/O statistics now: NOT_FOUND for an unknown id, FAILED_PRECONDITION when no
  // device serves it or it keeps none.
  absl::StatusOr<v1::VolumeStats> Stats(const std::string& id) const;
  // The statistics of every volume that has them, ordered by id (for /metrics).
  std::vector<v1::VolumeStats> AllStats() const;

  // Both end the retry thread first and wait for operations in flight, so every device is
  // handled once and none comes up after.
  // Stops and deletes every device, keeping the persisted specs
  // (`blkagent --on-exit delete`).
  void StopAll();
  // Leaves every device in the kernel for the next agent to recover (the
  // default exit: an upgrade or restart fails no I/O).
  void DetachAll();

 private:
  using ClaimedDevices = std::vector<std::pair<std::string, std::unique_ptr<VolumeDevice>>>;

  // Brings up the device of a claimed volume, reconciling with the kernel unless the volume is
  // `fresh` (just created), and records the outcome: live; or DEGRADED and scheduled for a retry
  // when `degrade`; else the volume is forgotten (a create leaves nothing behind).
  absl::StatusOr<v1::Volume> BringUp(const v1::Volume& spec, int device_id, bool degrade,
                                     bool fresh, BusyClaim& claim) ABSL_LOCKS_EXCLUDED(mutex_);
  absl::StatusOr<v1::Volume> RecordLiveLocked(const v1::Volume& spec,
                                              std::unique_ptr<VolumeDevice> device)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status RecordFailureLocked(const std::string& id, const absl::Status& failure, bool degrade)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Chooses a free kernel id for the volume in place of `taken_id` and records it.
  absl::StatusOr<int> ChooseFreeDeviceId(const v1::Volume& spec, int taken_id)
      ABSL_LOCKS_EXCLUDED(mutex_);
  DegradedRetrier::Attempt RetryDegraded(const std::string& id) ABSL_LOCKS_EXCLUDED(mutex_);
  // Deletes a device a previous agent left for a volume nothing serves, or stops `device`.
  absl::Status StopOrRemoveDevice(VolumeDevice* device, int device_id, bool force);
  // Waits until no operation is in flight, then claims every volume with a device and takes the
  // device out of it (for shutdown).
  ClaimedDevices ClaimAllDevices(std::list<BusyClaim>& claims) ABSL_LOCKS_EXCLUDED(mutex_);
  void ReleaseAll(std::list<BusyClaim>& claims, const ClaimedDevices& devices,
                  absl::string_view message) ABSL_LOCKS_EXCLUDED(mutex_);
  // OK unless `spec` is a file volume whose path file_dirs_ does not admit.
  absl::Status AdmitBacking(const v1::Volume& spec) const;
  std::set<int> ClaimedIdsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  bool NoneBusyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  VolumeRegistry registry_;
  DeviceProvisioner& provisioner_;
  const SpecResolver resolver_;
  const VolumeLimits limits_;
  const FileDirs file_dirs_;
  DeviceReconciler reconciler_;
  std::atomic<bool> restore_stopped_{false};
  mutable absl::Mutex mutex_;
  VolumeEntries entries_ ABSL_GUARDED_BY(mutex_);
  // Last: its thread calls into the table, so it ends before the rest is destroyed.
  DegradedRetrier retrier_;
};

}  // namespace blk::agent
