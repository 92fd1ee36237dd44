#include "client/backend_uri.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/size_parse.h"
#include "common/percent_decode.h"

namespace blk::client {
namespace {

constexpr absl::string_view kSchemeSeparator = "://";

absl::StatusOr<std::string> DecodePath(absl::string_view uri, absl::string_view encoded) {
  absl::StatusOr<std::string> decoded = blk::PercentDecode(encoded);
  if (!decoded.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend URI '", uri, "': ", decoded.status().message()));
  }
  return decoded;
}

// RFC 3986 unreserved characters and '/' stay as they are; the rest is encoded
// so that ParseBackendUri reads the same path back.
bool KeepsLiteral(unsigned char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
}

// `also_literal`: characters a path may hold as they are besides those (':' in an NQN).
std::string PercentEncode(absl::string_view path, absl::string_view also_literal = "") {
  std::string encoded;
  for (const char c : path) {
    if (KeepsLiteral(static_cast<unsigned char>(c)) ||
        also_literal.find(c) != absl::string_view::npos) {
      encoded.push_back(c);
    } else {
      absl::StrAppendFormat(&encoded, "%%%02X", static_cast<unsigned char>(c));
    }
  }
  return encoded;
}

absl::StatusOr<blk::v1::Volume> ParseFileUri(absl::string_view uri, absl::string_view rest,
                                             absl::string_view scheme = "file") {
  if (rest.find_first_of("?#") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend URI '", uri,
                     "': file URIs take no query or fragment (write %3F for '?', %23 for '#')"));
  }
  const size_t path_start = rest.find('/');
  const absl::string_view host = rest.substr(0, path_start);
  if (!host.empty()) {
    const absl::string_view tail =
        path_start == absl::string_view::npos ? absl::string_view() : rest.substr(path_start);
    return absl::InvalidArgumentError(absl::StrCat(
        "backend URI '", uri, "' names host '", host,
        "'; a path must be absolute, with three slashes: ", scheme, ":///", host, tail));
  }
  if (path_start == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("backend URI '", uri, "' has no path (expected ",
                                                   scheme, ":///absolute/path)"));
  }
  absl::StatusOr<std::string> path = DecodePath(uri, rest.substr(path_start));
  if (!path.ok()) return path.status();
  blk::v1::Volume volume;
  volume.mutable_file()->set_path(*std::move(path));
  return volume;
}

// The agent checks NBD URIs fully (it is the one that connects); here only the shape that a
// typo would break: a host for nbd://, an absolute socket path for nbd+unix://.
absl::StatusOr<blk::v1::Volume> ParseNbdUri(absl::string_view uri, absl::string_view scheme,
                                            absl::string_view rest) {
  if (scheme == "nbd") {
    if (rest.empty() || rest.front() == '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("backend URI '", uri, "' has no host (expected nbd://host[:port]/export)"));
    }
  } else {
    const size_t socket = rest.find("socket=/");
    if (rest.empty() || rest.front() != '/' || socket == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("backend URI '", uri,
                       "' needs an absolute socket path: nbd+unix:///export?socket=/path"));
    }
  }
  blk::v1::Volume volume;
  volume.mutable_nbd()->set_uri(absl::StrCat(scheme, "://", rest));
  return volume;
}

// nvme:///dev/ngXnY[?offset=SIZE]: the path like a file URI's, the one query parameter a size.
absl::StatusOr<blk::v1::Volume> ParseNvmeUri(absl::string_view uri, absl::string_view rest) {
  const size_t query = rest.find('?');
  absl::StatusOr<blk::v1::Volume> path = ParseFileUri(uri, rest.substr(0, query), "nvme");
  if (!path.ok()) return path.status();
  blk::v1::Volume volume;
  volume.mutable_nvme()->set_path(path->file().path());
  if (query == absl::string_view::npos) return volume;
  absl::string_view parameter = rest.substr(query + 1);
  if (!absl::ConsumePrefix(&parameter, "offset=")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend URI '", uri, "': the only query parameter of nvme URIs is offset=SIZE"));
  }
  absl::StatusOr<uint64_t> offset = ParseSize(parameter);
  if (!offset.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend URI '", uri, "': offset: ", offset.status().message()));
  }
  volume.mutable_nvme()->set_offset_bytes(*offset);
  return volume;
}

