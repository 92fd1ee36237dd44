#pragma once

// An in-process VolumeService on a Unix socket in a fresh directory: what
// blkctl talks to in the unit tests. It keeps volumes in memory, records
// every request, and can be told to fail or to hang.

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "blk/v1/volume.grpc.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/unit/temp_dir.h"

namespace blk::cli::testing {

class FakeVolumeService final : public blk::v1::VolumeService::Service {
 public:
  // The id the fake treats as an open device: deleting it needs force.
  static constexpr char kOpenVolumeId[] = "busy";

  grpc::Status CreateVolume(grpc::ServerContext* context,
                            const blk::v1::CreateVolumeRequest* request,
                            blk::v1::CreateVolumeResponse* response) override {
    if (auto failure = Record(context, "CreateVolume", *request)) return *failure;
    std::lock_guard lock(mutex_);
    const blk::v1::Volume& spec = request->volume();
    auto existing = volumes_.find(spec.id());
    if (existing != volumes_.end()) {
      if (existing->second.size_bytes() != spec.size_bytes()) {
        return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                            "volume " + spec.id() + " exists with size " +
                                std::to_string(existing->second.size_bytes()));
      }
      *response->mutable_volume() = existing->second;
      return grpc::Status::OK;
    }
    blk::v1::Volume volume = spec;
    volume.mutable_status()->set_state(blk::v1::VOLUME_STATE_LIVE);
    volume.mutable_status()->set_device_id(next_device_id_);
    volume.mutable_status()->set_device_path("/dev/ublkb" + std::to_string(next_device_id_));
    ++next_device_id_;
    volumes_[spec.id()] = volume;
    *response->mutable_volume() = volume;
    return grpc::Status::OK;
  }

