// Futex wait and wake on a 32-bit word that may live in memory shared between processes
// (shared futexes: the kernel keys them by the mapped file and offset, so FUTEX_*_PRIVATE
// would not reach the other process).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace wharf {

// Sleeps while *word == expected, at most timeout_ns; returns early on a wake, a signal, or
// when the word already differs.
inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000u),
              static_cast<long>(timeout_ns % 1000000000u)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// Wakes every thread sleeping in futex_wait on word.
inline void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace wharf