// IANA's port for NVMe/TCP I/O controllers (8009 is the discovery controllers').
constexpr uint32_t kNvmeTcpPort = 4420;

absl::Status BadNvmeTcpUri(absl::string_view uri, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("backend URI '", uri, "': ", why));
}

// Digits only: SimpleAtoi would also take a sign and surrounding blanks.
bool ParseDecimal(absl::string_view text, uint32_t* value) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isdigit(c); }) &&
         absl::SimpleAtoi(text, value);
}

// The hosts the agent takes: a DNS name or IPv4 address ([A-Za-z0-9.-]) or an IPv6 address in
// brackets. Nothing else may pass: a host goes back into a URI (and to the agent) as it is.
bool IsNvmeTcpHost(absl::string_view host) {
  if (absl::ConsumePrefix(&host, "[")) {
    return absl::ConsumeSuffix(&host, "]") && !host.empty() &&
           std::all_of(host.begin(), host.end(),
                       [](char c) { return absl::ascii_isxdigit(c) || c == ':' || c == '.'; });
  }
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '-' || c == '.';
  });
}

// "HOST[:PORT]" as "HOST:PORT", the port 4420 when omitted. `what` names the text in errors.
absl::StatusOr<std::string> ParseNvmeTcpPath(absl::string_view uri, absl::string_view what,
                                             absl::string_view text) {
  absl::string_view host = text;
  absl::string_view port_text;
  bool has_port = false;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return BadNvmeTcpUri(uri,
                           absl::StrCat(what, " '", text, "': no ']' closes the IPv6 address"));
    }
    host = text.substr(0, close + 1);
    absl::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (!absl::ConsumePrefix(&after, ":")) {
        return BadNvmeTcpUri(uri, absl::StrCat(what, " '", text, "': '", after,
                                               "' after the IPv6 address (expected :PORT)"));
      }
      port_text = after;
      has_port = true;
    }
  } else if (const size_t colon = text.find(':'); colon != absl::string_view::npos) {
    if (text.find(':', colon + 1) != absl::string_view::npos) {
      return BadNvmeTcpUri(
          uri, absl::StrCat(what, " '", text, "': an IPv6 address goes in brackets: [::1]:4420"));
    }
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    has_port = true;
  }
  if (host.empty()) return BadNvmeTcpUri(uri, absl::StrCat(what, " '", text, "' has no host"));
  if (!IsNvmeTcpHost(host)) {
    return BadNvmeTcpUri(
        uri,
        absl::StrCat(what, " '", text, "'", host == text ? "" : absl::StrCat(": host '", host, "'"),
                     " is not an IPv4 address, a DNS name or an IPv6 address in brackets"));
  }
  uint32_t port = kNvmeTcpPort;
  if (has_port && (!ParseDecimal(port_text, &port) || port == 0 || port > 65535)) {
    return BadNvmeTcpUri(
        uri, absl::StrCat(what, " '", text, "': bad port '", port_text, "' (expected 1-65535)"));
  }
  return absl::StrCat(host, ":", port);
}

