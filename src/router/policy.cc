// Enforcing the orchestrator's policies (common/policy.h): quotas when objects are created,
// rate limits as work requests start. A QP's own limit is the tighter of the policy's and
// the one its application set (IBV_QP_RATE_LIMIT, ibv_modify_qp_rate_limit). A QP under any
// rate limit leaves the direct path, so that every one of its messages passes Scheduler::admit.
#include <errno.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>

#include "common/clock.h"
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {
namespace {

// The limits a policy sets, for the log: "qp 4 rate 1000000000 bit/s" or "no limits".
std::string describe(const ContainerPolicy& p) {
  std::string out;
  for (size_t k = 0; k < kQuotaKinds; ++k)
    if (p.quota[k] != ContainerPolicy::kUnlimited)
      out += std::string(kQuotaNames[k]) + " " + std::to_string(p.quota[k]) + " ";
  if (p.rate_bps != 0) out += "rate " + std::to_string(p.rate_bps) + " bit/s ";
  if (p.qp_rate_bps != 0) out += "qp_rate " + std::to_string(p.qp_rate_bps) + " bit/s ";
  if (p.burst_bytes != 0) out += "burst " + std::to_string(p.burst_bytes) + " B ";
  if (p.priority != 0) out += "priority " + std::to_string(p.priority) + " ";
  return out.empty() ? "no limits" : out.substr(0, out.size() - 1);
}

// The tighter of two limits, where 0 is no limit.
uint64_t tighter(uint64_t a, uint64_t b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

// The depth of a bucket of bits_per_s (0: none, and no depth) given burst_bytes (0: default).
uint64_t depth_of(uint64_t bits_per_s, uint64_t burst_bytes) {
  if (bits_per_s == 0) return 0;
  return burst_bytes != 0 ? burst_bytes : TokenBucket::default_depth_bytes(bits_per_s);
}

}  // namespace

void Router::set_policy_st(const std::string& tenant, const std::string& name,
                           const ContainerPolicy& p) {
  const std::string key = tenant + "/" + name;
  spdlog::info("container {}/{}: policy {}", tenant, name, describe(p));
  if (p == ContainerPolicy{}) {
    policies_.erase(key);
  } else {
    policies_[key] = p;
  }
  for (auto& [ino, c] : containers_)
    if (c->registered && c->tenant == tenant && c->name == name) apply_policy_st(c.get(), p);
}

void Router::apply_policy_st(Container* c, const ContainerPolicy& p) {
  const bool rates_changed = c->policy.rate_bps != p.rate_bps ||
                             c->policy.qp_rate_bps != p.qp_rate_bps ||
                             c->policy.burst_bytes != p.burst_bytes;
  c->policy = p;
  if (!rates_changed) return;
  const uint64_t now = now_ns();
  c->rate.configure(p.rate_bps, p.burst_bytes, now);
  objects_.for_each_qp([&](Qp* qp) {
    if (qp->owner->container() != c) return;
    configure_qp_rate_st(qp, now);
    direct_.refresh(qp);
  });
}

void Router::configure_qp_rate_st(Qp* qp, uint64_t now) {
  const ContainerPolicy& p = qp->owner->container()->policy;
  const uint64_t app_bps = uint64_t{qp->app_rate_kbps()} * 1000;  // kbps, as rdma-core's
  // One bucket as tight as both: the lower rate and the shallower depth. Over any interval
  // it passes no more than either limit's own bucket would.
  const uint64_t bps = tighter(p.qp_rate_bps, app_bps);
  const uint64_t depth =
      tighter(depth_of(p.qp_rate_bps, p.burst_bytes), depth_of(app_bps, qp->app_burst_bytes()));
  if (bps == 0) {
    if (qp->rate_limited()) qp->extras().rate.reset();
  } else {
    std::unique_ptr<TokenBucket>& rate = qp->extras().rate;
    if (rate == nullptr) rate = std::make_unique<TokenBucket>();
    rate->retune(bps, depth, now);
  }
  qp->clear_work(&QpWork::paced_until_ns);
  // A limited QP's work goes through the router, which paces it: none on its express line.
  const bool express = cfg_.express && qp->type == IBV_QPT_RC && !qp->rate_limited() &&
                       !qp->owner->container()->rate.limited();
  qp->direct()->express_may_send.store(express ? 1 : 0, std::memory_order_relaxed);
}

int Router::check_quota_st(const Container* c, QuotaKind kind, uint64_t amount,
                           uint64_t released) const {
  const uint64_t limit = c->policy.limit(kind);
  if (limit == ContainerPolicy::kUnlimited) return 0;
  // Counted when asked rather than kept: nothing to get wrong when objects go away.
  uint64_t used = 0;
  for (const auto& [fd, s] : sessions_) {
    if (s->container() == c) used += held_st(*s, kind);
  }
  if (used - std::min(used, released) + amount <= limit) return 0;
  spdlog::debug("container {}/{}: {} quota {} reached", c->tenant, c->name,
                kQuotaNames[static_cast<size_t>(kind)], limit);
  return EDQUOT;
}

uint64_t Router::held_st(const Session& s, QuotaKind kind) {
  switch (kind) {
    case QuotaKind::kQp: return s.qps_.size();
    case QuotaKind::kCq: return s.cqs_.size();
    case QuotaKind::kMr: return s.mrs_.size();
    case QuotaKind::kPd: return s.pds_.size();
    case QuotaKind::kSrq: return s.srqs_.size();
    case QuotaKind::kMrBytes: {
      uint64_t bytes = 0;
      for (const auto& [handle, mr] : s.mrs_) bytes += mr->charged_bytes();
      return bytes;
    }
  }
  return 0;
}

}  // namespace wharf::router
