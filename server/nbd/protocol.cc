#include "server/nbd/protocol.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace blk::server::nbd {
namespace {

absl::Status Malformed(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed NBD reply: ", what));
}

bool IsPowerOfTwo(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Records that a chunk delivers bytes [begin, begin + length) of the request, checked before they
// are written: a server must send each byte of a read once (NBD proto.md, structured replies).
absl::Status Claim(ReplyTarget& target, uint32_t begin, uint32_t length, absl::string_view kind) {
  switch (target.covered.Add(begin, begin + length)) {
    case ReadCoverage::Claim::kAdded:
      return absl::OkStatus();
    case ReadCoverage::Claim::kOverlap:
      return Malformed(absl::StrCat(kind, " chunk at ", target.offset + begin, "+", length,
                                    " overlaps bytes of the read already sent"));
    case ReadCoverage::Claim::kTooFragmented:
      return Malformed(absl::StrCat(kind, " chunk at ", target.offset + begin, "+", length,
                                    " leaves the read in more than ", ReadCoverage::kMaxRanges,
                                    " separate pieces"));
  }
  return Malformed("unknown coverage claim");
}

}  // namespace

void PutU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void PutU32(uint8_t* p, uint32_t v) {
  PutU16(p, static_cast<uint16_t>(v >> 16));
  PutU16(p + 2, static_cast<uint16_t>(v));
}
void PutU64(uint8_t* p, uint64_t v) {
  PutU32(p, static_cast<uint32_t>(v >> 32));
  PutU32(p + 4, static_cast<uint32_t>(v));
}
uint16_t GetU16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t GetU32(const uint8_t* p) { return (uint32_t{GetU16(p)} << 16) | GetU16(p + 2); }
uint64_t GetU64(const uint8_t* p) { return (uint64_t{GetU32(p)} << 32) | GetU32(p + 4); }

int ErrnoOfNbdError(uint32_t nbd_error) {
  // The protocol's error values are the Linux errno numbers, a fixed list of them.
  switch (nbd_error) {
    case 1:
      return EPERM;
    case 5:
      return EIO;
    case 12:
      return ENOMEM;
    case 22:
      return EINVAL;
    case 28:
      return ENOSPC;
    case 75:
      return EOVERFLOW;
    case 95:
      return EOPNOTSUPP;
    case kNbdErrShutdown:
      return ESHUTDOWN;
    default:
      return EIO;
  }
}

std::vector<uint8_t> EncodeOption(uint32_t option, absl::string_view data) {
  std::vector<uint8_t> out(16 + data.size());
  PutU64(out.data(), kOptMagic);
  PutU32(out.data() + 8, option);
  PutU32(out.data() + 12, static_cast<uint32_t>(data.size()));
  if (!data.empty()) std::memcpy(out.data() + 16, data.data(), data.size());
  return out;
}

std::string GoOptionData(absl::string_view export_name) {
  std::string data(4 + export_name.size() + 4, '\0');
  auto* p = reinterpret_cast<uint8_t*>(data.data());
  PutU32(p, static_cast<uint32_t>(export_name.size()));
  std::memcpy(p + 4, export_name.data(), export_name.size());
  PutU16(p + 4 + export_name.size(), 1);
  PutU16(p + 6 + export_name.size(), kInfoBlockSize);
  return data;
}

absl::StatusOr<OptionReplyHeader> ParseOptionReplyHeader(const uint8_t* p) {
  if (GetU64(p) != kOptReplyMagic) {
    return absl::DataLossError("NBD option reply has a wrong magic");
  }
  OptionReplyHeader header;
  header.option = GetU32(p + 8);
  header.type = GetU32(p + 12);
  header.length = GetU32(p + 16);
  return header;
}

absl::Status ApplyInfoReply(const uint8_t* p, size_t n, ExportInfo* info) {
  if (n < 2) return absl::DataLossError("NBD_REP_INFO shorter than its type");
  const uint16_t type = GetU16(p);
  if (type == kInfoExport) {
    if (n != 12) return absl::DataLossError(absl::StrCat("NBD_INFO_EXPORT of ", n, " bytes"));
    info->size = GetU64(p + 2);
    info->flags = GetU16(p + 10);
  } else if (type == kInfoBlockSize) {
    if (n != 14) return absl::DataLossError(absl::StrCat("NBD_INFO_BLOCK_SIZE of ", n, " bytes"));
    info->min_block = GetU32(p + 2);
    info->preferred_block = GetU32(p + 6);
    info->max_payload = GetU32(p + 10);
  }
  return absl::OkStatus();
}

absl::Status ValidateBlockSizes(const ExportInfo& info) {
  if (!IsPowerOfTwo(info.min_block) || info.min_block > 65536) {
    return absl::DataLossError(
        absl::StrCat("NBD server's minimum block size ", info.min_block, " is invalid"));
  }
  if (info.max_payload < info.min_block) {
    return absl::DataLossError(absl::StrCat("NBD server's maximum payload ", info.max_payload,
                                            " is below its minimum block size ", info.min_block));
  }
  return absl::OkStatus();
}

void EncodeRequest(uint8_t* out, uint16_t flags, uint16_t command, uint64_t cookie, uint64_t offset,
                   uint32_t length) {
  PutU32(out, kRequestMagic);
  PutU16(out + 4, flags);
  PutU16(out + 6, command);
  PutU64(out + 8, cookie);
  PutU64(out + 16, offset);
  PutU32(out + 24, length);
}

void ReplyParser::Reset(bool structured_replies) {
  structured_ = structured_replies;
  state_ = State::kMagic;
  have_ = 0;
  target_ = nullptr;
}

absl::Status ReplyParser::Feed(const uint8_t* data, size_t n, ReplyTargets& targets) {
  while (n > 0) {
    switch (state_) {
      case State::kMagic:
      case State::kSimpleHeader:
      case State::kChunkHeader: {
        const size_t want = state_ == State::kMagic          ? 4
                            : state_ == State::kSimpleHeader ? kSimpleReplyHeaderBytes
                                                             : kStructuredReplyHeaderBytes;
        const size_t take = std::min(n, want - have_);
        std::memcpy(header_ + have_, data, take);
        have_ += take;
        data += take;
        n -= take;
        if (have_ == want) {
          absl::Status status = OnHeaderComplete(targets);
          if (!status.ok()) return status;
        }
        break;
      }
      case State::kSimpleData:
      case State::kChunkData: {
        const size_t take = std::min<size_t>(n, data_left_);
        std::memcpy(target_->buffer + data_pos_, data, take);
        data += take;
        n -= take;
        absl::Status status = PayloadDelivered(take, targets);
        if (!status.ok()) return status;
        break;
      }
      case State::kChunkPayload:
      case State::kChunkOffset: {
        const size_t want = state_ == State::kChunkOffset ? 8 : chunk_length_;
        const size_t take = std::min(n, want - have_);
        std::memcpy(scratch_ + have_, data, take);
        have_ += take;
        data += take;
        n -= take;
        if (have_ == want) {
          absl::Status status = OnChunkPayload(targets);
          if (!status.ok()) return status;
        }
        break;
      }
    }
  }
  return absl::OkStatus();
}

ReplyParser::Payload ReplyParser::PendingPayload() const {
  if (!InPayload()) return Payload{};
  return Payload{target_->buffer + data_pos_, data_left_, cookie_};
}

absl::Status ReplyParser::PayloadArrived(size_t n, ReplyTargets& targets) {
  if (!InPayload() || n == 0 || n > data_left_) {
    return absl::FailedPreconditionError(absl::StrCat(
        n, " bytes of read payload arrived where ", InPayload() ? data_left_ : 0, " were pending"));
  }
  return PayloadDelivered(n, targets);
}

absl::Status ReplyParser::PayloadDelivered(size_t n, ReplyTargets& targets) {
  data_pos_ += static_cast<uint32_t>(n);
  data_left_ -= static_cast<uint32_t>(n);
  if (data_left_ > 0) return absl::OkStatus();
  if (state_ == State::kChunkData) return FinishChunk(targets);
  target_->covered.Add(0, target_->length);
  state_ = State::kMagic;
  have_ = 0;
  targets.Complete(cookie_);
  return absl::OkStatus();
}

absl::Status ReplyParser::OnHeaderComplete(ReplyTargets& targets) {
  if (state_ == State::kMagic) {
    const uint32_t magic = GetU32(header_);
    if (magic == kSimpleReplyMagic) {
      state_ = State::kSimpleHeader;
    } else if (magic == kStructuredReplyMagic && structured_) {
      state_ = State::kChunkHeader;
    } else {
      return Malformed(absl::StrCat("magic 0x", absl::Hex(magic)));
    }
    return absl::OkStatus();
  }
  if (state_ == State::kChunkHeader) return OnChunkHeader(targets);

  const uint32_t error = GetU32(header_ + 4);
  cookie_ = GetU64(header_ + 8);
  target_ = targets.Find(cookie_);
  if (target_ == nullptr) return Malformed(absl::StrCat("unknown cookie ", cookie_));
  have_ = 0;
  if (error != 0) {
    target_->nbd_error = error;
  } else if (target_->command == kCmdRead && target_->length > 0) {
    // With structured replies a read's data must come in chunks.
    if (structured_) return Malformed("simple reply with data to a read");
    state_ = State::kSimpleData;
    data_pos_ = 0;
    data_left_ = target_->length;
    return absl::OkStatus();
  }
  state_ = State::kMagic;
  targets.Complete(cookie_);
  return absl::OkStatus();
}

absl::Status ReplyParser::OnChunkHeader(ReplyTargets& targets) {
  chunk_flags_ = GetU16(header_ + 4);
  chunk_type_ = GetU16(header_ + 6);
  cookie_ = GetU64(header_ + 8);
  chunk_length_ = GetU32(header_ + 16);
  target_ = targets.Find(cookie_);
  if (target_ == nullptr) return Malformed(absl::StrCat("unknown cookie ", cookie_));
  have_ = 0;
  const bool is_read = target_->command == kCmdRead;
  switch (chunk_type_) {
    case kChunkNone:
      if (!(chunk_flags_ & kReplyFlagDone) || chunk_length_ != 0) {
        return Malformed("NONE chunk without DONE or with a payload");
      }
      return FinishChunk(targets);
    case kChunkOffsetData:
      if (!is_read || chunk_length_ <= 8) return Malformed("OFFSET_DATA chunk out of place");
      state_ = State::kChunkOffset;
      return absl::OkStatus();
    case kChunkOffsetHole:
      if (!is_read || chunk_length_ != 12) return Malformed("OFFSET_HOLE chunk out of place");
      state_ = State::kChunkPayload;
      return absl::OkStatus();
    default:
      if (!(chunk_type_ & kChunkErrorBit)) {
        return Malformed(absl::StrCat("unexpected chunk type ", chunk_type_));
      }
      if (chunk_length_ < 6 || chunk_length_ > kScratchBytes) {
        return Malformed(absl::StrCat("error chunk of ", chunk_length_, " bytes"));
      }
      state_ = State::kChunkPayload;
      return absl::OkStatus();
  }
}

absl::Status ReplyParser::OnChunkPayload(ReplyTargets& targets) {
  const uint64_t request_end = target_->offset + target_->length;
  if (state_ == State::kChunkOffset) {
    const uint64_t offset = GetU64(scratch_);
    const uint32_t length = chunk_length_ - 8;
    if (offset < target_->offset || offset > request_end || length > request_end - offset) {
      return Malformed(absl::StrCat("data chunk at ", offset, "+", length, " outside the request ",
                                    target_->offset, "+", target_->length));
    }
    data_pos_ = static_cast<uint32_t>(offset - target_->offset);
    absl::Status claimed = Claim(*target_, data_pos_, length, "data");
    if (!claimed.ok()) return claimed;
    data_left_ = length;
    state_ = State::kChunkData;
    return absl::OkStatus();
  }
  if (chunk_type_ == kChunkOffsetHole) {
    const uint64_t offset = GetU64(scratch_);
    const uint32_t length = GetU32(scratch_ + 8);
    if (length == 0 || offset < target_->offset || offset > request_end ||
        length > request_end - offset) {
      return Malformed(absl::StrCat("hole chunk at ", offset, "+", length, " outside the request ",
                                    target_->offset, "+", target_->length));
    }
    const uint32_t begin = static_cast<uint32_t>(offset - target_->offset);
    absl::Status claimed = Claim(*target_, begin, length, "hole");
    if (!claimed.ok()) return claimed;
    std::memset(target_->buffer + begin, 0, length);
    return FinishChunk(targets);
  }
  // An error chunk (an unknown error type is still an error, as the protocol says).
  const uint32_t error = GetU32(scratch_);
  const uint16_t message_length = GetU16(scratch_ + 4);
  const uint32_t expected = 6u + message_length + (chunk_type_ == kChunkErrorOffset ? 8u : 0u);
  if (error == 0) return Malformed("error chunk with error 0");
  if (chunk_type_ == kChunkErrorOffset ? chunk_length_ != expected : chunk_length_ < expected) {
    return Malformed("error chunk length disagrees with its message length");
  }
  if (chunk_type_ == kChunkErrorOffset) {
    const uint64_t offset = GetU64(scratch_ + 6 + message_length);
    if (offset < target_->offset || offset >= request_end) {
      return Malformed(absl::StrCat("error offset ", offset, " outside the request"));
    }
  }
  if (target_->nbd_error == 0) target_->nbd_error = error;
  return FinishChunk(targets);
}

absl::Status ReplyParser::FinishChunk(ReplyTargets& targets) {
  state_ = State::kMagic;
  have_ = 0;
  if (!(chunk_flags_ & kReplyFlagDone)) return absl::OkStatus();
  if (target_->command == kCmdRead && target_->nbd_error == 0 &&
      !target_->covered.Covers(target_->length)) {
    return Malformed(absl::StrCat("read reply covered ", target_->covered.bytes(), " of ",
                                  target_->length, " bytes"));
  }
  targets.Complete(cookie_);
  return absl::OkStatus();
}

}  // namespace blk::server::nbd
