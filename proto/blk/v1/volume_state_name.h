#pragma once

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "blk/v1/volume.pb.h"

namespace blk::v1 {

// The short, lowercase name of a state ("live", "degraded"), taken from the
// enum itself so a new state needs no table anywhere; "unknown" for
// UNSPECIFIED and for values this build does not know.
inline std::string VolumeStateName(VolumeState state) {
  if (state == VOLUME_STATE_UNSPECIFIED || !VolumeState_IsValid(state)) return "unknown";
  return absl::AsciiStrToLower(absl::StripPrefix(VolumeState_Name(state), "VOLUME_STATE_"));
}

}  // namespace blk::v1
