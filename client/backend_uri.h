#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "blk/v1/volume.pb.h"

namespace blk::client {

// Parses a backend URI: "null://", "file:///absolute/path" (percent-encoded,
// e.g. "file:///var/lib/a%20b.img"), "nbd://host[:port]/export" or
// "nbd+unix:///export?socket=/path" (kept whole; the agent parses it), or
// "nvme:///dev/ngXnY" with an optional "?offset=SIZE" (bytes or K/M/G/T). Returns a Volume whose
// only set field is the backend oneof, to be merged into a request.
absl::StatusOr<blk::v1::Volume> ParseBackendUri(absl::string_view uri);

// The inverse: the URI of the volume's backend, "" when none is set.
std::string FormatBackendUri(const blk::v1::Volume& volume);

}  // namespace blk::client
