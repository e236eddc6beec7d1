// A library's side of a router QP's rings, an SRQ's ring and a CQ's ring, for unit tests that build
// router objects by hand (router_executor_test, router_remote_path_test).
#pragma once

#include <cstring>

#include "router/host_objects.h"
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

// srq made as the router's control path makes one, for `owner` on `pd`: `depth` receives of
// one SGE, its records fresh, numbered in `objects`. False if its region could not be made.
inline bool make_srq(router::Srq* srq, router::Session* owner, router::Pd* pd, uint32_t depth,
                     router::HostObjects& objects) {
  srq->owner = owner;
  srq->pd = pd;
  srq->layout = shm::srq_layout(depth, shm::recv_slot_size(1));
  if (srq->shm.create("wharf-test-srq", srq->layout.total) != 0) return false;
  srq->records.attach_fresh(srq->shm.data(), srq->layout);
  srq->max_wr = depth;
  srq->max_sge = 1;
  srq->srqn = objects.add_srq(srq);
  return true;
}

// qp made again (a new region, a new number) to take its receives from srq instead of a
// queue of its own; before it is connected.
inline bool put_qp_on_srq(router::Qp* qp, router::Srq* srq, router::HostObjects& objects) {
  objects.remove_qp(qp->qpn);
  qp->srq = srq;
  qp->rq_entries = 0;
  qp->shm = router::ShmRegion();
  return qp->shm.create("wharf-test-qp", qp->layout().total) == 0 && objects.add_qp(qp);
}

// What a library's ibv_post_srq_recv writes into srq's ring: a receive of one SGE.
inline bool push_srq_recv(router::Srq* srq, uint64_t wr_id, const shm::Sge& sge) {
  shm::RingProducer ring(reinterpret_cast<shm::RingHeader*>(srq->shm.data() + srq->layout.ring_off),
                         srq->shm.data() + srq->layout.slots_off, srq->layout.entries,
                         srq->layout.slot);
  ring.resume();
  shm::RingStatus st;
  uint8_t* slot = ring.reserve(&st);
  if (slot == nullptr) return false;
  const shm::RecvWqe h{wr_id, 1, 0};
  std::memcpy(slot, &h, sizeof(h));
  std::memcpy(slot + sizeof(h), &sge, sizeof(sge));
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
