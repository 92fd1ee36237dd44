// Placing an NVMe volume on its namespace: the size and block size a request left out, and the
// checks that need the namespace (capacity, LBA alignment) or the other volumes (overlap).
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "blk/v1/volume.pb.h"
#include "server/nvme/storage.h"

namespace blk::agent {

// Opens an NVMe generic char device and identifies its namespace. Blocking.
using NvmeNamespaceProbe =
    std::function<absl::StatusOr<server::NvmeNamespaceInfo>(const std::string& path)>;

// The probe the agent uses: Identify through the admin passthrough (server::ProbeNvmeNamespace).
NvmeNamespaceProbe RealNvmeNamespaceProbe();

// Fills in a normalized nvme spec's logical_block_size (0: the namespace's LBA size) and
// size_bytes (0: the namespace's bytes after offset_bytes), and refuses with INVALID_ARGUMENT
// naming the field: a block size smaller than the LBA size, an offset that is not a multiple of
// it, a volume that does not fit in the namespace. A path the probe cannot use keeps the probe's
// code (a metadata format is FAILED_PRECONDITION), prefixed with the field.
absl::Status ResolveNvmeVolume(v1::Volume& spec, const NvmeNamespaceProbe& probe);

}  // namespace blk::agent