  grpc::Status DeleteVolume(grpc::ServerContext* context,
                            const blk::v1::DeleteVolumeRequest* request,
                            blk::v1::DeleteVolumeResponse*) override {
    if (auto failure = Record(context, "DeleteVolume", *request)) return *failure;
    std::lock_guard lock(mutex_);
    // As the agent answers: an unknown volume is NOT_FOUND.
    if (!volumes_.contains(request->id())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "volume '" + request->id() + "' does not exist");
    }
    if (request->id() == kOpenVolumeId && !request->force()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "volume busy is open; use force to delete it anyway");
    }
    volumes_.erase(request->id());
    return grpc::Status::OK;
  }

  grpc::Status GetVolume(grpc::ServerContext* context, const blk::v1::GetVolumeRequest* request,
                         blk::v1::GetVolumeResponse* response) override {
    if (auto failure = Record(context, "GetVolume", *request)) return *failure;
    std::lock_guard lock(mutex_);
    auto found = volumes_.find(request->id());
    if (found == volumes_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "volume " + request->id() + " not found");
    }
    *response->mutable_volume() = found->second;
    return grpc::Status::OK;
  }

  grpc::Status UpdateVolume(grpc::ServerContext* context,
                            const blk::v1::UpdateVolumeRequest* request,
                            blk::v1::UpdateVolumeResponse* response) override {
    if (auto failure = Record(context, "UpdateVolume", *request)) return *failure;
    std::lock_guard lock(mutex_);
    auto found = volumes_.find(request->volume().id());
    if (found == volumes_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "volume " + request->volume().id() + " not found");
    }
    for (const std::string& path : request->update_mask().paths()) {
      if (path == "rq_affinity") {
        found->second.set_rq_affinity(request->volume().rq_affinity());
        found->second.mutable_status()->set_rq_affinity(request->volume().rq_affinity());
      } else if (path == "limits") {
        *found->second.mutable_limits() = request->volume().limits();
      }
    }
    *response->mutable_volume() = found->second;
    return grpc::Status::OK;
  }

  grpc::Status ResizeVolume(grpc::ServerContext* context,
                            const blk::v1::ResizeVolumeRequest* request,
                            blk::v1::ResizeVolumeResponse* response) override {
    if (auto failure = Record(context, "ResizeVolume", *request)) return *failure;
    std::lock_guard lock(mutex_);
    auto found = volumes_.find(request->id());
    if (found == volumes_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "volume " + request->id() + " not found");
    }
    found->second.set_size_bytes(request->size_bytes());
    *response->mutable_volume() = found->second;
    return grpc::Status::OK;
  }

  grpc::Status ListVolumes(grpc::ServerContext* context, const blk::v1::ListVolumesRequest* request,
                           blk::v1::ListVolumesResponse* response) override {
    if (auto failure = Record(context, "ListVolumes", *request)) return *failure;
    std::lock_guard lock(mutex_);
    for (const auto& [id, volume] : volumes_) *response->add_volumes() = volume;
    return grpc::Status::OK;
  }

  grpc::Status GetNodeInfo(grpc::ServerContext* context, const blk::v1::GetNodeInfoRequest* request,
                           blk::v1::GetNodeInfoResponse* response) override {
    if (auto failure = Record(context, "GetNodeInfo", *request)) return *failure;
    response->set_kernel_release("6.12.12-amd64");
    response->set_ublk_available(true);
    response->set_ublk_features(0x6);
    response->add_ublk_feature_names("COMP_IN_TASK");
    response->add_ublk_feature_names("NEED_GET_DATA");
    response->set_cpu_count(2);
    response->set_agent_version("0.1.0-test");
    return grpc::Status::OK;
  }

  // Each call reports 100 more reads of 4 KiB than the one before, all within 10 us, and a
  // write that failed.
  grpc::Status GetVolumeStats(grpc::ServerContext* context,
                              const blk::v1::GetVolumeStatsRequest* request,
                              blk::v1::GetVolumeStatsResponse* response) override {
    if (auto failure = Record(context, "GetVolumeStats", *request)) return *failure;
    std::lock_guard lock(mutex_);
    if (!volumes_.contains(request->id())) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "volume '" + request->id() + "' does not exist");
    }
    const uint64_t reads = 100 * ++stats_calls_;
    blk::v1::VolumeStats& stats = *response->mutable_stats();
    stats.set_volume_id(request->id());
    stats.add_latency_bounds_seconds(0.00001);
    blk::v1::IoOpStats* read = stats.add_ops();
    read->set_op("read");
    read->set_ios(reads);
    read->set_bytes(reads * 4096);
    read->add_latency_buckets(reads);
    read->add_latency_buckets(0);
    blk::v1::IoOpStats* write = stats.add_ops();
    write->set_op("write");
    write->set_ios(1);
    write->set_errors(1);
    write->add_latency_buckets(1);
    write->add_latency_buckets(0);
    stats.set_inflight_ios(7);
    // 10 requests held back per call, 5 ms each.
    stats.set_throttled_requests(10 * stats_calls_);
    stats.set_throttled_nanoseconds(10 * stats_calls_ * 5'000'000);
    return grpc::Status::OK;
  }

  // Every later call answers with this status.
  void FailWith(grpc::Status status) {
    std::lock_guard lock(mutex_);
    failure_ = std::move(status);
  }
  // Every later call of `method` ("DeleteVolume") answers with this status.
  void FailMethodWith(const std::string& method, grpc::Status status) {
    std::lock_guard lock(mutex_);
    method_failures_[method] = std::move(status);
  }
  // Every later call waits until the client gives up (its deadline).
  void HangUntilCancelled() { hang_ = true; }

  int calls() const { return calls_.load(); }
  std::vector<std::string> methods() const {
    std::lock_guard lock(mutex_);
    return methods_;
  }
  blk::v1::CreateVolumeRequest last_create() const {
    std::lock_guard lock(mutex_);
    return last_create_;
  }
  blk::v1::UpdateVolumeRequest last_update() const {
    std::lock_guard lock(mutex_);
    return last_update_;
  }
  blk::v1::ResizeVolumeRequest last_resize() const {
    std::lock_guard lock(mutex_);
    return last_resize_;
  }
  blk::v1::DeleteVolumeRequest last_delete() const {
    std::lock_guard lock(mutex_);
    return last_delete_;
  }

 private:
  template <typename Request>
  std::optional<grpc::Status> Record(grpc::ServerContext* context, const char* method,
                                     const Request& request) {
    ++calls_;
    {
      std::lock_guard lock(mutex_);
      methods_.push_back(method);
      if constexpr (std::is_same_v<Request, blk::v1::CreateVolumeRequest>) last_create_ = request;
      if constexpr (std::is_same_v<Request, blk::v1::DeleteVolumeRequest>) last_delete_ = request;
      if constexpr (std::is_same_v<Request, blk::v1::UpdateVolumeRequest>) last_update_ = request;
      if constexpr (std::is_same_v<Request, blk::v1::ResizeVolumeRequest>) last_resize_ = request;
      if (failure_) return failure_;
      if (auto it = method_failures_.find(method); it != method_failures_.end()) return it->second;
    }
    if (hang_) {
      // Polls for the client's cancellation, bounded so a broken client
      // cannot hang the test binary.
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!context->IsCancelled() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      return grpc::Status(grpc::StatusCode::CANCELLED, "client gave up");
    }
    return std::nullopt;
  }

  mutable std::mutex mutex_;
  std::map<std::string, blk::v1::Volume> volumes_;
  int next_device_id_ = 0;
  uint64_t stats_calls_ = 0;
  std::optional<grpc::Status> failure_;
  std::map<std::string, grpc::Status> method_failures_;
  std::atomic<bool> hang_{false};
  std::atomic<int> calls_{0};
  std::vector<std::string> methods_;
  blk::v1::CreateVolumeRequest last_create_;
  blk::v1::DeleteVolumeRequest last_delete_;
  blk::v1::UpdateVolumeRequest last_update_;
  blk::v1::ResizeVolumeRequest last_resize_;
};

using blk::testing::TempDir;

class FakeAgent {
 public:
  FakeAgent() : socket_path_(dir_.path() + "/agent.sock") {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_path_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) ADD_FAILURE() << "cannot serve on " << socket_path_;
  }
  ~FakeAgent() {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  }

  const std::string& socket_path() const { return socket_path_; }
  // Where nothing listens, in a directory that exists.
  std::string unused_socket_path() const { return dir_.path() + "/nobody.sock"; }
  const std::string& dir() const { return dir_.path(); }
  FakeVolumeService& service() { return service_; }

 private:
  TempDir dir_;
  std::string socket_path_;
  FakeVolumeService service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace blk::cli::testing
