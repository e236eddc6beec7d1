// Shared receive queues and address handles.
#include <errno.h>
#include <infiniband/verbs.h>

#include <cstring>
#include <new>

#include "abi/verbs/export.h"
#include "abi/verbs/provider.h"
#include "proto/device.h"
#include "proto/verbs_wire.h"

using namespace wharf;
using namespace wharf::abi;

namespace wharf::abi {

namespace {

// Posts go to the ring in srq's mapping, laid out as `layout`.
void attach_ring(Srq* srq, const shm::SrqLayout& layout) {
  srq->ring = shm::RingProducer(reinterpret_cast<shm::RingHeader*>(srq->map.data + layout.ring_off),
                                srq->map.data + layout.slots_off, layout.entries, layout.slot);
  srq->state = reinterpret_cast<const shm::SrqState*>(srq->map.data + layout.state_off);
}

// Maps the region the router moved srq to (rep, memfd) and posts there from now on. Until that
// succeeds, posts fail: the old region is no longer read.
int attach_moved_srq(Srq* srq, const proto::CreateSrqRep& rep, const UniqueFd& memfd) {
  const shm::SrqLayout layout = shm::srq_layout(rep.entries, rep.slot);
  int err = 0;
  if (!memfd.valid() || rep.entries == 0 || rep.slot != srq->ring.slot_size()) err = EPROTO;
  Mapping fresh;
  if (err == 0) err = fresh.map(memfd.get(), layout.total);
  std::lock_guard<SpinLock> g(srq->lock);
  if (err == 0) {
    srq->map.swap(fresh);
    attach_ring(srq, layout);
    srq->ring.resume();
    srq->resizing = false;
    ++srq->generation;
  }
  return err;  // `fresh` now holds the old region: unmapped on return, outside the lock
}

}  // namespace

// The router checks that xrcd and cq are the context's, and tm's sizes.
ibv_srq* create_srq_object(ibv_pd* pd, ibv_srq_attr* attr, void* srq_context, uint32_t type,
                           ibv_xrcd* xrcd, ibv_cq* cq, const ibv_tm_cap* tm) {
  if (pd == nullptr || attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  Context* ctx = to_ctx(pd->context);
  proto::CreateSrqReq req;
  req.pd = to_pd(pd)->handle;
  req.max_wr = attr->max_wr;
  req.max_sge = attr->max_sge;
  req.srq_limit = attr->srq_limit;
  req.srq_type = type;
  if (type == IBV_SRQT_XRC || type == IBV_SRQT_TM || type == proto::kSrqTypeWq) {
    if ((type == IBV_SRQT_XRC && xrcd == nullptr) || (type == IBV_SRQT_TM && tm == nullptr) ||
        cq == nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    if (xrcd != nullptr) req.xrcd = to_xrcd(xrcd)->handle;
    req.cq = to_cq(cq)->handle;
  }
  if (tm != nullptr) {
    req.max_num_tags = tm->max_num_tags;
    req.max_ops = tm->max_ops;
  }
  proto::CreateSrqRep rep;
  UniqueFd memfd;
  int err = ctx->client.call(proto::Op::kCreateSrq, req, nullptr, 0, &rep, &memfd, 1);
  const bool made = err == 0;
  if (err == 0 && !memfd.valid()) err = EPROTO;
  Srq* srq = err == 0 ? new (std::nothrow) Srq{} : nullptr;
  if (err == 0 && srq == nullptr) err = ENOMEM;
  shm::SrqLayout layout = shm::srq_layout(rep.entries, rep.slot);
  if (err == 0) err = srq->map.map(memfd.get(), layout.total);
  if (err != 0) {
    delete srq;
    if (made) ctx->release_in_router(proto::Op::kDestroySrq, rep.srq);
    errno = err;
    return nullptr;
  }
  srq->region = std::move(memfd);
  srq->request = req;
  srq->handle = rep.srq;
  srq->srqn = rep.srqn;
  srq->max_sge = rep.max_sge;
  srq->tm = type == IBV_SRQT_TM;
  attach_ring(srq, layout);
  ibv_srq* s = &srq->srq;
  s->context = pd->context;
  s->srq_context = srq_context;
  s->pd = pd;
  s->handle = rep.srq;
  pthread_mutex_init(&s->mutex, nullptr);
  pthread_cond_init(&s->cond, nullptr);
  attr->max_wr = rep.max_wr;
  attr->max_sge = rep.max_sge;
  if (!ctx->track(ctx->srqs, rep.srq, s)) {
    delete srq;
    return ctx->out_of_memory(proto::Op::kDestroySrq, rep.srq);
  }
  return s;
}

}  // namespace wharf::abi

WHARF_EXPORT ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* init) {
  if (init == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  return create_srq_object(pd, &init->attr, init->srq_context, IBV_SRQT_BASIC, nullptr, nullptr,
                           nullptr);
}

namespace wharf::abi {

// Basic, XRC and tag-matching SRQs.
ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr) {
  constexpr uint32_t kKnownMask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
                                  IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
                                  IBV_SRQ_INIT_ATTR_TM;
  if (attr == nullptr || (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) == 0 || attr->pd == nullptr ||
      attr->pd->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  const auto type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
  if ((attr->comp_mask & ~kKnownMask) != 0 ||
      (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC && type != IBV_SRQT_TM)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  ibv_xrcd* xrcd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ? attr->xrcd : nullptr;
  ibv_cq* cq = (attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ? attr->cq : nullptr;
  if (type == IBV_SRQT_XRC &&
      (xrcd == nullptr || cq == nullptr || xrcd->context != context || cq->context != context)) {
    errno = EINVAL;
    return nullptr;
  }
  const bool tm = type == IBV_SRQT_TM;
  if (tm &&
      ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) == 0 || cq == nullptr || cq->context != context)) {
    errno = EINVAL;
    return nullptr;
  }
  return create_srq_object(attr->pd, &attr->attr, attr->srq_context, type, xrcd, cq,
                           tm ? &attr->tm_cap : nullptr);
}

int get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  *srq_num = to_srq(srq)->srqn;
  return 0;
}

}  // namespace wharf::abi

// IBV_SRQ_MAX_WR: the router moves the SRQ to a region of the new size with the receives not
// yet taken (rxe resizes; mlx5 refuses). Posting to the SRQ from another thread meanwhile fails
// with ENOMEM: the application's race, as with providers.
WHARF_EXPORT int ibv_modify_srq(ibv_srq* ibsrq, ibv_srq_attr* attr, int mask) {
  if (ibsrq == nullptr || attr == nullptr) return EINVAL;
  Srq* srq = to_srq(ibsrq);
  const bool resize = (mask & IBV_SRQ_MAX_WR) != 0;
  if (resize) {
    std::lock_guard<SpinLock> g(srq->lock);
    srq->resizing = true;
  }
  proto::ModifySrqReq req;
  req.srq = srq->handle;
  req.attr_mask = static_cast<uint32_t>(mask);
  req.max_wr = attr->max_wr;
  req.srq_limit = attr->srq_limit;
  proto::CreateSrqRep rep;
  UniqueFd memfd;
  const int err =
      to_ctx(ibsrq->context)->client.call(proto::Op::kModifySrq, req, nullptr, 0, &rep, &memfd, 1);
  if (resize && err != 0) {  // nothing moved
    std::lock_guard<SpinLock> g(srq->lock);
    srq->resizing = false;
  }
  if (err != 0) return err;
  const int moved = resize ? attach_moved_srq(srq, rep, memfd) : 0;
  std::lock_guard<std::mutex> g(to_ctx(ibsrq->context)->objects_mu);  // read by a resume
  if (resize && moved == 0) {
    srq->region = std::move(memfd);
    srq->request.max_wr = rep.entries;
  }
  if ((mask & IBV_SRQ_LIMIT) != 0) srq->request.srq_limit = attr->srq_limit;
  return moved;
}

WHARF_EXPORT int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  proto::QuerySrqRep rep;
  int err =
      to_ctx(srq->context)
          ->client.call(proto::Op::kQuerySrq, proto::Handle{to_srq(srq)->handle}, nullptr, 0, &rep);
  if (err != 0) return err;
  attr->max_wr = rep.max_wr;
  attr->max_sge = rep.max_sge;
  attr->srq_limit = rep.srq_limit;
  return 0;
}

