// The NBD wire protocol as a client sees it (the NBD project's doc/proto.md): handshake
// messages, request headers, and an incremental parser for simple and structured replies. Pure
// functions over bytes: no sockets here, so everything is unit-testable and fuzzable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/nbd/read_coverage.h"

namespace blk::server::nbd {

// Handshake.
inline constexpr uint64_t kInitMagic = 0x4e42444d41474943;  // "NBDMAGIC"
inline constexpr uint64_t kOptMagic = 0x49484156454F5054;   // "IHAVEOPT"
inline constexpr uint64_t kOptReplyMagic = 0x3e889045565a9;
inline constexpr uint16_t kFlagFixedNewstyle = 1 << 0;
inline constexpr uint16_t kFlagNoZeroes = 1 << 1;
inline constexpr uint32_t kClientFlagFixedNewstyle = 1 << 0;
inline constexpr uint32_t kClientFlagNoZeroes = 1 << 1;

inline constexpr uint32_t kOptExportName = 1;
inline constexpr uint32_t kOptAbort = 2;
inline constexpr uint32_t kOptGo = 7;
inline constexpr uint32_t kOptStructuredReply = 8;

inline constexpr uint32_t kRepAck = 1;
inline constexpr uint32_t kRepInfo = 3;
inline constexpr uint32_t kRepFlagError = 1u << 31;
inline constexpr uint32_t kRepErrUnsup = kRepFlagError | 1;
// The server is shutting down: it will not serve this connection (NBD_REP_ERR_SHUTDOWN).
inline constexpr uint32_t kRepErrShutdown = kRepFlagError | 7;

inline constexpr uint16_t kInfoExport = 0;
inline constexpr uint16_t kInfoBlockSize = 3;

// Transmission flags.
inline constexpr uint16_t kFlagHasFlags = 1 << 0;
inline constexpr uint16_t kFlagReadOnly = 1 << 1;
inline constexpr uint16_t kFlagSendFlush = 1 << 2;
inline constexpr uint16_t kFlagSendFua = 1 << 3;
inline constexpr uint16_t kFlagSendTrim = 1 << 5;
inline constexpr uint16_t kFlagSendWriteZeroes = 1 << 6;
inline constexpr uint16_t kFlagCanMultiConn = 1 << 8;

// Transmission.
inline constexpr uint32_t kRequestMagic = 0x25609513;
inline constexpr uint32_t kSimpleReplyMagic = 0x67446698;
inline constexpr uint32_t kStructuredReplyMagic = 0x668e33ef;
inline constexpr size_t kRequestHeaderBytes = 28;
inline constexpr size_t kSimpleReplyHeaderBytes = 16;
inline constexpr size_t kStructuredReplyHeaderBytes = 20;

inline constexpr uint16_t kCmdFlagFua = 1 << 0;
inline constexpr uint16_t kCmdRead = 0;
inline constexpr uint16_t kCmdWrite = 1;
inline constexpr uint16_t kCmdDisc = 2;
inline constexpr uint16_t kCmdFlush = 3;
inline constexpr uint16_t kCmdTrim = 4;
inline constexpr uint16_t kCmdWriteZeroes = 6;

inline constexpr uint16_t kReplyFlagDone = 1 << 0;
inline constexpr uint16_t kChunkNone = 0;
inline constexpr uint16_t kChunkOffsetData = 1;
inline constexpr uint16_t kChunkOffsetHole = 2;
inline constexpr uint16_t kChunkErrorBit = 1 << 15;
inline constexpr uint16_t kChunkError = kChunkErrorBit | 1;
inline constexpr uint16_t kChunkErrorOffset = kChunkErrorBit | 2;

// Big-endian helpers (the wire is network byte order).
void PutU16(uint8_t* p, uint16_t v);
void PutU32(uint8_t* p, uint32_t v);
void PutU64(uint8_t* p, uint64_t v);
uint16_t GetU16(const uint8_t* p);
uint32_t GetU32(const uint8_t* p);
uint64_t GetU64(const uint8_t* p);

// NBD_ESHUTDOWN: the server is going away. Not the request's fault: it is worth resending on the
// next connection.
inline constexpr uint32_t kNbdErrShutdown = 108;

// An NBD error number on the wire as the errno the block layer gets. Unknown values are EIO.
int ErrnoOfNbdError(uint32_t nbd_error);

// What the handshake learnt about the export.
struct ExportInfo {
  uint64_t size = 0;
  uint16_t flags = 0;  // transmission flags
  uint32_t min_block = 1;
  uint32_t preferred_block = 4096;
  uint32_t max_payload = 32 * 1024 * 1024;  // the protocol's default when the server says nothing
  bool structured_replies = false;

