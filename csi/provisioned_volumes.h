#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "blk/csi/provisioned_volume.pb.h"

namespace blk::csi {

// The controller's record of the volumes it provisioned: one JSON file per volume,
// DIR/<volume id>.json, replaced atomically, so that a crash leaves the old record or the new
// one. The ids are agent ids (DNS labels: no '/', no "..").
class ProvisionedVolumes {
 public:
  explicit ProvisionedVolumes(std::string dir) : dir_(std::move(dir)) {}

  // Creates the directory (0700) when missing.
  absl::Status Open() const;
  // The record of `volume_id`; nullopt when there is none (an id that is no agent id included).
  absl::StatusOr<std::optional<ProvisionedVolume>> Find(absl::string_view volume_id) const;
  absl::Status Save(const ProvisionedVolume& volume) const;
  // A missing record is OK.
  absl::Status Remove(absl::string_view volume_id) const;

 private:
  std::string PathOf(absl::string_view volume_id) const;

  const std::string dir_;
};

// The context a volume is staged with: the one CreateVolume answered, with the limits changed
// since (modified_limits) laid over it.
std::map<std::string, std::string> StagingContext(const ProvisionedVolume& volume);

}  // namespace blk::csi