WHARF_EXPORT int ibv_destroy_srq(ibv_srq* srq) {
  Context* ctx = to_ctx(srq->context);
  proto::Empty rep;
  int err = ctx->client.call(proto::Op::kDestroySrq, proto::Handle{to_srq(srq)->handle}, nullptr, 0,
                             &rep);
  if (err != 0) return err;
  {
    std::lock_guard<std::mutex> g(ctx->objects_mu);
    ctx->srqs.erase(to_srq(srq)->handle);
  }
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete to_srq(srq);
  return 0;
}

namespace wharf::abi {
int post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Srq* srq = to_srq(ibsrq);
  int err = 0;
  srq->lock.lock();
  if (srq->resizing) err = ENOMEM;
  for (; err == 0 && wr != nullptr; wr = wr->next)
    if ((err = write_recv_wqe(&srq->ring, srq->max_sge, wr)) != 0) break;
  srq->lock.unlock();
  if (err != 0) *bad = wr;
  return err;
}
}  // namespace wharf::abi

WHARF_EXPORT ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  proto::CreateAhReq req;
  req.pd = to_pd(pd)->handle;
  req.attr = proto::to_wire(*attr);
  proto::Handle rep;
  int err = to_ctx(pd->context)->client.call(proto::Op::kCreateAh, req, nullptr, 0, &rep);
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  Context* ctx = to_ctx(pd->context);
  auto* ah = new (std::nothrow) Ah{};
  if (ah == nullptr) return ctx->out_of_memory(proto::Op::kDestroyAh, rep.handle);
  ah->ah.context = pd->context;
  ah->ah.pd = pd;
  ah->ah.handle = rep.handle;
  ah->handle = rep.handle;
  ah->request = req;
  if (!ctx->track(ctx->ahs, rep.handle, &ah->ah)) {
    delete ah;
    return ctx->out_of_memory(proto::Op::kDestroyAh, rep.handle);
  }
  return &ah->ah;
}

