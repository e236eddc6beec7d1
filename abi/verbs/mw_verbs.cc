// Memory windows (ibv_alloc_mw, ibv_bind_mw, ibv_dealloc_mw; binds of type 2 windows and
// invalidations are work requests, qp_verbs.cc). The router keeps the windows and checks
// every bind and every use of a window's key (router/memory_window.h).
#include <errno.h>
#include <infiniband/verbs.h>

#include <new>

#include "abi/verbs/provider.h"

namespace wharf::abi {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (pd == nullptr || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
    errno = EINVAL;
    return nullptr;
  }
  proto::AllocMwRep rep;
  const int err =
      to_ctx(pd->context)
          ->client.call(proto::Op::kAllocMw,
                        proto::AllocMwReq{to_pd(pd)->handle, static_cast<uint32_t>(type)}, nullptr,
                        0, &rep);
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  Context* ctx = to_ctx(pd->context);
  auto* mw = new (std::nothrow) ibv_mw{};
  if (mw == nullptr) return ctx->out_of_memory(proto::Op::kDeallocMw, rep.handle);
  mw->context = pd->context;
  mw->pd = pd;
  mw->rkey = rep.rkey;
  mw->handle = rep.handle;
  mw->type = type;
  if (!ctx->track(ctx->mws, rep.handle, mw)) {
    delete mw;
    return ctx->out_of_memory(proto::Op::kDeallocMw, rep.handle);
  }
  return mw;
}

int dealloc_mw(ibv_mw* mw) {
  proto::Empty rep;
  const int err =
      to_ctx(mw->context)
          ->client.call(proto::Op::kDeallocMw, proto::Handle{mw->handle}, nullptr, 0, &rep);
  if (err != 0) return err;
  to_ctx(mw->context)->untrack(to_ctx(mw->context)->mws, mw->handle);
  delete mw;
  return 0;
}

// A type 1 bind is a BIND_MW work request on qp with the window's next key (as providers
// do it); the window takes that key once the request is posted.
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  if (qp == nullptr || mw == nullptr || bind == nullptr) return EINVAL;
  ibv_send_wr wr{};
  wr.wr_id = bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = bind->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = bind->bind_info;
  ibv_send_wr* bad = nullptr;
  if (const int err = post_send_wrs(qp, &wr, &bad, IBV_MW_TYPE_1); err != 0) return err;
  mw->rkey = wr.bind_mw.rkey;
  return 0;
}

}  // namespace wharf::abi
