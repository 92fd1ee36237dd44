#include "csi/node_service.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "csi/backing_file.h"
#include "csi/grpc_status.h"
#include "csi/mount_table.h"
#include "csi/read_only_block.h"
#include "csi/volume_capability.h"
#include "csi/volume_context.h"

namespace blk::csi {
namespace {

using ::csi::v1::VolumeCapability;

constexpr char kDefaultFsType[] = "ext4";

grpc::Status RequireField(const std::string& value, const char* name) {
  if (value.empty()) return InvalidArgument(absl::StrCat(name, " is required"));
  return grpc::Status::OK;
}

grpc::Status CheckCapability(bool present, const VolumeCapability& capability) {
  if (!present) return InvalidArgument("volume_capability is required");
  return ToGrpc(CheckVolumeCapability(capability));
}

std::string FsTypeOf(const VolumeCapability& capability) {
  const std::string& fs_type = capability.mount().fs_type();
  return fs_type.empty() ? kDefaultFsType : fs_type;
}

std::vector<std::string> MountFlags(const VolumeCapability& capability) {
  std::vector<std::string> flags(capability.mount().mount_flags().begin(),
                                 capability.mount().mount_flags().end());
  if (IsReaderOnly(capability)) flags.push_back("ro");
  return flags;
}

// The loop device bound at `target` ("loop3"), "" when the mount there is not a bind of a
// loop device node (or there is none).
absl::StatusOr<std::string> LoopBoundAt(const std::string& target) {
  absl::StatusOr<std::vector<MountEntry>> table = ReadMountTable();
  if (!table.ok()) return table.status();
  std::string loop;
  for (const MountEntry& entry : *table) {
    if (entry.mount_point == target) loop = LoopNameOfMountRoot(entry.root);  // the top one
  }
  return loop;
}

// The block device the loop device `name` reads, from sysfs; "" when it is not bound.
std::string LoopBackingFile(const std::string& name) {
  std::ifstream file(absl::StrCat("/sys/block/", name, "/loop/backing_file"));
  std::string backing;
  if (file) std::getline(file, backing);
  return backing;
}

}  // namespace

absl::Status DeleteAgentVolume(blk::client::VolumeClient& agent, const std::string& volume_id) {
  blk::v1::DeleteVolumeRequest remove;
  remove.set_id(volume_id);
  absl::Status removed = agent.DeleteVolume(remove).status();
  if (removed.code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  return removed;
}

absl::Status UpdateAgentLimits(blk::client::VolumeClient& agent, const std::string& volume_id,
                               const blk::v1::VolumeLimits& limits) {
  blk::v1::UpdateVolumeRequest update;
  update.mutable_volume()->set_id(volume_id);
  *update.mutable_volume()->mutable_limits() = limits;
  update.mutable_update_mask()->add_paths("limits");
  return agent.UpdateVolume(update).status();
}

NodeService::NodeService(std::string node_id, std::string topology_key,
                         blk::client::VolumeClient& agent, const Mounter& mounter,
                         const KubeletPaths& paths, std::optional<ProvisionedVolumes> provisioned)
    : node_id_(std::move(node_id)),
      topology_key_(std::move(topology_key)),
      agent_(agent),
      mounter_(mounter),
      paths_(paths),
      provisioned_(std::move(provisioned)) {}

absl::StatusOr<std::map<std::string, std::string>> NodeService::ModifiedLimits(
    const std::string& volume_id) const {
  if (!provisioned_) return std::map<std::string, std::string>();
  absl::StatusOr<std::optional<ProvisionedVolume>> recorded = provisioned_->Find(volume_id);
  if (!recorded.ok()) return recorded.status();
  if (!recorded->has_value()) return std::map<std::string, std::string>();
  return std::map<std::string, std::string>((*recorded)->modified_limits().begin(),
                                            (*recorded)->modified_limits().end());
}

grpc::Status NodeService::Confined(const std::string& path, const char* field) const {
  return ToGrpc(paths_.Check(path, field));
}

absl::StatusOr<std::string> NodeService::LiveDevice(const std::string& volume_id) {
  blk::v1::GetVolumeRequest get;
  get.set_id(volume_id);
  absl::StatusOr<blk::v1::GetVolumeResponse> got = agent_.GetVolume(get);
  if (!got.ok()) return got.status();
  const blk::v1::VolumeStatus& status = got->volume().status();
  if (status.state() != blk::v1::VOLUME_STATE_LIVE || status.device_path().empty()) {
    return absl::UnavailableError(absl::StrCat("volume ", volume_id, " has no live device (",
                                               blk::v1::VolumeState_Name(status.state()),
                                               "): ", status.message()));
  }
  return status.device_path();
}

absl::StatusOr<std::vector<std::string>> NodeService::UsesOf(const std::string& device,
                                                             const std::string& except) {
  absl::StatusOr<std::vector<std::string>> mounts = mounter_.MountsOf(device, except);
  if (!mounts.ok()) return mounts.status();
  absl::StatusOr<std::vector<std::string>> loops = OwnedLoopsOver(device);
  if (!loops.ok()) return loops.status();
  for (const std::string& loop : *loops) {
    absl::StatusOr<std::vector<std::string>> loop_mounts = mounter_.MountsOf(loop, except);
    if (!loop_mounts.ok()) return loop_mounts.status();
    mounts->insert(mounts->end(), loop_mounts->begin(), loop_mounts->end());
  }
  return mounts;
}

absl::StatusOr<blk::v1::Volume> NodeService::VolumeAt(const std::string& volume_id,
                                                      const std::string& volume_path,
                                                      struct stat& st) {
  blk::v1::GetVolumeRequest get;
  get.set_id(volume_id);
  absl::StatusOr<blk::v1::GetVolumeResponse> got = agent_.GetVolume(get);
  if (!got.ok()) {
    // INVALID_ARGUMENT from the agent: an id it cannot hold, so none it has.
    if (got.status().code() == absl::StatusCode::kNotFound ||
        got.status().code() == absl::StatusCode::kInvalidArgument) {
      return absl::NotFoundError(absl::StrCat("volume ", volume_id, " is not on node ", node_id_,
                                              ": ", got.status().message()));
    }
    return got.status();
  }
  if (volume_path.front() != '/') {  // not empty: the caller required the field
    return absl::InvalidArgumentError("volume_path must be absolute");
  }
  if (::stat(volume_path.c_str(), &st) != 0) {
    const int err = errno;
    absl::Status status = absl::ErrnoToStatus(err, volume_path);
    if (err == ENOENT) return absl::NotFoundError(status.message());
    return status;
  }
  const std::string& device = got->volume().status().device_path();
  if (!device.empty()) {
    absl::StatusOr<std::vector<std::string>> uses = UsesOf(device, "");
    if (!uses.ok()) return uses.status();
    std::string wanted = std::filesystem::path(volume_path).lexically_normal().string();
    if (wanted.size() > 1 && wanted.back() == '/') wanted.pop_back();
    if (std::find(uses->begin(), uses->end(), wanted) == uses->end()) {
      return absl::NotFoundError(absl::StrCat("volume ", volume_id, " (", device,
                                              ") is not staged or published at ", volume_path));
    }
  }
  return got->volume();
}

grpc::Status NodeService::NodeStageVolume(grpc::ServerContext*,
                                          const ::csi::v1::NodeStageVolumeRequest* request,
                                          ::csi::v1::NodeStageVolumeResponse*) {
  for (grpc::Status check :
       {RequireField(request->volume_id(), "volume_id"),
        Confined(request->staging_target_path(), "staging_target_path"),
        CheckCapability(request->has_volume_capability(), request->volume_capability())}) {
    if (!check.ok()) return check;
  }
  std::map<std::string, std::string> context(request->volume_context().begin(),
                                             request->volume_context().end());
  absl::StatusOr<std::map<std::string, std::string>> modified =
      ModifiedLimits(request->volume_id());
  if (!modified.ok()) return ToGrpc(modified.status());
  for (const auto& [key, value] : *modified) context[key] = value;
  absl::StatusOr<blk::v1::Volume> volume = VolumeFromContext(request->volume_id(), context);
  if (!volume.ok()) return ToGrpc(volume.status());
  // Reader-only access modes: the ublk device itself refuses writes, whatever the pod does.
  volume->set_read_only(IsReaderOnly(request->volume_capability()));

  absl::MutexLock lock(&operations_mu_);
  blk::v1::GetVolumeRequest get;
  get.set_id(request->volume_id());
  absl::StatusOr<blk::v1::GetVolumeResponse> existing = agent_.GetVolume(get);
  if (!existing.ok() && existing.status().code() != absl::StatusCode::kNotFound) {
    return ToGrpc(existing.status());
  }
  if (!existing.ok() && volume->has_file()) {
    if (absl::Status present = RequireBackingFile(volume->file().path()); !present.ok()) {
      return ToGrpc(present);
    }
  }
  // The agent's CreateVolume is idempotent: the same spec again is fine, a different one is
  // ALREADY_EXISTS, which is also the spec's code for "staged with an incompatible volume".
  // The context's size is a floor: Kubernetes keeps the size the volume was provisioned with
  // after NodeExpandVolume grew it, so a restage takes the backing's (grown) size instead of
  // putting a smaller device under the grown filesystem.
  blk::v1::CreateVolumeRequest create;
  *create.mutable_volume() = *std::move(volume);
  create.set_size_is_minimum(true);
  absl::StatusOr<blk::v1::CreateVolumeResponse> created = agent_.CreateVolume(create);
  if (!created.ok()) return ToGrpc(created.status());
  // A ControllerModifyVolume that found no agent volume before the create saved its limits in
  // the record, maybe after this call read it: read again, and apply what changed.
  absl::StatusOr<std::map<std::string, std::string>> modified_since =
      ModifiedLimits(request->volume_id());
  if (!modified_since.ok()) return ToGrpc(modified_since.status());
  if (*modified_since != *modified) {
    for (const auto& [key, value] : *modified_since) context[key] = value;
    absl::StatusOr<blk::v1::Volume> now = VolumeFromContext(request->volume_id(), context);
    if (!now.ok()) return ToGrpc(now.status());
    if (absl::Status updated = UpdateAgentLimits(agent_, request->volume_id(), now->limits());
        !updated.ok()) {
      return ToGrpc(updated);
    }
  }
  absl::StatusOr<std::string> device = LiveDevice(request->volume_id());
  if (!device.ok()) return ToGrpc(device.status());
  if (request->volume_capability().has_block()) return grpc::Status::OK;
  grpc::Status staged = StageFilesystem(*request, *device);
  if (!staged.ok() && !existing.ok()) {
    // This call created the agent volume: a failed stage leaves none behind.
    if (absl::Status removed = DeleteAgentVolume(agent_, request->volume_id()); !removed.ok()) {
      return grpc::Status(
          staged.error_code(),
          absl::StrCat(staged.error_message(), "; the agent volume stays: ", removed.message()));
    }
  }
  return staged;
}

grpc::Status NodeService::StageFilesystem(const ::csi::v1::NodeStageVolumeRequest& request,
                                          const std::string& device) {
  const std::string& staging = request.staging_target_path();
  absl::StatusOr<bool> mounted = mounter_.IsMountPoint(staging);
  if (!mounted.ok()) return ToGrpc(mounted.status());
  if (*mounted) {
    absl::StatusOr<std::vector<std::string>> mounts = mounter_.MountsOf(device, "");
    if (!mounts.ok()) return ToGrpc(mounts.status());
    for (const std::string& mount : *mounts) {
      if (mount == staging) return grpc::Status::OK;  // staged already
    }
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        absl::StrCat(staging, " holds another mount than ", device));
  }
  if (absl::Status made = paths_.Create(staging, /*as_file=*/false); !made.ok()) {
    return ToGrpc(made);
  }
  const std::string fs_type = FsTypeOf(request.volume_capability());
  absl::StatusOr<DeviceContents> found = mounter_.Probe(device);
  if (!found.ok()) return ToGrpc(found.status());
  if (found->empty()) {
    if (IsReaderOnly(request.volume_capability())) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat(device, " of volume ", request.volume_id(),
                                       " holds no file system, and a reader-only access mode (",
                                       VolumeCapability::AccessMode::Mode_Name(
                                           request.volume_capability().access_mode().mode()),
                                       ") stages it read-only: it cannot be formatted"));
    }
    absl::Status made = mounter_.MakeFilesystem(device, fs_type);
    if (!made.ok()) return ToGrpc(made);
  } else if (found->type != fs_type || !found->partition_table.empty() || found->ambivalent) {
    // Never format or mount over anything else: the device holds data of another kind (a
    // partition table, another file system, an LVM or RAID member) than asked for.
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat(device, " of volume ", request.volume_id(), " holds ", found->Describe(),
                     ", not the requested ", fs_type, " file system: left as it is"));
  }
  return ToGrpc(mounter_.Mount(device, staging, fs_type, MountFlags(request.volume_capability())));
}

