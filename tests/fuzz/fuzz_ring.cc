// Fuzz target for shm/ring.h: one producer and one consumer on a ring whose shared header and
// slots the input may overwrite at any point, as a hostile container can.
//
// Input: [capacity selector][slot size selector] then a program of one-byte operations (some
// take operand bytes). Checked after every operation:
//   - every slot pointer handed out is the slot of the caller's own index, inside the slots
//     (which are an exactly-sized heap block, so AddressSanitizer sees any stray access);
//   - each side writes only its own index, and publishes exactly its own counter;
//   - every status is justified by a value the peer actually published (kOk never comes from
//     an index nobody wrote), and available()/in_flight() follow their documented formulas;
//   - while no index has been tampered with, the ring is an exact FIFO: statuses match a model
//     queue and the bytes popped are the bytes pushed (unless the slot itself was scribbled).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <set>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "shm/ring.h"

namespace wharf::shm {
namespace {

using fuzz::Input;

// Whether `set` holds a value among the `count` consecutive values starting at `lo`, mod 2^32.
bool any_in(const std::set<uint32_t>& set, uint32_t lo, uint64_t count) {
  if (count == 0) return false;
  if (count >= (1ull << 32)) return !set.empty();
  const uint64_t end = uint64_t{lo} + count;  // exclusive
  auto it = set.lower_bound(lo);
  if (it != set.end() && *it < end) return true;
  return end > (1ull << 32) && !set.empty() && *set.begin() < end - (1ull << 32);
}

class RingFuzzer {
 public:
  RingFuzzer(uint32_t capacity, uint32_t slot_size)
      : cap_(capacity),
        slot_size_(slot_size),
        hdr_(std::make_unique<RingHeader>()),
        slots_(new uint8_t[static_cast<size_t>(capacity) * slot_size]()),
        prod_(hdr_.get(), slots_.get(), capacity, slot_size),
        cons_(hdr_.get(), slots_.get(), capacity, slot_size),
        tampered_(capacity, false) {
    prod_published_.insert(0);
    cons_published_.insert(0);
  }

  // Runs operations until the input or a budget of 1024 ring calls runs out (keeps every
  // execution short, whatever the input length).
  void run(Input& in) {
    for (int budget = 1024; !in.empty() && budget > 0; --budget) {
      switch (in.u8() % 9) {
        case 0: reserve(/*commit=*/true); break;
        case 1: reserve(/*commit=*/false); break;
        case 2: peek(/*pop=*/true); break;
        case 3: peek(/*pop=*/false); break;
        case 4:
          publish_hostile(&hdr_->producer, cons_.tail(), prod_.head(), &prod_published_, in);
          break;
        case 5:
          publish_hostile(&hdr_->consumer, prod_.head(), cons_.tail(), &cons_published_, in);
          break;
        case 6: {
          const uint32_t slot = in.u8() % cap_;
          const uint32_t off = in.u8() % slot_size_;
          slots_[static_cast<size_t>(slot) * slot_size_ + off] = in.u8();
          tampered_[slot] = true;
          break;
        }
        case 7: counts(); break;
        case 8:
          // A burst of honest traffic, so short inputs still go round the ring.
          for (uint32_t i = 0, n = in.u8() % (2 * cap_ + 2); i < n && budget > 0; ++i) {
            reserve(true);
            peek(i % 3 != 0);
            budget -= 2;
          }
          break;
      }
    }
  }

 private:
  uint8_t* slot_of(uint32_t index) const {
    return slots_.get() + static_cast<size_t>(index & (cap_ - 1)) * slot_size_;
  }
  uint32_t producer_index() const { return hdr_->producer.value.load(std::memory_order_relaxed); }
  uint32_t consumer_index() const { return hdr_->consumer.value.load(std::memory_order_relaxed); }

  void reserve(bool commit) {
    const uint32_t h = prod_.head();
    const uint32_t p_before = producer_index(), c_before = consumer_index();
    RingStatus st;
    uint8_t* slot = prod_.reserve(&st);
    WHARF_FUZZ_CHECK(producer_index() == p_before && consumer_index() == c_before, "reserve");
    WHARF_FUZZ_CHECK((slot != nullptr) == (st == RingStatus::kOk), "reserve");
    WHARF_FUZZ_CHECK(prod_.head() == h, "reserve");
    switch (st) {
      case RingStatus::kOk:
        WHARF_FUZZ_CHECK(slot == slot_of(h), "reserve slot");
        WHARF_FUZZ_CHECK(any_in(cons_published_, h - cap_ + 1, cap_), "kOk unjustified");
        break;
      case RingStatus::kFull:
        WHARF_FUZZ_CHECK(cons_published_.count(h - cap_) == 1, "kFull unjustified");
        break;
      case RingStatus::kCorrupt:
        WHARF_FUZZ_CHECK(any_in(cons_published_, h + 1, (1ull << 32) - cap_ - 1),
                         "kCorrupt unjustified");
        break;
      case RingStatus::kEmpty: WHARF_FUZZ_CHECK(false, "producer reported kEmpty");
    }
    if (honest_) {
      const RingStatus want = fifo_.size() == cap_ ? RingStatus::kFull : RingStatus::kOk;
      WHARF_FUZZ_CHECK(st == want, "honest reserve");
    }
    if (slot == nullptr) return;
    const uint64_t seq = next_seq_++;
    std::memset(slot, 0, slot_size_);
    std::memcpy(slot, &seq, sizeof(seq));
    tampered_[h & (cap_ - 1)] = false;
    if (!commit) return;
    prod_.commit();
    WHARF_FUZZ_CHECK(prod_.head() == h + 1 && producer_index() == h + 1, "commit publishes");
    WHARF_FUZZ_CHECK(consumer_index() == c_before, "commit wrote consumer index");
    prod_published_.insert(h + 1);
    if (honest_) fifo_.push_back(seq);
  }

