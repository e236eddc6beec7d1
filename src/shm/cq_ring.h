// Completion queue rings: several producers, one consumer (see docs/shm-rings.md).
//
// A CQ has more than one producer: the router, and on the direct intra-host path
// (docs/ARCHITECTURE.md) the verbs libraries of the CQ's owner and of its trusted peers.
// As hardware CQEs carry an ownership bit, each Cqe carries a publication stamp `seq`:
//  - a producer claims ring position p by compare-and-swap of the header's producer index
//    from p to p+1, after checking that fewer than `capacity` entries are unconsumed;
//  - it writes the entry into slot p & (capacity-1) and then stores seq = p+1 (release);
//  - the consumer takes slot t only once its seq reads t+1 (acquire), copies the entry and
//    publishes t+1 as the consumer index, which frees the slot for position t+capacity.
// A claimed position is always published, so entries are consumed in claim order; a
// producer preempted between claim and publish delays the entries after it, never loses them.
//
// The router produces into container-owned memory: indices it reads are validated (a
// producer index more than `capacity` ahead of the consumer is kCorrupt), its attempts to
// claim are bounded, and it writes nothing but whole slots inside the slot array.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/clock.h"
#include "common/futex.h"
#include "shm/layout.h"
#include "shm/ring.h"

namespace wharf::shm {

class CqProducer {
 public:
  CqProducer() = default;
  CqProducer(RingHeader* hdr, Cqe* slots, uint32_t capacity)
      : hdr_(hdr), slots_(slots), capacity_(capacity) {}

  // Appends c stamped with the time now (its completion_ns and seq are ignored): kOk, kFull,
  // or kCorrupt when the indices are out of range or keep changing faster than a claim can
  // succeed.
  RingStatus push(const Cqe& c) {
    const uint64_t stamp = monotonic_raw_ns();
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
      // Consumer first: it never passes the producer index read after it.
      uint32_t cons = hdr_->consumer.value.load(std::memory_order_acquire);
      uint32_t pos = hdr_->producer.value.load(std::memory_order_acquire);
      uint32_t used = pos - cons;
      if (used > capacity_) continue;  // stale pair under concurrent producers, or corrupt
      if (used == capacity_) return RingStatus::kFull;
      if (!hdr_->producer.value.compare_exchange_weak(pos, pos + 1, std::memory_order_acq_rel,
                                                      std::memory_order_relaxed))
        continue;
      Cqe* slot = slots_ + (pos & (capacity_ - 1));
      std::memcpy(slot, &c, offsetof(Cqe, seq));
      slot->completion_ns = stamp;
      std::atomic_ref<uint32_t>(slot->seq).store(pos + 1, std::memory_order_release);
      return RingStatus::kOk;
    }
    return RingStatus::kCorrupt;
  }

  // The position the next entry will be claimed at (entries claim positions in order).
  uint32_t position() const { return hdr_->producer.value.load(std::memory_order_acquire); }

  // Whether an entry like `c` (same QP, work request, opcode and status) was published at a
  // position from `from` on: what a restarted producer asks of an entry it may have pushed
  // before it died. Consumed entries stay in their slots until the ring wraps; *known is
  // false (and so is the answer) when more than `capacity` positions were claimed since
  // `from`. The indices are the owner's: any values are read safely.
  bool published_since(uint32_t from, const Cqe& c, bool* known) const {
    const uint32_t end = position();
    *known = end - from <= capacity_;
    if (!*known) return false;
    for (uint32_t pos = from; pos != end; ++pos) {
      const Cqe* slot = slots_ + (pos & (capacity_ - 1));
      if (std::atomic_ref<uint32_t>(const_cast<Cqe*>(slot)->seq).load(std::memory_order_acquire) ==
              pos + 1 &&
          slot->qp_num == c.qp_num && slot->wr_id == c.wr_id && slot->opcode == c.opcode &&
          slot->status == c.status)
        return true;
    }
    return false;
  }

  // Whether n more entries fit now. A hint: another producer may take the room first.
  bool has_room(uint32_t n) const {
    uint32_t cons = hdr_->consumer.value.load(std::memory_order_acquire);
    uint32_t pos = hdr_->producer.value.load(std::memory_order_acquire);
    uint32_t used = pos - cons;
    return used <= capacity_ && capacity_ - used >= n;
  }

 private:
  static constexpr int kClaimAttempts = 64;
  RingHeader* hdr_ = nullptr;
  Cqe* slots_ = nullptr;
  uint32_t capacity_ = 0;
};

// The CQ owner's side. Not thread-safe (the library holds the CQ's lock).
class CqConsumer {
 public:
  CqConsumer() = default;
  CqConsumer(RingHeader* hdr, Cqe* slots, uint32_t capacity)
      : hdr_(hdr), slots_(slots), capacity_(capacity) {}

  // Whether an entry is published and waiting to be popped.
  bool has_entry() const {
    const Cqe* slot = slots_ + (tail_ & (capacity_ - 1));
    return std::atomic_ref<uint32_t>(const_cast<Cqe*>(slot)->seq).load(std::memory_order_acquire) ==
           tail_ + 1;
  }

  // Marks every published, unconsumed entry of QP qp_num discarded (Cqe::discarded); the
  // owner skips such entries when it pops them. Returns how many it marked.
  uint32_t discard_qp(uint32_t qp_num) {
    uint32_t marked = 0;
    for (uint32_t pos = tail_;; ++pos) {
      Cqe* slot = slots_ + (pos & (capacity_ - 1));
      if (std::atomic_ref<uint32_t>(slot->seq).load(std::memory_order_acquire) != pos + 1 ||
          pos - tail_ >= capacity_)
        return marked;
      if (slot->qp_num == qp_num && slot->discarded == 0) slot->discarded = 1, ++marked;
    }
  }