  bool read_only() const { return flags & kFlagReadOnly; }
  bool can_flush() const { return flags & kFlagSendFlush; }
  bool can_fua() const { return flags & kFlagSendFua; }
  bool can_trim() const { return flags & kFlagSendTrim; }
  bool can_write_zeroes() const { return flags & kFlagSendWriteZeroes; }
  bool can_multi_conn() const { return flags & kFlagCanMultiConn; }
};

// Client option message: IHAVEOPT, option, length, data.
std::vector<uint8_t> EncodeOption(uint32_t option, absl::string_view data);
// NBD_OPT_GO data: the export name and the infos we ask for (BLOCK_SIZE).
std::string GoOptionData(absl::string_view export_name);

struct OptionReplyHeader {
  uint32_t option = 0;
  uint32_t type = 0;
  uint32_t length = 0;
};
inline constexpr size_t kOptionReplyHeaderBytes = 20;
// Parses the 20-byte option reply header; a wrong magic is an error.
absl::StatusOr<OptionReplyHeader> ParseOptionReplyHeader(const uint8_t* p);
// Applies an NBD_REP_INFO payload to `info` (unknown info types are ignored).
absl::Status ApplyInfoReply(const uint8_t* p, size_t n, ExportInfo* info);
// Checks the block size constraints the server sent for consistency.
absl::Status ValidateBlockSizes(const ExportInfo& info);

void EncodeRequest(uint8_t* out, uint16_t flags, uint16_t command, uint64_t cookie, uint64_t offset,
                   uint32_t length);

// Where the reply to a request goes. Owned by the caller, found by cookie.
struct ReplyTarget {
  uint16_t command = 0;
  uint64_t offset = 0;        // of the request
  uint32_t length = 0;        // of the request
  uint8_t* buffer = nullptr;  // destination of read data (length bytes)
  ReadCoverage covered;       // read bytes delivered so far (data or hole)
  uint32_t nbd_error = 0;     // first error the server reported, 0 for none
};

class ReplyTargets {
 public:
  virtual ~ReplyTargets() = default;
  // The request awaiting a reply under `cookie`, or nullptr when there is none.
  virtual ReplyTarget* Find(uint64_t cookie) = 0;
  // The final reply for `cookie` was parsed; target.nbd_error says how it ended.
  virtual void Complete(uint64_t cookie) = 0;
};

// Incremental reply parser: feed it whatever the socket gave, in any pieces. Read data is copied
// into the target's buffer, holes are zeroed. Any malformed, unexpected or out-of-range reply is
// an error, after which the parser must not be used again (the connection is dropped). A read's
// chunks must cover it exactly once: an overlap, a gap, or more scattered pieces than
// ReadCoverage::kMaxRanges is an error too.
//
// Inside a read payload (a simple reply's data, an OFFSET_DATA chunk's data), the caller may also
// receive the payload's bytes straight where they belong (PendingPayload) and tell the parser they
// arrived (PayloadArrived) instead of feeding them: no copy.
class ReplyParser {
 public:
  // The rest of the read payload the parser is inside: `length` bytes that belong at `dst`, in the
  // buffer of the request under `cookie`. length is 0 when the next bytes are not read data.
  struct Payload {
    uint8_t* dst = nullptr;
    uint32_t length = 0;
    uint64_t cookie = 0;
  };

  explicit ReplyParser(bool structured_replies) : structured_(structured_replies) {}
  void Reset(bool structured_replies);
  absl::Status Feed(const uint8_t* data, size_t n, ReplyTargets& targets);

  Payload PendingPayload() const;
  // The caller wrote the next `n` bytes of the pending payload at PendingPayload().dst (1 <= n <=
  // its length): the parser goes on as if Feed had brought them, completing the request when they
  // were its last. Errors as Feed's (a final chunk that leaves its read uncovered); an `n` outside
  // the pending payload is one too (a bug of the caller).
  absl::Status PayloadArrived(size_t n, ReplyTargets& targets);

 private:
  enum class State : uint8_t {
    kMagic,         // collecting the 4-byte magic
    kSimpleHeader,  // rest of the simple header
    kSimpleData,    // read payload of a simple reply
    kChunkHeader,   // rest of the structured header
    kChunkPayload,  // collecting a small chunk payload (hole, error) into scratch_
    kChunkOffset,   // the 8-byte offset of an OFFSET_DATA chunk
    kChunkData,     // OFFSET_DATA payload, straight into the buffer
  };

  absl::Status OnHeaderComplete(ReplyTargets& targets);
  absl::Status OnChunkHeader(ReplyTargets& targets);
  absl::Status OnChunkPayload(ReplyTargets& targets);
  absl::Status FinishChunk(ReplyTargets& targets);
  // `n` bytes (at most data_left_) of the read payload are in place.
  absl::Status PayloadDelivered(size_t n, ReplyTargets& targets);
  bool InPayload() const { return state_ == State::kSimpleData || state_ == State::kChunkData; }

  bool structured_;
  State state_ = State::kMagic;
  uint8_t header_[kStructuredReplyHeaderBytes] = {};
  size_t have_ = 0;  // bytes of the current header / scratch part collected
  uint64_t cookie_ = 0;
  ReplyTarget* target_ = nullptr;
  uint16_t chunk_flags_ = 0;
  uint16_t chunk_type_ = 0;
  uint32_t chunk_length_ = 0;
  uint32_t data_pos_ = 0;   // offset in the request's buffer where data goes
  uint32_t data_left_ = 0;  // payload bytes still to come in this state
  // Small chunk payloads: a hole (12 bytes) or an error (6 + message + 8); longer ones are refused.
  static constexpr size_t kScratchBytes = 4096 + 16;
  uint8_t scratch_[kScratchBytes] = {};
};

}  // namespace blk::server::nbd
