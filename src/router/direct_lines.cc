#include "router/direct_lines.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "router/peer_rules.h"
#include "router/session.h"
#include "shm/direct_line.h"

namespace wharf::router {
namespace {

// How long the router waits for a library to finish one directly executed work request
// before revoking its right. A long copy looks every part whether the line is wanted
// (abi/verbs/direct_path.cc), so this bound is met only by a thread preempted mid-request.
constexpr uint64_t kBusyWaitNs = 100'000'000;

}  // namespace

bool DirectLines::eligible(const Qp* qp) const {
  // A QP under a rate limit has every message admitted by the router (router/policy.cc).
  // A QP on a tag-matching SRQ lends its send queue to the SRQ, whose rendezvous FINs the
  // router puts into the peer's receive queue: its own sends go through the router too, so
  // that queue has a single consumer.
  if (!enabled_ || qp->direct_revoked || qp->type != IBV_QPT_RC || qp->state() != IBV_QPS_RTS ||
      qp->rate_limited() || qp->owner->container()->rate.limited() ||
      (qp->srq != nullptr && qp->srq->tm != nullptr))
    return false;
  // Nor may a library write a moderated CQ (ibv_modify_cq): the router holds its events.
  if (qp->send_cq->moderation.active()) return false;
  const Qp* peer = objects_.qp_by_qpn(qp->attr.dest_qp_num);
  // A peer with an SRQ is still eligible: the library then executes only the work that
  // takes no receive WQE (RDMA and atomics), as an SRQ may have other consumers.
  return peer != nullptr && !peer->direct_revoked && answers(*qp, *peer, link_layer_) &&
         (peer->srq != nullptr || !peer->recv_cq->moderation.active());
}

Qp* DirectLines::peer_of(const Qp* qp) const {
  return qp->direct_on ? objects_.qp_by_qpn(qp->attr.dest_qp_num) : nullptr;
}

bool DirectLines::wait_idle(Qp* qp) {
  if (shm::wait_while_busy(qp->direct(), now_ns() + kBusyWaitNs)) return true;
  spdlog::warn("QP {:#x} of pid {}: library stayed busy on the direct path; revoked", qp->qpn,
               qp->owner->pid());
  qp->direct_revoked = true;
  return false;
}

void DirectLines::disable(Qp* qp, bool wait_for_library) {
  if (!qp->direct_on) return;
  qp->direct_on = false;
  on_.erase(std::find(on_.begin(), on_.end(), qp));
  // On -> Off: a library that has not claimed Busy now cannot. A Busy library returns the
  // line to On when it finishes; then the exchange is tried again.
  uint32_t expected = shm::kDirectOn;
  while (!qp->direct()->state.compare_exchange_strong(expected, shm::kDirectOff,
                                                      std::memory_order_seq_cst)) {
    if (expected == shm::kDirectBusy && wait_for_library) {
      // A new generation stops the library's long copy at its next look (within one part,
      // abi/verbs/direct_path.cc); the work request then goes to the send ring.
      qp->direct()->generation.store(++qp->direct_generation, std::memory_order_seq_cst);
      if (wait_idle(qp)) {
        expected = shm::kDirectOn;
        continue;
      }
    }
    // Off already, a value only a hostile library writes, or a library we cannot wait for.
    qp->direct()->state.store(shm::kDirectOff, std::memory_order_seq_cst);
    return;
  }
}

void DirectLines::set(Qp* qp, bool on) {
  disable(qp);
  if (!on) return;
  qp->direct()->generation.store(++qp->direct_generation, std::memory_order_relaxed);
  qp->direct()->state.store(shm::kDirectOn, std::memory_order_release);
  qp->direct_on = true;
  on_.push_back(qp);
}

void DirectLines::refresh(Qp* qp) {
  qp->direct()->in_error.store(qp->state() == IBV_QPS_ERR ? 1 : 0, std::memory_order_release);
  set(qp, eligible(qp));
  Qp* peer = objects_.qp_by_qpn(qp->attr.dest_qp_num);
  if (peer != nullptr && peer != qp) set(peer, eligible(peer));
}

void DirectLines::wait_out_retired_keys() {
  // A library that went Busy before seeing the new epoch may still use a retired key.
  std::vector<Qp*> revoked;
  for (Qp* qp : on_)
    if (!wait_idle(qp)) revoked.push_back(qp);
  for (Qp* qp : revoked) disable(qp, /*wait_for_library=*/false);
}

}  // namespace wharf::router
