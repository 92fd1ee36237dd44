#include "cli/commands.h"

#include "absl/strings/str_cat.h"
#include "cli/stats_report.h"
#include "client/backend_uri.h"
#include "client/rate_limit_parse.h"
#include "google/protobuf/descriptor.h"

namespace blk::cli {

bool LimitFlags::any() const {
  return !read_iops.empty() || !write_iops.empty() || !total_iops.empty() || !read_bytes.empty() ||
         !write_bytes.empty() || !total_bytes.empty();
}

absl::StatusOr<blk::v1::VolumeLimits> MergeLimits(blk::v1::VolumeLimits current,
                                                  const LimitFlags& flags) {
  using Parser = absl::StatusOr<blk::v1::RateLimit> (*)(absl::string_view);
  const struct {
    const char* flag;
    const std::string& text;
    Parser parse;
    const char* field;  // in VolumeLimits
  } limits[] = {
      {"--read-iops", flags.read_iops, client::ParseIopsLimit, "read_iops"},
      {"--write-iops", flags.write_iops, client::ParseIopsLimit, "write_iops"},
      {"--iops", flags.total_iops, client::ParseIopsLimit, "total_iops"},
      {"--read-bps", flags.read_bytes, client::ParseBytesLimit, "read_bytes_per_second"},
      {"--write-bps", flags.write_bytes, client::ParseBytesLimit, "write_bytes_per_second"},
      {"--bps", flags.total_bytes, client::ParseBytesLimit, "total_bytes_per_second"},
  };
  const google::protobuf::Reflection& reflection = *current.GetReflection();
  for (const auto& limit : limits) {
    if (limit.text.empty()) continue;
    absl::StatusOr<blk::v1::RateLimit> parsed = limit.parse(limit.text);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(limit.flag, ": ", parsed.status().message()));
    }
    const google::protobuf::FieldDescriptor* field =
        blk::v1::VolumeLimits::descriptor()->FindFieldByName(limit.field);
    // A rate of 0 is no limit: left unset, so that the request names only what is limited.
    if (parsed->rate() == 0 && parsed->burst() == 0) {
      reflection.ClearField(&current, field);
    } else {
      reflection.MutableMessage(&current, field)->CopyFrom(*parsed);
    }
  }
  return current;
}

absl::StatusOr<blk::v1::CreateVolumeRequest> BuildCreateVolumeRequest(
    const CreateVolumeFlags& flags) {
  absl::StatusOr<blk::v1::Volume> backend = client::ParseBackendUri(flags.backend_uri);
  if (!backend.ok()) return backend.status();
  blk::v1::CreateVolumeRequest request;
  blk::v1::Volume& volume = *request.mutable_volume();
  volume = *std::move(backend);
  volume.set_id(flags.id);
  volume.set_size_bytes(flags.size_bytes);
  volume.set_logical_block_size(flags.logical_block_size);
  volume.set_queues(flags.queues);
  volume.set_queue_depth(flags.queue_depth);
  volume.set_read_only(flags.read_only);
  volume.set_fail_fast(flags.fail_fast);
  if (flags.rq_affinity) volume.set_rq_affinity(*flags.rq_affinity);
  volume.set_placement(flags.placement);
  volume.set_poll(flags.poll);
  if (flags.limits.any()) {
    absl::StatusOr<blk::v1::VolumeLimits> limits = MergeLimits({}, flags.limits);
    if (!limits.ok()) return limits.status();
    if (limits->ByteSizeLong() != 0) *volume.mutable_limits() = *std::move(limits);
  }
  if (flags.io_timeout_seconds != 0) {
    if (!volume.has_nbd()) {
      return absl::InvalidArgumentError(
          "--io-timeout applies to nbd:// and nbd+unix:// backends (an nvme-tcp:// URI takes "
          "&io_timeout=SECONDS)");
    }
    volume.mutable_nbd()->set_io_timeout_seconds(flags.io_timeout_seconds);
  }
  return request;
}

absl::StatusOr<std::string> RunCreateVolume(client::VolumeClient& client,
                                            const CreateVolumeFlags& flags, OutputFormat format) {
  absl::StatusOr<blk::v1::CreateVolumeRequest> request = BuildCreateVolumeRequest(flags);
  if (!request.ok()) return request.status();
  absl::StatusOr<blk::v1::CreateVolumeResponse> response = client.CreateVolume(*request);
  if (!response.ok()) return response.status();
  if (format == OutputFormat::kJson) return RenderJson(*response);
  return RenderVolume(response->volume());
}

absl::StatusOr<blk::v1::UpdateVolumeRequest> BuildUpdateVolumeRequest(
    const UpdateVolumeFlags& flags, const blk::v1::VolumeLimits& current_limits) {
  blk::v1::UpdateVolumeRequest request;
  request.mutable_volume()->set_id(flags.id);
  if (flags.rq_affinity) {
    request.mutable_volume()->set_rq_affinity(*flags.rq_affinity);
    request.mutable_update_mask()->add_paths("rq_affinity");
  }
  if (flags.limits.any() || flags.no_limits) {
    absl::StatusOr<blk::v1::VolumeLimits> limits =
        MergeLimits(flags.no_limits ? blk::v1::VolumeLimits() : current_limits, flags.limits);
    if (!limits.ok()) return limits.status();
    if (limits->ByteSizeLong() != 0) *request.mutable_volume()->mutable_limits() = *limits;
    request.mutable_update_mask()->add_paths("limits");
  }
  if (request.update_mask().paths_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("update-volume ", kUpdateTunables));
  }
  return request;
}

