#include "server/backend.h"

#include "server/local/file_backend.h"
#include "server/local/null_backend.h"
#include "server/nbd/storage.h"
#include "server/nvme/storage.h"

namespace blk::server {

absl::StatusOr<std::unique_ptr<Storage>> OpenStorage(const DeviceConfig& config,
                                                     OpenPurpose purpose) {
  if (const auto* file = std::get_if<FileBackendConfig>(&config.backend)) {
    absl::StatusOr<std::unique_ptr<FileStorage>> storage =
        FileStorage::Open(file->path, config, purpose);
    if (!storage.ok()) return storage.status();
    return std::unique_ptr<Storage>(std::move(*storage));
  }
  if (const auto* nbd = std::get_if<NbdBackendConfig>(&config.backend)) {
    absl::StatusOr<std::unique_ptr<nbd::Storage>> storage =
        nbd::Storage::Open(*nbd, config, purpose);
    if (!storage.ok()) return storage.status();
    return std::unique_ptr<Storage>(std::move(*storage));
  }
  if (const auto* nvme = std::get_if<NvmeBackendConfig>(&config.backend)) {
    absl::StatusOr<std::unique_ptr<NvmeStorage>> storage = NvmeStorage::Open(*nvme, config);
    if (!storage.ok()) return storage.status();
    return std::unique_ptr<Storage>(std::move(*storage));
  }
  return std::unique_ptr<Storage>(std::make_unique<NullStorage>());
}

}  // namespace blk::server
