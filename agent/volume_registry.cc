#include "agent/volume_registry.h"

#include <absl/strings/str_cat.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/atomic_file.h"
#include "agent/volume_validation.h"

namespace blk::agent {

namespace fs = std::filesystem;

absl::StatusOr<VolumeRegistry> VolumeRegistry::Open(const std::string& state_dir) {
  const fs::path directory = fs::path(state_dir) / "volumes";
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create state directory ", directory.string(), ": ", error.message()));
  }
  return VolumeRegistry(directory.string());
}

std::string VolumeRegistry::PathOf(const std::string& id) const {
  return absl::StrCat(directory_, "/", id, ".json");
}

absl::Status VolumeRegistry::Save(const v1::Volume& spec) const {
  v1::Volume record = spec;
  record.clear_status();
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  const auto printed = google::protobuf::util::MessageToJsonString(record, &json, options);
  if (!printed.ok()) {
    return absl::InternalError(absl::StrCat("encode volume ", spec.id(), ": ", printed.ToString()));
  }
  return WriteFileAtomically(PathOf(spec.id()), json);
}

absl::Status VolumeRegistry::Remove(const std::string& id) const {
  return RemoveFileDurably(PathOf(id));
}

VolumeRegistry::Loaded VolumeRegistry::LoadAll() const {
  Loaded loaded;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory_, error)) {
    const fs::path& path = entry.path();
    if (path.extension() != ".json") continue;  // e.g. a *.json.tmp left by a crash
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    v1::Volume spec;
    const auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), &spec);
    if (!in || !parsed.ok()) {
      loaded.problems.push_back(
          absl::StrCat(path.string(), ": unreadable record: ", parsed.ToString()));
      continue;
    }
    if (spec.id() != path.stem().string()) {
      loaded.problems.push_back(absl::StrCat(path.string(), ": record names volume '", spec.id(),
                                             "', not its file name"));
      continue;
    }
    if (absl::Status valid = ValidateVolumeSpec(NormalizeVolumeSpec(spec)); !valid.ok()) {
      // Keep it anyway: the owner must still be able to see and delete it.
      loaded.problems.push_back(absl::StrCat(path.string(), ": ", valid.message()));
    }
    loaded.volumes.push_back(std::move(spec));
  }
  if (error) {
    loaded.problems.push_back(absl::StrCat(directory_, ": ", error.message()));
  }
  std::sort(loaded.volumes.begin(), loaded.volumes.end(),
            [](const v1::Volume& a, const v1::Volume& b) { return a.id() < b.id(); });
  return loaded;
}

}  // namespace blk::agent
