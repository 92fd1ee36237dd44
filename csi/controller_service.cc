#include "csi/controller_service.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "csi/backing_file.h"
#include "csi/backing_template.h"
#include "csi/grpc_status.h"
#include "csi/node_service.h"
#include "csi/volume_capability.h"
#include "csi/volume_context.h"
#include "csi/volume_id.h"

namespace blk::csi {
namespace {

using ::csi::v1::CapacityRange;

// Sizes are rounded to this: a multiple of both logical block sizes (512, 4096).
constexpr int64_t kSizeUnit = 4096;
// The agent's largest volume (agent/volumes/volume_validation.h).
constexpr int64_t kMaxCapacityBytes = int64_t{1} << 50;

grpc::Status OutOfRange(const std::string& message) {
  return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, message);
}

std::string RangeText(const CapacityRange& range) {
  return absl::StrCat(
      "capacity_range [required_bytes ", range.required_bytes(), ", limit_bytes ",
      range.limit_bytes() == 0 ? std::string("none") : absl::StrCat(range.limit_bytes()), "]");
}

// The volume's size in bytes, 0 for "the backend's own" (a whole NBD export or
// NVMe namespace, unknown here). A size the StorageClass fixes must lie in the
// range; otherwise the range chooses: required_bytes rounded up, else
// limit_bytes rounded down; no range: the backend's own size, or
// kDefaultCapacityBytes for a backend without one.
grpc::Status ResolveSize(const ::csi::v1::CreateVolumeRequest& request,
                         const blk::v1::Volume& from_class, int64_t* size) {
  const CapacityRange& range = request.capacity_range();
  const int64_t required = range.required_bytes();
  const int64_t limit = range.limit_bytes();
  if (required < 0 || limit < 0) {
    return InvalidArgument(absl::StrCat(RangeText(range), ": a size cannot be negative"));
  }
  if (limit != 0 && required > limit) {
    return InvalidArgument(
        absl::StrCat(RangeText(range), ": required_bytes is larger than limit_bytes"));
  }
  if (required > kMaxCapacityBytes) {
    return OutOfRange(
        absl::StrCat(RangeText(range), ": a volume holds at most ", kMaxCapacityBytes, " bytes"));
  }
  if (from_class.size_bytes() != 0) {
    const int64_t fixed = static_cast<int64_t>(from_class.size_bytes());
    if (fixed < required || (limit != 0 && fixed > limit)) {
      return OutOfRange(absl::StrCat("the StorageClass's ", kSizeKey, " (", fixed,
                                     " bytes) is outside the ", RangeText(range)));
    }
    *size = fixed;
    return grpc::Status::OK;
  }
  if (required != 0) {
    *size = (required + kSizeUnit - 1) / kSizeUnit * kSizeUnit;
  } else if (limit != 0) {
    *size = std::min(limit, kMaxCapacityBytes) / kSizeUnit * kSizeUnit;
  } else {
    const bool sized_backend = from_class.has_nbd() || from_class.has_nvme();
    *size = sized_backend ? 0 : kDefaultCapacityBytes;
    return grpc::Status::OK;
  }
  if (*size == 0 || (limit != 0 && *size > limit)) {
    return OutOfRange(absl::StrCat(RangeText(range), " holds no multiple of ", kSizeUnit,
                                   " bytes, the volume's size unit"));
  }
  return grpc::Status::OK;
}

// The StorageClass parameters that are blk-csi's: the keys with a '/' are
// Kubernetes' own (csi.storage.k8s.io/...), not part of the volume.
std::map<std::string, std::string> OwnParameters(
    const google::protobuf::Map<std::string, std::string>& parameters) {
  std::map<std::string, std::string> own;
  for (const auto& [key, value] : parameters) {
    if (!absl::StrContains(key, '/')) own.emplace(key, value);
  }
  return own;
}

// An agent call's NOT_FOUND (and INVALID_ARGUMENT: an id the agent cannot
// hold) means no volume of that id on this node.
bool NoSuchVolume(const absl::Status& status) {
  return status.code() == absl::StatusCode::kNotFound ||
         status.code() == absl::StatusCode::kInvalidArgument;
}

}  // namespace

ControllerService::ControllerService(std::string node_id, std::string topology_key,
                                     blk::client::VolumeClient& agent, ProvisionedVolumes volumes)
    : node_id_(std::move(node_id)),
      topology_key_(std::move(topology_key)),
      agent_(agent),
      volumes_(std::move(volumes)) {}

