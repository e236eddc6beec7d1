#include "router/tag_list.h"

#include <utility>

namespace wharf::router {
namespace {

uint64_t load_be(const uint8_t* b, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | b[i];
  return v;
}

}  // namespace

TmHeader parse_tmh(const uint8_t* b) {
  TmHeader h;
  h.opcode = b[0];
  h.app_ctx = static_cast<uint32_t>(load_be(b + 4, 4));
  h.tag = load_be(b + 8, 8);
  return h;
}

RndvHeader parse_rvh(const uint8_t* b) {
  RndvHeader h;
  h.va = load_be(b, 8);
  h.rkey = static_cast<uint32_t>(load_be(b + 8, 4));
  h.len = static_cast<uint32_t>(load_be(b + 12, 4));
  return h;
}

// Handles keep a slot in their low 16 bits.
TagList::TagList(uint32_t capacity) : slots_(capacity < 0xffff ? capacity : 0xffff) {
  for (uint32_t i = static_cast<uint32_t>(slots_.size()); i > 0; --i) free_.push_back(i - 1);
}

void TagList::sync(uint32_t sw_count) {
  if (sync_required(sw_count)) return;
  for (Slot& s : slots_) s.held = false;
}

std::optional<uint32_t> TagList::add(TaggedBuffer b, uint32_t sw_count) {
  sync(sw_count);
  if (free_.empty()) return std::nullopt;
  const uint32_t slot = free_.back();
  free_.pop_back();
  Slot& s = slots_[slot];
  s.buffer = std::move(b);
  s.order = next_order_++;
  s.used = true;
  s.held = sync_required(sw_count);
  ++used_;
  return handle_of(slot, s.generation);
}

bool TagList::remove(uint32_t handle, uint32_t sw_count) {
  sync(sw_count);
  const uint32_t slot = handle & 0xffff;
  if (slot >= slots_.size() || !slots_[slot].used ||
      handle_of(slot, slots_[slot].generation) != handle)
    return false;
  release(slot);
  return true;
}

std::optional<uint32_t> TagList::match(uint64_t tag) const {
  std::optional<uint32_t> best;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.used || s.held || ((s.buffer.tag ^ tag) & s.buffer.mask) != 0) continue;
    if (!best || s.order < slots_[*best].order) best = i;
  }
  return best;
}

TaggedBuffer TagList::take(uint32_t slot) {
  TaggedBuffer b = std::move(slots_[slot].buffer);
  release(slot);
  return b;
}

void TagList::release(uint32_t slot) {
  Slot& s = slots_[slot];
  s.used = false;
  s.held = false;
  s.buffer = TaggedBuffer{};
  ++s.generation;
  --used_;
  free_.push_back(slot);
}

}  // namespace wharf::router