  // Copies the oldest published entry into *out and frees its slot. False if none.
  bool pop(Cqe* out) {
    Cqe* slot = slots_ + (tail_ & (capacity_ - 1));
    if (std::atomic_ref<uint32_t>(slot->seq).load(std::memory_order_acquire) != tail_ + 1)
      return false;
    std::memcpy(out, slot, sizeof(Cqe));
    ++tail_;
    hdr_->consumer.value.store(tail_, std::memory_order_release);
    return true;
  }

 private:
  RingHeader* hdr_ = nullptr;
  Cqe* slots_ = nullptr;
  uint32_t capacity_ = 0;
  uint32_t tail_ = 0;
};

// Called by a producer after publishing an entry: wakes a poller sleeping on the CQ. The
// fence pairs with the one in begin_nap between announcing the nap and looking at the
// ring: either the poller sees the entry or the producer sees the nap.
inline void wake_napping_poller(CqNotify* n) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (n->napping.load(std::memory_order_relaxed) != 0 &&
      n->napping.exchange(0, std::memory_order_acq_rel) != 0)
    futex_wake_all(&n->napping);
}

// The polling side, in two steps. begin_nap, called by the consumer (holding the lock that
// guards `ring`), announces the nap and returns true, or returns false when an entry is
// already there. nap then sleeps until a producer publishes an entry, or at most timeout_ns.
// Only producers clear the announcement, and always with a wake of every sleeper: a poller
// that withdrew or woke by its timeout leaves it, since another thread may be napping on the
// same CQ under it. The price is one futex wake, by the next producer, per such nap.
inline bool begin_nap(CqNotify* n, const CqConsumer& ring) {
  n->napping.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return !ring.has_entry();
}
inline void nap(CqNotify* n, uint64_t timeout_ns) { futex_wait(&n->napping, 1, timeout_ns); }

// How long a poller that found the CQ empty naps at once (0: not at once) at now_ns while the
// router moves a long message for a QP completing here, `until` being the CQ's bulk_until_ns:
// at most nap_ns, and never past the end of that window, since only a CQE ends a nap and the
// application may await something else (its own memory, an express line, another CQ). The
// router extends the window by kBulkWindowNs with each packet of such a message it sends or
// receives. 5 ms, because the router sends none while the link's queue it filled drains
// (links::HostLinks::kQueueLimit, 4 MiB: 2 ms at 2 GB/s), nor while it waits for the cores
// the pollers compete for, and a window that closes in such a gap lets them spin it longer:
// with 50 or 200 us UCX's tag_bw between hosts gained nothing, with 1 ms about a quarter,
// and 1 ms windows were still open at 0.25% of the READ responder's polls (6.6 million in a
// run); with 5 ms the polls fell to 48 thousand and tag_bw rose a fifth (docs/PERFORMANCE.md).
constexpr uint64_t kBulkWindowNs = 5'000'000;
inline uint64_t bulk_nap_ns(uint64_t until, uint64_t now_ns, uint64_t nap_ns) {
  return until > now_ns ? std::min(nap_ns, until - now_ns) : 0;
}
// The router, for each packet of a long message: the window whose end `until_ns` holds (a
// CQ's bulk_until_ns, a QP's peer_reads_until_ns) goes on. The store is skipped while the
// window would move less than a tenth of itself, so that a stream of packets does not write
// the line the library reads at every one. (The application may write the word too; a value
// past the new end, being wrapped in the difference, is replaced.)
inline void extend_bulk_window(std::atomic<uint64_t>* until_ns, uint64_t now_ns) {
  const uint64_t until = now_ns + kBulkWindowNs;
  if (until - until_ns->load(std::memory_order_relaxed) > kBulkWindowNs / 10)
    until_ns->store(until, std::memory_order_relaxed);
}

// Called by a producer after publishing an entry: whether the CQ is armed for it. The fence
// pairs with req_notify_cq's fence between arming and polling: either the consumer sees the
// entry or the producer sees the arm.
inline bool cq_event_wanted(CqNotify* n, bool solicited, bool success) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint32_t arm = n->arm.load(std::memory_order_relaxed);
  if (arm == kCqDisarmed) return false;
  // Armed for solicited events only: unsolicited successful completions do not fire.
  return arm == kCqArmedAny || solicited || !success;
}

// Disarms the CQ: true if this producer must now send the completion event (it won the arm).
inline bool take_cq_arm(CqNotify* n) {
  return n->arm.exchange(kCqDisarmed, std::memory_order_acq_rel) != kCqDisarmed;
}

// Called by a producer after publishing an entry: true if this producer must now send the
// completion event (the CQ was armed for the entry, and this producer won the arm).
inline bool claim_cq_event(CqNotify* n, bool solicited, bool success) {
  return cq_event_wanted(n, solicited, success) && take_cq_arm(n);
}

// What a library does after publishing a successful entry: wakes a napping poller, and true
// if it must now send the completion event (the CQ has a channel, `has_channel`, and was
// armed for the entry).
inline bool raise_cq_event(CqNotify* n, bool has_channel, bool solicited) {
  wake_napping_poller(n);
  return has_channel && claim_cq_event(n, solicited, true);
}

}  // namespace wharf::shm