grpc::Status NodeService::NodeUnstageVolume(grpc::ServerContext*,
                                            const ::csi::v1::NodeUnstageVolumeRequest* request,
                                            ::csi::v1::NodeUnstageVolumeResponse*) {
  for (grpc::Status check : {RequireField(request->volume_id(), "volume_id"),
                             Confined(request->staging_target_path(), "staging_target_path")}) {
    if (!check.ok()) return check;
  }
  absl::MutexLock lock(&operations_mu_);
  blk::v1::GetVolumeRequest get;
  get.set_id(request->volume_id());
  absl::StatusOr<blk::v1::GetVolumeResponse> got = agent_.GetVolume(get);
  if (!got.ok() && got.status().code() != absl::StatusCode::kNotFound) {
    return ToGrpc(got.status());
  }
  const std::string device = got.ok() ? got->volume().status().device_path() : "";
  if (!device.empty()) {
    // Still published somewhere (the device node, the file system, or a read-only loop device
    // over it): unstaging now would pull the device from under a pod.
    absl::StatusOr<std::vector<std::string>> mounts =
        UsesOf(device, request->staging_target_path());
    if (!mounts.ok()) return ToGrpc(mounts.status());
    if (!mounts->empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("volume ", request->volume_id(), " (", device,
                                       ") is still mounted at ", absl::StrJoin(*mounts, ", ")));
    }
    // Unmounted loop devices a crash between attaching and bind-mounting left behind.
    absl::StatusOr<std::vector<std::string>> loops = OwnedLoopsOver(device);
    if (!loops.ok()) return ToGrpc(loops.status());
    for (const std::string& loop : *loops) {
      if (absl::Status detached = DetachLoop(loop); !detached.ok()) return ToGrpc(detached);
    }
  }
  absl::Status unmounted = mounter_.Unmount(request->staging_target_path());
  if (!unmounted.ok()) return ToGrpc(unmounted);
  if (!got.ok()) return grpc::Status::OK;  // the agent volume is gone already
  return ToGrpc(DeleteAgentVolume(agent_, request->volume_id()));
}

