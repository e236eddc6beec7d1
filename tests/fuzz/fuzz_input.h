// The fuzz input read as a program: bytes and little-endian words, zeros once it runs out.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wharf::fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  bool empty() const { return n_ == 0; }
  uint8_t u8() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(u8()) << (8 * i);
    return v;
  }
  uint64_t u64() { return u32() | static_cast<uint64_t>(u32()) << 32; }

 private:
  const uint8_t* p_;
  size_t n_;
};

}  // namespace wharf::fuzz
