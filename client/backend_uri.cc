#include "client/backend_uri.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

std::string PercentEncode(absl::string_view path) {
  std::string encoded;
  for (const char c : path) {
    if (KeepsLiteral(static_cast<unsigned char>(c))) {
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
  return absl::InvalidArgumentError(absl::StrCat("unknown backend scheme '", scheme, "' in '", uri,
                                                 "' (supported: null, file, nbd, nbd+unix, nvme)"));
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
