#include "server/nbd/storage.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/nbd/connection_stash.h"
#include "server/nbd/forwarding_backend.h"

namespace blk::server::nbd {
namespace {

constexpr std::chrono::milliseconds kRecoverDialTimeout{2000};

}  // namespace

absl::StatusOr<std::unique_ptr<Storage>> Storage::Open(const NbdBackendConfig& backend,
                                                       const DeviceConfig& config,
                                                       OpenPurpose purpose) {
  absl::StatusOr<Address> address = ParseUri(backend.uri);
  if (!address.ok()) return address.status();
  const std::chrono::milliseconds connect_timeout(backend.connect_timeout_ms);
  std::unique_ptr<Storage> storage(new Storage());
  storage->address_ = *address;
  storage->connect_timeout_ = connect_timeout;
  storage->options_.read_only = config.read_only;
  storage->device_size_->store(config.size_bytes, std::memory_order_release);
  storage->options_.device_size = storage->device_size_;
  storage->options_.io_timeout_ms = backend.io_timeout_ms;
  storage->queues_ = std::max<uint16_t>(config.queues, 1);
  if (backend.stats != nullptr) storage->stats_ = backend.stats;

  // A recovery waits at most kRecoverDialTimeout for the server: its device's I/O is held
  // meanwhile, and the agent's restore waits for it.
  const bool recover = purpose == OpenPurpose::kRecover;
  std::optional<Connection> probed = ConnectionStash::Global().Take(address->ToString());
  absl::StatusOr<Connection> connection =
      probed.has_value()
          ? std::move(*probed)
          : Connect(*address,
                    recover ? std::min(connect_timeout, kRecoverDialTimeout) : connect_timeout);
  if (!connection.ok()) {
    if (recover && absl::IsUnavailable(connection.status())) {
      return storage;
    }
    return connection.status();
  }
  const ExportInfo& info = connection->info;
  const std::string where = address->ToString();
  if (config.size_bytes > info.size) {
    return absl::InvalidArgumentError(absl::StrCat("volume of ", config.size_bytes,
                                                   " bytes is larger than the NBD export ", where,
                                                   " (", info.size, " bytes)"));
  }
  if (info.read_only() && !config.read_only) {
    return absl::InvalidArgumentError(
        absl::StrCat("NBD export ", where, " is read-only: create the volume read-only"));
  }
  if (info.min_block > config.logical_block_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("NBD export ", where, " needs blocks of at least ", info.min_block,
                     " bytes, above the volume's logical block size ", config.logical_block_size));
  }
  storage->info_ = info;
  storage->first_ = std::move(*connection);
  return storage;
}

absl::Status Storage::Grow(uint64_t size_bytes) {
  absl::StatusOr<Connection> connection = Connect(address_, connect_timeout_);
  if (!connection.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot ask NBD export ", address_.ToString(),
                     " for its size: ", connection.status().message()));
  }
  if (connection->info.size < size_bytes) {
    return absl::FailedPreconditionError(absl::StrCat("NBD export ", address_.ToString(), " has ",
                                                      connection->info.size, " bytes, fewer than ",
                                                      size_bytes));
  }
  // Raised before the kernel grows the device, so no I/O beyond the old end can reach an export
  // a reconnect found shrunk back; the kernel refusing the new size leaves a floor the export was
  // just seen to meet.
  if (size_bytes > device_size_->load(std::memory_order_relaxed)) {
    device_size_->store(size_bytes, std::memory_order_release);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<server::Backend>> Storage::NewQueueBackend(uint16_t queue_depth) {
  if (queues_made_ >= queues_) {
    return absl::FailedPreconditionError(absl::StrCat("NBD volume on ", address_.ToString(),
                                                      " was opened for ", queues_, " queues"));
  }
  const bool shared = queues_ > 1 && !(info_.has_value() && info_->can_multi_conn());
  if (shared && queues_made_ > 0) {
    if (queue_depth != shared_->depth) {
      return absl::FailedPreconditionError(
          absl::StrCat("NBD queue ", queues_made_, " has depth ", queue_depth,
                       ", the connection it shares serves depth ", shared_->depth));
    }
    return std::make_unique<ForwardingBackend>(shared_, queues_made_++);
  }
  std::optional<Connection> connection;  // none: the server could not be reached at Open
  if (first_.has_value()) {
    connection = std::move(*first_);
    first_.reset();
  } else if (info_.has_value()) {
    absl::StatusOr<Connection> more = Connect(address_, connect_timeout_);
    if (!more.ok()) return more.status();
    connection = std::move(*more);
  }
  absl::StatusOr<std::unique_ptr<Reconnector>> reconnector =
      Reconnector::Create(address_, connect_timeout_);
  if (!reconnector.ok()) return reconnector.status();
  if (durability_ == nullptr) durability_ = std::make_shared<Durability>(shared ? 1 : queues_);
  BackendOptions options = options_;
  options.queue_depth = queue_depth;
  options.durability = durability_;
  options.connection = shared ? 0 : queues_made_;
  if (shared) {
    shared_ = std::make_shared<SharedConnection>(queues_, queue_depth);
    options.shared = shared_;
  }
  ++queues_made_;
  return std::make_unique<Backend>(std::move(connection), options, std::move(*reconnector), stats_);
}

absl::StatusOr<ExportInfo> ProbeExport(const std::string& uri, std::chrono::milliseconds timeout) {
  absl::StatusOr<Address> address = ParseUri(uri);
  if (!address.ok()) return address.status();
  absl::StatusOr<Connection> connection = Connect(*address, timeout);
  if (!connection.ok()) return connection.status();
  const ExportInfo info = connection->info;
  ConnectionStash::Global().Put(address->ToString(), std::move(*connection));
  return info;
}

void EndProbe(const std::string& uri) {
  absl::StatusOr<Address> address = ParseUri(uri);
  if (address.ok()) ConnectionStash::Global().Take(address->ToString());
}

}  // namespace blk::server::nbd
