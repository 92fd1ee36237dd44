// Admin commands on an NVMe generic char device (/dev/ngXnY) through the synchronous passthrough
// ioctl: just enough to learn the namespace's profile when a volume is created. Needs a real (or
// QEMU-emulated) controller, so it is exercised in the VM, not by host unit tests.
#pragma once

#include "absl/status/statusor.h"
#include "server/nvme/identify.h"

namespace blk::server::nvme {

// Identify Controller and Identify Namespace for the namespace `fd` is open on.
absl::StatusOr<NamespaceProfile> IdentifyNamespace(int fd);

}  // namespace blk::server::nvme
