// The router's half of the direct intra-host path (docs/ARCHITECTURE.md, "The direct path").
//
// An RC QP in RTS whose connected peer QP lives on this host may execute its sends in its
// own library: the library copies into the peer's registered memory, takes the peer's
// receive WQEs and writes both sides' completions. The router decides when that is allowed
// (the QP's direct line, shm::QpDirect), describes the peer (GetDirectPeer, GetPeerMr) and
// keeps every change that could invalidate the library's view behind a handshake: it turns
// the line Off, or bumps the MR epoch, and then waits until no work request is executing.
// Whatever the library cannot do on the fast path (errors, RNR, unmapped memory) it posts
// to the send ring as usual, and the router executes it with full semantics.
#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/clock.h"
#include "router/peer_rules.h"
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {
namespace {

// How long the router waits for a library to finish one directly executed work request
// (microseconds of copying, unless the thread was preempted) before revoking its right.
constexpr uint64_t kBusyWaitNs = 100'000'000;

}  // namespace

bool Router::direct_eligible_st(const Qp* qp) const {
  // A QP under a rate limit has every message admitted by the router (router/policy.cc).
  // A QP on a tag-matching SRQ lends its send queue to the SRQ, whose rendezvous FINs the
  // router puts into the peer's receive queue: its own sends go through the router too, so
  // that queue has a single consumer.
  if (!cfg_.direct_path || qp->direct_revoked || qp->type != IBV_QPT_RC ||
      qp->state() != IBV_QPS_RTS || qp->rate_limited() || qp->owner->container()->rate.limited() ||
      (qp->srq != nullptr && qp->srq->tm != nullptr))
    return false;
  // Nor may a library write a moderated CQ (ibv_modify_cq): the router holds its events.
  if (qp->send_cq->moderation.active()) return false;
  const Qp* peer = qp_by_qpn(qp->attr.dest_qp_num);
  // A peer with an SRQ is still eligible: the library then executes only the work that
  // takes no receive WQE (RDMA and atomics), as an SRQ may have other consumers.
  return peer != nullptr && !peer->direct_revoked && answers(*qp, *peer, cfg_.link_layer) &&
         (peer->srq != nullptr || !peer->recv_cq->moderation.active());
}

Qp* Router::direct_peer_st(const Qp* qp) const {
  return qp->direct_on ? qp_by_qpn(qp->attr.dest_qp_num) : nullptr;
}

bool Router::wait_direct_idle_st(Qp* qp) {
  const uint64_t deadline = now_ns() + kBusyWaitNs;
  while (qp->direct()->state.load(std::memory_order_seq_cst) == shm::kDirectBusy) {
    if (now_ns() > deadline) {
      spdlog::warn("QP {:#x} of pid {}: library stayed busy on the direct path; revoked", qp->qpn,
                   qp->owner->pid());
      qp->direct_revoked = true;
      return false;
    }
    sched_yield();
  }
  return true;
}

void Router::disable_direct_st(Qp* qp, bool wait_for_library) {
  if (!qp->direct_on) return;
  qp->direct_on = false;
  direct_.erase(std::find(direct_.begin(), direct_.end(), qp));
  // On -> Off: a library that has not claimed Busy now cannot. A Busy library returns the
  // line to On when it finishes; then the exchange is tried again.
  uint32_t expected = shm::kDirectOn;
  while (!qp->direct()->state.compare_exchange_strong(expected, shm::kDirectOff,
                                                      std::memory_order_seq_cst)) {
    if (expected == shm::kDirectBusy && wait_for_library) {
      // A new generation stops the library's long copy at its next look (within one part,
      // abi/verbs/direct_path.cc); the work request then goes to the send ring.
      qp->direct()->generation.store(++qp->direct_generation, std::memory_order_seq_cst);
      if (wait_direct_idle_st(qp)) {
        expected = shm::kDirectOn;
        continue;
      }
    }
    // Off already, a value only a hostile library writes, or a library we cannot wait for.
    qp->direct()->state.store(shm::kDirectOff, std::memory_order_seq_cst);
    return;
  }
}

void Router::set_direct_st(Qp* qp, bool on) {
  disable_direct_st(qp);
  if (!on) return;
  qp->direct()->generation.store(++qp->direct_generation, std::memory_order_relaxed);
  qp->direct()->state.store(shm::kDirectOn, std::memory_order_release);
  qp->direct_on = true;
  direct_.push_back(qp);
}

void Router::refresh_direct_st(Qp* qp) {
  qp->direct()->in_error.store(qp->state() == IBV_QPS_ERR ? 1 : 0, std::memory_order_release);
  set_direct_st(qp, direct_eligible_st(qp));
  Qp* peer = qp_by_qpn(qp->attr.dest_qp_num);
  if (peer != nullptr && peer != qp) set_direct_st(peer, direct_eligible_st(peer));
}

void Router::retire_mr_st() {
  ++mr_epoch_;
  for (auto& [fd, s] : sessions_)
    if (s->page() != nullptr) s->page()->mr_epoch.store(mr_epoch_, std::memory_order_seq_cst);
  // A library that went Busy before seeing the new epoch may still use a retired key.
  std::vector<Qp*> revoked;
  for (Qp* qp : direct_)
    if (!wait_direct_idle_st(qp)) revoked.push_back(qp);
  for (Qp* qp : revoked) disable_direct_st(qp, /*wait_for_library=*/false);
}

// ---- Control requests of the direct path ----

int Session::on_get_direct_peer(const proto::Handle& req, UniqueFd*, int, proto::DirectPeerRep* rep,
                                ReplyFds* out) {
  Qp* qp = qps_.find(req.handle);
  if (qp == nullptr) return EINVAL;
  Qp* peer = router_->direct_peer_st(qp);
  if (peer == nullptr) return EAGAIN;
  rep->generation = qp->direct_generation;
  rep->peer_qpn = peer->qpn;
  rep->peer_sq_entries = peer->sq_entries;
  rep->peer_sq_slot = peer->sq_slot;
  rep->peer_rq_entries = peer->rq_entries;
  rep->peer_rq_slot = peer->rq_slot;
  rep->peer_max_recv_sge = peer->max_recv_sge();
  rep->peer_access = peer->attr.qp_access_flags;
  rep->peer_cq = peer->recv_cq->handle;
  rep->peer_cq_entries = peer->recv_cq->layout.entries;
  if (peer->srq != nullptr) rep->flags |= proto::kPeerUsesSrq;  // its layout has no RQ
  rep->slid = router_->config().link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : container_->lid;
  rep->sl = qp->attr.ah_attr.sl;
  out->add(peer->shm.fd());
  peer->shm_shared = true;
  out->add(peer->recv_cq->shm.fd());
  if (peer->recv_cq->channel != nullptr) {
    rep->flags |= proto::kPeerCqChannel;
    out->add(peer->recv_cq->channel->sock.get());
  }
  if (qp->send_cq->channel != nullptr) {
    rep->flags |= proto::kSendCqChannel;
    out->add(qp->send_cq->channel->sock.get());
  }
  return 0;
}

int Session::on_get_peer_mr(const proto::PeerMrReq& req, UniqueFd*, int, proto::PeerMrRep* rep,
                            ReplyFds* out) {
  Qp* qp = qps_.find(req.qp);
  if (qp == nullptr) return EINVAL;
  Qp* peer = router_->direct_peer_st(qp);
  if (peer == nullptr) return EAGAIN;
  // Only the peer's registrations in the peer QP's PD: what its keys may name (C9-... 9.7.4.1).
  Mr* mr = router_->mr_by_key(req.key);
  if (mr == nullptr || mr->owner != peer->owner || mr->pd != peer->pd) return EACCES;
  rep->access = mr->access;
  // A window's binding is part of a mapping, to the byte, and may be for one QP only: the
  // router checks every use of it (no memfd: the library leaves such work to the router).
  if (mr->mapped_len == 0 || mr->parent != nullptr) return 0;
  rep->mapped_iova = mr->iova + (mr->mapped_start - mr->addr);
  rep->mapped_len = mr->mapped_len;
  rep->memfd_offset = mr->memfd_offset;
  out->add(mr->memfd.get());
  return 0;
}

}  // namespace wharf::router
