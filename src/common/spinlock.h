// Test-and-test-and-set spinlock for short critical sections in the verbs library
// (post/poll on one queue from several threads, as rdma-core providers lock them).
#pragma once

#include <atomic>

namespace wharf {

class SpinLock {
 public:
  void lock() {
    for (;;) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace wharf
