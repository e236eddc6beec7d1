// A library's side of a router QP's rings and a CQ's ring, for unit tests that build router
// objects by hand (router_executor_test, router_remote_path_test).
#pragma once

#include <cstring>

#include "router/objects.h"
#include "shm/cq_ring.h"
#include "shm/ring.h"

namespace wharf::test_support {

// What a library's ibv_post_send (send true) or ibv_post_recv writes into qp's ring: a
// header and its body in the next slot, then published. False if the ring has no room.
inline bool push_wqe(router::Qp* qp, bool send, const void* head, size_t head_len, const void* body,
                     size_t body_len) {
  const shm::QpLayout l = qp->layout();
  shm::RingProducer ring(
      reinterpret_cast<shm::RingHeader*>(qp->shm.data() + (send ? l.sq_ring_off : l.rq_ring_off)),
      qp->shm.data() + (send ? l.sq_slots_off : l.rq_slots_off),
      send ? qp->sq_entries : qp->rq_entries, send ? qp->sq_slot : qp->rq_slot);
  ring.resume();
  shm::RingStatus st;
  uint8_t* slot = ring.reserve(&st);
  if (slot == nullptr) return false;
  std::memcpy(slot, head, head_len);
  std::memcpy(slot + head_len, body, body_len);
  ring.commit();
  return true;
}

// A reader of cq's entries, as a library's ibv_poll_cq reads them.
inline shm::CqConsumer cq_reader(const router::Cq& cq) {
  return shm::CqConsumer(reinterpret_cast<shm::RingHeader*>(cq.shm.data() + cq.layout.ring_off),
                         reinterpret_cast<shm::Cqe*>(cq.shm.data() + cq.layout.slots_off),
                         cq.layout.entries);
}

}  // namespace wharf::test_support
