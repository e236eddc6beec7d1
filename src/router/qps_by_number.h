// The router's QPs by QP number (host-wide, router/router.h), which this table also hands out.
//
// A QPN is a slot of the table in its low 16 bits and that slot's generation (1..254) above
// them: never 0 or 1 (the special QPs), never 0xffffff (the multicast QPN), and a lookup is
// an index and a compare, with no hashing, lock or allocation (every work request to a QP on
// this host, every packet from another). Per QP it costs a pointer and a generation byte,
// where a hash set of the QPs cost 9 to 18 B with its spare room (issue #18: router memory
// per idle QP).
// Freed slots are reused oldest first, so a destroyed QP's number comes back only after every
// other free slot served a QP and its own slot went through 253 more QPs: late packets for an
// old QP find no QP rather than its successor.
// Numbers are not sequential (issue #19): the table grows kGrowBy slots at a time, handed out
// in a random order, and each slot's generations start at a random one, so a QP's number
// says nothing about the next one's (the kernel's randomness, std::random_device).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <numeric>
#include <random>
#include <vector>

#include "proto/device.h"
#include "router/objects.h"

namespace wharf::router {

class QpsByNumber {
 public:
  static constexpr uint32_t kSlotBits = 16;
  static constexpr uint32_t kMaxQps = 1u << kSlotBits;  // the most QPs a router has at once
  static_assert(device::kMaxQp <= kMaxQps, "a slot for each QP the router may have");

  // Gives qp a number (qp->qpn) and adds it. False (qp->qpn untouched) when kMaxQps QPs
  // have numbers.
  bool add(Qp* qp) {
    if (free_.empty() && !grow()) return false;
    const uint32_t slot = free_.front();
    free_.pop_front();
    qp->qpn = static_cast<uint32_t>(generations_[slot]) << kSlotBits | slot;
    slots_[slot] = qp;
    ++size_;
    return true;
  }

  // Adds qp under `qpn`, the number it had in an earlier router process (a resumed
  // session's). False when that number is not one this table could give or its slot is taken.
  bool add_numbered(Qp* qp, uint32_t qpn) {
    const uint32_t slot = qpn & (kMaxQps - 1);
    const auto generation = static_cast<uint8_t>(qpn >> kSlotBits);
    if (qpn >> kSlotBits > kLastGeneration || generation < kFirstGeneration) return false;
    while (slots_.size() <= slot)
      if (!grow()) return false;
    if (slots_[slot] != nullptr) return false;
    free_.erase(std::find(free_.begin(), free_.end(), slot));
    generations_[slot] = generation;
    qp->qpn = qpn;
    slots_[slot] = qp;
    ++size_;
    return true;
  }

  // The QP numbered qpn, or nullptr (any number may come from the network or a library).
  Qp* find(uint32_t qpn) const {
    const uint32_t slot = qpn & (kMaxQps - 1);
    if (slot >= slots_.size()) return nullptr;
    Qp* qp = slots_[slot];
    return qp != nullptr && qp->qpn == qpn ? qp : nullptr;
  }

  // Removes the QP numbered qpn; nothing if no QP has that number.
  void remove(uint32_t qpn) {
    if (find(qpn) == nullptr) return;
    const uint32_t slot = qpn & (kMaxQps - 1);
    slots_[slot] = nullptr;
    generations_[slot] = next_generation(generations_[slot]);
    free_.push_back(slot);
    --size_;
  }

  size_t size() const { return size_; }

  // Calls f(Qp*) for each QP, in slot order; f must not add or remove any.
  template <class F>
  void for_each(F&& f) const {
    for (Qp* qp : slots_)
      if (qp != nullptr) f(qp);
  }

 private:
  static constexpr uint8_t kFirstGeneration = 1;    // slot 0 and 1 are then 0x10000, 0x10001
  static constexpr uint8_t kLastGeneration = 0xfe;  // the last slot then 0xfeffff
  static constexpr uint32_t kGrowBy = 256;

  static uint8_t next_generation(uint8_t g) {
    return g == kLastGeneration ? kFirstGeneration : static_cast<uint8_t>(g + 1);
  }

  // Adds up to kGrowBy free slots in a random order, each at a random first generation.
  // False when the table has kMaxQps slots.
  bool grow() {
    const auto first = static_cast<uint32_t>(slots_.size());
    const uint32_t n = std::min<uint32_t>(kGrowBy, kMaxQps - first);
    if (n == 0) return false;
    std::random_device kernel;  // getrandom(2); control path only
    std::mt19937 gen(kernel());
    std::uniform_int_distribution<int> generation(kFirstGeneration, kLastGeneration);
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), first);
    std::shuffle(order.begin(), order.end(), gen);
    slots_.resize(first + n, nullptr);
    for (uint32_t i = 0; i < n; ++i) generations_.push_back(static_cast<uint8_t>(generation(gen)));
    free_.insert(free_.end(), order.begin(), order.end());
    return true;
  }

  std::vector<Qp*> slots_;
  std::vector<uint8_t> generations_;  // of each slot: its current or next QP's
  std::deque<uint32_t> free_;         // free slots, the longest free first
  size_t size_ = 0;
};

}  // namespace wharf::router
