#include "server/nbd/uri.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/percent_decode.h"

namespace blk::server::nbd {
namespace {

absl::Status Invalid(absl::string_view uri, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("NBD URI \"", uri, "\": ", why));
}

absl::StatusOr<std::string> Decode(absl::string_view uri, absl::string_view encoded) {
  absl::StatusOr<std::string> decoded = blk::PercentDecode(encoded);
  if (!decoded.ok()) return Invalid(uri, decoded.status().message());
  return decoded;
}

}  // namespace

std::string Address::ToString() const {
  if (is_unix()) return absl::StrCat("nbd+unix:///", export_name, "?socket=", unix_socket);
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat("nbd://", v6 ? "[" : "", host, v6 ? "]" : "", ":", port, "/", export_name);
}

absl::StatusOr<Address> ParseUri(absl::string_view uri) {
  Address address;
  absl::string_view rest = uri;
  if (absl::ConsumePrefix(&rest, "nbd+unix://")) {
    if (!absl::ConsumePrefix(&rest, "/")) {
      return Invalid(uri, "a Unix-socket URI has no host: nbd+unix:///export?socket=PATH");
    }
    const size_t query = rest.find('?');
    if (query == absl::string_view::npos) return Invalid(uri, "needs ?socket=PATH");
    absl::StatusOr<std::string> name = Decode(uri, rest.substr(0, query));
    if (!name.ok()) return name.status();
    address.export_name = std::move(*name);
    absl::string_view params = rest.substr(query + 1);
    while (!params.empty()) {
      const size_t amp = params.find('&');
      absl::string_view param = params.substr(0, amp);
      params = amp == absl::string_view::npos ? absl::string_view() : params.substr(amp + 1);
      if (absl::ConsumePrefix(&param, "socket=")) {
        absl::StatusOr<std::string> path = Decode(uri, param);
        if (!path.ok()) return path.status();
        address.unix_socket = std::move(*path);
      } else {
        return Invalid(uri, absl::StrCat("unknown parameter \"", param, "\""));
      }
    }
    if (address.unix_socket.empty() || address.unix_socket[0] != '/') {
      return Invalid(uri, "socket must be an absolute path");
    }
    return address;
  }
  if (!absl::ConsumePrefix(&rest, "nbd://")) {
    return Invalid(uri, "scheme must be nbd:// or nbd+unix://");
  }
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  absl::string_view path = slash == absl::string_view::npos ? "" : rest.substr(slash + 1);
  if (path.find('?') != absl::string_view::npos) return Invalid(uri, "no query allowed");
  absl::string_view port_text;
  if (absl::ConsumePrefix(&authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return Invalid(uri, "unclosed [ in host");
    address.host = std::string(authority.substr(0, close));
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty() && !absl::ConsumePrefix(&after, ":")) return Invalid(uri, "junk after ]");
    port_text = after;
  } else {
    const size_t colon = authority.find(':');
    address.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (address.host.empty()) return Invalid(uri, "no host");
  if (!port_text.empty()) {
    uint32_t port = 0;
    if (!absl::SimpleAtoi(port_text, &port) || port == 0 || port > 65535) {
      return Invalid(uri, absl::StrCat("bad port \"", port_text, "\""));
    }
    address.port = static_cast<uint16_t>(port);
  }
  absl::StatusOr<std::string> name = Decode(uri, path);
  if (!name.ok()) return name.status();
  address.export_name = std::move(*name);
  return address;
}

}  // namespace blk::server::nbd
