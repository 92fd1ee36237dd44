// The requests a queue answers itself, before its backend sees them: the same answer whatever
// the backend, so no backend repeats these checks.
#pragma once

#include <cstdint>

#include "server/backend.h"

namespace blk::server {

// 0 when the backend should serve `op`; otherwise the result the request completes with:
// -EOPNOTSUPP for an op the block layer may send but no backend serves (zones, WRITE_SAME) or
// one the storage said it lacks (StorageTraits::discard, ::write_zeroes), -EROFS for anything
// that changes data on a read-only device (checked first).
int32_t AdmitIo(uint8_t op, bool read_only, const StorageTraits& traits);

}  // namespace blk::server