grpc::Status NodeService::NodePublishVolume(grpc::ServerContext*,
                                            const ::csi::v1::NodePublishVolumeRequest* request,
                                            ::csi::v1::NodePublishVolumeResponse*) {
  for (grpc::Status check :
       {RequireField(request->volume_id(), "volume_id"),
        Confined(request->staging_target_path(), "staging_target_path"),
        Confined(request->target_path(), "target_path"),
        CheckCapability(request->has_volume_capability(), request->volume_capability())}) {
    if (!check.ok()) return check;
  }
  absl::MutexLock lock(&operations_mu_);
  const std::string& target = request->target_path();
  absl::StatusOr<bool> published = mounter_.IsMountPoint(target);
  if (!published.ok()) return ToGrpc(published.status());
  if (*published) return grpc::Status::OK;

  absl::StatusOr<std::string> device = LiveDevice(request->volume_id());
  if (!device.ok()) {
    if (device.status().code() == absl::StatusCode::kNotFound) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("volume ", request->volume_id(), " is not staged here"));
    }
    return ToGrpc(device.status());
  }
  if (request->volume_capability().has_block()) {
    absl::Status file = paths_.Create(target, /*as_file=*/true);
    if (!file.ok()) return ToGrpc(file);
    if (!request->readonly()) return ToGrpc(mounter_.BindMount(*device, target, false));
    return PublishReadOnlyBlock(*device, target);
  }
  const std::string& staging = request->staging_target_path();
  absl::StatusOr<bool> staged = mounter_.IsMountPoint(staging);
  if (!staged.ok()) return ToGrpc(staged.status());
  if (!*staged) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("volume ", request->volume_id(), " is not staged at ", staging,
                                     " (NodeStageVolume first)"));
  }
  absl::Status directory = paths_.Create(target, /*as_file=*/false);
  if (!directory.ok()) return ToGrpc(directory);
  return ToGrpc(mounter_.BindMount(staging, target, request->readonly()));
}

