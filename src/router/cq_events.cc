// Completion events: raising a CQ's event when it is armed, at once or as its moderation
// (ibv_modify_cq, router/cq_moderation.h) allows. Only the router holds events back: a
// moderated CQ has no direct-path writers (router/direct_path.cc), so every entry it gets
// passes through here.
#include <algorithm>
#include <cstdint>

#include "common/clock.h"
#include "proto/datagram.h"
#include "router/router.h"
#include "router/session.h"
#include "shm/cq_ring.h"

namespace wharf::router {
namespace {

void send_event(const Cq* cq) { proto::send_cq_event(cq->channel->sock.get(), cq->handle); }

}  // namespace

std::vector<Qp*> Router::cq_writers_st(const Cq* cq) const {
  std::vector<Qp*> writers;
  objects_.for_each_qp([&](Qp* qp) {
    if (qp->send_cq == cq) writers.push_back(qp);
    if (qp->recv_cq != cq) return;
    if (Qp* peer = objects_.qp_by_qpn(qp->attr.dest_qp_num); peer != nullptr && peer != qp)
      writers.push_back(peer);
  });
  return writers;
}

void Router::raise_cq_event_st(Cq* cq, bool solicited, bool success) {
  if (!cq->moderation.active()) {
    if (shm::claim_cq_event(cq->notify, solicited, success)) send_event(cq);
    return;
  }
  if (!shm::cq_event_wanted(cq->notify, solicited, success)) return;
  const bool first = cq->moderation.held() == 0;
  if (!cq->moderation.hold(now_ns())) {
    if (first) held_cqs_.push_back(cq);
    return;
  }
  raise_held_cq_event_st(cq);
}

void Router::raise_held_cq_event_st(Cq* cq) {
  drop_held_cq_st(cq);
  cq->moderation.fired();
  if (shm::take_cq_arm(cq->notify)) send_event(cq);
}

void Router::raise_due_cq_events_st(uint64_t now) {
  // Raising an event takes its CQ out of the list, swapping the last one into its place.
  for (size_t i = 0; i < held_cqs_.size();) {
    if (held_cqs_[i]->moderation.due_ns() > now)
      ++i;
    else
      raise_held_cq_event_st(held_cqs_[i]);
  }
}

uint64_t Router::next_cq_event_due() const {
  uint64_t due = UINT64_MAX;
  for (const Cq* cq : held_cqs_) due = std::min(due, cq->moderation.due_ns());
  return due;
}

void Router::drop_held_cq_st(Cq* cq) {
  auto it = std::find(held_cqs_.begin(), held_cqs_.end(), cq);
  if (it == held_cqs_.end()) return;
  *it = held_cqs_.back();
  held_cqs_.pop_back();
}

}  // namespace wharf::router
