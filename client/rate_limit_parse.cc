#include "client/rate_limit_parse.h"

#include <algorithm>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/size_parse.h"

namespace blk::client {
namespace {

absl::StatusOr<uint64_t> ParseCount(absl::string_view text) {
  uint64_t count = 0;
  // SimpleAtoi alone would take "+5" and " 5".
  const bool digits = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
  if (!digits || !absl::SimpleAtoi(text, &count)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid count '", text, "'", !text.empty() && text.front() == '-' ? ": negative" : "",
        " (expected a whole number of operations, e.g. 1000)"));
  }
  return count;
}

// "RATE" or "RATE:BURST", each read by `parse`.
absl::StatusOr<blk::v1::RateLimit> ParseRateLimit(
    absl::string_view text, absl::string_view form,
    const std::function<absl::StatusOr<uint64_t>(absl::string_view)>& parse) {
  const size_t colon = text.find(':');
  const absl::string_view rate_text = text.substr(0, colon);
  absl::StatusOr<uint64_t> rate = parse(rate_text);
  if (!rate.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit '", text, "' (", form, "): ", rate.status().message()));
  }
  blk::v1::RateLimit limit;
  limit.set_rate(*rate);
  if (colon == absl::string_view::npos) return limit;
  absl::StatusOr<uint64_t> burst = parse(text.substr(colon + 1));
  if (!burst.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit '", text, "' (", form, "): burst: ", burst.status().message()));
  }
  limit.set_burst(*burst);
  return limit;
}

}  // namespace

absl::StatusOr<blk::v1::RateLimit> ParseIopsLimit(absl::string_view text) {
  return ParseRateLimit(text, "N[:BURST]", ParseCount);
}

absl::StatusOr<blk::v1::RateLimit> ParseBytesLimit(absl::string_view text) {
  return ParseRateLimit(text, "SIZE[:BURST]", ParseSize);
}

}  // namespace blk::client
