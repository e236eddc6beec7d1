// A set of at most `capacity` 64-bit keys that forgets the least recently used one to make
// room: the tag store of a cache. touch() is O(1) and allocation-free (everything is sized at
// construction), so the router's data path may call it per packet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wharf::emulator {

class LruSet {
 public:
  // capacity >= 1.
  explicit LruSet(uint32_t capacity);

  // Marks key as the most recently used. Returns true if it was in the set (a hit); on a miss
  // it is added, and if the set was full the least recently used key leaves it.
  bool touch(uint64_t key);
  bool contains(uint64_t key) const { return find(key) != kNone; }
  uint32_t size() const { return size_; }
  uint32_t capacity() const { return capacity_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;

  uint32_t find(uint64_t key) const;  // the entry holding key, or kNone
  void unlink(uint32_t e);
  void push_front(uint32_t e);
  void index_insert(uint64_t key, uint32_t e);
  void index_erase(uint64_t key);
  size_t home(uint64_t key) const;

  uint32_t capacity_;
  uint32_t size_ = 0;
  // Entries: the keys, and the recency list through them (head_ most recent).
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> prev_, next_;
  uint32_t head_ = kNone, tail_ = kNone;
  // The index: open addressing with linear probing over a power-of-two table at most half
  // full; slots hold an entry number or kNone. Erasure shifts the run back (no tombstones).
  std::vector<uint32_t> slots_;
  size_t mask_;
};

}  // namespace wharf::emulator
