// A FIFO queue of at most N elements kept inside the object itself: no pointers, no
// allocation, trivially copyable when T is. Its bytes are its state, so it may be copied
// with memcpy, kept in shared memory or in a file, and continued by another process at
// another address (the router's restart keeps the reliable transport's queues this way).
//
// The positions are a head index and a count, both below N; a copy read back from somewhere
// hostile is checked with valid() before it is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

namespace wharf {

template <class T, uint32_t N>
class FixedRing {
  static_assert(N > 0 && (N & (N - 1)) == 0, "the capacity is a power of two");

 public:
  template <class Q, class V>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    Iter(Q* q, uint32_t i) : q_(q), i_(i) {}
    reference operator*() const { return q_->at(i_); }
    pointer operator->() const { return &q_->at(i_); }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    Iter operator++(int) {
      Iter old = *this;
      ++i_;
      return old;
    }
    bool operator==(const Iter& o) const { return i_ == o.i_; }
    bool operator!=(const Iter& o) const { return i_ != o.i_; }

   private:
    Q* q_;
    uint32_t i_;
  };
  using iterator = Iter<FixedRing, T>;
  using const_iterator = Iter<const FixedRing, const T>;

  static constexpr uint32_t capacity() { return N; }
  bool empty() const { return size_ == 0; }
  bool full() const { return size_ == N; }
  uint32_t size() const { return size_; }
  // Whether the positions are possible: what a copy from untrusted memory must show.
  bool valid() const { return head_ < N && size_ <= N; }

  T& front() { return at(0); }
  const T& front() const { return at(0); }
  T& back() { return at(size_ - 1); }
  const T& back() const { return at(size_ - 1); }
  // The i-th element from the front (i < size()).
  T& at(uint32_t i) { return slots_[(head_ + i) & (N - 1)]; }
  const T& at(uint32_t i) const { return slots_[(head_ + i) & (N - 1)]; }

  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, size_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

  // False, and nothing changes, when the ring is full.
  bool push_back(const T& v) {
    if (full()) return false;
    slots_[(head_ + size_) & (N - 1)] = v;
    ++size_;
    return true;
  }
  void pop_front() {
    head_ = (head_ + 1) & (N - 1);
    --size_;
  }
  void clear() { head_ = size_ = 0; }

 private:
  T slots_[N] = {};
  uint32_t head_ = 0;
  uint32_t size_ = 0;
};

}  // namespace wharf
