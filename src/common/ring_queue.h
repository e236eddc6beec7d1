// A FIFO queue in one array used as a ring: push_back and pop_front move no other element and
// allocate nothing while the array has room; a full array doubles. A queue never used holds
// no memory; one that empties gives its array back unless it is small (kKeep elements), so a
// queue drained after a burst does not keep the burst's memory, and one that is in use all
// the time (a window of a few requests) does not allocate again and again.
//
// Replaces std::deque for the per-QP queues of the reliable transport: libstdc++'s deque
// allocates a map and a node when it is made, and one node per element of a large type.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <utility>

namespace wharf {

template <class T>
class RingQueue {
 public:
  static constexpr size_t kKeep = 4;

  template <class Q, class V>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    Iter(Q* q, size_t i) : q_(q), i_(i) {}
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
    size_t i_;
  };
  using iterator = Iter<RingQueue, T>;
  using const_iterator = Iter<const RingQueue, const T>;

  RingQueue() = default;
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;
  RingQueue(RingQueue&& o) noexcept { swap(o); }
  RingQueue& operator=(RingQueue&& o) noexcept {
    RingQueue gone;
    swap(gone);
    swap(o);
    return *this;
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  T& front() { return at(0); }
  const T& front() const { return at(0); }
  T& back() { return at(size_ - 1); }
  const T& back() const { return at(size_ - 1); }
  // The i-th element from the front (i < size()).
  T& at(size_t i) { return slots_[(head_ + i) & (cap_ - 1)]; }
  const T& at(size_t i) const { return slots_[(head_ + i) & (cap_ - 1)]; }

  iterator begin() { return iterator(this, 0); }
  iterator end() { return iterator(this, size_); }
  const_iterator begin() const { return const_iterator(this, 0); }
  const_iterator end() const { return const_iterator(this, size_); }

  // Allocates only when the array is full (or was never made); may throw std::bad_alloc,
  // leaving the queue as it was.
  void push_back(T v) {
    if (size_ == cap_) grow();
    at(size_) = std::move(v);
    ++size_;
  }
  // The front element is reset (its resources freed) and removed.
  void pop_front() {
    slots_[head_] = T{};
    head_ = (head_ + 1) & (cap_ - 1);
    if (--size_ == 0) emptied();
  }
  void clear() {
    while (size_ != 0) pop_front();
  }

 private:
  void grow() {
    const size_t cap = cap_ == 0 ? 2 : cap_ * 2;
    std::unique_ptr<T[]> slots(new T[cap]);
    for (size_t i = 0; i < size_; ++i) slots[i] = std::move(at(i));
    slots_ = std::move(slots);
    cap_ = cap;
    head_ = 0;
  }
  void emptied() {
    head_ = 0;
    if (cap_ <= kKeep) return;
    slots_.reset();
    cap_ = 0;
  }
  void swap(RingQueue& o) noexcept {
    std::swap(slots_, o.slots_);
    std::swap(cap_, o.cap_);
    std::swap(head_, o.head_);
    std::swap(size_, o.size_);
  }

  std::unique_ptr<T[]> slots_;
  size_t cap_ = 0;  // 0 or a power of two
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace wharf
