// Tag matching (docs/ARCHITECTURE.md, "Tag matching"): the matching list of a tag-matching SRQ
// (IBV_SRQT_TM) and the headers of the messages it matches. Pure and single-threaded: the
// router applies ibv_post_srq_ops operations and arriving messages to it in the order they
// reach it.
//
// The protocol is rdma-core's (Documentation/tag_matching.md). Software posts tagged buffers
// (ADD) and removes them (DEL); a message whose tag matches a posted buffer goes straight to
// it, any other goes to the SRQ's ordinary receives as "unexpected" for software to match.
// Because software may post a buffer before it has seen an unexpected message that buffer
// would have taken, every operation carries the number of unexpected messages software has
// handled: a buffer posted while that number is behind the list's count is held (matches
// nothing) until an operation reports the count caught up.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "shm/layout.h"

namespace wharf::router {

// The tag-matching header (infiniband/tm_types.h, struct ibv_tmh) every TM message starts
// with, and the rendezvous header (struct ibv_rvh) after it in a rendezvous request. Both are
// big-endian on the wire; these hold host-order values.
constexpr uint32_t kTmhSize = 16;
constexpr uint32_t kRvhSize = 16;
struct TmHeader {
  uint8_t opcode = 0;  // enum ibv_tmh_op
  uint32_t app_ctx = 0;
  uint64_t tag = 0;
};
struct RndvHeader {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t len = 0;
};
TmHeader parse_tmh(const uint8_t* b);    // kTmhSize bytes
RndvHeader parse_rvh(const uint8_t* b);  // kRvhSize bytes

// A posted tagged buffer. Its scatter entries are resolved against the SRQ's PD when a
// message lands in it, as a receive WQE's are.
struct TaggedBuffer {
  uint64_t tag = 0;
  uint64_t mask = 0;
  uint64_t recv_wr_id = 0;
  std::vector<shm::Sge> sges;
};

class TagList {
 public:
  explicit TagList(uint32_t capacity);

  uint32_t capacity() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t size() const { return used_; }
  uint32_t unexpected_count() const { return unexpected_; }
  bool full() const { return used_ == slots_.size(); }

  // Every operation first reports software's unexpected count `sw_count`; its completion
  // carries IBV_WC_TM_SYNC_REQ when sync_required(sw_count) holds after it.
  bool sync_required(uint32_t sw_count) const { return sw_count != unexpected_; }
  // SYNC. Releases the held buffers when sw_count has caught up.
  void sync(uint32_t sw_count);
  // ADD: the buffer's handle, or nullopt when the list is full.
  std::optional<uint32_t> add(TaggedBuffer b, uint32_t sw_count);
  // DEL: false when `handle` names no posted buffer (never posted, deleted, or consumed by
  // a message: IBV_WC_TM_ERR).
  bool remove(uint32_t handle, uint32_t sw_count);

  // The slot of the earliest-posted, unheld buffer whose tag agrees with `tag` under its mask;
  // nullopt when none does. Takes nothing: the caller takes it once the message can land.
  std::optional<uint32_t> match(uint64_t tag) const;
  const TaggedBuffer& at(uint32_t slot) const { return slots_[slot].buffer; }
  TaggedBuffer take(uint32_t slot);
  // A tagged message matched nothing and went to the SRQ's receives.
  void note_unexpected() { ++unexpected_; }

 private:
  struct Slot {
    TaggedBuffer buffer;
    uint64_t order = 0;       // when it was posted: earlier buffers match first
    uint16_t generation = 0;  // bumped when the slot is freed, so stale handles miss
    bool used = false;
    bool held = false;
  };
  static uint32_t handle_of(uint32_t slot, uint16_t generation) {
    return (uint32_t{generation} << 16) | slot;
  }
  void release(uint32_t slot);

  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;  // free slots; add takes the last
  uint32_t used_ = 0;
  uint32_t unexpected_ = 0;
  uint64_t next_order_ = 0;
};

}  // namespace wharf::router
