// Express lines' receives from shared receive queues: see srq_receives.h.
#include "abi/verbs/srq_receives.h"

#include <cstring>
#include <mutex>

#include "abi/verbs/provider.h"

namespace wharf::abi {

namespace {

// Whether lines may take srq's receives now (under srq->lock).
bool lines_may_take(const Srq* srq) {
  return !srq->tm && !srq->resizing && srq->state->limit_armed.load(std::memory_order_acquire) == 0;
}

}  // namespace

bool ReceiveCopy::copy_from(const uint8_t* slot, uint32_t max_sge, uint32_t at) {
  std::memcpy(&hdr, slot, sizeof(hdr));
  if (hdr.num_sge > max_sge || hdr.num_sge > shm::kMaxRecvSge) return false;
  std::memcpy(sge, slot + sizeof(shm::RecvWqe), hdr.num_sge * sizeof(shm::Sge));
  pos = at;
  return true;
}

bool peek_srq_receive(Srq* srq, ReceiveCopy* out) {
  std::lock_guard<SpinLock> g(srq->lock);
  if (!lines_may_take(srq)) return false;
  const shm::RingHeader* hdr = srq->ring.header();
  const uint32_t pos = hdr->consumer.value.load(std::memory_order_acquire);
  const uint32_t posted = srq->ring.head() - pos;  // this process is the producer
  if (posted == 0 || posted > srq->ring.capacity()) return false;
  if (!out->copy_from(srq->ring.slot_at(pos), srq->max_sge, pos)) return false;
  out->generation = srq->generation;
  return true;
}

bool claim_srq_receive(Srq* srq, const ReceiveCopy& r) {
  std::lock_guard<SpinLock> g(srq->lock);
  // A move copies the receives not yet claimed to the new region, numbered from 0 again: none
  // is claimed meanwhile, nor by a position in an older region.
  if (!lines_may_take(srq) || r.generation != srq->generation) return false;
  uint32_t expected = r.pos;
  return srq->ring.header()->consumer.value.compare_exchange_strong(expected, r.pos + 1,
                                                                    std::memory_order_acq_rel);
}

bool requeue_srq_receive(Srq* srq, const ReceiveCopy& r) {
  std::lock_guard<SpinLock> g(srq->lock);
  if (srq->resizing) return false;
  shm::RingStatus st;
  uint8_t* slot = srq->ring.reserve(&st);
  if (slot == nullptr) return false;
  std::memcpy(slot, &r.hdr, sizeof(r.hdr));
  std::memcpy(slot + sizeof(shm::RecvWqe), r.sge, r.hdr.num_sge * sizeof(shm::Sge));
  srq->ring.commit();
  return true;
}

}  // namespace wharf::abi
