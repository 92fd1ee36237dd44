#pragma once

#include <string>

#include "absl/status/status.h"

namespace blk {

// Replaces `path` with `contents` so that a crash leaves either the old or the
// new file, never a torn one: write a temporary file, fsync it, rename it over
// the target, fsync the directory.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

// Makes the creation, rename or removal of `path` durable: fsync of its directory.
absl::Status SyncDirectoryOf(const std::string& path);

// Removes `path` durably (unlink + fsync of the directory). A missing file is OK.
absl::Status RemoveFileDurably(const std::string& path);

}  // namespace blk
