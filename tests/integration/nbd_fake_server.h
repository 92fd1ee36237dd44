// A tiny NBD server for the tests: negotiates structured replies and GO for a 1 MiB export of
// zeroes, then answers the first request of its first connection with a chosen lie, and behaves
// on every later connection. The shutdown kinds play a server going away gracefully instead; the
// mid-payload kinds serve PatternByte data instead of zeroes. The cache kinds keep what is written
// (zeroes at first), and play a server with a volatile write cache that crashes.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/nbd/protocol.h"

namespace blk::server::testing_nbd {

enum class Lie {
  kWrongCookie,
  kTooLongChunk,
  kGarbageMagic,
  kSameHalfTwice,  // a read's first half sent twice, its second half never: lengths add up
  // Connection 1 answers every request with NBD_ESHUTDOWN until the client hangs up; connection 2
  // is closed right after accept; connection 3's options are answered NBD_REP_ERR_SHUTDOWN; then
  // the server behaves.
  kShutdownThenRefuse,
  // Every connection answers every request with NBD_ESHUTDOWN until the client hangs up.
  kAlwaysShuttingDown,
  // Connection 1 answers its first read with the header of a data chunk for all of it and half
  // the data, then closes (a server killed mid-payload). Every later connection sends each read as
  // two OFFSET_DATA chunks of PatternByte data, its second half first.
  kDiesMidPayload,
  // Connection 1 closes at its first request; connection 2 answers its first read with half the
  // data as kDiesMidPayload does, then answers nothing more until the client hangs up (the outage
  // goes on); later connections behave as kDiesMidPayload's.
  kStallsMidPayload,
  // A write cache (SEND_FLUSH, also TRIM and WRITE_ZEROES): writes land in it, a FLUSH makes them
  // durable; a crash (Crash) loses what is not and closes the connections. Connection 1 crashes at
  // its first FLUSH, before answering it.
  kCacheLostAtFirstFlush,
  // The same cache, crashing only when told (Crash).
  kCache,
  // No write cache (no SEND_FLUSH): a write is durable once answered; Crash only closes.
  kNoCache,
};

class FakeNbdServer {
 public:
  static constexpr uint64_t kExportBytes = 1024 * 1024;

