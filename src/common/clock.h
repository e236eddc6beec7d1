// Monotonic time in nanoseconds (vDSO clock_gettime: no syscall on the hot path).
#pragma once

#include <time.h>

#include <cstdint>

namespace wharf {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The device's free-running clock (completion timestamps, ibv_query_rt_values_ex): raw
// monotonic time in nanoseconds, which NTP does not slew.
inline uint64_t monotonic_raw_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace wharf
