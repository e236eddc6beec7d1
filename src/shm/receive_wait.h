// A direct-path sender that finds no receive posted at its peer sleeps until the peer posts
// one, instead of spinning (docs/shm-rings.md, "The direct-path line"). The protocol is the
// napping poller's (shm/cq_ring.h): the sender announces the wait in the receiver's line, the
// receiving library wakes it after it posted.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/futex.h"
#include "shm/layout.h"
#include "shm/ring.h"

namespace wharf::shm {

// The sending side, in two steps. begin_receive_wait, called with the peer's regions mapped
// (under the lock that keeps them so), announces the wait and returns true, or false when a
// receive beyond `consumer` was posted meanwhile. receive_wait then sleeps until the receiver
// wakes it, or at most timeout_ns; it touches nothing but the futex word, so a region unmapped
// meanwhile costs at most the timeout (the kernel fails a wait on an unmapped address). An
// announcement left standing costs the receiver one wake-up.
inline bool begin_receive_wait(QpDirect* line, const RingHeader* rq, uint32_t consumer) {
  line->receive_wanted.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return rq->producer.value.load(std::memory_order_acquire) == consumer;
}
inline void receive_wait(QpDirect* line, uint64_t timeout_ns) {
  futex_wait(&line->receive_wanted, 1, timeout_ns);
}

// Called by the receiving library after it published receives. The fence pairs with the one
// in begin_receive_wait: either the sender sees the receive or this sees the announcement.
inline void wake_receive_waiter(QpDirect* line) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (line->receive_wanted.load(std::memory_order_relaxed) != 0 &&
      line->receive_wanted.exchange(0, std::memory_order_acq_rel) != 0)
    futex_wake_all(&line->receive_wanted);
}

}  // namespace wharf::shm
