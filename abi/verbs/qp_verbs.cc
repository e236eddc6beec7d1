// Queue pairs: creation, the state machine (validated by the router), and posting work.
#include <errno.h>
#include <infiniband/verbs.h>
#include <sched.h>

#include <cstring>
#include <new>

#include "abi/verbs/export.h"
#include "abi/verbs/provider.h"
#include "proto/qp_rules.h"
#include "proto/verbs_wire.h"
#include "shm/receive_wait.h"

using namespace wharf;
using namespace wharf::abi;

namespace wharf::abi {

void Qp::reset_rings() {
  uint8_t* base = map.data;
  if (base == nullptr) return;  // a target opened by ibv_open_qp has no queues here
  sq = shm::RingProducer(reinterpret_cast<shm::RingHeader*>(base + layout.sq_ring_off),
                         base + layout.sq_slots_off, layout.sq_entries, layout.sq_slot);
  if (layout.rq_entries != 0)
    rq = shm::RingProducer(reinterpret_cast<shm::RingHeader*>(base + layout.rq_ring_off),
                           base + layout.rq_slots_off, layout.rq_entries, layout.rq_slot);
}

}  // namespace wharf::abi

namespace {

void caps_to_ibv(const proto::QpCaps& c, ibv_qp_cap* cap) {
  cap->max_send_wr = c.max_send_wr;
  cap->max_recv_wr = c.max_recv_wr;
  cap->max_send_sge = c.max_send_sge;
  cap->max_recv_sge = c.max_recv_sge;
  cap->max_inline_data = c.max_inline_data;
}

}  // namespace

namespace wharf::abi {

Qp* create_qp(ibv_context* context, ibv_pd* pd, ibv_xrcd* xrcd, ibv_qp_init_attr* init, bool rss) {
  // An XRC target names its domain only; an XRC initiator has a send CQ and no receive side;
  // an RSS QP has a PD only.
  const bool target = init != nullptr && init->qp_type == IBV_QPT_XRC_RECV;
  const bool initiator = init != nullptr && init->qp_type == IBV_QPT_XRC_SEND;
  if (init == nullptr || (target ? xrcd == nullptr || xrcd->context != context
                                 : pd == nullptr || pd->context != context ||
                                       (!rss && (init->send_cq == nullptr ||
                                                 (!initiator && init->recv_cq == nullptr))))) {
    errno = EINVAL;
    return nullptr;
  }
  Context* ctx = to_ctx(context);
  proto::CreateQpReq req;
  if (target) {
    req.xrcd = to_xrcd(xrcd)->handle;
  } else if (rss) {
    req.pd = to_pd(pd)->handle;  // no CQs, no queues: the router's mark of an RSS QP
    init->cap = ibv_qp_cap{};
  } else {
    req.pd = to_pd(pd)->handle;
    req.send_cq = to_cq(init->send_cq)->handle;
    if (!initiator) {
      req.recv_cq = to_cq(init->recv_cq)->handle;
      req.srq = init->srq != nullptr ? to_srq(init->srq)->handle : 0;
    }
  }
  req.qp_type = static_cast<uint8_t>(init->qp_type);
  req.sq_sig_all = init->sq_sig_all != 0;
  req.caps.max_send_wr = init->cap.max_send_wr;
  req.caps.max_recv_wr = init->cap.max_recv_wr;
  req.caps.max_send_sge = init->cap.max_send_sge;
  req.caps.max_recv_sge = init->cap.max_recv_sge;
  req.caps.max_inline_data = init->cap.max_inline_data;
  proto::CreateQpRep rep;
  UniqueFd memfd;
  int err = ctx->client.call(proto::Op::kCreateQp, req, nullptr, 0, &rep, &memfd, 1);
  const bool made = err == 0;
  if (err == 0 && (!memfd.valid() || rep.posted_mark >= shm::kPostedMarks)) err = EPROTO;
  Qp* qp = err == 0 ? new (std::nothrow) Qp{} : nullptr;
  if (err == 0 && qp == nullptr) err = ENOMEM;
  if (err == 0) {
    qp->layout = shm::qp_layout(rep.sq_entries, rep.sq_slot, rep.rq_entries, rep.rq_slot);
    err = qp->map.map(memfd.get(), qp->layout.total);
  }
  if (err != 0) {
    delete qp;
    if (made) ctx->release_in_router(proto::Op::kDestroyQp, rep.qp);
    errno = err;
    return nullptr;
  }
  qp->handle = rep.qp;
  qp->region = std::move(memfd);
  qp->request = req;
  qp->proof = rep.proof;
  qp->posted_mark = rep.posted_mark;
  qp->caps = rep.caps;
  qp->sq_sig_all = req.sq_sig_all;
  qp->reset_rings();
  qp->direct_line = reinterpret_cast<shm::QpDirect*>(qp->map.data + qp->layout.direct_off);
  qp->counters = reinterpret_cast<shm::QpCounters*>(qp->map.data + qp->layout.counters_off);
  ibv_qp* q = &qp->qp;
  q->context = context;
  q->qp_context = init->qp_context;
  q->pd = target ? nullptr : pd;
  q->send_cq = target ? nullptr : init->send_cq;
  q->recv_cq = target || initiator ? nullptr : init->recv_cq;
  q->srq = target || initiator ? nullptr : init->srq;
  q->handle = rep.qp;
  q->qp_num = rep.qpn;
  q->state = IBV_QPS_RESET;
  q->qp_type = init->qp_type;
  pthread_mutex_init(&q->mutex, nullptr);
  pthread_cond_init(&q->cond, nullptr);
  if (!ctx->track(ctx->qps, rep.qp, q)) {
    delete qp;
    return ctx->out_of_memory(proto::Op::kDestroyQp, rep.qp);
  }
  caps_to_ibv(rep.caps, &init->cap);
  return qp;
}

}  // namespace wharf::abi

