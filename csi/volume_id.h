#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace blk::csi {

// The agent volume id for a CreateVolume name, the same for the same name on
// every call and every node (the controller keeps no table of names). A name
// that is already a valid agent id (lower-case letters, digits and '-', at most
// 63, starting and ending with a letter or digit; what agent/volume_validation
// accepts), like Kubernetes' "pvc-<uid>", is the id itself. Any other name
// becomes its lower-cased, '-'-for-anything-else prefix plus a hash of the
// whole name, so that two names differing only where the prefix lost them stay
// two ids.
std::string VolumeIdForName(absl::string_view name);

}  // namespace blk::csi
