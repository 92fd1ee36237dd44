#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "blk/v1/volume.pb.h"
#include "cli/output.h"
#include "client/volume_client.h"

namespace blk::cli {

// The I/O limit flags of create-volume and update-volume as typed, "" when not given; each is
// checked while parsing (ParseIopsLimit, ParseBytesLimit).
struct LimitFlags {
  std::string read_iops;    // --read-iops N[:BURST]
  std::string write_iops;   // --write-iops N[:BURST]
  std::string total_iops;   // --iops N[:BURST]
  std::string read_bytes;   // --read-bps SIZE[:BURST]
  std::string write_bytes;  // --write-bps SIZE[:BURST]
  std::string total_bytes;  // --bps SIZE[:BURST]
  bool any() const;
};

// `current` with each limit given in `flags` replaced (a rate of 0 lifts it); InvalidArgument
// naming the flag when one does not parse.
absl::StatusOr<blk::v1::VolumeLimits> MergeLimits(blk::v1::VolumeLimits current,
                                                  const LimitFlags& flags);

// create-volume's flags after parsing; zero means "the server's default".
struct CreateVolumeFlags {
  std::string id;
  uint64_t size_bytes = 0;
  std::string backend_uri;
  uint32_t queues = 0;
  uint32_t queue_depth = 0;
  uint32_t logical_block_size = 0;
  bool read_only = false;
  bool fail_fast = false;
  bool poll = false;
  uint32_t io_timeout_seconds = 0;      // NBD backends; 0: the agent's default
  std::optional<uint32_t> rq_affinity;  // unset: the kernel's default
  std::string placement;                // empty: the agent's default (node)
  LimitFlags limits;                    // none given: unlimited
};

// What update-volume says when no tunable is given.
inline constexpr char kUpdateTunables[] =
    "needs a tunable to change: --rq-affinity, a limit (--read-iops, --write-iops, --iops, "
    "--read-bps, --write-bps, --bps) or --no-limits";

// update-volume's flags: each set one names a tunable to change.
struct UpdateVolumeFlags {
  std::string id;
  std::optional<uint32_t> rq_affinity;
  LimitFlags limits;       // replace these limits, keep the others
  bool no_limits = false;  // lift every limit (then apply those in `limits`)
  // Whether the request needs the volume's current limits to merge `limits` into.
  bool needs_current_limits() const { return limits.any() && !no_limits; }
};

absl::StatusOr<blk::v1::CreateVolumeRequest> BuildCreateVolumeRequest(
    const CreateVolumeFlags& flags);

// Each command performs its RPC and returns what to print on stdout.
absl::StatusOr<std::string> RunCreateVolume(client::VolumeClient& client,
                                            const CreateVolumeFlags& flags, OutputFormat format);
// The request changes exactly the tunables given; none given is InvalidArgument. Limits are one
// tunable (the agent replaces them as a whole): those given merged into `current_limits`, the
// volume's now (see UpdateVolumeFlags::needs_current_limits).
absl::StatusOr<blk::v1::UpdateVolumeRequest> BuildUpdateVolumeRequest(
    const UpdateVolumeFlags& flags, const blk::v1::VolumeLimits& current_limits = {});
absl::StatusOr<std::string> RunUpdateVolume(client::VolumeClient& client,
                                            const UpdateVolumeFlags& flags, OutputFormat format);
// Grows the volume to `size_bytes` (the agent refuses shrinking).
absl::StatusOr<std::string> RunResizeVolume(client::VolumeClient& client, absl::string_view id,
                                            uint64_t size_bytes, OutputFormat format);
// An unknown volume is NOT_FOUND, unless `if_exists`: then it says there was nothing to delete.
absl::StatusOr<std::string> RunDeleteVolume(client::VolumeClient& client, absl::string_view id,
                                            bool force, bool if_exists, OutputFormat format);
absl::StatusOr<std::string> RunGetVolume(client::VolumeClient& client, absl::string_view id,
                                         OutputFormat format);
absl::StatusOr<std::string> RunListVolumes(client::VolumeClient& client, OutputFormat format);
absl::StatusOr<std::string> RunNodeInfo(client::VolumeClient& client, OutputFormat format);

struct StatsFlags {
  std::string id;
  absl::Duration interval = absl::Seconds(1);
  uint32_t count = 0;  // intervals to report; 0: until interrupted
};
// Writes one line per interval to `out` as it ends (after a header, in table format); `wait`
// passes the time between two snapshots.
absl::Status RunStats(client::VolumeClient& client, const StatsFlags& flags, OutputFormat format,
                      std::ostream& out,
                      const std::function<void(absl::Duration)>& wait = absl::SleepFor);

}  // namespace blk::cli
