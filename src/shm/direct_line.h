// The two ends of the direct-path line's Busy handshake (docs/shm-rings.md, "The
// direct-path line"): the library hands a Busy line back, the router waits for that.
//
// The router sleeps instead of spinning: it stores 1 in `router_waits`, looks at `state`,
// and sleeps on `state` while it reads Busy; the library moves Busy -> On and then looks at
// `router_waits`, waking the router if it is 1. All four accesses are sequentially
// consistent, so at least one side sees the other's store: the router sees On, or the
// library sees the waiter (no lost wake-up). On x86 this costs the library one plain load
// more per directly executed work request (the compare-and-swap is a full fence already).
// A library that never wakes the router only makes it sleep out its deadline.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/clock.h"
#include "common/futex.h"
#include "shm/layout.h"

namespace wharf::shm {

// Library: the work request executed directly is finished (its completions published).
inline void hand_back_busy_line(QpDirect* line) {
  uint32_t busy = kDirectBusy;
  line->state.compare_exchange_strong(busy, kDirectOn, std::memory_order_seq_cst);
  if (line->router_waits.load(std::memory_order_seq_cst) != 0) futex_wake_all(&line->state);
}

// Router: waits while the line is Busy, at most until deadline_ns (CLOCK_MONOTONIC). True
// once it is not Busy; false at the deadline.
inline bool wait_while_busy(QpDirect* line, uint64_t deadline_ns) {
  line->router_waits.store(1, std::memory_order_seq_cst);
  bool handed_back = false;
  for (;;) {
    if (line->state.load(std::memory_order_seq_cst) != kDirectBusy) {
      handed_back = true;
      break;
    }
    const uint64_t now = now_ns();
    if (now >= deadline_ns) break;
    futex_wait(&line->state, kDirectBusy, deadline_ns - now);
  }
  line->router_waits.store(0, std::memory_order_relaxed);
  return handed_back;
}

}  // namespace wharf::shm
