// The receives the router took off a shared receive queue's ring and has not completed yet,
// recorded in the SRQ's region (shm::SrqHeldRecord) so that a router process started after a
// crash finds them (issue #23). Once the router claims a receive, the ring's slot is the
// library's again: without a record, a receive the dead process had claimed (the SRQ's next)
// or held for a message arriving in parts would never complete, and the message, sent again
// from its start, would take the receive after it.
//
// Single-threaded (the router's loop). The records are read back from memory the SRQ's owner
// can write: adopt() takes any bytes, and a forged record can only make the router use, for
// the owner's own QPs, a receive it checks like any other (its SGEs against the SRQ's PD).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "router/wqe.h"
#include "shm/layout.h"

namespace wharf::router {

class SrqRecords {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // The records of a new region (all zeros: all free), at `region` laid out as `layout`.
  void attach_fresh(uint8_t* region, const shm::SrqLayout& layout);
  // Copies the records, under the same indices, into a region the SRQ moves to
  // (ibv_modify_srq), and goes on there. The slot size, and so the record size, is the same.
  void move_to(uint8_t* region, const shm::SrqLayout& layout);

  // What a previous process left in an adopted region: the receive it had claimed (kNone if
  // none) and those QPs held, as (QPN, record). Any record in a state it could not have left
  // (a second claimed one, a QPN held twice, an unknown state) is freed.
  struct Left {
    uint32_t claimed = kNone;
    std::vector<std::pair<uint32_t, uint32_t>> held;
  };
  Left adopt(uint8_t* region, const shm::SrqLayout& layout);

  // Records rw, just claimed from the ring, as the SRQ's next receive; kNone when all records
  // are in use (the receive is then not kept across a restart).
  uint32_t keep_claimed(const RecvWork& rw);
  // The claimed receive in `record` is now QP qpn's, for a message arriving in parts.
  void hold(uint32_t record, uint32_t qpn);
  // The receive is completed, flushed or dropped. kNone: nothing.
  void release(uint32_t record);
  // The receive in `record`, checked as a ring slot is (copy_recv_wqe).
  void read(uint32_t record, uint32_t max_sge, RecvWork* out) const;

 private:
  shm::SrqHeldRecord* header(uint32_t i) const {
    return reinterpret_cast<shm::SrqHeldRecord*>(records_ + size_t{i} * record_size_);
  }
  uint8_t* wqe(uint32_t i) const { return records_ + size_t{i} * record_size_ + kHeader; }
  void set(uint8_t* region, const shm::SrqLayout& layout);

  static constexpr size_t kHeader = sizeof(shm::SrqHeldRecord);
  uint8_t* records_ = nullptr;
  uint32_t record_size_ = 0;
  uint32_t slot_ = 0;
  std::vector<uint32_t> free_;  // capacity kSrqHeldRecords: never grows on the data path
};

}  // namespace wharf::router