grpc::Status NodeService::PublishReadOnlyBlock(const std::string& device,
                                               const std::string& target) {
  absl::StatusOr<std::string> loop = AttachReadOnlyLoop(device);
  if (!loop.ok()) return ToGrpc(loop.status());
  absl::Status bound = mounter_.BindMount(*loop, target, /*read_only=*/true);
  if (!bound.ok()) {
    if (absl::Status detached = DetachLoop(*loop); !detached.ok()) {
      return ToGrpc(
          absl::Status(bound.code(), absl::StrCat(bound.message(), "; and ", detached.message())));
    }
  }
  return ToGrpc(bound);
}

grpc::Status NodeService::ReleaseUnusedLoops(const std::string& device) {
  absl::StatusOr<std::vector<std::string>> loops = OwnedLoopsOver(device);
  if (!loops.ok()) return ToGrpc(loops.status());
  for (const std::string& loop : *loops) {
    absl::StatusOr<std::vector<std::string>> mounts = mounter_.MountsOf(loop, "");
    if (!mounts.ok()) return ToGrpc(mounts.status());
    if (!mounts->empty()) continue;  // another read-only publish
    if (absl::Status detached = DetachLoop(loop); !detached.ok()) return ToGrpc(detached);
  }
  return grpc::Status::OK;
}

