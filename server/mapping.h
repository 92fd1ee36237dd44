#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

namespace blk::server {

// Owns an mmap'ed region; unmaps it once.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* address, size_t length) : address_(address), length_(length) {}
  Mapping(Mapping&& other) noexcept
      : address_(std::exchange(other.address_, nullptr)),
        length_(std::exchange(other.length_, 0)) {}
  Mapping& operator=(Mapping&& other) noexcept {
    if (this != &other) {
      Reset();
      address_ = std::exchange(other.address_, nullptr);
      length_ = std::exchange(other.length_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { Reset(); }

  void* address() const { return address_; }
  size_t length() const { return length_; }
  void Reset() {
    if (address_ != nullptr) ::munmap(address_, length_);
    address_ = nullptr;
    length_ = 0;
  }

 private:
  void* address_ = nullptr;
  size_t length_ = 0;
};

}  // namespace blk::server
