#include "server/nbd_storage.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/nbd_forwarding_backend.h"

namespace blk::server {
namespace {

constexpr std::chrono::milliseconds kCreateTimeout(10000);

}  // namespace

absl::StatusOr<std::unique_ptr<NbdStorage>> NbdStorage::Open(const NbdBackendConfig& backend,
                                                             const DeviceConfig& config) {
  absl::StatusOr<NbdAddress> address = ParseNbdUri(backend.uri);
  if (!address.ok()) return address.status();
  absl::StatusOr<NbdConnection> connection = ConnectNbd(*address, kCreateTimeout);
  if (!connection.ok()) return connection.status();
  const nbd::ExportInfo& info = connection->info;
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
  std::unique_ptr<NbdStorage> storage(new NbdStorage());
  storage->address_ = *address;
  storage->info_ = info;
  storage->options_.read_only = config.read_only;
  storage->options_.device_size = config.size_bytes;
  storage->options_.io_timeout_ms = backend.io_timeout_ms;
  storage->first_ = std::move(*connection);
  storage->queues_ = std::max<uint16_t>(config.queues, 1);
  if (backend.stats != nullptr) storage->stats_ = backend.stats;
  return storage;
}

absl::StatusOr<std::unique_ptr<Backend>> NbdStorage::NewQueueBackend(uint16_t queue_depth) {
  if (queues_made_ >= queues_) {
    return absl::FailedPreconditionError(absl::StrCat("NBD volume on ", address_.ToString(),
                                                      " was opened for ", queues_, " queues"));
  }
  const bool shared = queues_ > 1 && !info_.can_multi_conn();
  if (shared && queues_made_ > 0) {
    if (queue_depth != shared_->depth) {
      return absl::FailedPreconditionError(
          absl::StrCat("NBD queue ", queues_made_, " has depth ", queue_depth,
                       ", the connection it shares serves depth ", shared_->depth));
    }
    return std::make_unique<NbdForwardingBackend>(shared_, queues_made_++);
  }
  NbdConnection connection;
  if (first_.has_value()) {
    connection = std::move(*first_);
    first_.reset();
  } else {
    absl::StatusOr<NbdConnection> more = ConnectNbd(address_, kCreateTimeout);
    if (!more.ok()) return more.status();
    connection = std::move(*more);
  }
  absl::StatusOr<std::unique_ptr<NbdReconnector>> reconnector = NbdReconnector::Create(address_);
  if (!reconnector.ok()) return reconnector.status();
  NbdBackendOptions options = options_;
  options.queue_depth = queue_depth;
  if (shared) {
    shared_ = std::make_shared<NbdSharedConnection>(queues_, queue_depth);
    options.shared = shared_;
  }
  ++queues_made_;
  return std::make_unique<NbdBackend>(std::move(connection), options, std::move(*reconnector),
                                      stats_);
}

absl::StatusOr<nbd::ExportInfo> ProbeNbdExport(const std::string& uri) {
  absl::StatusOr<NbdAddress> address = ParseNbdUri(uri);
  if (!address.ok()) return address.status();
  absl::StatusOr<NbdConnection> connection = ConnectNbd(*address, kCreateTimeout);
  if (!connection.ok()) return connection.status();
  return connection->info;
}

}  // namespace blk::server
