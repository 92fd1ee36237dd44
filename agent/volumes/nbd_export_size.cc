#include "agent/volumes/nbd_export_size.h"

#include "absl/strings/str_cat.h"
#include "server/nbd/storage.h"
#include "spdlog/spdlog.h"

namespace blk::agent {

NbdSizeProbe RealNbdSizeProbe(std::chrono::milliseconds timeout) {
  return [timeout](const std::string& uri) -> absl::StatusOr<uint64_t> {
    absl::StatusOr<server::nbd::ExportInfo> info = server::nbd::ProbeExport(uri, timeout);
    if (!info.ok()) return info.status();
    return info->size;
  };
}

absl::StatusOr<uint64_t> ResolveNbdVolumeSize(const std::string& volume_id, const std::string& uri,
                                              uint32_t logical_block_size,
                                              const NbdSizeProbe& probe) {
  absl::StatusOr<uint64_t> export_size = probe(uri);
  if (!export_size.ok()) {
    // A refusal the server made on purpose keeps its code; anything else (no route, refused
    // connection, timeout, broken handshake) is worth retrying later.
    absl::StatusCode code = export_size.status().code();
    if (code == absl::StatusCode::kNotFound) code = absl::StatusCode::kFailedPrecondition;
    if (code != absl::StatusCode::kInvalidArgument &&
        code != absl::StatusCode::kFailedPrecondition) {
      code = absl::StatusCode::kUnavailable;
    }
    return absl::Status(code, absl::StrCat("volume.nbd.uri: cannot learn the size of NBD export ",
                                           uri, ": ", export_size.status().message()));
  }
  const uint64_t size = *export_size - *export_size % logical_block_size;
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume.size_bytes: NBD export ", uri, " has ", *export_size,
                     " bytes, less than one logical block of ", logical_block_size));
  }
  if (size != *export_size) {
    spdlog::warn(
        "volume {}: NBD export {} has {} bytes, not a multiple of the logical block size {}; "
        "the volume uses the first {} bytes",
        volume_id, uri, *export_size, logical_block_size, size);
  } else {
    spdlog::info("volume {}: size {} bytes taken from NBD export {}", volume_id, size, uri);
  }
  return size;
}

}  // namespace blk::agent
