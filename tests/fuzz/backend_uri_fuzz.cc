// libFuzzer target: backend URIs as blkctl reads them (cli/backend_uri), with their percent-encoded
// paths, the nvme:// ?offset=SIZE and the nvme-tcp:// hosts, NQN and query. An accepted URI sets
// exactly one backend, and its printed form parses back to the same backend.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "client/backend_uri.h"
#include "google/protobuf/util/message_differencer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string uri(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<blk::v1::Volume> volume = blk::client::ParseBackendUri(uri);
  if (!volume.ok()) {
    if (volume.status().message().empty()) abort();
    return 0;
  }
  if (volume->backend_case() == blk::v1::Volume::BACKEND_NOT_SET) abort();
  const std::string printed = blk::client::FormatBackendUri(*volume);
  absl::StatusOr<blk::v1::Volume> again = blk::client::ParseBackendUri(printed);
  if (!again.ok() || !google::protobuf::util::MessageDifferencer::Equals(*again, *volume)) abort();
  return 0;
}
