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
    bytes_per_s_ = bytes_per_s_of(bits_per_s);
    if (depth_bytes == 0) depth_bytes = default_depth_bytes(bits_per_s);
    depth_ = static_cast<__int128>(depth_bytes) * kNsPerS;
    tokens_ = depth_;
    last_ns_ = now_ns;
  }

  // As configure, but a bucket that was limited keeps what it holds (refilled up to now_ns
  // at the old rate, then capped at the new depth) and its debt: a limit its owner may change
  // as often as it likes must not hand out a fresh burst each time.
  void retune(uint64_t bits_per_s, uint64_t depth_bytes, uint64_t now_ns) {
    if (!limited()) return configure(bits_per_s, depth_bytes, now_ns);
    uint64_t unused = 0;
    ready(now_ns, &unused);  // refills at the old rate
    const __int128 tokens = tokens_;
    configure(bits_per_s, depth_bytes, std::max(now_ns, last_ns_));
    tokens_ = std::min(tokens_, tokens);
  }

  // The depth configure() gives a rate when none is set.
  static uint64_t default_depth_bytes(uint64_t bits_per_s) {
    return std::max<uint64_t>(bytes_per_s_of(bits_per_s) * kDefaultDepthNs / kNsPerS,
                              kMinDepthBytes);
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
  // A limit below 8 bit/s still limits, to 1 byte/s.
  static uint64_t bytes_per_s_of(uint64_t bits_per_s) {
    return bits_per_s != 0 && bits_per_s < 8 ? 1 : bits_per_s / 8;
  }
  uint64_t bytes_per_s_ = 0;
  __int128 depth_ = 0;
  __int128 tokens_ = 0;  // bytes * ns
  uint64_t last_ns_ = 0;
};

}  // namespace wharf::router
