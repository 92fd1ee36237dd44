#pragma once

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include <memory>
#include <string>

#include "blk/v1/volume.pb.h"

namespace blk::agent {

// The block device that serves one volume, as the volume table sees it.
class VolumeDevice {
 public:
  virtual ~VolumeDevice() = default;
  virtual int id() const = 0;
  virtual std::string block_path() const = 0;
  // force=false refuses (FAILED_PRECONDITION) while the device is open.
  virtual absl::Status Stop(bool force) = 0;
};

// Turns a validated, normalized volume spec into a running device.
class DeviceProvisioner {
 public:
  virtual ~DeviceProvisioner() = default;
  virtual absl::StatusOr<std::unique_ptr<VolumeDevice>> Provision(const v1::Volume& spec) = 0;
};

}  // namespace blk::agent