WHARF_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (pd == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  Qp* qp = create_qp(pd->context, pd, nullptr, init);
  return qp != nullptr ? &qp->qp : nullptr;
}

WHARF_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  proto::ModifyQpReq req;
  req.qp = to_qp(qp)->handle;
  req.attr_mask = static_cast<uint32_t>(attr_mask);
  req.attr = proto::to_wire(*attr);
  proto::Empty rep;
  Qp* q = to_qp(qp);
  // A QP leaving RTS leaves its express line: into SQD the line finishes what it holds,
  // otherwise the router takes what is outstanding on it (and flushes or drops it as the new
  // state says).
  const bool leaves_rts = (attr_mask & IBV_QP_STATE) && attr->qp_state != IBV_QPS_RTS;
  if (leaves_rts) q->express.stop(q, attr->qp_state);
  int err = to_ctx(qp->context)->client.call(proto::Op::kModifyQp, req, nullptr, 0, &rep);
  if (err != 0) {
    if (leaves_rts) q->express.resume(q);  // still in RTS
    return err;
  }
  {
    // A resumed session brings the QP back by these (a reset starts them again).
    std::lock_guard<std::mutex> g(to_ctx(qp->context)->objects_mu);
    const bool reset = (attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET;
    if (reset) q->modifications.clear();
    try {
      if (!reset) q->modifications.push_back(req);
    } catch (...) {  // then it could not be restored: as if the router had it alone
    }
  }
  if (attr_mask & IBV_QP_STATE) {
    if (attr->qp_state == IBV_QPS_RESET) {
      forget_express(q);
      q->express.close(q);
      q->sq_lock.lock();
      q->rq_lock.lock();
      q->reset_rings();
      q->rq_lock.unlock();
      q->sq_lock.unlock();
      if (qp->send_cq != nullptr) discard_completions(qp->send_cq, qp->qp_num);
      if (qp->recv_cq != nullptr && qp->recv_cq != qp->send_cq)
        discard_completions(qp->recv_cq, qp->qp_num);
    }
    qp->state = attr->qp_state;
    if (leaves_rts) q->express.resume(q);  // goes on the line again once back in RTS
  }
  return 0;
}