  FakeNbdServer(std::string path, Lie lie) : path_(std::move(path)), lie_(lie) {
    ::unlink(path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    std::strncpy(sun.sun_path, path_.c_str(), sizeof(sun.sun_path) - 1);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sun), sizeof(sun)) != 0 ||
        ::listen(listen_fd_, 8) != 0) {
      ADD_FAILURE() << "fake NBD server cannot listen on " << path_ << ": " << std::strerror(errno);
    }
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeNbdServer() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    // clients_ belongs to Serve() until it has returned.
    thread_.join();
    for (int fd : clients_) ::shutdown(fd, SHUT_RDWR);
    for (auto& worker : workers_) worker.join();
    ::close(listen_fd_);
    for (int fd : clients_) ::close(fd);
    ::unlink(path_.c_str());
  }
  // The byte at `offset` of the export the mid-payload kinds serve: it differs between
  // neighbouring bytes and sectors, so data placed at a wrong offset reads back wrong.
  static uint8_t PatternByte(uint64_t offset) {
    return static_cast<uint8_t>((offset >> 9) * 31 + (offset & 511) * 7 + 13);
  }

  std::string uri() const { return "nbd+unix:///?socket=" + path_; }
  int connections() const { return connections_.load(); }

  // The cache kinds. What survives a crash: the durable bytes at [offset, offset + length).
  std::vector<uint8_t> Durable(uint64_t offset, uint32_t length) {
    std::lock_guard<std::mutex> lock(mutex_);
    return {durable_.begin() + static_cast<ptrdiff_t>(offset),
            durable_.begin() + static_cast<ptrdiff_t>(offset + length)};
  }
  int flushes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return flushes_;
  }
  // Loses the cache and closes every connection.
  void Crash() {
    std::lock_guard<std::mutex> lock(mutex_);
    CrashLocked();
  }

 private:
  bool ReadAll(int fd, void* p, size_t n) {
    auto* b = static_cast<uint8_t*>(p);
    while (n > 0) {
      ssize_t got = ::recv(fd, b, n, 0);
      if (got <= 0) return false;
      b += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  void WriteAll(int fd, const std::vector<uint8_t>& bytes) {
    ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  static std::vector<uint8_t> OptionReply(uint32_t option, uint32_t type,
                                          const std::vector<uint8_t>& data) {
    std::vector<uint8_t> out(20);
    nbd::PutU64(out.data(), nbd::kOptReplyMagic);
    nbd::PutU32(out.data() + 8, option);
    nbd::PutU32(out.data() + 12, type);
    nbd::PutU32(out.data() + 16, static_cast<uint32_t>(data.size()));
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }

  // Replies NBD_ESHUTDOWN to the request just read and to every later one until the client hangs
  // up (as nbdkit does once stopped: it waits for the client to let go).
  void AnswerShuttingDown(int fd, uint16_t command, uint64_t cookie) {
    for (;;) {
      if (command == nbd::kCmdRead) {
        // A read's reply must be structured: an error chunk.
        std::vector<uint8_t> payload(6);
        nbd::PutU32(payload.data(), nbd::kNbdErrShutdown);
        WriteAll(fd, Chunk(cookie, nbd::kChunkError, nbd::kReplyFlagDone, payload));
      } else {
        std::vector<uint8_t> reply(16);
        nbd::PutU32(reply.data(), nbd::kSimpleReplyMagic);
        nbd::PutU32(reply.data() + 4, nbd::kNbdErrShutdown);
        nbd::PutU64(reply.data() + 8, cookie);
        WriteAll(fd, reply);
      }
      uint8_t request[nbd::kRequestHeaderBytes];
      if (!ReadAll(fd, request, sizeof(request))) return;
      command = nbd::GetU16(request + 6);
      cookie = nbd::GetU64(request + 8);
      if (command == nbd::kCmdWrite) {
        std::vector<uint8_t> payload(nbd::GetU32(request + 24));
        if (!ReadAll(fd, payload.data(), payload.size())) return;
      }
    }
  }

  // Answers every option with NBD_REP_ERR_SHUTDOWN until the client gives up.
  void RefuseOptions(int fd) {
    std::vector<uint8_t> greeting(18);
    nbd::PutU64(greeting.data(), nbd::kInitMagic);
    nbd::PutU64(greeting.data() + 8, nbd::kOptMagic);
    nbd::PutU16(greeting.data() + 16, nbd::kFlagFixedNewstyle | nbd::kFlagNoZeroes);
    WriteAll(fd, greeting);
    uint8_t client_flags[4];
    if (!ReadAll(fd, client_flags, 4)) return;
    for (;;) {
      uint8_t header[16];
      if (!ReadAll(fd, header, 16)) return;
      const uint32_t option = nbd::GetU32(header + 8);
      std::vector<uint8_t> data(nbd::GetU32(header + 12));
      if (!data.empty() && !ReadAll(fd, data.data(), data.size())) return;
      const std::string message = "going down";
      WriteAll(fd, OptionReply(option, nbd::kRepErrShutdown,
                               std::vector<uint8_t>(message.begin(), message.end())));
    }
  }

  struct Request {
    uint16_t command = 0;
    uint64_t cookie = 0;
    uint64_t offset = 0;
    uint32_t length = 0;
  };
  // The next request's header; false once the client is gone.
  bool ReadRequest(int fd, Request& out) {
    uint8_t request[nbd::kRequestHeaderBytes];
    if (!ReadAll(fd, request, sizeof(request))) return false;
    out = Request{.command = nbd::GetU16(request + 6),
                  .cookie = nbd::GetU64(request + 8),
                  .offset = nbd::GetU64(request + 16),
                  .length = nbd::GetU32(request + 24)};
    return true;
  }

  bool cache_kind() const {
    return lie_ == Lie::kCacheLostAtFirstFlush || lie_ == Lie::kCache || lie_ == Lie::kNoCache;
  }
  void CrashLocked() {
    cache_ = durable_;
    for (int fd : live_) ::shutdown(fd, SHUT_RDWR);
  }

  // The cache kinds' requests: every one answered with a simple reply, reads from the cache.
  void ServeCache(int fd, int connection) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_.push_back(fd);
    }
    bool crash_at_flush = lie_ == Lie::kCacheLostAtFirstFlush && connection == 1;
    for (Request request; ReadRequest(fd, request);) {
      const auto [command, cookie, offset, length] = request;
      std::vector<uint8_t> reply(16);
      nbd::PutU32(reply.data(), nbd::kSimpleReplyMagic);
      nbd::PutU64(reply.data() + 8, cookie);
      std::lock_guard<std::mutex> lock(mutex_);
      auto at = cache_.begin() + static_cast<ptrdiff_t>(offset);
      switch (command) {
        case nbd::kCmdWrite:
          if (!ReadAll(fd, &*at, length)) return;
          if (lie_ == Lie::kNoCache)
            std::copy_n(at, length, durable_.begin() + (at - cache_.begin()));
          break;
        case nbd::kCmdWriteZeroes:
        case nbd::kCmdTrim:
          std::fill_n(at, length, 0);
          break;
        case nbd::kCmdFlush:
          if (crash_at_flush) {
            CrashLocked();
            return;
          }
          ++flushes_;
          durable_ = cache_;
          break;
        case nbd::kCmdRead:
          reply.insert(reply.end(), at, at + length);
          break;
        case nbd::kCmdDisc:
          return;
        default:
          nbd::PutU32(reply.data() + 4, EINVAL);
          break;
      }
      WriteAll(fd, reply);
    }
  }

  bool Handshake(int fd) {
    std::vector<uint8_t> greeting(18);
    nbd::PutU64(greeting.data(), nbd::kInitMagic);
    nbd::PutU64(greeting.data() + 8, nbd::kOptMagic);
    nbd::PutU16(greeting.data() + 16, nbd::kFlagFixedNewstyle | nbd::kFlagNoZeroes);
    WriteAll(fd, greeting);
    uint8_t client_flags[4];
    if (!ReadAll(fd, client_flags, 4)) return false;
    for (;;) {
      uint8_t header[16];
      if (!ReadAll(fd, header, 16)) return false;
      const uint32_t option = nbd::GetU32(header + 8);
      std::vector<uint8_t> data(nbd::GetU32(header + 12));
      if (!data.empty() && !ReadAll(fd, data.data(), data.size())) return false;
      if (option == nbd::kOptStructuredReply && !cache_kind()) {
        WriteAll(fd, OptionReply(option, nbd::kRepAck, {}));
      } else if (option == nbd::kOptGo) {
        std::vector<uint8_t> info(12);
        nbd::PutU16(info.data(), nbd::kInfoExport);
        nbd::PutU64(info.data() + 2, kExportBytes);
        uint16_t flags = nbd::kFlagHasFlags | nbd::kFlagSendFlush;
        if (lie_ == Lie::kNoCache) flags = nbd::kFlagHasFlags;
        if (lie_ == Lie::kCache || lie_ == Lie::kCacheLostAtFirstFlush) {
          flags |= nbd::kFlagSendTrim | nbd::kFlagSendWriteZeroes;
        }
        nbd::PutU16(info.data() + 10, flags);
        WriteAll(fd, OptionReply(option, nbd::kRepInfo, info));
        WriteAll(fd, OptionReply(option, nbd::kRepAck, {}));
        return true;
      } else {
        WriteAll(fd, OptionReply(option, nbd::kRepErrUnsup, {}));
      }
    }
  }

  std::vector<uint8_t> Chunk(uint64_t cookie, uint16_t type, uint16_t flags,
                             const std::vector<uint8_t>& payload) {
    std::vector<uint8_t> out(20);
    nbd::PutU32(out.data(), nbd::kStructuredReplyMagic);
    nbd::PutU16(out.data() + 4, flags);
    nbd::PutU16(out.data() + 6, type);
    nbd::PutU64(out.data() + 8, cookie);
    nbd::PutU32(out.data() + 16, static_cast<uint32_t>(payload.size()));
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
  }

  std::vector<uint8_t> PatternChunk(uint64_t cookie, uint64_t offset, uint32_t length,
                                    uint16_t flags) {
    std::vector<uint8_t> payload(8 + length);
    nbd::PutU64(payload.data(), offset);
    for (uint32_t i = 0; i < length; ++i) payload[8 + i] = PatternByte(offset + i);
    return Chunk(cookie, nbd::kChunkOffsetData, flags, payload);
  }

  // Reads requests (and write payloads) without answering until the client hangs up.
  void IgnoreRequests(int fd) {
    for (;;) {
      uint8_t request[nbd::kRequestHeaderBytes];
      if (!ReadAll(fd, request, sizeof(request))) return;
      if (nbd::GetU16(request + 6) == nbd::kCmdWrite) {
        std::vector<uint8_t> payload(nbd::GetU32(request + 24));
        if (!ReadAll(fd, payload.data(), payload.size())) return;
      }
    }
  }

  void Transmit(int fd, bool lie) {
    const bool mid_payload = lie_ == Lie::kDiesMidPayload || lie_ == Lie::kStallsMidPayload;
    for (Request request; ReadRequest(fd, request);) {
      const auto [command, cookie, offset, length] = request;
      if (command == nbd::kCmdWrite) {
        std::vector<uint8_t> payload(length);
        if (!ReadAll(fd, payload.data(), length)) return;
      }
      if (command == nbd::kCmdDisc) return;
      if (lie && mid_payload && command == nbd::kCmdRead) {
        std::vector<uint8_t> chunk = PatternChunk(cookie, offset, length, nbd::kReplyFlagDone);
        chunk.resize(nbd::kStructuredReplyHeaderBytes + 8 + length / 2);
        WriteAll(fd, chunk);
        if (lie_ == Lie::kStallsMidPayload) IgnoreRequests(fd);
        return;
      }
      if (lie && !mid_payload) {
        lie = false;
        if (lie_ == Lie::kShutdownThenRefuse || lie_ == Lie::kAlwaysShuttingDown) {
          AnswerShuttingDown(fd, command, cookie);
          return;
        }
        if (lie_ == Lie::kGarbageMagic) {
          WriteAll(fd, std::vector<uint8_t>(32, 0xAB));
        } else if (lie_ == Lie::kSameHalfTwice && command == nbd::kCmdRead) {
          std::vector<uint8_t> payload(8 + length / 2, 0x11);
          nbd::PutU64(payload.data(), offset);
          WriteAll(fd, Chunk(cookie, nbd::kChunkOffsetData, 0, payload));
          WriteAll(fd, Chunk(cookie, nbd::kChunkOffsetData, nbd::kReplyFlagDone, payload));
        } else if (lie_ == Lie::kWrongCookie) {
          WriteAll(fd, Chunk(cookie ^ 0x5a5a0000, nbd::kChunkNone, nbd::kReplyFlagDone, {}));
        } else {
          // A data chunk reaching 4 KiB past the request.
          std::vector<uint8_t> payload(8 + length + 4096, 0x11);
          nbd::PutU64(payload.data(), offset);
          WriteAll(fd, Chunk(cookie, nbd::kChunkOffsetData, nbd::kReplyFlagDone, payload));
        }
        continue;
      }
      if (command == nbd::kCmdRead && mid_payload && length >= 2) {
        WriteAll(fd, PatternChunk(cookie, offset + length / 2, length - length / 2, 0));
        WriteAll(fd, PatternChunk(cookie, offset, length / 2, nbd::kReplyFlagDone));
      } else if (command == nbd::kCmdRead) {
        std::vector<uint8_t> hole(12);
        nbd::PutU64(hole.data(), offset);
        nbd::PutU32(hole.data() + 8, length);
        WriteAll(fd, Chunk(cookie, nbd::kChunkOffsetHole, nbd::kReplyFlagDone, hole));
      } else {
        WriteAll(fd, Chunk(cookie, nbd::kChunkNone, nbd::kReplyFlagDone, {}));
      }
    }
  }

  void Serve() {
    while (!stop_) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      clients_.push_back(fd);
      const int n = ++connections_;
      // Connection 1 is the volume's first (made at open); the lie goes to its first request.
      workers_.emplace_back([this, fd, n] {
        if (lie_ == Lie::kShutdownThenRefuse && n == 2) {
          // Accepted, then closed at once.
        } else if (lie_ == Lie::kShutdownThenRefuse && n == 3) {
          RefuseOptions(fd);
        } else if (lie_ == Lie::kStallsMidPayload && n == 1) {
          uint8_t request[nbd::kRequestHeaderBytes];
          if (Handshake(fd)) ReadAll(fd, request, sizeof(request));  // then closed
        } else if (cache_kind()) {
          if (Handshake(fd)) ServeCache(fd, n);
        } else if (Handshake(fd)) {
          Transmit(fd, lie_ == Lie::kStallsMidPayload ? n == 2
                                                      : n == 1 || lie_ == Lie::kAlwaysShuttingDown);
        }
        ::shutdown(fd, SHUT_RDWR);
      });
    }
  }

  std::string path_;
  Lie lie_;
  int listen_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::vector<int> clients_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;  // the cache kinds' state below
  std::vector<uint8_t> cache_ = std::vector<uint8_t>(kExportBytes);
  std::vector<uint8_t> durable_ = std::vector<uint8_t>(kExportBytes);
  std::vector<int> live_;  // connections a crash closes
  int flushes_ = 0;
};

}  // namespace blk::server::testing_nbd
