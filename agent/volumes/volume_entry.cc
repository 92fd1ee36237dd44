#include "agent/volumes/volume_entry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/devices/nvme_fabric.h"

namespace blk::agent {

v1::Volume SpecOf(const v1::Volume& volume) {
  v1::Volume spec = volume;
  spec.clear_status();
  return spec;
}

void SetVolumeState(v1::Volume& volume, v1::VolumeState state, absl::string_view message) {
  v1::VolumeStatus* status = volume.mutable_status();
  status->set_state(state);
  status->set_message(std::string(message));
  if (state != v1::VOLUME_STATE_LIVE && state != v1::VOLUME_STATE_DELETING) {
    status->clear_copy_mode();
    status->clear_io_mode();
    status->clear_device_path();
    status->set_device_id(-1);
  }
}

v1::Volume WithLiveCounters(const VolumeEntry& entry) {
  v1::Volume volume = entry.volume;
  if (!entry.device) return volume;
  const BackendFaults faults = entry.device->backend_faults();
  v1::VolumeStatus& status = *volume.mutable_status();
  status.set_reconnects(faults.reconnects);
  status.set_server_errors(faults.server_errors);
  status.set_protocol_errors(faults.protocol_errors);
  status.set_io_timeouts(faults.io_timeouts);
  status.set_unflushed_losses(faults.unflushed_losses);
  const server::ThrottleCounts throttled = entry.device->throttle_counts();
  status.set_throttled_requests(throttled.requests);
  status.set_throttled_nanoseconds(throttled.wait_ns);
  absl::StatusOr<uint32_t> rq_affinity = entry.device->RqAffinity();
  if (rq_affinity.ok()) status.set_rq_affinity(*rq_affinity);
  status.set_rq_affinity_redirected(entry.device->RqAffinityRedirected());
  // The device stays (delete-volume removes it) but serves nothing: failed, not retried.
  if (std::string lost = entry.device->backend_lost();
      !lost.empty() && status.state() == v1::VOLUME_STATE_LIVE) {
    status.set_state(v1::VOLUME_STATE_FAILED);
    status.set_message(std::move(lost));
  }
  if (volume.has_nvme() && volume.nvme().has_fabric()) {
    const FabricPathCount paths = CountLivePaths(volume.nvme().fabric());
    status.set_nvme_paths_live(paths.live);
    status.set_nvme_paths_total(paths.total);
    status.set_nvme_failovers(faults.nvme_failovers);
    // I/O waits (up to io_timeout) for a path; the kernel reconnects the controllers.
    if (paths.live == 0 && status.state() == v1::VOLUME_STATE_LIVE) {
      status.set_state(v1::VOLUME_STATE_DEGRADED);
      status.set_message(absl::StrCat("no live path to nsid ", volume.nvme().fabric().nsid(),
                                      " of ", volume.nvme().fabric().subsystem_nqn(), " (",
                                      paths.total, " reconnecting): I/O waits up to ",
                                      FabricIoTimeoutMs(volume.nvme().fabric()) / 1000,
                                      " s for one, then fails"));
    }
  }
  // The device stays and serves what the backing still holds; the rest fails until it is back.
  if (std::string shortfall = entry.device->backing_shortfall(volume.size_bytes());
      !shortfall.empty() && status.state() == v1::VOLUME_STATE_LIVE) {
    status.set_state(v1::VOLUME_STATE_DEGRADED);
    status.set_message(std::move(shortfall));
  }
  return volume;
}

}  // namespace blk::agent
