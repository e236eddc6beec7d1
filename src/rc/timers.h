// The transport's timers as IBTA encodes them in QP attributes.
#pragma once

#include <algorithm>
#include <cstdint>

namespace wharf::rc {

// IBTA table 45: RNR NAK timer field -> microseconds (field 0 means 655.36 ms).
inline constexpr uint32_t kRnrTimerUs[32] = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

inline constexpr uint64_t rnr_timer_ns(uint8_t field) { return kRnrTimerUs[field & 31] * 1000ull; }

// Local ACK timeout 4.096 us * 2^timeout (IBTA 9.7.6.1.3). 0 is infinite: the requester
// never gives up (out_of_retries), but still sends again every 100 ms, which costs a silent
// peer one packet a tenth of a second and recovers a request a lost link dropped.
inline constexpr uint64_t ack_timeout_ns(uint8_t timeout) {
  if (timeout == 0) return 100000000ull;
  return 4096ull << std::min<uint8_t>(timeout, 31);
}

// Whether a requester that has sent again `attempts` times after a local ACK timeout
// `timeout` fails with RETRY_EXC_ERR: after retry_cnt attempts, never with timeout 0.
inline constexpr bool out_of_retries(uint8_t timeout, uint32_t attempts, uint8_t retry_cnt) {
  return timeout != 0 && attempts >= retry_cnt;
}

// rnr_retry 7 means "retry for ever" (IBTA 9.7.5.2.8).
inline constexpr uint8_t kRnrRetryInfinite = 7;

}  // namespace wharf::rc
