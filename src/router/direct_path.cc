// The requests a library makes to set up its direct path (GetDirectPeer, GetPeerMr), and the
// MR epoch every library is told of when a registration goes away. Which QPs may take the
// direct path, and the handshake around it, are router/direct_lines.h.
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {

void Router::retire_mr_st() {
  const uint32_t epoch = direct_.next_mr_epoch();
  for (auto& [fd, s] : sessions_)
    if (s->page() != nullptr) s->page()->mr_epoch.store(epoch, std::memory_order_seq_cst);
  direct_.wait_out_retired_keys();
}

// ---- Control requests of the direct path ----

int Session::on_get_direct_peer(const proto::Handle& req, UniqueFd*, int, proto::DirectPeerRep* rep,
                                ReplyFds* out) {
  Qp* qp = qps_.find(req.handle);
  if (qp == nullptr) return EINVAL;
  Qp* peer = router_->direct().peer_of(qp);
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
  Qp* peer = router_->direct().peer_of(qp);
  if (peer == nullptr) return EAGAIN;
  // Only the peer's registrations in the peer QP's PD: what its keys may name (C9-... 9.7.4.1).
  Mr* mr = router_->objects().mr_by_key(req.key);
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
