#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "blk/v1/volume.pb.h"

namespace blk::client {

// Parses a backend URI: "null://", "file:///absolute/path" (percent-encoded,
// e.g. "file:///var/lib/a%20b.img"), "nbd://host[:port]/export" or
// "nbd+unix:///export?socket=/path" (kept whole; the agent parses it),
// "nvme:///dev/ngXnY" with an optional "?offset=SIZE" (bytes or K/M/G/T), or a namespace of a
// remote subsystem:
//   nvme-tcp://HOST[:PORT]/NQN?nsid=N[&path=HOST[:PORT]]...[&offset=SIZE][&io_timeout=SECONDS]
//       [&dhchap_secret_file=/abs/path]
// (the nvme backend with its fabric set: the paths are the authority, then each path= in order,
// as "HOST:PORT" with PORT 4420 when omitted; HOST an IPv4 address, a DNS name or "[IPv6]"; the
// NQN is the percent-decoded URI path, e.g.
// "nvme-tcp://10.0.0.5/nqn.2014-08.org.example:a1?nsid=1"). Returns a Volume whose only set field
// is the backend oneof, to be merged into a request.
absl::StatusOr<blk::v1::Volume> ParseBackendUri(absl::string_view uri);

// The inverse: the URI of the volume's backend, "" when none is set.
std::string FormatBackendUri(const blk::v1::Volume& volume);

}  // namespace blk::client