grpc::Status ControllerService::CheckTopology(const ::csi::v1::CreateVolumeRequest& request) const {
  const auto& requisite = request.accessibility_requirements().requisite();
  if (requisite.empty()) return grpc::Status::OK;
  for (const ::csi::v1::Topology& topology : requisite) {
    const auto segment = topology.segments().find(topology_key_);
    if (segment != topology.segments().end() && segment->second == node_id_) {
      return grpc::Status::OK;
    }
  }
  // The spec's code for "cannot provision in the requisite topologies".
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat("this controller provisions only on node ", node_id_, " (",
                                   topology_key_, "), which no requisite topology names"));
}

grpc::Status ControllerService::FindRecord(const std::string& volume_id,
                                           absl::string_view without_record,
                                           ProvisionedVolume* recorded) const {
  absl::StatusOr<std::optional<ProvisionedVolume>> found = volumes_.Find(volume_id);
  if (!found.ok()) return ToGrpc(found.status());
  if (!found->has_value()) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("volume ", volume_id, " was not provisioned by the controller of node ",
                     node_id_, without_record));
  }
  *recorded = **std::move(found);
  return grpc::Status::OK;
}

grpc::Status ControllerService::CreateVolume(grpc::ServerContext*,
                                             const ::csi::v1::CreateVolumeRequest* request,
                                             ::csi::v1::CreateVolumeResponse* response) {
  if (request->name().empty()) return InvalidArgument("name is required");
  if (request->volume_capabilities().empty()) {
    return InvalidArgument("volume_capabilities is required");
  }
  for (const ::csi::v1::VolumeCapability& capability : request->volume_capabilities()) {
    absl::Status supported = CheckVolumeCapability(capability);
    if (!supported.ok()) return ToGrpc(supported);
  }
  if (request->has_volume_content_source()) {
    return InvalidArgument("volume_content_source is not supported (no snapshots, no clones)");
  }
  if (grpc::Status placed = CheckTopology(*request); !placed.ok()) return placed;

  const std::string volume_id = VolumeIdForName(request->name());
  const std::map<std::string, std::string> parameters = OwnParameters(request->parameters());
  const std::map<std::string, std::string> mutable_parameters =
      OwnParameters(request->mutable_parameters());
  if (absl::Status valid = CheckMutableParameters(mutable_parameters); !valid.ok()) {
    return ToGrpc(valid);
  }
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::optional<ProvisionedVolume>> recorded = volumes_.Find(volume_id);
  if (!recorded.ok()) return ToGrpc(recorded.status());
  if (recorded->has_value()) {
    grpc::Status same = CheckSameVolume(*request, parameters, **recorded);
    if (!same.ok()) return same;
    // Made by an earlier call that may have stopped between its record and its file.
    if (!(*recorded)->created_file().empty()) {
      absl::Status made =
          CreateBackingFile((*recorded)->created_file(), (*recorded)->capacity_bytes());
      if (!made.ok()) return ToGrpc(made);
    }
    Answer(**recorded, response);
    return grpc::Status::OK;
  }

  // The class's limits, then the VolumeAttributesClass's over them.
  std::map<std::string, std::string> context = parameters;
  for (const auto& [key, value] : mutable_parameters) context[key] = value;
  if (const auto backend = context.find(kBackendKey); backend != context.end()) {
    absl::StatusOr<std::string> own = BackendForVolume(backend->second, volume_id);
    if (!own.ok()) {
      return InvalidArgument(absl::StrCat("StorageClass parameters: ", own.status().message()));
    }
    backend->second = *std::move(own);
  }
  absl::StatusOr<blk::v1::Volume> from_class = VolumeFromContext(volume_id, context);
  if (!from_class.ok()) {
    return InvalidArgument(
        absl::StrCat("StorageClass parameters: ", from_class.status().message()));
  }
  int64_t size = 0;
  if (grpc::Status sized = ResolveSize(*request, *from_class, &size); !sized.ok()) return sized;
  if (size != 0) context[kSizeKey] = absl::StrCat(size);

  // A volume of this id staged here without a record (a PersistentVolume made by hand under
  // this name) is not this controller's to hand out.
  blk::v1::GetVolumeRequest get;
  get.set_id(volume_id);
  absl::StatusOr<blk::v1::GetVolumeResponse> existing = agent_.GetVolume(get);
  if (!existing.ok() && !NoSuchVolume(existing.status())) return ToGrpc(existing.status());
  if (existing.ok()) {
    return grpc::Status(
        grpc::StatusCode::ALREADY_EXISTS,
        absl::StrCat("volume ", volume_id, " (name '", request->name(), "') is staged on node ",
                     node_id_, " but was not provisioned by this controller"));
  }

  ProvisionedVolume volume;
  volume.set_name(request->name());
  volume.set_volume_id(volume_id);
  volume.set_capacity_bytes(size);
  volume.mutable_parameters()->insert(parameters.begin(), parameters.end());
  volume.mutable_volume_context()->insert(context.begin(), context.end());
  volume.mutable_modified_limits()->insert(mutable_parameters.begin(), mutable_parameters.end());
  if (from_class->has_file()) volume.set_created_file(from_class->file().path());
  // The record first: a crash between the two leaves a record whose file the next call (or
  // DeleteVolume) finishes, never a file no record owns.
  if (absl::Status saved = volumes_.Save(volume); !saved.ok()) return ToGrpc(saved);
  if (!volume.created_file().empty()) {
    if (absl::Status made = CreateBackingFile(volume.created_file(), size); !made.ok()) {
      // Not ours to remove later: drop the record that would claim it.
      if (absl::Status dropped = volumes_.Remove(volume_id); !dropped.ok()) {
        return ToGrpc(absl::Status(
            made.code(), absl::StrCat(made.message(), "; the record stays: ", dropped.message())));
      }
      return ToGrpc(made);
    }
  }
  Answer(volume, response);
  return grpc::Status::OK;
}

