// Single-producer rings in shared memory (see docs/shm-rings.md), with one consumer, or with
// several that each claim the entry they take (BasicRingConsumer::claim: a shared receive
// queue's).
//
// A ring is a RingHeader (producer and consumer indices on separate cache lines) plus
// `capacity` fixed-size slots. Indices are free-running uint32 counters; slot i lives at
// (i & (capacity-1)) * slot_size. Each side keeps its own index privately and only ever
// *publishes* it to shared memory; the peer's index is read with acquire and cached.
//
// The peer may be hostile (the router never trusts a container): a peer index that claims
// more than `capacity` entries in flight is reported as kCorrupt, never used to index.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "common/bits.h"

namespace wharf::shm {

struct alignas(kCacheLine) RingIndex {
  std::atomic<uint32_t> value;
};
static_assert(sizeof(RingIndex) == kCacheLine);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

struct RingHeader {
  RingIndex producer;  // written only by the producer
  RingIndex consumer;  // written only by the consumer(s)
};
static_assert(sizeof(RingHeader) == 2 * kCacheLine);

enum class RingStatus { kOk, kEmpty, kFull, kCorrupt };

// Producer side. Not thread-safe; callers serialize (library: per-queue spinlock;
// router: the data-path thread).
class RingProducer {
 public:
  RingProducer() = default;
  RingProducer(RingHeader* hdr, uint8_t* slots, uint32_t capacity, uint32_t slot_size)
      : hdr_(hdr), slots_(slots), capacity_(capacity), slot_size_(slot_size) {}

  // Slot for the next entry, or nullptr with *st = kFull / kCorrupt. Does not publish.
  uint8_t* reserve(RingStatus* st) { return reserve_ahead(0, st); }

  // Slot for the entry `ahead` places after the next one (entries may be written ahead and
  // published together), or nullptr with *st = kFull / kCorrupt.
  uint8_t* reserve_ahead(uint32_t ahead, RingStatus* st) {
    if (head_ + ahead - cached_consumer_ >= capacity_) {
      cached_consumer_ = hdr_->consumer.value.load(std::memory_order_acquire);
      uint32_t used = head_ - cached_consumer_;
      if (used > capacity_) {
        *st = RingStatus::kCorrupt;
        return nullptr;
      }
      if (used + ahead >= capacity_) {
        *st = RingStatus::kFull;
        return nullptr;
      }
    }
    *st = RingStatus::kOk;
    return slots_ + static_cast<size_t>((head_ + ahead) & (capacity_ - 1)) * slot_size_;
  }

  // Makes the next n reserved slots visible. Release: their bytes happen-before the index.
  void commit(uint32_t n = 1) {
    head_ += n;
    hdr_->producer.value.store(head_, std::memory_order_release);
  }

  // Continues a ring whose region already holds entries (a queue moved to a new region by its
  // consumer): the next entry goes where the header's producer index says.
  void resume() {
    head_ = hdr_->producer.value.load(std::memory_order_acquire);
    cached_consumer_ = hdr_->consumer.value.load(std::memory_order_acquire);
  }

  uint32_t head() const { return head_; }
  uint32_t capacity() const { return capacity_; }
  uint32_t slot_size() const { return slot_size_; }
  RingHeader* header() const { return hdr_; }
  // The slot at ring position `index` (published or not).
  uint8_t* slot_at(uint32_t index) const {
    return slots_ + static_cast<size_t>(index & (capacity_ - 1)) * slot_size_;
  }
  // Entries the consumer has not yet released, as last observed (refreshes the cache).
  uint32_t in_flight() {
    cached_consumer_ = hdr_->consumer.value.load(std::memory_order_acquire);
    return head_ - cached_consumer_;
  }

