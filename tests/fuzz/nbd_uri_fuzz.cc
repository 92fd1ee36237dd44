// libFuzzer target: NBD URI parsing of arbitrary strings. An accepted URI names a host or an
// absolute socket path, and its printed form parses again to the same place.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/nbd/uri.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string uri(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<blk::server::nbd::Address> address = blk::server::nbd::ParseUri(uri);
  if (!address.ok()) return 0;
  if (address->is_unix() ? address->unix_socket[0] != '/' : address->host.empty()) abort();
  if (address->port == 0) abort();
  // Export names and paths are printed undecoded, so only plain ones must round-trip.
  const std::string& name = address->export_name;
  const std::string& path = address->unix_socket;
  if (name.find_first_of("%?&/#") != std::string::npos) return 0;
  if (path.find_first_of("%?&#") != std::string::npos) return 0;
  if (address->host.find_first_of("[]/%") != std::string::npos) return 0;
  absl::StatusOr<blk::server::nbd::Address> again = blk::server::nbd::ParseUri(address->ToString());
  if (!again.ok() || again->host != address->host || again->port != address->port ||
      again->unix_socket != address->unix_socket || again->export_name != name) {
    abort();
  }
  return 0;
}
