// A device backed by a remote NBD export. One connection per queue when the server advertises
// multi-conn; without it, one connection that queue 0 drives for all queues (see
// shared_connection.h). Queue backends are made in queue order, queue 0 first.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "server/backend.h"
#include "server/nbd/backend.h"
#include "server/nbd/handshake.h"
#include "server/nbd/shared_connection.h"
#include "server/nbd/uri.h"

namespace blk::server::nbd {

class Storage final : public server::Storage {
 public:
  // Connects and negotiates; refuses a volume larger than the export, a writable volume on a
  // read-only export, and a logical block size below the server's minimum. For a device the
  // kernel holds (kRecover), a server that cannot be reached within 2 s (or the connect timeout,
  // if shorter) does not stop the recovery: the
  // queues start without a connection and keep dialling, the kernel's held I/O waits for the
  // server or fails at io_timeout, as in any outage, and the checks apply to the export found
  // then. Such a volume's queues share one connection (multi-conn is not known yet).
  static absl::StatusOr<std::unique_ptr<Storage>> Open(const NbdBackendConfig& backend,
                                                       const DeviceConfig& config,
                                                       OpenPurpose purpose = OpenPurpose::kCreate);
  absl::StatusOr<std::unique_ptr<server::Backend>> NewQueueBackend(uint16_t queue_depth) override;
  // Asks the server again for the export's size (it may have grown since Open): FailedPrecondition
  // when it is still smaller than `size_bytes`. Otherwise a reconnect from then on must find the
  // export at least `size_bytes` large. Blocking (a new connection).
  absl::Status Grow(uint64_t size_bytes) override;

  // What the export offered at Open; nothing when its server could not be reached (kRecover).
  const std::optional<ExportInfo>& export_info() const { return info_; }
  const std::shared_ptr<Stats>& stats() const { return stats_; }

 private:
  Storage() = default;

  Address address_;
  std::chrono::milliseconds connect_timeout_{0};  // NbdBackendConfig::connect_timeout_ms
  std::optional<ExportInfo> info_;
  BackendOptions options_;
  // The size a reconnected export must still have; the queues' backends share it.
  std::shared_ptr<std::atomic<uint64_t>> device_size_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::optional<Connection> first_;  // made by Open, used by the first queue
  uint16_t queues_ = 1;
  uint16_t queues_made_ = 0;
  std::shared_ptr<SharedConnection> shared_;  // without multi-conn and with several queues
  std::shared_ptr<Durability> durability_;    // made with the first queue's backend
  std::shared_ptr<Stats> stats_ = std::make_shared<Stats>();
};

// Connects once to learn what the export offers (e.g. its size, for a volume created without
// one); each step of the handshake gives up after `timeout`. Blocking. The connection is kept a
// while for the volume's Storage::Open (connection_stash.h).
absl::StatusOr<ExportInfo> ProbeExport(const std::string& uri, std::chrono::milliseconds timeout);
// Ends the connection a probe of `uri` kept, if no Storage::Open took it (the call that probed is
// over).
void EndProbe(const std::string& uri);

}  // namespace blk::server::nbd
