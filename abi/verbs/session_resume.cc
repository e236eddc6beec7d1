#include "abi/verbs/session_resume.h"

#include <cerrno>
#include <cstdint>
#include <map>

#include "abi/verbs/provider.h"
#include "proto/qp_cm_step_log.h"
#include "proto/resume_retry.h"

namespace wharf::abi {

namespace {

// Restores one object: RestoreNext (its handle, number and proof, and its region if it has
// one) and then the create request that made it, with its descriptor if it has one.
template <class Rep, class Req>
int restore(proto::RouterClient* c, const proto::RestoreNextReq& next, int region, proto::Op op,
            const Req& req, int fd = -1) {
  proto::Empty none;
  if (int err = c->call(proto::Op::kRestoreNext, next, &region, region >= 0 ? 1 : 0, &none);
      err != 0)
    return err;
  Rep rep;
  return c->call(op, req, &fd, fd >= 0 ? 1 : 0, &rep);
}

// The objects of one kind in handle order (the order they were made in, which is the one a
// session's handles grow in), from the context's map.
template <class T>
std::map<uint32_t, T*> in_order(const std::unordered_map<uint32_t, T*>& m) {
  return {m.begin(), m.end()};
}

// Says Hello on `fresh` as ctx's session. Errors a later try may not meet (the container
// not registered again yet: EADDRINUSE) are returned like any other.
int hello_again(Context* ctx, proto::RouterClient* fresh) {
  proto::HelloReq req;
  req.resume = 1;
  req.resume_lid = ctx->hello.lid;
  const int fds[3] = {ctx->async_router_end.get(), ctx->page_fd.get(), ctx->doorbell.get()};
  proto::HelloRep rep;
  return fresh->call(proto::Op::kHello, req, fds, 3, &rep);
}

// Restores every object of ctx on `fresh`, which said Hello. Caller holds objects_mu.
int restore_objects(Context* ctx, proto::RouterClient* fresh) {
  if (!ctx->xrcds.empty() || !ctx->mws.empty()) return EOPNOTSUPP;
  // Only basic SRQs come back; the router refuses the others' restore just as well
  // (Session::on_create_srq), but failing here first leaves nothing half restored.
  for (const auto& [h, s] : ctx->srqs) {
    if (to_srq(s)->request.srq_type != IBV_SRQT_BASIC) return EOPNOTSUPP;  // XRC, TM, WQ
  }
  using Op = proto::Op;
  for (const auto& [h, pd] : in_order(ctx->pds)) {
    if (int err = restore<proto::Handle>(fresh, {h, 0, 0}, -1, Op::kAllocPd, proto::Empty{});
        err != 0)
      return err;
  }
  for (const auto& [h, m] : in_order(ctx->mrs)) {
    const Mr* mr = to_mr(m);
    if (int err = restore<proto::RegMrRep>(fresh, {h, mr->mr.lkey, mr->proof}, -1, Op::kRegMr,
                                           mr->request, mr->memfd.get());
        err != 0)
      return err;
  }
  for (const auto& [h, a] : in_order(ctx->ahs)) {
    if (int err = restore<proto::Handle>(fresh, {h, 0, 0}, -1, Op::kCreateAh, to_ah(a)->request);
        err != 0)
      return err;
  }
  for (const auto& [h, c] : in_order(ctx->channels)) {
    if (int err = restore<proto::Handle>(fresh, {h, 0, 0}, -1, Op::kCreateChannel, proto::Empty{},
                                         to_channel(c)->router_end.get());
        err != 0)
      return err;
  }
  for (const auto& [h, c] : in_order(ctx->cqs)) {
    const Cq* cq = to_cq(c);
    if (int err = restore<proto::CreateCqRep>(fresh, {h, 0, 0}, cq->region.get(), Op::kCreateCq,
                                              cq->request);
        err != 0)
      return err;
  }
  for (const auto& [h, s] : in_order(ctx->srqs)) {
    const Srq* srq = to_srq(s);
    if (int err = restore<proto::CreateSrqRep>(fresh, {h, 0, 0}, srq->region.get(), Op::kCreateSrq,
                                               srq->request);
        err != 0)
      return err;
  }
  for (const auto& [h, q] : in_order(ctx->qps)) {
    Qp* qp = to_qp(q);
    // The transitions the router applied for the QP's rdma_cm id go back among our own.
    auto* cm_steps = reinterpret_cast<shm::QpCmSteps*>(qp->map.data + qp->layout.cm_steps_off);
    if (int err = proto::merge_cm_steps(cm_steps, h, &qp->modifications); err != 0) return err;
    if (int err = restore<proto::CreateQpRep>(fresh, {h, q->qp_num, qp->proof}, qp->region.get(),
                                              Op::kCreateQp, qp->request);
        err != 0)
      return err;
    for (const proto::ModifyQpReq& m : qp->modifications) {
      proto::Empty none;
      if (int err = fresh->call(proto::Op::kModifyQp, m, nullptr, 0, &none); err != 0) return err;
    }
  }
  return 0;
}

}  // namespace

int resume_session(Context* ctx, proto::RouterClient* fresh) {
  return proto::resume_with_retries(
      fresh, ctx->router_socket.data(), [&] { return hello_again(ctx, fresh); },
      [&] {
        std::lock_guard<std::mutex> g(ctx->objects_mu);
        return restore_objects(ctx, fresh);
      },
      [&] { return ctx->closing.load(std::memory_order_relaxed); });
}

}  // namespace wharf::abi
