#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace blk::client {

// Parses a byte count as typed by an operator: a non-negative integer with an
// optional binary suffix K, M, G or T (powers of 1024), written with or
// without "iB" and in any case: "4096", "64M", "64MiB", "1g". Fractions
// ("1.5G") are rejected: sizes must come out exact.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

// For display: "64MiB" when the size is an exact multiple of a unit, else
// the largest unit that fits with one decimal, rounded down ("1.5GiB"), and
// plain bytes ("512B") below 1 KiB.
std::string FormatSize(uint64_t bytes);

}  // namespace blk::client
