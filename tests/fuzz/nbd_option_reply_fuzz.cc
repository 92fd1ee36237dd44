// libFuzzer target: the handshake's byte parsers (server/nbd/protocol): option reply headers and
// the NBD_REP_INFO payloads that fill the export's size, flags and block sizes, then the block
// size check. Input: a stream of (20-byte header, payload of header.length bytes) replies.
// A header parses only with the reply magic and returns the fields as sent; an info reply of a
// known type and its exact length sets exactly its fields, of a wrong length changes nothing;
// unknown types are ignored; accepted block sizes are a power-of-two minimum up to 64 KiB and a
// maximum payload not below it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "server/nbd/protocol.h"

namespace {

using namespace blk::server::nbd;

bool Same(const ExportInfo& a, const ExportInfo& b) {
  return a.size == b.size && a.flags == b.flags && a.min_block == b.min_block &&
         a.preferred_block == b.preferred_block && a.max_payload == b.max_payload &&
         a.structured_replies == b.structured_replies;
}

void CheckInfo(const uint8_t* p, size_t n, ExportInfo& info) {
  const ExportInfo before = info;
  const absl::Status status = ApplyInfoReply(p, n, &info);
  if (n < 2) {
    if (status.ok() || !Same(info, before)) abort();
    return;
  }
  const uint16_t type = GetU16(p);
  ExportInfo expected = before;
  bool valid = true;
  if (type == kInfoExport) {
    valid = n == 12;
    if (valid) {
      expected.size = GetU64(p + 2);
      expected.flags = GetU16(p + 10);
    }
  } else if (type == kInfoBlockSize) {
    valid = n == 14;
    if (valid) {
      expected.min_block = GetU32(p + 2);
      expected.preferred_block = GetU32(p + 6);
      expected.max_payload = GetU32(p + 10);
    }
  }
  if (status.ok() != valid || !Same(info, valid ? expected : before)) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ExportInfo info;
  while (size >= kOptionReplyHeaderBytes) {
    absl::StatusOr<OptionReplyHeader> header = ParseOptionReplyHeader(data);
    if (header.ok() != (GetU64(data) == kOptReplyMagic)) abort();
    if (header.ok() && (header->option != GetU32(data + 8) || header->type != GetU32(data + 12) ||
                        header->length != GetU32(data + 16))) {
      abort();
    }
    const size_t length = header.ok() ? header->length : 0;
    data += kOptionReplyHeaderBytes;
    size -= kOptionReplyHeaderBytes;
    const size_t n = length < size ? length : size;
    if (header.ok() && header->type == kRepInfo) CheckInfo(data, n, info);
    data += n;
    size -= n;
  }
  if (ValidateBlockSizes(info).ok()) {
    const uint32_t min = info.min_block;
    if (min == 0 || (min & (min - 1)) != 0 || min > 65536 || info.max_payload < min) abort();
  }
  return 0;
}
