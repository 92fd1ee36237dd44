#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "blk/v1/volume.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace blk::cli {

enum class OutputFormat { kTable, kJson };

// "live", "creating", "deleting", "failed"; "unknown" for unspecified states.
std::string StateName(blk::v1::VolumeState state);

// One row per volume under the header ID SIZE BACKEND DEVICE STATE QUEUES DEPTH.
std::string RenderVolumeTable(const google::protobuf::RepeatedPtrField<blk::v1::Volume>& volumes);

// "key: value" lines describing one volume.
std::string RenderVolume(const blk::v1::Volume& volume);

std::string RenderNodeInfo(const blk::v1::GetNodeInfoResponse& info);

// The protobuf JSON mapping of the message (lowerCamelCase field names,
// fields at their default value left out), followed by a newline.
absl::StatusOr<std::string> RenderJson(const google::protobuf::Message& message);

}  // namespace blk::cli
