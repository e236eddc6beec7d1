// Flow steering of RAW_PACKET QPs: the routers are the virtual Ethernet segment of each
// virtual network. A frame a RAW_PACKET QP sends never reaches a host interface; it reaches
// the RAW_PACKET QPs of the sender's network whose rules take it (router/flow_match.h), on
// this host and, carried over the host links to every other router (RemotePath::
// flood_frame_st), on the others.
#include <algorithm>

#include "router/executor.h"
#include "router/flow_match.h"
#include "router/flow_rules.h"
#include "router/peer_rules.h"
#include "router/session.h"

namespace wharf::router {
namespace {

constexpr size_t kMaxFlowsPerQp = 64;
constexpr size_t kMaxFlows = 1u << 12;

}  // namespace

int FlowRules::create(Qp* qp, uint32_t type, const proto::FlowMatch& match, uint32_t* handle) {
  if (qp->type != IBV_QPT_RAW_PACKET ||
      (type != IBV_FLOW_ATTR_NORMAL && type != IBV_FLOW_ATTR_SNIFFER) || !valid_flow_match(match))
    return EINVAL;
  const auto of_qp =
      std::count_if(rules_.begin(), rules_.end(), [&](const Rule& f) { return f.qp == qp; });
  if (static_cast<size_t>(of_qp) >= kMaxFlowsPerQp || rules_.size() >= kMaxFlows) return ENOMEM;
  *handle = next_handle_++;
  rules_.push_back(Rule{*handle, qp, type == IBV_FLOW_ATTR_SNIFFER, match});
  return 0;
}

int FlowRules::destroy(const Session* owner, uint32_t handle) {
  auto it = std::find_if(rules_.begin(), rules_.end(),
                         [&](const Rule& f) { return f.handle == handle && f.qp->owner == owner; });
  if (it == rules_.end()) return EINVAL;
  rules_.erase(it);
  return 0;
}

bool FlowRules::has_rules(const Qp* qp) const {
  return std::any_of(rules_.begin(), rules_.end(), [&](const Rule& f) { return f.qp == qp; });
}

void FlowRules::forget(Qp* qp) {
  std::erase_if(rules_, [&](const Rule& f) { return f.qp == qp; });
}

void Executor::deliver_frame_st(uint32_t network, const Qp* src, const SegmentList& frame) {
  uint8_t head[kFrameHeaderBytes];
  const uint64_t head_len = std::min<uint64_t>(frame.total, sizeof(head));
  SegmentList head_target;
  head_target.push(Segment{head, 0, 0, head_len});
  if (copy_segments(frame, head_target, head_len) != 0) return;
  const FrameFields fields = parse_frame(head, head_len);
  const auto& flows = ctx_.flows.rules();
  // An RSS QP receives through its table; any other RAW_PACKET QP in a receiving state.
  auto receives = [](const Qp* qp) { return qp->rss() != nullptr || can_receive(qp->state()); };
  auto takes = [&](const FlowRules::Rule& f) {
    return f.qp != src && f.qp->owner->container()->network_id == network && receives(f.qp) &&
           (f.sniffer || flow_matches(f.match, fields));
  };
  // Delivering may move a QP to ERR but never changes the rules. A QP with two rules that
  // take the frame gets one copy.
  for (size_t i = 0; i < flows.size(); ++i) {
    if (!takes(flows[i])) continue;
    const bool seen =
        std::any_of(flows.begin(), flows.begin() + static_cast<ptrdiff_t>(i),
                    [&](const FlowRules::Rule& f) { return f.qp == flows[i].qp && takes(f); });
    if (seen) continue;
    Qp* dst = flows[i].qp;
    if (dst->rss() == nullptr) {
      deliver_datagram_st(responder_of(dst), frame, /*grh_room=*/false, nullptr, Origin{});
      continue;
    }
    const QpRss& rss = *dst->rss();
    Srq* wq = rss.wqs[rss_hash(rss.hash_key, rss.hash_fields, fields) & (rss.wqs.size() - 1)];
    if (wq->wq_state == IBV_WQS_RDY)
      deliver_datagram_st(srq_responder(dst, wq), frame,
                          /*grh_room=*/false, nullptr, Origin{});
  }
}

}  // namespace wharf::router
