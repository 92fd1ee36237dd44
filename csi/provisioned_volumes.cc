#include "csi/provisioned_volumes.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/dns_label.h"
#include "common/read_file.h"
#include "google/protobuf/util/json_util.h"

namespace blk::csi {

absl::Status ProvisionedVolumes::Open() const {
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("create the controller's state directory ", dir_));
  }
  return absl::OkStatus();
}

std::string ProvisionedVolumes::PathOf(absl::string_view volume_id) const {
  return absl::StrCat(dir_, "/", volume_id, ".json");
}

absl::StatusOr<std::optional<ProvisionedVolume>> ProvisionedVolumes::Find(
    absl::string_view volume_id) const {
  // Not a path: "../x" names no record.
  if (!IsDnsLabel(std::string_view(volume_id.data(), volume_id.size()))) return std::nullopt;
  const std::string path = PathOf(volume_id);
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (absl::IsNotFound(text.status())) return std::nullopt;
  if (!text.ok()) return text.status();
  ProvisionedVolume volume;
  const auto parsed = google::protobuf::util::JsonStringToMessage(*text, &volume);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat("the controller's record ", path,
                                            " is not a ProvisionedVolume: ", parsed.ToString()));
  }
  return volume;
}

absl::Status ProvisionedVolumes::Save(const ProvisionedVolume& volume) const {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  const auto printed = google::protobuf::util::MessageToJsonString(volume, &json, options);
  if (!printed.ok()) {
    return absl::InternalError(
        absl::StrCat("record of volume ", volume.volume_id(), ": ", printed.ToString()));
  }
  return WriteFileAtomically(PathOf(volume.volume_id()), json);
}

std::map<std::string, std::string> StagingContext(const ProvisionedVolume& volume) {
  std::map<std::string, std::string> context(volume.volume_context().begin(),
                                             volume.volume_context().end());
  for (const auto& [key, value] : volume.modified_limits()) context[key] = value;
  return context;
}

absl::Status ProvisionedVolumes::Remove(absl::string_view volume_id) const {
  return RemoveFileDurably(PathOf(volume_id));
}

}  // namespace blk::csi
