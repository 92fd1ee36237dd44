#include "csi/volume_capability.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace blk::csi {

using ::csi::v1::VolumeCapability;

// A ublk device lives on one node: the modes that share a writer across nodes cannot be served.
absl::Status CheckVolumeCapability(const VolumeCapability& capability) {
  if (capability.access_type_case() == VolumeCapability::ACCESS_TYPE_NOT_SET) {
    return absl::InvalidArgumentError("volume_capability needs an access type (block or mount)");
  }
  switch (capability.access_mode().mode()) {
    case VolumeCapability::AccessMode::MULTI_NODE_SINGLE_WRITER:
    case VolumeCapability::AccessMode::MULTI_NODE_MULTI_WRITER:
      return absl::InvalidArgumentError(absl::StrCat(
          "access mode ", VolumeCapability::AccessMode::Mode_Name(capability.access_mode().mode()),
          " is not supported: a ublk volume is served on one node"));
    default:
      break;
  }
  if (capability.has_mount()) {
    const std::string& fs_type = capability.mount().fs_type();
    if (!fs_type.empty() && fs_type != "ext4" && fs_type != "xfs") {
      return absl::InvalidArgumentError(
          absl::StrCat("fs_type '", fs_type, "' is not supported (ext4 or xfs)"));
    }
  }
  return absl::OkStatus();
}

bool IsReaderOnly(const VolumeCapability& capability) {
  const VolumeCapability::AccessMode::Mode mode = capability.access_mode().mode();
  return mode == VolumeCapability::AccessMode::SINGLE_NODE_READER_ONLY ||
         mode == VolumeCapability::AccessMode::MULTI_NODE_READER_ONLY;
}

}  // namespace blk::csi
