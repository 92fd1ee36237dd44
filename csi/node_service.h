#pragma once

#include <sys/stat.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/volume_client.h"
#include "csi/kubelet_paths.h"
#include "csi/mounter.h"
#include "csi/provisioned_volumes.h"
#include "csi/v1/csi.grpc.pb.h"

namespace blk::csi {

// The agent's DeleteVolume (not forced: a device some process holds open stays, and the agent's
// FAILED_PRECONDITION says so), with NOT_FOUND taken as done: CSI's deletes are idempotent, and
// the volume may be gone already (deleted by another call since it was looked up).
absl::Status DeleteAgentVolume(blk::client::VolumeClient& agent, const std::string& volume_id);
// The agent's UpdateVolume of `volume_id`'s limits (the whole set), e.g. after
// ControllerModifyVolume.
absl::Status UpdateAgentLimits(blk::client::VolumeClient& agent, const std::string& volume_id,
                               const blk::v1::VolumeLimits& limits);

// CSI Node: stage = the agent volume (created from the volume context) plus,
// in filesystem mode, a file system mounted at the staging path; publish = a
// bind of that mount (or of the device node, raw block; of a read-only loop
// device over it for readonly=true) at the target path. Reader-only access
// modes stage the agent volume read-only (and mount its file system ro).
// Staging and target paths are confined below the kubelet root (KubeletPaths).
// Every call is idempotent. Required fields are checked before anything is
// touched. The calls that change state run one at a time: they are short,
// and the kubelet may retry a call while the first one still runs.
class NodeService final : public ::csi::v1::Node::Service {
 public:
  // `provisioned`: the controller's records when it runs in this process (--controller), whose
  // limits changed by ControllerModifyVolume a stage takes over the volume context's.
  NodeService(std::string node_id, std::string topology_key, blk::client::VolumeClient& agent,
              const Mounter& mounter, const KubeletPaths& paths,
              std::optional<ProvisionedVolumes> provisioned = std::nullopt);

  grpc::Status NodeStageVolume(grpc::ServerContext* context,
                               const ::csi::v1::NodeStageVolumeRequest* request,
                               ::csi::v1::NodeStageVolumeResponse* response) override;
  grpc::Status NodeUnstageVolume(grpc::ServerContext* context,
                                 const ::csi::v1::NodeUnstageVolumeRequest* request,
                                 ::csi::v1::NodeUnstageVolumeResponse* response) override;
  grpc::Status NodePublishVolume(grpc::ServerContext* context,
                                 const ::csi::v1::NodePublishVolumeRequest* request,
                                 ::csi::v1::NodePublishVolumeResponse* response) override;
  grpc::Status NodeUnpublishVolume(grpc::ServerContext* context,
                                   const ::csi::v1::NodeUnpublishVolumeRequest* request,
                                   ::csi::v1::NodeUnpublishVolumeResponse* response) override;
  grpc::Status NodeGetVolumeStats(grpc::ServerContext* context,
                                  const ::csi::v1::NodeGetVolumeStatsRequest* request,
                                  ::csi::v1::NodeGetVolumeStatsResponse* response) override;
  // Grows the agent volume to capacity_range.required_bytes (rounded up to its logical block
  // size), then the file system mounted at volume_path; a raw block volume has none to grow.
  grpc::Status NodeExpandVolume(grpc::ServerContext* context,
                                const ::csi::v1::NodeExpandVolumeRequest* request,
                                ::csi::v1::NodeExpandVolumeResponse* response) override;
  grpc::Status NodeGetCapabilities(grpc::ServerContext* context,
                                   const ::csi::v1::NodeGetCapabilitiesRequest* request,
                                   ::csi::v1::NodeGetCapabilitiesResponse* response) override;
  grpc::Status NodeGetInfo(grpc::ServerContext* context,
                           const ::csi::v1::NodeGetInfoRequest* request,
                           ::csi::v1::NodeGetInfoResponse* response) override;

 private:
  // The limits ControllerModifyVolume set on the volume (its record's modified_limits);
  // none without a record.
  absl::StatusOr<std::map<std::string, std::string>> ModifiedLimits(
      const std::string& volume_id) const;
  // A staging or target path's check: INVALID_ARGUMENT unless below the kubelet root.
  grpc::Status Confined(const std::string& path, const char* field) const;
  // The agent volume's device, or NOT_FOUND / UNAVAILABLE (no live device).
  absl::StatusOr<std::string> LiveDevice(const std::string& volume_id);
  grpc::Status StageFilesystem(const ::csi::v1::NodeStageVolumeRequest& request,
                               const std::string& device);
  // readonly=true raw block: a read-only loop device over `device` bound at `target`, so that
  // the kernel refuses the pod's writes while other publishes still write.
  grpc::Status PublishReadOnlyBlock(const std::string& device, const std::string& target);
  // Every mount through which `device` is in use: its file system's, binds of its node, and
  // binds of blk-csi's read-only loop devices over it. `except` is left out.
  absl::StatusOr<std::vector<std::string>> UsesOf(const std::string& device,
                                                  const std::string& except);
  // The agent volume `volume_id`, with `volume_path` (already stat'ed into `st`) one of its
  // mounts: NOT_FOUND, as the spec asks of NodeGetVolumeStats and NodeExpandVolume, for an
  // unknown volume, a path that does not exist or one where the volume is not published.
  // The volume is looked up first, so that an unknown volume is NOT_FOUND whatever the path.
  absl::StatusOr<blk::v1::Volume> VolumeAt(const std::string& volume_id,
                                           const std::string& volume_path, struct stat& st);
  // Detaches blk-csi's loop devices over `device` that no mount uses.
  grpc::Status ReleaseUnusedLoops(const std::string& device);

  const std::string node_id_;
  const std::string topology_key_;
  blk::client::VolumeClient& agent_;
  const Mounter& mounter_;
  const KubeletPaths& paths_;
  const std::optional<ProvisionedVolumes> provisioned_;
  // Held through every state-changing call (the mounts and the agent's volumes are the state).
  absl::Mutex operations_mu_;
};

}  // namespace blk::csi
