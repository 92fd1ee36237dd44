// A Completer for tests that drive a backend without a queue: it records every completion.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "server/backend.h"

namespace blk::server {

class RecordingCompleter {
 public:
  Completer completer() { return Completer(&Record, this); }

  // The oldest completion not taken yet, if any.
  std::optional<std::pair<uint16_t, int32_t>> Next() {
    if (completions_.empty()) return std::nullopt;
    std::pair<uint16_t, int32_t> next = completions_.front();
    completions_.pop_front();
    return next;
  }
  // The oldest untaken completion of `tag`, if any.
  std::optional<int32_t> Take(uint16_t tag) {
    for (auto it = completions_.begin(); it != completions_.end(); ++it) {
      if (it->first != tag) continue;
      const int32_t result = it->second;
      completions_.erase(it);
      return result;
    }
    return std::nullopt;
  }
  size_t untaken() const { return completions_.size(); }

 private:
  static void Record(void* self, uint16_t tag, int32_t result) {
    static_cast<RecordingCompleter*>(self)->completions_.emplace_back(tag, result);
  }

  std::deque<std::pair<uint16_t, int32_t>> completions_;
};

}  // namespace blk::server
