#include "emulator/lru_set.h"

#include <bit>
#include <cassert>

namespace wharf::emulator {

LruSet::LruSet(uint32_t capacity)
    : capacity_(capacity),
      keys_(capacity),
      prev_(capacity, kNone),
      next_(capacity, kNone),
      slots_(std::bit_ceil(static_cast<size_t>(capacity) * 2), kNone),
      mask_(slots_.size() - 1) {
  assert(capacity >= 1);
}

size_t LruSet::home(uint64_t key) const {
  // Fibonacci hashing: QPNs and page numbers are dense, the multiply spreads them.
  return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> 17) & mask_;
}

uint32_t LruSet::find(uint64_t key) const {
  for (size_t i = home(key);; i = (i + 1) & mask_) {
    const uint32_t e = slots_[i];
    if (e == kNone) return kNone;
    if (keys_[e] == key) return e;
  }
}

void LruSet::index_insert(uint64_t key, uint32_t e) {
  size_t i = home(key);
  while (slots_[i] != kNone) i = (i + 1) & mask_;
  slots_[i] = e;
}

void LruSet::index_erase(uint64_t key) {
  size_t i = home(key);
  while (keys_[slots_[i]] != key) i = (i + 1) & mask_;
  // Backward-shift deletion: move later members of the run into the hole when the hole lies
  // between their home and their slot, so that every lookup still finds them.
  for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
    const uint32_t e = slots_[j];
    if (e == kNone) break;
    const size_t h = home(keys_[e]);
    const bool hole_on_path = ((j - h) & mask_) >= ((j - i) & mask_);
    if (hole_on_path) {
      slots_[i] = e;
      i = j;
    }
  }
  slots_[i] = kNone;
}

void LruSet::unlink(uint32_t e) {
  if (prev_[e] != kNone)
    next_[prev_[e]] = next_[e];
  else
    head_ = next_[e];
  if (next_[e] != kNone)
    prev_[next_[e]] = prev_[e];
  else
    tail_ = prev_[e];
  prev_[e] = next_[e] = kNone;
}

void LruSet::push_front(uint32_t e) {
  prev_[e] = kNone;
  next_[e] = head_;
  if (head_ != kNone) prev_[head_] = e;
  head_ = e;
  if (tail_ == kNone) tail_ = e;
}

bool LruSet::touch(uint64_t key) {
  if (const uint32_t e = find(key); e != kNone) {
    if (e != head_) {
      unlink(e);
      push_front(e);
    }
    return true;
  }
  uint32_t e;
  if (size_ < capacity_) {
    e = size_++;
  } else {
    e = tail_;
    unlink(e);
    index_erase(keys_[e]);
  }
  keys_[e] = key;
  index_insert(key, e);
  push_front(e);
  return false;
}

}  // namespace wharf::emulator
