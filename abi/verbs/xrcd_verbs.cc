// XRC domains (ibv_open_xrcd, ibv_close_xrcd) and opening a target QP another context made in
// a shared domain (ibv_open_qp). The router keeps the domain; a domain named by a file is
// shared by the processes of this container that open the same file.
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <new>

#include "abi/verbs/provider.h"

namespace wharf::abi {

ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  constexpr uint32_t kKnownMask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if (attr == nullptr || (attr->comp_mask & ~kKnownMask) != 0 ||
      (attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) == 0 ||
      (attr->oflags & ~static_cast<uint32_t>(O_CREAT | O_EXCL)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  // As the kernel: no file (fd -1) makes a domain of this context alone, and needs O_CREAT.
  const bool has_file = (attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) != 0 && attr->fd != -1;
  if (!has_file && (attr->oflags & O_CREAT) == 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* x = new (std::nothrow) Xrcd{};
  if (x == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  Context* ctx = to_ctx(context);
  proto::OpenXrcdReq req;
  req.oflags = attr->oflags;
  proto::Handle rep;
  int fd = attr->fd;
  int err =
      ctx->client.call(proto::Op::kOpenXrcd, req, has_file ? &fd : nullptr, has_file ? 1 : 0, &rep);
  if (err != 0) {
    delete x;
    errno = err;
    return nullptr;
  }
  x->handle = rep.handle;
  x->xrcd.context = context;
  if (!ctx->track(ctx->xrcds, rep.handle, &x->xrcd)) {
    delete x;
    return ctx->out_of_memory(proto::Op::kCloseXrcd, rep.handle);
  }
  return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
  Context* ctx = to_ctx(xrcd->context);
  Xrcd* x = to_xrcd(xrcd);
  proto::Empty rep;
  int err = ctx->client.call(proto::Op::kCloseXrcd, proto::Handle{x->handle}, nullptr, 0, &rep);
  if (err != 0) return err;
  ctx->untrack(ctx->xrcds, x->handle);
  delete x;
  return 0;
}

// A target opened here has no queues: posting to it fails (its type allows no work requests,
// and it has no receive queue); modify, query and destroy go to the router by handle.
ibv_qp* open_qp(ibv_context* context, ibv_qp_open_attr* attr) {
  constexpr uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if (attr == nullptr || (attr->comp_mask & kNeeded) != kNeeded ||
      (attr->comp_mask & ~(kNeeded | IBV_QP_OPEN_ATTR_CONTEXT)) != 0 || attr->xrcd == nullptr ||
      attr->xrcd->context != context || attr->qp_type != IBV_QPT_XRC_RECV) {
    errno = EINVAL;
    return nullptr;
  }
  auto* qp = new (std::nothrow) Qp{};
  if (qp == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  Context* ctx = to_ctx(context);
  proto::OpenQpReq req;
  req.xrcd = to_xrcd(attr->xrcd)->handle;
  req.qpn = attr->qp_num;
  proto::Handle rep;
  if (int err = ctx->client.call(proto::Op::kOpenQp, req, nullptr, 0, &rep); err != 0) {
    delete qp;
    errno = err;
    return nullptr;
  }
  qp->handle = rep.handle;
  ibv_qp* q = &qp->qp;
  q->context = context;
  q->qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : nullptr;
  q->handle = rep.handle;
  q->qp_num = attr->qp_num;
  q->qp_type = IBV_QPT_XRC_RECV;
  q->state = IBV_QPS_UNKNOWN;
  pthread_mutex_init(&q->mutex, nullptr);
  pthread_cond_init(&q->cond, nullptr);
  if (!ctx->track(ctx->qps, rep.handle, q)) {
    delete qp;
    return ctx->out_of_memory(proto::Op::kDestroyQp, rep.handle);
  }
  return q;
}

}  // namespace wharf::abi
