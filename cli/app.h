#pragma once

#include <ostream>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace blk::cli {

inline constexpr int kExitOk = 0;
// The agent refused or failed the request, or could not be reached.
inline constexpr int kExitRpcError = 1;
// The command line itself is wrong; nothing was sent.
inline constexpr int kExitUsage = 2;

inline constexpr char kSocketEnv[] = "BLKCTL_SOCKET";

// "60s", "2m", "1m30s", "500ms" (absl duration syntax) or plain seconds ("60"); > 0. `what` names
// the value in the error ("timeout", "interval").
absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text,
                                                     absl::string_view what);
inline absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text) {
  return ParsePositiveDuration(text, "timeout");
}

// blkctl's whole command line: parses argv, performs the command, writes its
// result to out and any error (as "blkctl: CODE: message") to err, and
// returns the process exit code.
int RunBlkctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace blk::cli
