#include "server/nvme/admin.h"

#include <sys/ioctl.h>

#include <array>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "server/nvme/abi.h"

namespace blk::server::nvme {
namespace {

absl::Status Identify(int fd, uint32_t nsid, uint32_t cns,
                      std::array<uint8_t, kIdentifyBytes>& page) {
  PassthruCmd cmd{};
  cmd.opcode = kAdminIdentify;
  cmd.nsid = nsid;
  cmd.addr = reinterpret_cast<uintptr_t>(page.data());
  cmd.data_len = page.size();
  cmd.cdw10 = cns;
  const int rc = ::ioctl(fd, kIoctlAdminCmd, &cmd);
  if (rc < 0) {
    // The controller did not answer: worth another try later, whatever errno says.
    return absl::UnavailableError(
        absl::ErrnoToStatus(errno, absl::StrCat("Identify (CNS ", cns, ") ioctl failed"))
            .message());
  }
  // A positive return is the NVMe status of a command the controller refused.
  if (rc > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("Identify (CNS ", cns, ") failed with NVMe status 0x", absl::Hex(rc)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NamespaceProfile> IdentifyNamespace(int fd) {
  const int nsid = ::ioctl(fd, kIoctlId);
  if (nsid < 0) {
    return absl::FailedPreconditionError(
        absl::ErrnoToStatus(errno, "not an NVMe namespace device: NVME_IOCTL_ID failed").message());
  }
  std::array<uint8_t, kIdentifyBytes> page{};
  if (absl::Status s = Identify(fd, 0, kCnsController, page); !s.ok()) return s;
  absl::StatusOr<ControllerLimits> controller = ParseIdentifyController(page);
  if (!controller.ok()) return controller.status();

  page.fill(0);
  if (absl::Status s = Identify(fd, static_cast<uint32_t>(nsid), kCnsNamespace, page); !s.ok()) {
    return s;
  }
  absl::StatusOr<NamespaceFormat> format = ParseIdentifyNamespace(page);
  if (!format.ok()) return format.status();
  return NamespaceProfile{static_cast<uint32_t>(nsid), *format, *controller};
}

}  // namespace blk::server::nvme