grpc::Status NodeService::NodeUnpublishVolume(grpc::ServerContext*,
                                              const ::csi::v1::NodeUnpublishVolumeRequest* request,
                                              ::csi::v1::NodeUnpublishVolumeResponse*) {
  for (grpc::Status check : {RequireField(request->volume_id(), "volume_id"),
                             Confined(request->target_path(), "target_path")}) {
    if (!check.ok()) return check;
  }
  absl::MutexLock lock(&operations_mu_);
  // A read-only raw block publish: the loop device goes once its bind is unmounted.
  absl::StatusOr<std::string> loop = LoopBoundAt(request->target_path());
  if (!loop.ok()) return ToGrpc(loop.status());
  const std::string loop_device = loop->empty() ? "" : LoopBackingFile(*loop);
  absl::Status unmounted = mounter_.Unmount(request->target_path());
  if (!unmounted.ok()) return ToGrpc(unmounted);
  // The spec has the plugin remove what it created at the target path (never what a
  // symbolic link put there points to).
  if (absl::Status removed = paths_.Remove(request->target_path()); !removed.ok()) {
    return ToGrpc(removed);
  }
  // Every unmounted loop device of ours over the same device: this one, and any a crash
  // between attaching and bind-mounting left.
  if (!loop_device.empty()) return ReleaseUnusedLoops(loop_device);
  return grpc::Status::OK;
}

grpc::Status NodeService::NodeGetVolumeStats(grpc::ServerContext*,
                                             const ::csi::v1::NodeGetVolumeStatsRequest* request,
                                             ::csi::v1::NodeGetVolumeStatsResponse* response) {
  for (grpc::Status check : {RequireField(request->volume_id(), "volume_id"),
                             RequireField(request->volume_path(), "volume_path")}) {
    if (!check.ok()) return check;
  }
  struct stat st;
  absl::StatusOr<blk::v1::Volume> found =
      VolumeAt(request->volume_id(), request->volume_path(), st);
  if (!found.ok()) return ToGrpc(found.status());
  const blk::v1::Volume& volume = *found;

  if (S_ISDIR(st.st_mode)) {
    struct statvfs fs;
    if (::statvfs(request->volume_path().c_str(), &fs) != 0) {
      return ToGrpc(absl::ErrnoToStatus(errno, absl::StrCat("statvfs ", request->volume_path())));
    }
    ::csi::v1::VolumeUsage* bytes = response->add_usage();
    bytes->set_unit(::csi::v1::VolumeUsage::BYTES);
    bytes->set_total(static_cast<int64_t>(fs.f_blocks * fs.f_frsize));
    bytes->set_available(static_cast<int64_t>(fs.f_bavail * fs.f_frsize));
    bytes->set_used(static_cast<int64_t>((fs.f_blocks - fs.f_bfree) * fs.f_frsize));
    ::csi::v1::VolumeUsage* inodes = response->add_usage();
    inodes->set_unit(::csi::v1::VolumeUsage::INODES);
    inodes->set_total(static_cast<int64_t>(fs.f_files));
    inodes->set_available(static_cast<int64_t>(fs.f_favail));
    inodes->set_used(static_cast<int64_t>(fs.f_files - fs.f_ffree));
  } else {
    ::csi::v1::VolumeUsage* bytes = response->add_usage();
    bytes->set_unit(::csi::v1::VolumeUsage::BYTES);
    bytes->set_total(static_cast<int64_t>(volume.size_bytes()));
  }

  ::csi::v1::VolumeCondition* condition = response->mutable_volume_condition();
  const blk::v1::VolumeStatus& status = volume.status();
  if (status.state() == blk::v1::VOLUME_STATE_LIVE) {
    condition->set_message("live");
  } else {
    condition->set_abnormal(true);
    condition->set_message(
        absl::StrCat(blk::v1::VolumeState_Name(status.state()), ": ", status.message()));
  }
  return grpc::Status::OK;
}

