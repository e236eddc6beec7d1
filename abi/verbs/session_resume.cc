#include "abi/verbs/session_resume.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <map>

#include "abi/verbs/provider.h"
#include "common/clock.h"

namespace wharf::abi {

namespace {

constexpr int kReplyTimeoutMs = 5000;

uint64_t resume_window_ns() {
  const char* v = getenv("WHARF_RESUME_S");
  const long s = v != nullptr && *v != '\0' ? strtol(v, nullptr, 10) : 30;
  return static_cast<uint64_t>(std::max(0L, s)) * 1'000'000'000ull;
}

void nap(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

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
  if (!ctx->srqs.empty() || !ctx->xrcds.empty() || !ctx->mws.empty()) return EOPNOTSUPP;
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
  for (const auto& [h, q] : in_order(ctx->qps)) {
    const Qp* qp = to_qp(q);
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
  const uint64_t deadline = now_ns() + resume_window_ns();
  uint64_t backoff = 5'000'000;  // 5 ms, doubling to 50 ms: a refused connect costs little
  for (;;) {
    int err = fresh->connect(ctx->router_socket.data());
    // A router that accepts and never answers (a dead one's backlog) is given up on like one
    // that refuses.
    fresh->set_reply_timeout_ms(kReplyTimeoutMs);
    if (err == 0) err = hello_again(ctx, fresh);
    if (err == 0) {
      std::lock_guard<std::mutex> g(ctx->objects_mu);
      err = restore_objects(ctx, fresh);
      fresh->set_reply_timeout_ms(-1);
      return err;
    }
    fresh->close();
    // A router that cannot resume sessions at all will not learn to.
    if (err == EOPNOTSUPP || err == EPROTO || now_ns() + backoff > deadline) return err;
    if (ctx->closing.load(std::memory_order_relaxed)) return ECANCELED;
    nap(backoff);
    backoff = std::min<uint64_t>(backoff * 2, 50'000'000);
  }
}

}  // namespace wharf::abi
