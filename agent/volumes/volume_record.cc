#include "agent/volumes/volume_record.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/fnv1a.h"
#include "google/protobuf/util/json_util.h"

namespace blk::agent {
namespace {

constexpr char kMagic[] = "blkagent-volume";
constexpr int kFormat = 3;

std::string Hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016" PRIx64, value);
  return text;
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

std::string EncodeVolumeRecord(const VolumeRecord& record) {
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

absl::StatusOr<VolumeRecord> DecodeVolumeRecord(const std::string& text,
                                                const std::string& expected_id) {
  VolumeRecord record;
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

}  // namespace blk::agent