grpc::Status ControllerService::CheckSameVolume(
    const ::csi::v1::CreateVolumeRequest& request,
    const std::map<std::string, std::string>& parameters, const ProvisionedVolume& recorded) const {
  const auto exists = [&](const std::string& why) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        absl::StrCat("volume ", recorded.volume_id(), " (name '", recorded.name(),
                                     "') exists on node ", node_id_, " ", why));
  };
  if (recorded.name() != request.name()) {
    return exists(absl::StrCat("for another name than '", request.name(), "'"));
  }
  const std::map<std::string, std::string> recorded_parameters(recorded.parameters().begin(),
                                                               recorded.parameters().end());
  if (recorded_parameters != parameters) return exists("with other StorageClass parameters");
  const int64_t capacity = recorded.capacity_bytes();
  const CapacityRange& range = request.capacity_range();
  const bool fits = capacity == 0
                        ? range.required_bytes() == 0 && range.limit_bytes() == 0
                        : capacity >= range.required_bytes() &&
                              (range.limit_bytes() == 0 || capacity <= range.limit_bytes());
  if (!fits)
    return exists(absl::StrCat("with ", capacity, " bytes, outside the ", RangeText(range)));
  return grpc::Status::OK;
}

void ControllerService::Answer(const ProvisionedVolume& recorded,
                               ::csi::v1::CreateVolumeResponse* response) const {
  ::csi::v1::Volume& volume = *response->mutable_volume();
  volume.set_volume_id(recorded.volume_id());
  volume.set_capacity_bytes(recorded.capacity_bytes());
  *volume.mutable_volume_context() = recorded.volume_context();
  (*volume.add_accessible_topology()->mutable_segments())[topology_key_] = node_id_;
}

grpc::Status ControllerService::DeleteVolume(grpc::ServerContext*,
                                             const ::csi::v1::DeleteVolumeRequest* request,
                                             ::csi::v1::DeleteVolumeResponse*) {
  if (request->volume_id().empty()) return InvalidArgument("volume_id is required");
  absl::MutexLock lock(&mu_);
  blk::v1::GetVolumeRequest get;
  get.set_id(request->volume_id());
  absl::StatusOr<blk::v1::GetVolumeResponse> existing = agent_.GetVolume(get);
  if (existing.ok()) {
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("volume ", request->volume_id(), " is still staged on node ", node_id_, " (",
                     existing->volume().status().device_path(), "); unstage it first"));
  }
  if (!NoSuchVolume(existing.status())) return ToGrpc(existing.status());
  absl::StatusOr<std::optional<ProvisionedVolume>> recorded = volumes_.Find(request->volume_id());
  if (!recorded.ok()) return ToGrpc(recorded.status());
  // Never provisioned here, or deleted already: deleted, as often as asked.
  if (!recorded->has_value()) return grpc::Status::OK;
  if (!(*recorded)->created_file().empty()) {
    if (absl::Status removed = RemoveFileDurably((*recorded)->created_file()); !removed.ok()) {
      return ToGrpc(removed);
    }
  }
  return ToGrpc(volumes_.Remove(request->volume_id()));
}

