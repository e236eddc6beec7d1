// A token bucket of bytes, of the deficit kind: a message may start whenever the bucket is
// not in debt, and is then charged in full. Messages larger than the depth still pass, and
// over any long run the bytes that pass equal the rate times the time (plus one depth), so a
// rate holds for 64-byte and 1-MiB messages alike. Exact in integers: tokens are counted in
// byte-nanoseconds, so no fraction is lost however often it is refilled.
// Router thread only.
#pragma once

#include <algorithm>
#include <cstdint>

namespace wharf::router {

class TokenBucket {
 public:
  // bits_per_s 0: unlimited. depth_bytes 0: kDefaultDepthNs of the rate, at least
  // kMinDepthBytes. Starts full.
  void configure(uint64_t bits_per_s, uint64_t depth_bytes, uint64_t now_ns) {
    bytes_per_s_ = bits_per_s / 8;
    if (bits_per_s != 0 && bytes_per_s_ == 0) bytes_per_s_ = 1;
    if (depth_bytes == 0)
      depth_bytes = std::max<uint64_t>(bytes_per_s_ * kDefaultDepthNs / kNsPerS, kMinDepthBytes);
    depth_ = static_cast<__int128>(depth_bytes) * kNsPerS;
    tokens_ = depth_;
    last_ns_ = now_ns;
  }

  bool limited() const { return bytes_per_s_ != 0; }

  // Whether a message may start at now_ns; if not, *ready_ns is when it may.
  bool ready(uint64_t now_ns, uint64_t* ready_ns) {
    if (!limited()) return true;
    if (now_ns > last_ns_) {
      tokens_ = std::min(depth_, tokens_ + static_cast<__int128>(now_ns - last_ns_) * bytes_per_s_);
      last_ns_ = now_ns;
    }
    if (tokens_ >= 0) return true;
    *ready_ns = now_ns + static_cast<uint64_t>((-tokens_ + bytes_per_s_ - 1) / bytes_per_s_);
    return false;
  }

  void charge(uint64_t bytes) {
    if (limited()) tokens_ -= static_cast<__int128>(bytes) * kNsPerS;
  }

  // The defaults absorb a router that wakes up to a few milliseconds late (its sleeps have
  // millisecond resolution) without losing rate.
  static constexpr uint64_t kDefaultDepthNs = 5'000'000;
  static constexpr uint64_t kMinDepthBytes = 64 * 1024;

 private:
  static constexpr uint64_t kNsPerS = 1'000'000'000;
  uint64_t bytes_per_s_ = 0;
  __int128 depth_ = 0;
  __int128 tokens_ = 0;  // bytes * ns
  uint64_t last_ns_ = 0;
};

}  // namespace wharf::router
