#include "csi/backing_template.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/backend_uri.h"

namespace blk::csi {

absl::StatusOr<std::string> BackendForVolume(absl::string_view class_backend,
                                             absl::string_view volume_id) {
  const std::string backend = absl::StrReplaceAll(class_backend, {{kVolumePlaceholder, volume_id}});
  absl::StatusOr<blk::v1::Volume> parsed = blk::client::ParseBackendUri(backend);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend '", class_backend, "': ", parsed.status().message()));
  }
  if (parsed->has_null()) return backend;
  if (parsed->has_nvme()) {
    const bool remote = parsed->nvme().has_fabric();
    return absl::InvalidArgumentError(absl::StrCat(
        "backend '", class_backend, "': an ", remote ? "nvme-tcp://" : "nvme://",
        " class cannot be provisioned dynamically (its ",
        remote ? "subsystem NQN and nsid name" : "path names",
        " one namespace, which every claim would share); make one PersistentVolume per "
        "namespace range"));
  }
  if (!absl::StrContains(class_backend, kVolumePlaceholder)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend '", class_backend,
                     "' names one backing for every claim of the class, so two "
                     "claims would share it; put ",
                     kVolumePlaceholder,
                     " where each volume's own file or export goes (file:///var/lib/blk/pool/",
                     kVolumePlaceholder, ".img, nbd://server/", kVolumePlaceholder, ")"));
  }
  return backend;
}

}  // namespace blk::csi
