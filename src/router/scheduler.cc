#include "router/scheduler.h"

#include <algorithm>

#include "router/session.h"

namespace wharf::router {

void Scheduler::activate(Qp* qp) {
  if (qp->send_cq == nullptr) return;
  qp->active = true;
  qp->woken = true;
  if (qp->busy) return;
  qp->busy = true;
  busy_.push_back(qp);
}

void Scheduler::deactivate(Qp* qp) {
  qp->active = false;
  if (!qp->busy) return;
  drop(qp);
  // Never during a pass: the order of busy_ is free.
  busy_.erase(std::find(busy_.begin(), busy_.end(), qp));
}

bool Scheduler::admit(Qp* qp, uint64_t bytes, uint64_t now) {
  TokenBucket& shared = qp->owner->container()->rate;
  if (!qp->rate_limited() && !shared.limited()) return true;
  uint64_t own_at = 0, shared_at = 0;
  const bool own_ok = !qp->rate_limited() || qp->rate()->ready(now, &own_at);
  const bool shared_ok = shared.ready(now, &shared_at);
  if (!own_ok || !shared_ok) {
    const uint64_t until = std::max(own_at, shared_at);
    work(qp).paced_until_ns = until;
    // The QP is not offered work again before `until` (its issue loops wait for it).
    qp->owner->container()->throttled_ns += until > now ? until - now : 0;
    return false;
  }
  if (qp->rate_limited()) qp->rate()->charge(bytes);
  shared.charge(bytes);
  return true;
}

void Scheduler::clear() {
  for (Qp* qp : busy_) drop(qp);
  busy_.clear();
}

void Scheduler::drop(Qp* qp) {
  qp->busy = false;
  if (qp->work_under_way != nullptr) {
    pool_.put(qp->work_under_way);
    qp->work_under_way = nullptr;
  }
}

}  // namespace wharf::router