// nvme-tcp://HOST[:PORT]/NQN?nsid=N[&path=HOST[:PORT]]...[&offset=SIZE][&io_timeout=SECONDS]
// [&dhchap_secret_file=/PATH]: the authority is the first path, the NQN the percent-decoded URI
// path. The agent checks the values (NQN syntax, path count, duplicates, bounds); here only what
// a URI can get wrong.
absl::StatusOr<blk::v1::Volume> ParseNvmeTcpUri(absl::string_view uri, absl::string_view rest) {
  constexpr absl::string_view kShape = "nvme-tcp://host[:port]/nqn...?nsid=N";
  if (rest.find('#') != absl::string_view::npos) {
    return BadNvmeTcpUri(uri, "nvme-tcp URIs take no fragment (write %23 for '#')");
  }
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) {
    return BadNvmeTcpUri(uri, absl::StrCat("no subsystem NQN (expected ", kShape, ")"));
  }
  blk::v1::Volume volume;
  blk::v1::NvmeFabric& fabric = *volume.mutable_nvme()->mutable_fabric();
  absl::StatusOr<std::string> first = ParseNvmeTcpPath(uri, "host", rest.substr(0, slash));
  if (!first.ok()) return first.status();
  fabric.add_paths(*std::move(first));

  const size_t query = rest.find('?', slash);
  absl::StatusOr<std::string> nqn = DecodePath(uri, rest.substr(slash + 1, query - slash - 1));
  if (!nqn.ok()) return nqn.status();
  if (nqn->empty()) {
    return BadNvmeTcpUri(uri, absl::StrCat("the subsystem NQN is empty (expected ", kShape, ")"));
  }
  fabric.set_subsystem_nqn(*std::move(nqn));
  if (query == absl::string_view::npos) {
    return BadNvmeTcpUri(uri, "needs nsid=N, the namespace id in the subsystem (?nsid=1)");
  }

  bool has_offset = false;
  bool has_io_timeout = false;
  bool has_secret = false;
  for (const absl::string_view parameter : absl::StrSplit(rest.substr(query + 1), '&')) {
    const size_t equals = parameter.find('=');
    if (parameter.empty() || equals == absl::string_view::npos) {
      return BadNvmeTcpUri(uri, absl::StrCat("query parameter '", parameter, "' is not KEY=VALUE"));
    }
    const absl::string_view key = parameter.substr(0, equals);
    const absl::string_view value = parameter.substr(equals + 1);
    const bool again = (key == "nsid" && fabric.nsid() != 0) || (key == "offset" && has_offset) ||
                       (key == "io_timeout" && has_io_timeout) ||
                       (key == "dhchap_secret_file" && has_secret);
    if (again) return BadNvmeTcpUri(uri, absl::StrCat(key, " is given twice"));
    if (key == "nsid") {
      uint32_t nsid = 0;
      // 0 names no namespace, 0xFFFFFFFF all of them.
      if (!ParseDecimal(value, &nsid) || nsid == 0 || nsid == 0xFFFFFFFF) {
        return BadNvmeTcpUri(
            uri, absl::StrCat("nsid '", value, "' is not a namespace id (1-4294967294)"));
      }
      fabric.set_nsid(nsid);
    } else if (key == "path") {
      absl::StatusOr<std::string> decoded = DecodePath(uri, value);
      if (!decoded.ok()) return decoded.status();
      absl::StatusOr<std::string> path = ParseNvmeTcpPath(uri, "path", *decoded);
      if (!path.ok()) return path.status();
      fabric.add_paths(*std::move(path));
    } else if (key == "offset") {
      absl::StatusOr<uint64_t> offset = ParseSize(value);
      if (!offset.ok()) {
        return BadNvmeTcpUri(uri, absl::StrCat("offset: ", offset.status().message()));
      }
      volume.mutable_nvme()->set_offset_bytes(*offset);
      has_offset = true;
    } else if (key == "io_timeout") {
      uint32_t seconds = 0;
      if (!ParseDecimal(value, &seconds)) {
        return BadNvmeTcpUri(
            uri, absl::StrCat("io_timeout '", value, "' is not a whole number of seconds"));
      }
      fabric.set_io_timeout_seconds(seconds);
      has_io_timeout = true;
    } else if (key == "dhchap_secret_file") {
      absl::StatusOr<std::string> file = DecodePath(uri, value);
      if (!file.ok()) return file.status();
      if (file->empty() || file->front() != '/') {
        return BadNvmeTcpUri(
            uri, absl::StrCat("dhchap_secret_file '", *file, "' is not an absolute path"));
      }
      fabric.set_dhchap_secret_file(*std::move(file));
      has_secret = true;
    } else {
      return BadNvmeTcpUri(uri,
                           absl::StrCat("unknown query parameter '", key,
                                        "' (nvme-tcp URIs take nsid, path, offset, io_timeout and "
                                        "dhchap_secret_file)"));
    }
  }
  if (fabric.nsid() == 0) {
    return BadNvmeTcpUri(uri, "needs nsid=N, the namespace id in the subsystem (?nsid=1)");
  }
  return volume;
}