  void peek(bool pop) {
    const uint32_t t = cons_.tail();
    const uint32_t p_before = producer_index(), c_before = consumer_index();
    RingStatus st;
    const uint8_t* slot = cons_.peek(&st);
    WHARF_FUZZ_CHECK(producer_index() == p_before && consumer_index() == c_before, "peek");
    WHARF_FUZZ_CHECK((slot != nullptr) == (st == RingStatus::kOk), "peek");
    WHARF_FUZZ_CHECK(cons_.tail() == t, "peek");
    switch (st) {
      case RingStatus::kOk:
        WHARF_FUZZ_CHECK(slot == slot_of(t), "peek slot");
        WHARF_FUZZ_CHECK(any_in(prod_published_, t + 1, cap_), "kOk unjustified");
        break;
      case RingStatus::kEmpty:
        WHARF_FUZZ_CHECK(prod_published_.count(t) == 1, "kEmpty unjustified");
        break;
      case RingStatus::kCorrupt:
        WHARF_FUZZ_CHECK(any_in(prod_published_, t + cap_ + 1, (1ull << 32) - cap_ - 1),
                         "kCorrupt unjustified");
        break;
      case RingStatus::kFull: WHARF_FUZZ_CHECK(false, "consumer reported kFull");
    }
    if (honest_) {
      const RingStatus want = fifo_.empty() ? RingStatus::kEmpty : RingStatus::kOk;
      WHARF_FUZZ_CHECK(st == want, "honest peek");
    }
    if (slot == nullptr) return;
    uint8_t copy[64];
    std::memcpy(copy, slot, slot_size_);  // copy out first, as the contract asks
    if (honest_ && !tampered_[t & (cap_ - 1)]) {
      uint64_t seq;
      std::memcpy(&seq, copy, sizeof(seq));
      WHARF_FUZZ_CHECK(seq == fifo_.front(), "FIFO content");
    }
    if (!pop) return;
    cons_.pop();
    WHARF_FUZZ_CHECK(cons_.tail() == t + 1 && consumer_index() == t + 1, "pop publishes");
    WHARF_FUZZ_CHECK(producer_index() == p_before, "pop wrote producer index");
    cons_published_.insert(t + 1);
    if (honest_) fifo_.pop_front();
  }

  // The peer overwrites its index: an arbitrary value, one near ours, one near UINT32_MAX, or
  // its honest value again.
  void publish_hostile(RingIndex* index, uint32_t ours, uint32_t honest, std::set<uint32_t>* log,
                       Input& in) {
    uint32_t v;
    switch (in.u8() % 4) {
      case 0: v = in.u32(); break;
      case 1:
        v = ours + static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(in.u8())));
        break;
      case 2: v = UINT32_MAX - in.u8(); break;
      default: v = honest; break;
    }
    if (v != index->value.load(std::memory_order_relaxed)) honest_ = false;
    index->value.store(v, std::memory_order_relaxed);
    log->insert(v);
  }

  void counts() {
    const uint32_t t = cons_.tail(), h = prod_.head();
    const uint32_t avail = cons_.available();
    const uint32_t diff = producer_index() - t;
    WHARF_FUZZ_CHECK(avail == (diff > cap_ ? cap_ + 1 : diff), "available()");
    WHARF_FUZZ_CHECK(prod_.in_flight() == h - consumer_index(), "in_flight()");
    if (honest_) {
      WHARF_FUZZ_CHECK(avail == fifo_.size() && h - consumer_index() == fifo_.size(), "counts");
    }
  }

  const uint32_t cap_, slot_size_;
  std::unique_ptr<RingHeader> hdr_;
  std::unique_ptr<uint8_t[]> slots_;
  RingProducer prod_;
  RingConsumer cons_;
  std::vector<bool> tampered_;
  std::set<uint32_t> prod_published_, cons_published_;
  bool honest_ = true;
  std::deque<uint64_t> fifo_;
  uint64_t next_seq_ = 0;
};

}  // namespace
}  // namespace wharf::shm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wharf::fuzz::Input in(data, size);
  const uint32_t capacity = 1u << (in.u8() % 9);   // 1 .. 256
  const uint32_t slot_size = 8u << (in.u8() % 4);  // 8 .. 64
  wharf::shm::RingFuzzer fuzzer(capacity, slot_size);
  fuzzer.run(in);
  return 0;
}
