#include "client/size_parse.h"

#include <array>
#include <cctype>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace blk::client {
namespace {

struct Unit {
  char letter;
  int shift;
};

constexpr std::array<Unit, 4> kUnits = {{{'K', 10}, {'M', 20}, {'G', 30}, {'T', 40}}};

absl::Status BadSize(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid size '", text, "': ", why,
                   " (expected an integer number of bytes with an optional K, M, G or T "
                   "suffix, e.g. 4096, 64M, 64MiB)"));
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  if (text.empty()) return BadSize(text, "empty");
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  if (digits == 0) {
    if (text[0] == '-') return BadSize(text, "negative");
    return BadSize(text, "does not start with a digit");
  }

  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return BadSize(text, "too large");
    }
    value = value * 10 + digit;
  }

  absl::string_view suffix = text.substr(digits);
  if (suffix.empty()) return value;
  if (suffix[0] == '.' || suffix[0] == ',') return BadSize(text, "fractions are not supported");

  const char letter = absl::ascii_toupper(static_cast<unsigned char>(suffix[0]));
  const std::string rest = absl::AsciiStrToLower(suffix.substr(1));
  if (rest == "b" && letter != 'B') {
    // "MB" means 10^6 to some and 2^20 to others; only accept spellings that say which.
    return BadSize(text,
                   absl::StrCat("ambiguous suffix '", suffix, "', write ", std::string(1, letter),
                                " or ", std::string(1, letter), "iB (units are powers of 1024)"));
  }
  if (!rest.empty() && rest != "ib") {
    return BadSize(text, absl::StrCat("unknown suffix '", suffix, "'"));
  }
  for (const Unit& unit : kUnits) {
    if (unit.letter != letter) continue;
    if (value > (std::numeric_limits<uint64_t>::max() >> unit.shift)) {
      return BadSize(text, "too large");
    }
    return value << unit.shift;
  }
  if (letter == 'B' && rest.empty()) return value;
  return BadSize(text, absl::StrCat("unknown suffix '", suffix, "'"));
}

std::string FormatSize(uint64_t bytes) {
  for (auto unit = kUnits.rbegin(); unit != kUnits.rend(); ++unit) {
    const uint64_t one = uint64_t{1} << unit->shift;
    if (bytes < one) continue;
    if (bytes % one == 0) return absl::StrCat(bytes / one, std::string(1, unit->letter), "iB");
    // Rounded down, so that a size just short of a unit never reads as the unit.
    const uint64_t tenths = (bytes % one) * 10 / one;
    return absl::StrCat(bytes / one, ".", tenths, std::string(1, unit->letter), "iB");
  }
  return absl::StrCat(bytes, "B");
}

}  // namespace blk::client
