// Integer helpers used by ring and layout arithmetic. Header-only, no dependencies.
#pragma once

#include <cstddef>
#include <cstdint>

namespace wharf {

constexpr bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Smallest power of two >= v; v must be <= 2^63.
constexpr uint64_t round_up_pow2(uint64_t v) {
  uint64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// Rounds v up to a multiple of align (a power of two).
constexpr uint64_t align_up(uint64_t v, uint64_t align) { return (v + align - 1) & ~(align - 1); }
constexpr uint64_t align_down(uint64_t v, uint64_t align) { return v & ~(align - 1); }

// True when [off, off+len) lies inside [0, size) without overflow.
constexpr bool range_within(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

constexpr size_t kCacheLine = 64;
constexpr size_t kPageSize = 4096;

}  // namespace wharf
