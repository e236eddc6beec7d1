// Appending to a vector that a spinlock guards, without allocating under the lock (nothing
// slow may happen while a spinlock is held: readers spin meanwhile).
#pragma once

#include <mutex>
#include <new>
#include <vector>

#include "common/spinlock.h"

namespace wharf {

// Appends item to v, which `lock` guards. The room comes from a copy made outside the lock,
// swapped in when nothing changed meanwhile (the old storage is freed after the lock is
// released). False: out of memory, v unchanged.
template <class T>
bool append_outside_lock(SpinLock& lock, std::vector<T>& v, const T& item) noexcept {
  for (;;) {
    size_t n;
    {
      std::lock_guard<SpinLock> g(lock);
      if (v.size() < v.capacity()) {
        v.push_back(item);  // fits: no allocation
        return true;
      }
      n = v.size();
    }
    std::vector<T> grown;
    try {
      grown.reserve(n < 4 ? 8 : 2 * n);
    } catch (const std::bad_alloc&) {
      return false;
    }
    std::lock_guard<SpinLock> g(lock);
    if (v.size() < grown.capacity()) {
      grown.assign(v.begin(), v.end());  // fits: no allocation
      grown.push_back(item);
      v.swap(grown);
      return true;  // the old storage goes with `grown`, after the lock
    }
  }  // others filled it meanwhile: again
}

}  // namespace wharf
