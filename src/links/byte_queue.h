// A FIFO of bytes for a connection's send and receive buffers: appended at the tail,
// consumed at the head. Space handed out by append() is not initialized (the caller writes
// it at once), and consumed space is reclaimed by moving the live bytes to the front only
// when at least as many bytes were consumed as are live, so every byte is moved O(1) times.
// A queue may report its memory to a counter its owner keeps for many queues.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace wharf::links {

class ByteQueue {
 public:
  ByteQueue() = default;
  // `memory` (may be null) has the queue's capacity added to it while the queue lives.
  explicit ByteQueue(size_t* memory) : memory_(memory) {}
  ~ByteQueue() { resize_to(0); }
  ByteQueue(const ByteQueue&) = delete;
  ByteQueue& operator=(const ByteQueue&) = delete;

  uint8_t* data() { return buf_.get() + head_; }
  const uint8_t* data() const { return buf_.get() + head_; }
  size_t size() const { return tail_ - head_; }
  bool empty() const { return head_ == tail_; }

  // Makes room for n more bytes at the tail and returns where they go.
  uint8_t* append(size_t n) {
    if (tail_ + n > cap_) make_room(n);
    uint8_t* at = buf_.get() + tail_;
    tail_ += n;
    return at;
  }
  // Takes back the last n appended bytes.
  void unappend(size_t n) { tail_ -= std::min(n, size()); }
  // Drops the first n bytes.
  void consume(size_t n) {
    head_ += std::min(n, size());
    if (head_ == tail_) head_ = tail_ = 0;
  }
  // Drops everything.
  void clear() { head_ = tail_ = 0; }
  // Gives back memory a burst left behind: when the bytes fill at most a quarter of more than
  // `keep`, the queue moves to twice their size (at least `keep`), or frees it all when empty.
  // Called after every consume, a queue would hold at most max(keep, 4 x its bytes) of memory
  // (but a queue that keeps draining empty and filling again would allocate all the time).
  void shrink(size_t keep) {
    const size_t live = size();
    if (cap_ <= keep || live * 4 > cap_) return;
    resize_to(live == 0 ? 0 : std::max(keep, 2 * live));
  }
  size_t capacity() const { return cap_; }

 private:
  void make_room(size_t n) {
    const size_t live = size();
    if (head_ >= live && live + n <= cap_) {  // cheap: move the live bytes to the front
      std::memmove(buf_.get(), buf_.get() + head_, live);
      head_ = 0;
      tail_ = live;
    } else {
      resize_to(std::max({cap_ * 2, live + n, size_t{64} << 10}));
    }
  }
  // Moves the live bytes (at most cap) into a buffer of cap bytes (none for 0).
  void resize_to(size_t cap) {
    const size_t live = size();
    std::unique_ptr<uint8_t[]> buf;
    if (cap != 0) {
      buf = std::make_unique_for_overwrite<uint8_t[]>(cap);
      if (live != 0) std::memcpy(buf.get(), buf_.get() + head_, live);
    }
    if (memory_ != nullptr) *memory_ = *memory_ - cap_ + cap;
    buf_ = std::move(buf);
    cap_ = cap;
    head_ = 0;
    tail_ = live;
  }

  std::unique_ptr<uint8_t[]> buf_;
  size_t cap_ = 0;
  size_t head_ = 0;
  size_t tail_ = 0;
  size_t* memory_ = nullptr;
};

}  // namespace wharf::links