WHARF_EXPORT int ibv_destroy_ah(ibv_ah* ah) {
  proto::Empty rep;
  Context* ctx = to_ctx(ah->context);
  int err =
      ctx->client.call(proto::Op::kDestroyAh, proto::Handle{to_ah(ah)->handle}, nullptr, 0, &rep);
  if (err != 0) return err;
  ctx->untrack(ctx->ahs, to_ah(ah)->handle);
  delete to_ah(ah);
  return 0;
}

// IBTA 11.4.1.1: the reply address is the sender's; with a GRH, reverse its GIDs.
WHARF_EXPORT int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc,
                                     ibv_grh* grh, ibv_ah_attr* ah_attr) {
  std::memset(ah_attr, 0, sizeof(*ah_attr));
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if (wc->wc_flags & IBV_WC_GRH) {
    if (grh == nullptr) return -1;
    ah_attr->is_global = 1;
    std::memcpy(ah_attr->grh.dgid.raw, grh->sgid.raw, 16);
    uint32_t flow = be32toh(grh->version_tclass_flow);
    ah_attr->grh.flow_label = flow & 0xfffff;
    ah_attr->grh.traffic_class = static_cast<uint8_t>((flow >> 20) & 0xff);
    ah_attr->grh.hop_limit = 0xff;
    ah_attr->grh.sgid_index = 0;
  } else if (to_ctx(context)->hello.link_layer == IBV_LINK_LAYER_ETHERNET) {
    return -1;  // RoCE addressing needs the GRH
  }
  return 0;
}

WHARF_EXPORT ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  return ibv_create_ah(pd, &attr);
}
