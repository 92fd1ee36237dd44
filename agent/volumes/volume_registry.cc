#include "agent/volumes/volume_registry.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "agent/volumes/volume_validation.h"
#include "common/atomic_file.h"
#include "common/read_file.h"

namespace blk::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kRecordSuffix[] = ".json";

}  // namespace

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
  return absl::StrCat(directory_, "/", id, kRecordSuffix);
}

absl::Status VolumeRegistry::Save(const v1::Volume& spec, int device_id) const {
  const std::string path = PathOf(spec.id());
  const auto failed = [&](const absl::Status& error) {
    return absl::InternalError(absl::StrCat("cannot save the record of volume '", spec.id(), "' (",
                                            path, "): ", error.message()));
  };
  // Keep the current record as the fallback, but only when it is good: a corrupt one must not
  // replace a good previous version.
  absl::StatusOr<std::string> current = ReadFileToString(path);
  if (current.ok() && DecodeVolumeRecord(*current, spec.id()).ok()) {
    if (absl::Status kept = WriteFileAtomically(path + ".prev", *current); !kept.ok()) {
      return failed(kept);
    }
  }
  absl::Status saved = WriteFileAtomically(path, EncodeVolumeRecord(Record{spec, device_id}));
  return saved.ok() ? saved : failed(saved);
}

absl::Status VolumeRegistry::Remove(const std::string& id) const {
  const std::string path = PathOf(id);
  // The fallback first: a crash in between must not bring a deleted volume back from it.
  absl::Status removed = RemoveFileDurably(path + ".prev");
  if (removed.ok()) removed = RemoveFileDurably(path);
  if (removed.ok()) return removed;
  return absl::InternalError(absl::StrCat("cannot remove the record of volume '", id, "' (", path,
                                          "): ", removed.message()));
}

VolumeRegistry::Loaded VolumeRegistry::LoadAll() const {
  Loaded loaded;
  std::set<std::string> ids;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory_, error)) {
    const std::string name = entry.path().filename().string();
    // Skips *.json.tmp left by a crash and *.json.prev (read only as a fallback).
    if (name.size() > 5 && name.ends_with(kRecordSuffix)) {
      ids.insert(name.substr(0, name.size() - 5));
    }
  }
  if (error) loaded.problems.push_back(absl::StrCat(directory_, ": ", error.message()));

  for (const std::string& id : ids) {
    const std::string path = PathOf(id);
    absl::StatusOr<Record> record = absl::NotFoundError("");
    absl::StatusOr<std::string> text = ReadFileToString(path);
    record = text.ok() ? DecodeVolumeRecord(*text, id) : text.status();
    if (!record.ok()) {
      const std::string previous_path = path + ".prev";
      absl::StatusOr<std::string> previous_text = ReadFileToString(previous_path);
      absl::StatusOr<Record> previous =
          previous_text.ok() ? DecodeVolumeRecord(*previous_text, id) : previous_text.status();
      if (previous.ok()) {
        loaded.problems.push_back(absl::StrCat(path, ": ", record.status().message(),
                                               "; using the previous version ", previous_path));
        record = std::move(previous);
      } else {
        loaded.problems.push_back(
            absl::StrCat(path, ": ", record.status().message(), " (no good previous version)"));
        continue;
      }
    }
    if (absl::Status valid = ValidateVolumeSpec(NormalizeVolumeSpec(record->spec)); !valid.ok()) {
      // Keep it anyway: the owner must still be able to see and delete it.
      loaded.problems.push_back(absl::StrCat(path, ": ", valid.message()));
    }
    loaded.records.push_back(std::move(*record));
  }
  return loaded;
}

}  // namespace blk::agent
