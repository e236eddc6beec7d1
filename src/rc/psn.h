// Packet sequence numbers (IBTA 9.7.1): 24 bits, compared in serial-number arithmetic, so
// that a window of up to 2^23 packets is ordered correctly across the wrap.
#pragma once

#include <cstdint>

#include "proto/host_wire.h"

namespace wharf::rc {

inline constexpr uint32_t kPsnMask = 0xffffff;

constexpr uint32_t psn_add(uint32_t psn, uint32_t n) { return (psn + n) & kPsnMask; }

// How many PSNs b is after a (b - a in 24-bit arithmetic).
constexpr uint32_t psn_diff(uint32_t b, uint32_t a) { return (b - a) & kPsnMask; }

// a comes before b.
constexpr bool psn_lt(uint32_t a, uint32_t b) {
  const uint32_t d = psn_diff(b, a);
  return d != 0 && d < 0x800000;
}

// The PSNs a message of `len` bytes takes: one per packet, and one for an empty message.
constexpr uint32_t packets_for(uint64_t len) {
  return len == 0 ? 1
                  : static_cast<uint32_t>((len + proto::host::kMaxSegment - 1) /
                                          proto::host::kMaxSegment);
}

}  // namespace wharf::rc
