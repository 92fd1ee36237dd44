// One volume as the volume table holds it: its spec and status, the device serving it, and
// whether an operation on it is in flight.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "agent/devices/volume_device.h"
#include "blk/v1/volume.pb.h"

namespace blk::agent {

struct VolumeEntry {
  v1::Volume volume;  // normalized spec plus status
  std::unique_ptr<VolumeDevice> device;
  int device_id = -1;  // the kernel id in the record
  bool busy = false;   // a Create, Delete, Update, retry or shutdown is in flight (see BusyClaim)
  // A Resize in flight reserves its new size here (0: none), so that the backing conflict
  // check of a concurrent Create sees the bytes the volume is growing into.
  uint64_t growing_to_bytes = 0;
  // A Resize grew the device but could not record the new size: the same Resize again records
  // it instead of finding nothing to do.
  bool size_unrecorded = false;
  // No device belongs to the volume any more (a Delete removed it) or ever did (its Create
  // failed), but its record could not be removed: the volume is listed, FAILED, until a Delete
  // removes the record (and only the record: the kernel id it names may be another program's
  // now). Creates and updates are refused meanwhile.
  bool record_only = false;
};

// By volume id.
using VolumeEntries = std::map<std::string, VolumeEntry>;

// The spec alone, without the status.
v1::Volume SpecOf(const v1::Volume& volume);

// Sets the volume's state and message; a state without a device clears the device fields.
void SetVolumeState(v1::Volume& volume, v1::VolumeState state, absl::string_view message = {});

// The entry's volume with counters (backend faults, throttling) and rq_affinity read from its
// device now.
v1::Volume WithLiveCounters(const VolumeEntry& entry);

}  // namespace blk::agent