namespace wharf::abi {

// The router paces bytes, not packets: typical_pkt_sz is checked as mlx5 does, then unused.
int modify_qp_rate_limit(ibv_qp* qp, ibv_qp_rate_limit_attr* attr) {
  if (attr->comp_mask != 0) return EINVAL;
  if ((attr->max_burst_sz != 0 || attr->typical_pkt_sz != 0) && attr->rate_limit == 0)
    return EINVAL;
  proto::ModifyQpRateLimitReq req;
  req.qp = to_qp(qp)->handle;
  req.rate_limit = attr->rate_limit;
  req.max_burst_sz = attr->max_burst_sz;
  req.typical_pkt_sz = attr->typical_pkt_sz;
  proto::Empty rep;
  return to_ctx(qp->context)->client.call(proto::Op::kModifyQpRateLimit, req, nullptr, 0, &rep);
}

}  // namespace wharf::abi

WHARF_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  proto::QueryQpRep rep;
  int err =
      to_ctx(qp->context)
          ->client.call(proto::Op::kQueryQp, proto::Handle{to_qp(qp)->handle}, nullptr, 0, &rep);
  if (err != 0) return err;
  proto::from_wire(rep.attr, attr);
  caps_to_ibv(rep.caps, &attr->cap);
  qp->state = attr->qp_state;
  if (init != nullptr) {
    std::memset(init, 0, sizeof(*init));
    init->qp_context = qp->qp_context;
    init->send_cq = qp->send_cq;
    init->recv_cq = qp->recv_cq;
    init->srq = qp->srq;
    init->qp_type = qp->qp_type;
    init->sq_sig_all = rep.sq_sig_all;
    caps_to_ibv(rep.caps, &init->cap);
  }
  return 0;
}

WHARF_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  Context* ctx = to_ctx(qp->context);
  proto::Empty rep;
  int err =
      ctx->client.call(proto::Op::kDestroyQp, proto::Handle{to_qp(qp)->handle}, nullptr, 0, &rep);
  if (err != 0) return err;
  forget_express(to_qp(qp));
  to_qp(qp)->express.close(to_qp(qp));  // a receive its line claimed from an SRQ goes back
  {
    std::lock_guard<std::mutex> g(ctx->objects_mu);
    ctx->qps.erase(to_qp(qp)->handle);
  }
  if (to_qp(qp)->rss_table != nullptr) release_rss_table(to_qp(qp)->rss_table);
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete to_qp(qp);
  return 0;
}

