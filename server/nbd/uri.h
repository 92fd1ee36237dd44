// Where an NBD export lives: "nbd://host[:port]/export" (TCP, port 10809 by default) or
// "nbd+unix:///export?socket=PATH" (a Unix socket). The export name is percent-decoded.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace blk::server::nbd {

struct Address {
  std::string host;         // TCP; empty for a Unix socket
  uint16_t port = 10809;    // TCP
  std::string unix_socket;  // absolute path; empty for TCP
  std::string export_name;

  bool is_unix() const { return !unix_socket.empty(); }
  // For messages: "nbd://h:p/e" or "nbd+unix:///e?socket=/p".
  std::string ToString() const;
};

inline constexpr uint16_t kNbdDefaultPort = 10809;

absl::StatusOr<Address> ParseUri(absl::string_view uri);

}  // namespace blk::server::nbd
