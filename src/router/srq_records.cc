#include "router/srq_records.h"

#include <algorithm>
#include <cstring>

namespace wharf::router {

void SrqRecords::set(uint8_t* region, const shm::SrqLayout& layout) {
  records_ = region + layout.records_off;
  record_size_ = layout.record_size;
  slot_ = layout.slot;
}

void SrqRecords::attach_fresh(uint8_t* region, const shm::SrqLayout& layout) {
  set(region, layout);
  free_.clear();
  free_.reserve(shm::kSrqHeldRecords);
  for (uint32_t i = shm::kSrqHeldRecords; i-- > 0;) free_.push_back(i);
}

void SrqRecords::move_to(uint8_t* region, const shm::SrqLayout& layout) {
  std::memcpy(region + layout.records_off, records_,
              size_t{shm::kSrqHeldRecords} * layout.record_size);
  set(region, layout);
}

SrqRecords::Left SrqRecords::adopt(uint8_t* region, const shm::SrqLayout& layout) {
  set(region, layout);
  free_.clear();
  free_.reserve(shm::kSrqHeldRecords);
  Left left;
  for (uint32_t i = shm::kSrqHeldRecords; i-- > 0;) {
    shm::SrqHeldRecord* h = header(i);
    const uint32_t state = h->state.load(std::memory_order_acquire);
    const uint32_t qpn = h->qpn;
    bool kept = false;
    if (state == shm::kSrqRecordClaimed && left.claimed == kNone) {
      left.claimed = i;
      kept = true;
    } else if (state == shm::kSrqRecordHeld &&
               std::none_of(left.held.begin(), left.held.end(),
                            [qpn](const auto& e) { return e.first == qpn; })) {
      left.held.emplace_back(qpn, i);
      kept = true;
    }
    if (!kept) {
      h->state.store(shm::kSrqRecordFree, std::memory_order_relaxed);
      free_.push_back(i);
    }
  }
  return left;
}

uint32_t SrqRecords::keep_claimed(const RecvWork& rw) {
  if (free_.empty()) return kNone;
  const uint32_t i = free_.back();
  free_.pop_back();
  const size_t sges = std::min<size_t>(rw.hdr.num_sge, (slot_ - sizeof(rw.hdr)) / sizeof(shm::Sge));
  std::memcpy(wqe(i), &rw.hdr, sizeof(rw.hdr));
  std::memcpy(wqe(i) + sizeof(rw.hdr), rw.sge, sges * sizeof(shm::Sge));
  // Last, after the receive: a process killed before this leaves the record free.
  header(i)->state.store(shm::kSrqRecordClaimed, std::memory_order_release);
  return i;
}

void SrqRecords::hold(uint32_t record, uint32_t qpn) {
  if (record == kNone) return;
  // A process killed between the two leaves it claimed: the SRQ's next receive, which the
  // message, sent again from its start, takes all the same.
  header(record)->qpn = qpn;
  header(record)->state.store(shm::kSrqRecordHeld, std::memory_order_release);
}

void SrqRecords::release(uint32_t record) {
  if (record == kNone) return;
  header(record)->state.store(shm::kSrqRecordFree, std::memory_order_release);
  free_.push_back(record);
}

void SrqRecords::read(uint32_t record, uint32_t max_sge, RecvWork* out) const {
  copy_recv_wqe(wqe(record), slot_, max_sge, out);
}

}  // namespace wharf::router