 private:
  RingHeader* hdr_ = nullptr;
  uint8_t* slots_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t slot_size_ = 0;
  uint32_t head_ = 0;
  uint32_t cached_consumer_ = 0;
};

// A consumer's own position in a ring: the next entry it takes, and the producer index it
// last read.
struct RingCursor {
  uint32_t tail = 0;
  uint32_t cached_producer = 0;
};

// Consumer side. Same threading contract as RingProducer. Cursor is RingCursor (the consumer
// keeps its position itself: RingConsumer) or RingCursor& (RingConsumerView: a consumer made
// for the moment over a position its owner keeps, with the geometry it can work out itself:
// the router keeps 8 bytes per ring of a QP instead of 32).
template <class Cursor>
class BasicRingConsumer {
 public:
  BasicRingConsumer() = default;
  BasicRingConsumer(RingHeader* hdr, const uint8_t* slots, uint32_t capacity, uint32_t slot_size)
      : hdr_(hdr), slots_(slots), capacity_(capacity), slot_size_(slot_size) {}
  BasicRingConsumer(RingHeader* hdr, const uint8_t* slots, uint32_t capacity, uint32_t slot_size,
                    Cursor cursor)
      : hdr_(hdr), slots_(slots), capacity_(capacity), slot_size_(slot_size), cur_(cursor) {}

  // The oldest unconsumed slot, or nullptr with *st = kEmpty / kCorrupt. A hostile producer
  // may rewrite the slot at any time: copy it out before validating it.
  const uint8_t* peek(RingStatus* st) { return peek_ahead(0, st); }

  // The slot `ahead` positions behind the oldest unconsumed one (a consumer that releases
  // slots only once their work is done looks past the slots it still holds), or nullptr
  // with *st = kEmpty (not produced yet) / kCorrupt. Copy it out before validating it.
  const uint8_t* peek_ahead(uint32_t ahead, RingStatus* st) {
    if (cur_.cached_producer - cur_.tail <= ahead)
      cur_.cached_producer = hdr_->producer.value.load(std::memory_order_acquire);
    const uint32_t produced = cur_.cached_producer - cur_.tail;
    if (produced > capacity_) {
      *st = RingStatus::kCorrupt;
      return nullptr;
    }
    if (produced <= ahead) {
      *st = RingStatus::kEmpty;
      return nullptr;
    }
    *st = RingStatus::kOk;
    return slot_at(cur_.tail + ahead);
  }

  // The slot at ring position `index`, one peeked before and not popped yet
  // (tail() <= index < tail() + capacity()): to copy out again.
  const uint8_t* slot_at(uint32_t index) const {
    return slots_ + static_cast<size_t>(index & (capacity_ - 1)) * slot_size_;
  }

  // Entries available now (refreshes the cached producer index); capacity_+1 if corrupt.
  uint32_t available() {
    cur_.cached_producer = hdr_->producer.value.load(std::memory_order_acquire);
    uint32_t n = cur_.cached_producer - cur_.tail;
    return n > capacity_ ? capacity_ + 1 : n;
  }

  // Releases the peeked slot to the producer. Release: our reads of the slot happen-before
  // the producer may overwrite it.
  void pop() {
    ++cur_.tail;
    hdr_->consumer.value.store(cur_.tail, std::memory_order_release);
  }

  // Takes the peeked slot for this consumer when more than one consumes the ring (a shared
  // receive queue, whose receives the router and the express lines of the SRQ's QPs take):
  // the consumer index moves from tail() to tail() + 1 only if nobody moved it since. True if
  // the slot is ours (copied out before, it may be used now); false: another consumer took
  // it, and the cursor is at the index found (peek again).
  bool claim() {
    uint32_t expected = cur_.tail;
    if (hdr_->consumer.value.compare_exchange_strong(expected, cur_.tail + 1,
                                                     std::memory_order_acq_rel)) {
      ++cur_.tail;
      return true;
    }
    cur_.tail = expected;
    return false;
  }

  // Takes the consumer index from shared memory: for a ring whose consumer role another
  // party (a direct-path library) takes in turn. peek() validates it like any peer index.
  void resync() {
    cur_.tail = hdr_->consumer.value.load(std::memory_order_acquire);
    cur_.cached_producer = cur_.tail;
  }

  uint32_t tail() const { return cur_.tail; }
  uint32_t capacity() const { return capacity_; }

 private:
  RingHeader* hdr_ = nullptr;
  const uint8_t* slots_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t slot_size_ = 0;
  Cursor cur_;
};

using RingConsumer = BasicRingConsumer<RingCursor>;
using RingConsumerView = BasicRingConsumer<RingCursor&>;

}  // namespace wharf::shm