grpc::Status ControllerService::ValidateVolumeCapabilities(
    grpc::ServerContext*, const ::csi::v1::ValidateVolumeCapabilitiesRequest* request,
    ::csi::v1::ValidateVolumeCapabilitiesResponse* response) {
  if (request->volume_id().empty()) return InvalidArgument("volume_id is required");
  if (request->volume_capabilities().empty()) {
    return InvalidArgument("volume_capabilities is required");
  }
  // The volume is its context: the one given, else the one this controller answered.
  std::map<std::string, std::string> context(request->volume_context().begin(),
                                             request->volume_context().end());
  if (context.empty()) {
    absl::MutexLock lock(&mu_);
    ProvisionedVolume recorded;
    grpc::Status found = FindRecord(
        request->volume_id(), " and the request has no volume_context to describe it", &recorded);
    if (!found.ok()) return found;
    context.insert(recorded.volume_context().begin(), recorded.volume_context().end());
  }
  absl::StatusOr<blk::v1::Volume> volume = VolumeFromContext(request->volume_id(), context);
  if (!volume.ok()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("volume ", request->volume_id(),
                                     " is not a blk-csi volume: ", volume.status().message()));
  }
  for (const ::csi::v1::VolumeCapability& capability : request->volume_capabilities()) {
    absl::Status supported = CheckVolumeCapability(capability);
    if (!supported.ok()) {
      response->set_message(std::string(supported.message()));
      return grpc::Status::OK;
    }
  }
  auto& confirmed = *response->mutable_confirmed();
  *confirmed.mutable_volume_context() = request->volume_context();
  *confirmed.mutable_volume_capabilities() = request->volume_capabilities();
  *confirmed.mutable_parameters() = request->parameters();
  return grpc::Status::OK;
}

grpc::Status ControllerService::ControllerGetCapabilities(
    grpc::ServerContext*, const ::csi::v1::ControllerGetCapabilitiesRequest*,
    ::csi::v1::ControllerGetCapabilitiesResponse* response) {
  for (auto type : {::csi::v1::ControllerServiceCapability::RPC::CREATE_DELETE_VOLUME,
                    ::csi::v1::ControllerServiceCapability::RPC::MODIFY_VOLUME}) {
    response->add_capabilities()->mutable_rpc()->set_type(type);
  }
  return grpc::Status::OK;
}

grpc::Status ControllerService::ControllerModifyVolume(
    grpc::ServerContext*, const ::csi::v1::ControllerModifyVolumeRequest* request,
    ::csi::v1::ControllerModifyVolumeResponse*) {
  if (request->volume_id().empty()) return InvalidArgument("volume_id is required");
  const std::map<std::string, std::string> changes = OwnParameters(request->mutable_parameters());
  if (changes.empty()) {
    return InvalidArgument("mutable_parameters is required (the limits to change, e.g. iops)");
  }
  if (absl::Status valid = CheckMutableParameters(changes); !valid.ok()) return ToGrpc(valid);

  absl::MutexLock lock(&mu_);
  ProvisionedVolume before;
  if (grpc::Status found = FindRecord(request->volume_id(), "", &before); !found.ok()) return found;
  ProvisionedVolume modified = before;
  for (const auto& [key, value] : changes) (*modified.mutable_modified_limits())[key] = value;
  absl::StatusOr<blk::v1::Volume> volume =
      VolumeFromContext(modified.volume_id(), StagingContext(modified));
  if (!volume.ok()) return ToGrpc(volume.status());

  // The record first, so that a NodeStageVolume from now on takes the new limits; then the
  // staged agent volume, if any. The agent's refusal (e.g. an absurd rate) restores the record.
  if (absl::Status saved = volumes_.Save(modified); !saved.ok()) return ToGrpc(saved);
  const absl::Status updated = UpdateAgentLimits(agent_, modified.volume_id(), volume->limits());
  // NOT_FOUND: not staged on this node now; the record has the limits for when it is.
  if (updated.ok() || updated.code() == absl::StatusCode::kNotFound) return grpc::Status::OK;
  if (absl::Status restored = volumes_.Save(before); !restored.ok()) {
    return ToGrpc(absl::Status(
        updated.code(), absl::StrCat(updated.message(),
                                     "; the record keeps the new limits: ", restored.message())));
  }
  return ToGrpc(updated);
}

}  // namespace blk::csi
