#include "agent/volume_registry.h"

#include <algorithm>
#include <cinttypes>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/atomic_file.h"
#include "agent/volume_validation.h"
#include "google/protobuf/util/json_util.h"

namespace blk::agent {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "blkagent-volume";
constexpr int kFormat = 3;
constexpr char kRecordSuffix[] = ".json";

// Detects corruption, not tampering: FNV-1a is enough and needs no library.
uint64_t Fnv1a64(std::string_view data) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string Hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, value);
  return text;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot open");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError("read error");
  return text.str();
}

absl::StatusOr<v1::Volume> ParseSpec(std::string_view json, const std::string& expected_id) {
  v1::Volume spec;
  const auto parsed = google::protobuf::util::JsonStringToMessage(std::string(json), &spec);
  if (!parsed.ok()) {
    return absl::DataLossError(absl::StrCat("unreadable record: ", parsed.ToString()));
  }
  if (spec.id() != expected_id) {
    return absl::DataLossError(
        absl::StrCat("record names volume '", spec.id(), "', not its file name"));
  }
  return spec;
}

}  // namespace

std::string EncodeVolumeRecord(const VolumeRegistry::Record& record) {
  v1::Volume spec = record.spec;
  spec.clear_status();
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  // Cannot fail for a message without Any fields.
  (void)google::protobuf::util::MessageToJsonString(spec, &json, options);
  return absl::StrCat(kMagic, " ", kFormat, " device=", record.device_id,
                      " fnv1a64=", Hex(Fnv1a64(json)), "\n", json);
}

absl::StatusOr<VolumeRegistry::Record> DecodeVolumeRecord(const std::string& text,
                                                          const std::string& expected_id) {
  VolumeRegistry::Record record;
  if (!text.empty() && text.front() == '{') {  // format 1
    absl::StatusOr<v1::Volume> spec = ParseSpec(text, expected_id);
    if (!spec.ok()) return spec.status();
    record.spec = std::move(*spec);
    return record;
  }
  const size_t newline = text.find('\n');
  if (newline == std::string::npos) return absl::DataLossError("truncated record (no header)");
  std::vector<absl::string_view> header =
      absl::StrSplit(absl::string_view(text).substr(0, newline), ' ');
  int format = 0;
  if (header.size() < 2 || header[0] != kMagic || !absl::SimpleAtoi(header[1], &format)) {
    return absl::DataLossError("not a volume record (bad header)");
  }
  if (format > kFormat) {
    return absl::FailedPreconditionError(
        absl::StrCat("record format ", format, " is newer than this agent's (", kFormat, ")"));
  }
  std::string checksum;
  for (size_t i = 2; i < header.size(); ++i) {
    if (absl::ConsumePrefix(&header[i], "device=")) {
      if (!absl::SimpleAtoi(header[i], &record.device_id) || record.device_id < -1) {
        return absl::DataLossError("bad device id in the header");
      }
    } else if (absl::ConsumePrefix(&header[i], "fnv1a64=")) {
      checksum = std::string(header[i]);
    }
  }
  const std::string_view body = std::string_view(text).substr(newline + 1);
  if (checksum != Hex(Fnv1a64(body))) {
    return absl::DataLossError("checksum mismatch (torn or corrupted record)");
  }
  absl::StatusOr<v1::Volume> spec = ParseSpec(body, expected_id);
  if (!spec.ok()) return spec.status();
  record.spec = std::move(*spec);
  return record;
}

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
  // Keep the current record as the fallback, but only when it is good: a corrupt one must not
  // replace a good previous version.
  absl::StatusOr<std::string> current = ReadFile(path);
  if (current.ok() && DecodeVolumeRecord(*current, spec.id()).ok()) {
    if (absl::Status kept = WriteFileAtomically(path + ".prev", *current); !kept.ok()) return kept;
  }
  return WriteFileAtomically(path, EncodeVolumeRecord(Record{spec, device_id}));
}

absl::Status VolumeRegistry::Remove(const std::string& id) const {
  // The fallback first: a crash in between must not bring a deleted volume back from it.
  if (absl::Status removed = RemoveFileDurably(PathOf(id) + ".prev"); !removed.ok()) {
    return removed;
  }
  return RemoveFileDurably(PathOf(id));
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
    absl::StatusOr<std::string> text = ReadFile(path);
    record = text.ok() ? DecodeVolumeRecord(*text, id) : text.status();
    if (!record.ok()) {
      const std::string previous_path = path + ".prev";
      absl::StatusOr<std::string> previous_text = ReadFile(previous_path);
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
