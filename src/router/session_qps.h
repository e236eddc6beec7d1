// A session's QPs: owns them, names each by its handle, and finds each by its posted mark
// (shm/posted_marks.h). One slot per QP, reused once its QP is gone; the slot is the QP's
// posted mark, so marks stay few and dense and a mark taken from the (hostile) context page
// can only name one of the session's own QPs.
//
// A handle is the slot in its low 16 bits and the slot's generation (1..0x7fff) above them:
// never 0, never with proto::kOpenedQpBit, and a destroyed QP's handle names no QP until
// its slot has served 0x7fff QPs more. Per QP this costs a pointer and a generation, where a
// hash table of handles cost a node and a bucket (issue #18: router memory per idle QP).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "proto/device.h"
#include "router/objects.h"

namespace wharf::router {

class SessionQps {
 public:
  static constexpr uint32_t kSlotBits = 16;
  static_assert(device::kMaxQp == 1u << kSlotBits, "a slot for each QP a session may have");

  static uint32_t posted_mark(const Qp& qp) { return slot_of(qp.handle); }

  // Takes qp, gives it a handle and returns it; nullptr (qp dropped) when the session
  // already has device::kMaxQp QPs.
  Qp* add(std::unique_ptr<Qp> qp) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else if (slots_.size() < device::kMaxQp) {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
      generations_.push_back(1);
    } else {
      return nullptr;
    }
    qp->handle = static_cast<uint32_t>(generations_[slot]) << kSlotBits | slot;
    slots_[slot] = std::move(qp);
    ++size_;
    return slots_[slot].get();
  }

  // Takes qp under `handle`, which a resumed session had (its slot is its posted mark, which
  // the library keeps); nullptr (qp dropped) when that slot is taken or out of range.
  Qp* add_at(uint32_t handle, std::unique_ptr<Qp> qp) {
    const uint32_t slot = slot_of(handle);
    const auto generation = static_cast<uint16_t>(handle >> kSlotBits);
    if (generation == 0 || generation > kMaxGeneration) return nullptr;
    while (slots_.size() <= slot) {
      free_.push_back(static_cast<uint32_t>(slots_.size()));
      slots_.emplace_back();
      generations_.push_back(1);
    }
    if (slots_[slot] != nullptr) return nullptr;
    free_.erase(std::find(free_.begin(), free_.end(), slot));
    generations_[slot] = generation;
    qp->handle = handle;
    slots_[slot] = std::move(qp);
    ++size_;
    return slots_[slot].get();
  }
  // The QP `handle` names, or nullptr.
  Qp* find(uint32_t handle) const {
    Qp* qp = by_mark(slot_of(handle));
    return qp != nullptr && qp->handle == handle ? qp : nullptr;
  }

  // The QP `mark` names, or nullptr (any value may come from the page).
  Qp* by_mark(uint32_t mark) const { return mark < slots_.size() ? slots_[mark].get() : nullptr; }

  // Removes the QP `handle` names and gives it back (nullptr if it names none).
  std::unique_ptr<Qp> take(uint32_t handle) {
    if (find(handle) == nullptr) return nullptr;
    const uint32_t slot = slot_of(handle);
    generations_[slot] = generations_[slot] == kMaxGeneration ? 1 : generations_[slot] + 1;
    free_.push_back(slot);
    --size_;
    return std::move(slots_[slot]);
  }

  size_t size() const { return size_; }

  // Calls f(Qp*) for each QP, in slot order. f must not add or take QPs.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& qp : slots_)
      if (qp != nullptr) f(qp.get());
  }

  // Every QP's handle, in slot order (to take them all).
  std::vector<uint32_t> handles() const {
    std::vector<uint32_t> all;
    all.reserve(size_);
    for_each([&all](const Qp* qp) { all.push_back(qp->handle); });
    return all;
  }

 private:
  static constexpr uint16_t kMaxGeneration = 0x7fff;

  static uint32_t slot_of(uint32_t handle) { return handle & (device::kMaxQp - 1); }

  std::vector<std::unique_ptr<Qp>> slots_;
  std::vector<uint16_t> generations_;
  std::vector<uint32_t> free_;
  size_t size_ = 0;
};

}  // namespace wharf::router
