#include "cli/output.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "blk/v1/volume_state_name.h"
#include "client/backend_uri.h"
#include "client/size_parse.h"
#include "google/protobuf/util/json_util.h"

namespace blk::cli {
namespace {

// The defaults volume.proto documents for a zero value.
constexpr uint32_t kDefaultLogicalBlockSize = 512;
constexpr uint32_t kDefaultQueues = 1;
constexpr uint32_t kDefaultQueueDepth = 128;

uint32_t OrDefault(uint32_t value, uint32_t fallback) { return value == 0 ? fallback : value; }

std::string OrDash(absl::string_view value) { return value.empty() ? "-" : std::string(value); }

using Row = std::vector<std::string>;

// Left-aligned columns two spaces apart, without trailing blanks.
std::string RenderColumns(const std::vector<Row>& rows) {
  std::vector<size_t> widths;
  for (const Row& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const Row& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out += row[i];
      if (i + 1 < row.size()) out.append(widths[i] - row[i].size() + 2, ' ');
    }
    out += '\n';
  }
  return out;
}

std::string RenderKeyValues(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::vector<Row> rows;
  rows.reserve(fields.size());
  for (const auto& [key, value] : fields) rows.push_back({absl::StrCat(key, ":"), value});
  return RenderColumns(rows);
}

// What the device has (read back), and what was asked when it differs.
std::string RenderRqAffinity(const blk::v1::Volume& volume) {
  const blk::v1::VolumeStatus& status = volume.status();
  std::string text = status.has_rq_affinity() ? absl::StrCat(status.rq_affinity()) : "-";
  if (!volume.has_rq_affinity()) {
    absl::StrAppend(&text, " (kernel default)");
  } else if (!status.has_rq_affinity() || status.rq_affinity() != volume.rq_affinity()) {
    absl::StrAppend(&text, " (requested ", volume.rq_affinity(), ")");
  }
  return text;
}

// The limits that are set, e.g. "read 1000 iops (burst 100), total 50MiB/s"; "none".
std::string RenderLimits(const blk::v1::VolumeLimits& limits) {
  const struct {
    const char* ops;
    const blk::v1::RateLimit& limit;
    bool bytes;
  } shown[] = {
      {"read", limits.read_iops(), false},
      {"write", limits.write_iops(), false},
      {"total", limits.total_iops(), false},
      {"read", limits.read_bytes_per_second(), true},
      {"write", limits.write_bytes_per_second(), true},
      {"total", limits.total_bytes_per_second(), true},
  };
  std::vector<std::string> parts;
  for (const auto& [ops, limit, bytes] : shown) {
    if (limit.rate() == 0) continue;
    std::string part = bytes ? absl::StrCat(ops, " ", client::FormatSize(limit.rate()), "/s")
                             : absl::StrCat(ops, " ", limit.rate(), " iops");
    if (limit.burst() != 0) {
      absl::StrAppend(&part, " (burst ",
                      bytes ? client::FormatSize(limit.burst()) : absl::StrCat(limit.burst()), ")");
    }
    parts.push_back(std::move(part));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

std::string RenderThrottled(const blk::v1::VolumeStatus& status) {
  return absl::StrFormat("%d %s, %.3f s", status.throttled_requests(),
                         status.throttled_requests() == 1 ? "request" : "requests",
                         static_cast<double>(status.throttled_nanoseconds()) / 1e9);
}

}  // namespace

std::string StateName(blk::v1::VolumeState state) { return blk::v1::VolumeStateName(state); }

std::string RenderVolumeTable(const google::protobuf::RepeatedPtrField<blk::v1::Volume>& volumes) {
  std::vector<Row> rows;
  rows.push_back({"ID", "SIZE", "BACKEND", "DEVICE", "STATE", "QUEUES", "DEPTH"});
  for (const blk::v1::Volume& volume : volumes) {
    rows.push_back({
        volume.id(),
        client::FormatSize(volume.size_bytes()),
        OrDash(client::FormatBackendUri(volume)),
        OrDash(volume.status().device_path()),
        StateName(volume.status().state()),
        absl::StrCat(OrDefault(volume.queues(), kDefaultQueues)),
        absl::StrCat(OrDefault(volume.queue_depth(), kDefaultQueueDepth)),
    });
  }
  return RenderColumns(rows);
}

std::string RenderVolume(const blk::v1::Volume& volume) {
  const blk::v1::VolumeStatus& status = volume.status();
  std::vector<std::pair<std::string, std::string>> fields = {
      {"id", volume.id()},
      {"size",
       absl::StrCat(client::FormatSize(volume.size_bytes()), " (", volume.size_bytes(), " bytes)")},
      {"backend", OrDash(client::FormatBackendUri(volume))},
      {"block size",
       absl::StrCat(OrDefault(volume.logical_block_size(), kDefaultLogicalBlockSize))},
      {"queues", absl::StrCat(OrDefault(volume.queues(), kDefaultQueues))},
      {"queue depth", absl::StrCat(OrDefault(volume.queue_depth(), kDefaultQueueDepth))},
      {"read only", volume.read_only() ? "yes" : "no"},
      {"fail fast", volume.fail_fast() ? "yes" : "no"},
      {"placement", volume.placement().empty() ? "node" : volume.placement()},
      {"rq affinity", RenderRqAffinity(volume)},
      {"limits", RenderLimits(volume.limits())},
      {"state", StateName(status.state())},
      {"device", OrDash(status.device_path())},
  };
  if (!status.device_path().empty()) {
    fields.push_back({"device id", absl::StrCat(status.device_id())});
    fields.push_back({"rq redirect", status.rq_affinity_redirected() ? "yes" : "no"});
    fields.push_back({"throttled", RenderThrottled(status)});
  }
  if (volume.has_nbd()) {
    fields.push_back({"reconnects", absl::StrCat(status.reconnects())});
    fields.push_back({"server errors", absl::StrCat(status.server_errors())});
    fields.push_back({"protocol errors", absl::StrCat(status.protocol_errors())});
    fields.push_back({"io timeouts", absl::StrCat(status.io_timeouts())});
    fields.push_back({"flush losses", absl::StrCat(status.unflushed_losses())});
  }
  if (volume.nvme().has_fabric()) {
    fields.push_back(
        {"paths", absl::StrCat(status.nvme_paths_live(), "/", status.nvme_paths_total(), " live")});
    fields.push_back({"failovers", absl::StrCat(status.nvme_failovers())});
  }
  if (volume.poll()) fields.push_back({"poll", "yes"});
  if (!status.copy_mode().empty()) fields.push_back({"copy mode", status.copy_mode()});
  if (!status.io_mode().empty()) fields.push_back({"io mode", status.io_mode()});
  if (!status.message().empty()) fields.push_back({"message", status.message()});
  return RenderKeyValues(fields);
}

std::string RenderNodeInfo(const blk::v1::GetNodeInfoResponse& info) {
  std::string features = absl::StrFormat("0x%x", info.ublk_features());
  if (info.ublk_feature_names_size() > 0) {
    absl::StrAppend(&features, " (", absl::StrJoin(info.ublk_feature_names(), ", "), ")");
  }
  return RenderKeyValues({
      {"kernel", OrDash(info.kernel_release())},
      {"ublk", info.ublk_available() ? "available" : "not available"},
      {"ublk features", features},
      {"cpus", absl::StrCat(info.cpu_count())},
      {"agent version", OrDash(info.agent_version())},
      {"bpf locality", info.bpf_locality_available()
                           ? absl::StrCat("available (", info.bpf_locality_message(), ")")
                           : absl::StrCat("not available: ", OrDash(info.bpf_locality_message()))},
  });
}

absl::StatusOr<std::string> RenderJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = false;
  options.preserve_proto_field_names = false;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot render ", message.GetTypeName(), " as JSON: ", status.ToString()));
  }
  // add_whitespace already ends the document with a newline; compact output would not.
  if (json.empty() || json.back() != '\n') json += '\n';
  return json;
}

}  // namespace blk::cli