std::string FormatNvmeTcpUri(const blk::v1::NvmeBackend& nvme) {
  const blk::v1::NvmeFabric& fabric = nvme.fabric();
  std::string text =
      absl::StrCat("nvme-tcp://", fabric.paths().empty() ? "" : fabric.paths(0), "/",
                   PercentEncode(fabric.subsystem_nqn(), ":"), "?nsid=", fabric.nsid());
  for (int i = 1; i < fabric.paths_size(); ++i) absl::StrAppend(&text, "&path=", fabric.paths(i));
  if (nvme.offset_bytes() != 0) absl::StrAppend(&text, "&offset=", nvme.offset_bytes());
  if (fabric.io_timeout_seconds() != 0) {
    absl::StrAppend(&text, "&io_timeout=", fabric.io_timeout_seconds());
  }
  if (!fabric.dhchap_secret_file().empty()) {
    absl::StrAppend(&text, "&dhchap_secret_file=", PercentEncode(fabric.dhchap_secret_file()));
  }
  return text;
}

}  // namespace

absl::StatusOr<blk::v1::Volume> ParseBackendUri(absl::string_view uri) {
  const size_t separator = uri.find(kSchemeSeparator);
  if (separator == absl::string_view::npos || separator == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend URI '", uri, "' has no scheme (expected null:// or file:///absolute/path)"));
  }
  const std::string scheme = absl::AsciiStrToLower(uri.substr(0, separator));
  const absl::string_view rest = uri.substr(separator + kSchemeSeparator.size());
  if (scheme == "null") {
    if (!rest.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("backend URI '", uri, "': the null backend takes nothing after null://"));
    }
    blk::v1::Volume volume;
    volume.mutable_null();
    return volume;
  }
  if (scheme == "file") return ParseFileUri(uri, rest);
  if (scheme == "nbd" || scheme == "nbd+unix") return ParseNbdUri(uri, scheme, rest);
  if (scheme == "nvme") return ParseNvmeUri(uri, rest);
  if (scheme == "nvme-tcp") return ParseNvmeTcpUri(uri, rest);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend scheme '", scheme, "' in '", uri,
                   "' (supported: null, file, nbd, nbd+unix, nvme, nvme-tcp)"));
}

std::string FormatBackendUri(const blk::v1::Volume& volume) {
  switch (volume.backend_case()) {
    case blk::v1::Volume::kNull:
      return "null://";
    case blk::v1::Volume::kFile:
      return absl::StrCat("file://", PercentEncode(volume.file().path()));
    case blk::v1::Volume::kNbd:
      return volume.nbd().uri();
    case blk::v1::Volume::kNvme: {
      if (volume.nvme().has_fabric()) return FormatNvmeTcpUri(volume.nvme());
      std::string text = absl::StrCat("nvme://", PercentEncode(volume.nvme().path()));
      if (volume.nvme().offset_bytes() != 0) {
        absl::StrAppend(&text, "?offset=", volume.nvme().offset_bytes());
      }
      return text;
    }
    case blk::v1::Volume::BACKEND_NOT_SET:
      break;
  }
  return "";
}

}  // namespace blk::client