absl::StatusOr<std::string> RunUpdateVolume(client::VolumeClient& client,
                                            const UpdateVolumeFlags& flags, OutputFormat format) {
  // The agent replaces the limits as a whole: the ones not given stay as the volume has them.
  blk::v1::VolumeLimits current_limits;
  if (flags.needs_current_limits()) {
    blk::v1::GetVolumeRequest get;
    get.set_id(flags.id);
    absl::StatusOr<blk::v1::GetVolumeResponse> volume = client.GetVolume(get);
    if (!volume.ok()) return volume.status();
    current_limits = volume->volume().limits();
  }
  absl::StatusOr<blk::v1::UpdateVolumeRequest> request =
      BuildUpdateVolumeRequest(flags, current_limits);
  if (!request.ok()) return request.status();
  absl::StatusOr<blk::v1::UpdateVolumeResponse> response = client.UpdateVolume(*request);
  if (!response.ok()) return response.status();
  if (format == OutputFormat::kJson) return RenderJson(*response);
  return RenderVolume(response->volume());
}

absl::StatusOr<std::string> RunResizeVolume(client::VolumeClient& client, absl::string_view id,
                                            uint64_t size_bytes, OutputFormat format) {
  blk::v1::ResizeVolumeRequest request;
  request.set_id(std::string(id));
  request.set_size_bytes(size_bytes);
  absl::StatusOr<blk::v1::ResizeVolumeResponse> response = client.ResizeVolume(request);
  if (!response.ok()) return response.status();
  if (format == OutputFormat::kJson) return RenderJson(*response);
  return RenderVolume(response->volume());
}

absl::StatusOr<std::string> RunDeleteVolume(client::VolumeClient& client, absl::string_view id,
                                            bool force, bool if_exists, OutputFormat format) {
  blk::v1::DeleteVolumeRequest request;
  request.set_id(std::string(id));
  request.set_force(force);
  absl::StatusOr<blk::v1::DeleteVolumeResponse> response = client.DeleteVolume(request);
  const bool missing = response.status().code() == absl::StatusCode::kNotFound;
  if (missing && !if_exists) {
    return absl::NotFoundError(absl::StrCat(
        response.status().message(), "; nothing deleted (with --if-exists that is not an error)"));
  }
  if (!response.ok() && !missing) return response.status();
  if (format == OutputFormat::kJson) return RenderJson(blk::v1::DeleteVolumeResponse());
  if (missing) return absl::StrCat("volume ", id, " does not exist; nothing to delete\n");
  return absl::StrCat("volume ", id, " deleted\n");
}

absl::StatusOr<std::string> RunGetVolume(client::VolumeClient& client, absl::string_view id,
                                         OutputFormat format) {
  blk::v1::GetVolumeRequest request;
  request.set_id(std::string(id));
  absl::StatusOr<blk::v1::GetVolumeResponse> response = client.GetVolume(request);
  if (!response.ok()) return response.status();
  if (format == OutputFormat::kJson) return RenderJson(*response);
  return RenderVolume(response->volume());
}

absl::StatusOr<std::string> RunListVolumes(client::VolumeClient& client, OutputFormat format) {
  absl::StatusOr<blk::v1::ListVolumesResponse> response =
      client.ListVolumes(blk::v1::ListVolumesRequest());
  if (!response.ok()) return response.status();
  if (format == OutputFormat::kJson) return RenderJson(*response);
  return RenderVolumeTable(response->volumes());
}

absl::StatusOr<std::string> RunNodeInfo(client::VolumeClient& client, OutputFormat format) {
  absl::StatusOr<blk::v1::GetNodeInfoResponse> response =
      client.GetNodeInfo(blk::v1::GetNodeInfoRequest());
  if (!response.ok()) return response.status();
  if (format == OutputFormat::kJson) return RenderJson(*response);
  return RenderNodeInfo(*response);
}

absl::Status RunStats(client::VolumeClient& client, const StatsFlags& flags, OutputFormat format,
                      std::ostream& out, const std::function<void(absl::Duration)>& wait) {
  blk::v1::GetVolumeStatsRequest request;
  request.set_id(flags.id);
  absl::StatusOr<blk::v1::GetVolumeStatsResponse> before = client.GetVolumeStats(request);
  if (!before.ok()) return before.status();
  absl::Time before_time = absl::Now();
  if (format == OutputFormat::kTable) out << RenderStatsHeader() << std::flush;
  for (uint32_t reported = 0; flags.count == 0 || reported < flags.count; ++reported) {
    wait(flags.interval);
    absl::StatusOr<blk::v1::GetVolumeStatsResponse> after = client.GetVolumeStats(request);
    if (!after.ok()) return after.status();
    const absl::Time now = absl::Now();
    const StatsInterval interval =
        ComputeInterval(before->stats(), after->stats(), now - before_time);
    out << (format == OutputFormat::kJson ? RenderStatsJsonLine(flags.id, interval, now)
                                          : RenderStatsLine(interval, now))
        << std::flush;
    before = std::move(after);
    before_time = now;
  }
  return absl::OkStatus();
}

}  // namespace blk::cli
