#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/nbd_export_size.h"
#include "agent/nvme_volume.h"
#include "agent/volume_device.h"
#include "agent/volume_registry.h"
#include "blk/v1/volume.pb.h"
#include "google/protobuf/field_mask.pb.h"

namespace blk::agent {

// The volumes this agent owns: their specs (persisted), states and devices.
// Semantics follow CSI: Create is idempotent on the id, Delete of an unknown id
// is OK, a second call while one is in flight on the same id is ABORTED, and a
// rejected request changes nothing.
class VolumeTable {
 public:
  // `probe` learns the size of an NBD export for a volume created without one; `nvme_probe`
  // identifies the namespace of an nvme volume.
  VolumeTable(VolumeRegistry registry, DeviceProvisioner& provisioner,
              NbdSizeProbe probe = RealNbdSizeProbe(),
              NvmeNamespaceProbe nvme_probe = RealNvmeNamespaceProbe());
  ~VolumeTable();  // ends the retry thread; devices are left as they are
  VolumeTable(const VolumeTable&) = delete;
  VolumeTable& operator=(const VolumeTable&) = delete;

  // Reconciles every persisted volume with the kernel (see DecideRestore):
  // recovers devices a previous agent left, re-creates missing ones under
  // their old number, removes half-created ones. Volumes that cannot be served
  // stay listed in state DEGRADED with the reason. Kernel devices no record
  // claims are reported and left alone. Returns the problems found, for the log.
  std::vector<std::string> Restore();

  // ublk devices the kernel has that no volume of this agent claims: never
  // touched, only reported.
  std::vector<int> UnknownKernelDevices() const;

  // Retries DEGRADED volumes in the background, each with its own backoff
  // (initial_backoff doubling up to max_backoff).
  void StartRetrying(std::chrono::milliseconds initial_backoff = std::chrono::seconds(1),
                     std::chrono::milliseconds max_backoff = std::chrono::seconds(60));

  // An NBD volume requested without a size gets the export's (probed here, on the caller's
  // thread); repeating that request returns the existing volume whatever size it resolved to.
  absl::StatusOr<v1::Volume> Create(const v1::Volume& requested);
  absl::Status Delete(const std::string& id, bool force);
  // Sets the tunables `mask` names (only "rq_affinity" today) to their values
  // in `changes`, on the device and in the registry; see UpdateVolumeRequest.
  absl::StatusOr<v1::Volume> Update(const v1::Volume& changes,
                                    const google::protobuf::FieldMask& mask);
  absl::StatusOr<v1::Volume> Get(const std::string& id) const;
  std::vector<v1::Volume> List() const;
  // The volume's I/O statistics now: NOT_FOUND for an unknown id, FAILED_PRECONDITION when no
  // device serves it or it keeps none.
  absl::StatusOr<v1::VolumeStats> Stats(const std::string& id) const;
  // The statistics of every volume that has them, ordered by id (for /metrics).
  std::vector<v1::VolumeStats> AllStats() const;

  // Stops and deletes every device, keeping the persisted specs
  // (`blkagent --on-exit delete`).
  void StopAll();
  // Leaves every device in the kernel for the next agent to recover (the
  // default exit: an upgrade or restart fails no I/O).
  void DetachAll();

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    v1::Volume volume;  // normalized spec plus status
    std::unique_ptr<VolumeDevice> device;
    int device_id = -1;  // the kernel id in the record
    bool busy = false;   // a Create, Delete or retry is in flight
    std::chrono::milliseconds backoff{0};
    Clock::time_point next_retry{};
  };

  // The entry's volume with counters and rq_affinity read from its device now.
  static v1::Volume WithLiveCounters(const Entry& entry);

  // Brings up the device of an entry marked busy, reconciling with the kernel
  // unless the volume is `fresh` (just created), and records the outcome
  // (failure: DEGRADED when `degrade`, else FAILED).
  absl::StatusOr<v1::Volume> BringUp(const v1::Volume& spec, int device_id, bool degrade,
                                     bool fresh = false);
  absl::StatusOr<std::unique_ptr<VolumeDevice>> Reconcile(const v1::Volume& spec, int& device_id,
                                                          bool fresh);
  absl::Status CheckNoConflictLocked(const v1::Volume& spec) const;
  // Fills in the size of an NBD spec that has none: the existing volume's when the id is known,
  // else the export's.
  absl::Status ResolveNbdSize(v1::Volume& spec);
  // Fills in an nvme spec's size and block size: the existing volume's when the id is known, else
  // from the namespace, which is also checked to hold the volume.
  absl::Status ResolveNvme(v1::Volume& spec);
  std::set<int> ClaimedIdsLocked() const;
  void RetryLoop();

  VolumeRegistry registry_;
  DeviceProvisioner& provisioner_;
  NbdSizeProbe probe_;
  NvmeNamespaceProbe nvme_probe_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;

  std::condition_variable retry_wake_;
  bool retry_stop_ = false;
  std::chrono::milliseconds initial_backoff_{1000};
  std::chrono::milliseconds max_backoff_{60000};
  std::thread retry_thread_;
};

}  // namespace blk::agent