namespace wharf::abi {

int write_send_wqe(Qp* qp, uint8_t* slot, const ibv_send_wr* wr) {
  auto* h = reinterpret_cast<shm::SendWqe*>(slot);
  h->wr_id = wr->wr_id;
  h->opcode = static_cast<uint8_t>(wr->opcode);
  h->flags = static_cast<uint8_t>(((wr->send_flags & IBV_SEND_SIGNALED) ? shm::kWqeSignaled : 0) |
                                  ((wr->send_flags & IBV_SEND_SOLICITED) ? shm::kWqeSolicited : 0) |
                                  ((wr->send_flags & IBV_SEND_FENCE) ? shm::kWqeFence : 0));
  h->imm_data = wr->imm_data;
  switch (wr->opcode) {
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      h->remote_addr = wr->wr.atomic.remote_addr;
      h->rkey = wr->wr.atomic.rkey;
      h->compare_add = wr->wr.atomic.compare_add;
      h->swap = wr->wr.atomic.swap;
      break;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_WRITE:
      h->remote_addr = wr->wr.rdma.remote_addr;
      h->rkey = wr->wr.rdma.rkey;
      break;
    case IBV_WR_BIND_MW: {  // the field use: shm::SendWqe
      const ibv_mw_bind_info& b = wr->bind_mw.bind_info;
      h->rkey = wr->bind_mw.rkey;
      h->remote_addr = b.addr;
      h->compare_add = b.length;
      h->swap = b.mw_access_flags;
      h->ah_handle = wr->bind_mw.mw->handle;
      h->remote_qpn = b.mr != nullptr ? b.mr->lkey : 0;
      h->num_sge = 0;
      h->inline_len = 0;
      return 0;
    }
    case IBV_WR_LOCAL_INV:
      h->rkey = wr->invalidate_rkey;
      h->num_sge = 0;
      h->inline_len = 0;
      return 0;
    case IBV_WR_SEND_WITH_INV: h->rkey = wr->invalidate_rkey; break;
    default: break;
  }
  if (qp->qp.qp_type == IBV_QPT_XRC_SEND) h->remote_srqn = wr->qp_type.xrc.remote_srqn;
  if (qp->qp.qp_type == IBV_QPT_UD) {
    if (wr->wr.ud.ah == nullptr) return EINVAL;
    h->ah_handle = to_ah(wr->wr.ud.ah)->handle;
    h->remote_qpn = wr->wr.ud.remote_qpn;
    h->remote_qkey = wr->wr.ud.remote_qkey;
  }
  uint8_t* body = slot + sizeof(shm::SendWqe);
  if ((wr->send_flags & IBV_SEND_INLINE) && wr->opcode != IBV_WR_RDMA_READ &&
      wr->opcode != IBV_WR_ATOMIC_CMP_AND_SWP && wr->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) {
    // An atomic write's 8 bytes go inline whatever max_inline_data says, if the slot holds them.
    const uint64_t cap = wr->opcode == IBV_WR_ATOMIC_WRITE
                             ? qp->layout.sq_slot - sizeof(shm::SendWqe)
                             : qp->caps.max_inline_data;
    uint64_t total = 0;
    for (int i = 0; i < wr->num_sge; ++i) {
      total += wr->sg_list[i].length;
      if (total > cap) return EINVAL;
      std::memcpy(body + total - wr->sg_list[i].length,
                  reinterpret_cast<const void*>(wr->sg_list[i].addr), wr->sg_list[i].length);
    }
    h->flags |= shm::kWqeInline;
    h->inline_len = static_cast<uint32_t>(total);
    h->num_sge = 0;
    return 0;
  }
  h->inline_len = 0;
  h->num_sge = static_cast<uint8_t>(wr->num_sge);
  auto* sge = reinterpret_cast<shm::Sge*>(body);
  for (int i = 0; i < wr->num_sge; ++i) {
    sge[i].addr = wr->sg_list[i].addr;
    sge[i].length = wr->sg_list[i].length;
    sge[i].lkey = wr->sg_list[i].lkey;
  }
  return 0;
}

namespace {

// A BIND_MW work request as providers check it before posting (mlx5): a window of this
// context and the QP's PD, of the type the caller may bind (type 1 through ibv_bind_mw only,
// type 2 through ibv_post_send), a key that keeps the window's index, a registration of the
// window's PD for a non-empty window, no zero-based access. 0 or EINVAL.
int check_bind(const ibv_qp* qp, const ibv_send_wr* wr, ibv_mw_type type) {
  const ibv_mw* mw = wr->bind_mw.mw;
  const ibv_mw_bind_info& b = wr->bind_mw.bind_info;
  if (mw == nullptr || mw->context != qp->context || mw->type != type || mw->pd != qp->pd ||
      (wr->bind_mw.rkey >> 8) != (mw->rkey >> 8) || (b.mw_access_flags & IBV_ACCESS_ZERO_BASED))
    return EINVAL;
  if (b.mr == nullptr) return b.addr != 0 || b.length != 0 ? EINVAL : 0;
  return b.mr->pd == mw->pd ? 0 : EINVAL;
}

// With qp's sq_lock held: puts wr on the QP's express line, or stages it behind the line's
// outstanding work (true, *err set if that failed), or leaves it for the send ring (false).
// Drops the lock while it looks a key up.
bool send_on_express_line(Qp* qp, const ibv_send_wr* wr, int* err) {
  for (;;) {
    uint32_t key = 0;
    switch (qp->express.try_send(qp, wr, &key)) {
      case ExpressLine::Send::kSent: return true;
      case ExpressLine::Send::kToRing: return false;
      case ExpressLine::Send::kStage: *err = qp->express.stage(qp, wr); return true;
      case ExpressLine::Send::kNeedKey:
        qp->sq_lock.unlock();
        qp->express.learn_key(qp, key);
        qp->sq_lock.lock();
        break;
    }
  }
}

}  // namespace

int post_send_wrs(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad, ibv_mw_type bind_type) {
  thread_idle_since_ns = 0;
  Qp* qp = to_qp(ibqp);
  int err = 0;
  bool to_router = false;
  std::optional<DirectSetUp> set_up;  // made only by a set-up; freed after the unlock below
  take_express_if_offered(qp);
  qp->sq_lock.lock();
  for (; wr != nullptr; wr = wr->next) {
    if (ibqp->state == IBV_QPS_RESET || ibqp->state == IBV_QPS_INIT || ibqp->state == IBV_QPS_RTR ||
        !proto::opcode_allowed(ibqp->qp_type, wr->opcode) || wr->num_sge < 0 ||
        static_cast<uint32_t>(wr->num_sge) > qp->caps.max_send_sge ||
        (wr->opcode == IBV_WR_BIND_MW && check_bind(ibqp, wr, bind_type) != 0)) {
      err = EINVAL;
      break;
    }
    // The fast path only behind a drained send ring: work requests complete in order.
    if (qp->direct_line->state.load(std::memory_order_relaxed) == shm::kDirectOn &&
        qp->sq.in_flight() == 0 && execute_directly(qp, wr, &set_up))
      continue;
    if (qp->express.fd() >= 0 && send_on_express_line(qp, wr, &err)) {
      if (err != 0) break;
      continue;
    }
    to_router = true;
    shm::RingStatus st;
    uint8_t* slot = qp->sq.reserve(&st);
    if (slot == nullptr) {
      err = ENOMEM;
      break;
    }
    if ((err = write_send_wqe(qp, slot, wr)) != 0) break;
    qp->sq.commit();
  }
  qp->sq_lock.unlock();
  if (err != 0) *bad = wr;
  if (to_router) to_ctx(ibqp->context)->ring_doorbell(qp->posted_mark);
  return err;
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return post_send_wrs(qp, wr, bad, IBV_MW_TYPE_2);
}

int write_recv_wqe(shm::RingProducer* ring, uint32_t max_sge, const ibv_recv_wr* wr) {
  if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > max_sge) return EINVAL;
  shm::RingStatus st;
  uint8_t* slot = ring->reserve(&st);
  if (slot == nullptr) return ENOMEM;
  auto* h = reinterpret_cast<shm::RecvWqe*>(slot);
  h->wr_id = wr->wr_id;
  h->num_sge = static_cast<uint32_t>(wr->num_sge);
  auto* sge = reinterpret_cast<shm::Sge*>(slot + sizeof(shm::RecvWqe));
  for (int i = 0; i < wr->num_sge; ++i) {
    sge[i].addr = wr->sg_list[i].addr;
    sge[i].length = wr->sg_list[i].length;
    sge[i].lkey = wr->sg_list[i].lkey;
  }
  ring->commit();
  return 0;
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Qp* qp = to_qp(ibqp);
  // A QP on an SRQ, and XRC QPs, have no receive queue of their own.
  if (qp->layout.rq_entries == 0 || ibqp->state == IBV_QPS_RESET) {
    *bad = wr;
    return EINVAL;
  }
  int err = 0;
  take_express_if_offered(qp);
  qp->rq_lock.lock();
  for (; wr != nullptr; wr = wr->next)
    if ((err = write_recv_wqe(&qp->rq, qp->caps.max_recv_sge, wr)) != 0) break;
  qp->rq_lock.unlock();
  if (err != 0) *bad = wr;
  // Only a QP in ERR needs the router to see new receives (it flushes them). Otherwise the
  // peer's library takes them (waking it if it waits for one), or a send the router holds for
  // one (RNR) is retried on a timer the sleeping router wakes for.
  shm::wake_receive_waiter(qp->direct_line);
  if (qp->direct_line->in_error.load(std::memory_order_acquire) != 0)
    to_ctx(ibqp->context)->ring_doorbell(qp->posted_mark);
  return err;
}

}  // namespace wharf::abi