grpc::Status NodeService::NodeExpandVolume(grpc::ServerContext*,
                                           const ::csi::v1::NodeExpandVolumeRequest* request,
                                           ::csi::v1::NodeExpandVolumeResponse* response) {
  for (grpc::Status check : {RequireField(request->volume_id(), "volume_id"),
                             RequireField(request->volume_path(), "volume_path")}) {
    if (!check.ok()) return check;
  }
  const int64_t required = request->capacity_range().required_bytes();
  const int64_t limit = request->capacity_range().limit_bytes();
  if (required < 0 || limit < 0) {
    return InvalidArgument("capacity_range: required_bytes and limit_bytes must not be negative");
  }
  if (request->has_volume_capability()) {
    grpc::Status capable = CheckCapability(true, request->volume_capability());
    if (!capable.ok()) return capable;
  }
  absl::MutexLock lock(&operations_mu_);
  struct stat st;
  absl::StatusOr<blk::v1::Volume> found =
      VolumeAt(request->volume_id(), request->volume_path(), st);
  if (!found.ok()) return ToGrpc(found.status());
  blk::v1::Volume volume = *std::move(found);

  // The agent's sizes are whole logical blocks; the kubelet asks in bytes.
  const uint64_t block = volume.logical_block_size() == 0 ? 512 : volume.logical_block_size();
  const uint64_t wanted = (static_cast<uint64_t>(required) + block - 1) / block * block;
  if (limit > 0 && wanted > static_cast<uint64_t>(limit)) {
    return grpc::Status(grpc::StatusCode::OUT_OF_RANGE,
                        absl::StrCat("capacity_range: ", required, " bytes rounded up to the ",
                                     block, "-byte block size exceed limit_bytes ", limit));
  }
  if (wanted > volume.size_bytes() && volume.has_nvme()) {
    // A restage creates the volume at the context's size again: unlike a file or an export, a
    // namespace (which may hold other volumes) cannot tell how far this one had grown.
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("volume ", request->volume_id(), " is on NVMe namespace ",
                     volume.nvme().has_fabric()
                         ? absl::StrCat(volume.nvme().fabric().nsid(), " of ",
                                        volume.nvme().fabric().subsystem_nqn())
                         : volume.nvme().path(),
                     ": its grown size would be lost at the next stage; "
                     "recreate it with the new size in its volume context instead"));
  }
  if (wanted > volume.size_bytes()) {
    blk::v1::ResizeVolumeRequest resize;
    resize.set_id(request->volume_id());
    resize.set_size_bytes(wanted);
    absl::StatusOr<blk::v1::ResizeVolumeResponse> resized = agent_.ResizeVolume(resize);
    if (!resized.ok()) return ToGrpc(resized.status());
    volume = resized->volume();
  }

  // A raw block volume (the device node bound at volume_path) has no file system to grow.
  const bool block_mode = request->volume_capability().has_block() || !S_ISDIR(st.st_mode);
  if (!block_mode) {
    const std::string& device = volume.status().device_path();
    if (device.empty()) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("volume ", request->volume_id(), " has no live device"));
    }
    absl::StatusOr<DeviceContents> contents = mounter_.Probe(device);
    if (!contents.ok()) return ToGrpc(contents.status());
    if (absl::Status grown =
            mounter_.GrowFilesystem(device, request->volume_path(), contents->type);
        !grown.ok()) {
      return ToGrpc(grown);
    }
  }
  response->set_capacity_bytes(static_cast<int64_t>(volume.size_bytes()));
  return grpc::Status::OK;
}

grpc::Status NodeService::NodeGetCapabilities(grpc::ServerContext*,
                                              const ::csi::v1::NodeGetCapabilitiesRequest*,
                                              ::csi::v1::NodeGetCapabilitiesResponse* response) {
  using Rpc = ::csi::v1::NodeServiceCapability::RPC;
  for (Rpc::Type type : {Rpc::STAGE_UNSTAGE_VOLUME, Rpc::GET_VOLUME_STATS, Rpc::EXPAND_VOLUME,
                         Rpc::VOLUME_CONDITION}) {
    response->add_capabilities()->mutable_rpc()->set_type(type);
  }
  return grpc::Status::OK;
}

grpc::Status NodeService::NodeGetInfo(grpc::ServerContext*, const ::csi::v1::NodeGetInfoRequest*,
                                      ::csi::v1::NodeGetInfoResponse* response) {
  response->set_node_id(node_id_);
  (*response->mutable_accessible_topology()->mutable_segments())[topology_key_] = node_id_;
  return grpc::Status::OK;
}

}  // namespace blk::csi
