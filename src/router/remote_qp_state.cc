#include "router/remote_qp_state.h"

#include "rc/psn.h"

namespace wharf::router {
namespace {

// Whether a ring's consumer index `tail` has passed position `index` (ring indices wrap).
bool popped(uint32_t index, uint32_t tail) { return static_cast<int32_t>(tail - index) > 0; }

// Whether the receive a completion under way names left its queue: the QP's receive ring
// moved past it, or its SRQ's records no longer keep it (they do until it is let go of).
bool receive_taken(const RemoteQpState::CompletionUnderWay& r, const RemoteQpState::RingTails& t) {
  if (r.srq_record != SrqRecords::kNone)
    return r.srq_record != t.srq_held && r.srq_record != t.srq_claimed;
  return t.rq == r.ring_index + 1;
}

}  // namespace

RemoteQpState::Continuation RemoteQpState::continuation(RingTails tails) const {
  Continuation c{parked(), {}};
  // A request completes in three steps (its WQE leaves the ring, its entry goes to the CQ, it
  // leaves the window): only the oldest can be between the first and the last.
  if (requester.window().valid()) {
    for (const rc::Request<Work>& r : requester.window()) {
      if (!popped(r.work.ring_index, tails.sq)) {
        c.at.next_psn = r.first_psn;
        break;
      }
      c.at.next_psn = rc::psn_add(r.last_psn, 1);
      if (sending.post && sending.ring_index == r.work.ring_index) c.unfinished.send = sending;
    }
  }
  // A receive completes in four (its WQE leaves its queue, its entry goes to the CQ, the last
  // PSN is accepted, the message ends): once the WQE left, the message is not taken again.
  if (responder.in_message()) {
    c.at.epsn = responder.message_psn();
    if (receiving.message_psn == responder.message_psn() && receive_taken(receiving, tails)) {
      c.at.epsn = rc::psn_add(receiving.end_psn, 1);
      c.at.msn = rc::psn_add(receiving.msn, 1);
      if (receiving.post) c.unfinished.receive = receiving;
    }
  }
  return c;
}

}  // namespace wharf::router
