// UD multicast (IBTA 10.5): the router's group memberships and the fan-out of a datagram to
// them. A group is the QPs attached to one MGID/MLID within one virtual network; a datagram
// sent to a group from another host reaches this router as a UD packet to kMulticastQpn
// (router/remote.cc floods it to every host).
#include "proto/multicast.h"

#include <algorithm>

#include "router/executor.h"
#include "router/multicast_groups.h"
#include "router/peer_rules.h"
#include "router/session.h"

namespace wharf::router {

int MulticastGroups::attach(Qp* qp, const proto::Gid& mgid, uint16_t mlid) {
  if (qp->type != IBV_QPT_UD || !proto::is_multicast_gid(mgid) ||
      (link_layer_ == IBV_LINK_LAYER_INFINIBAND && !proto::is_multicast_lid(mlid)))
    return EINVAL;
  size_t of_qp = 0;
  for (const Member& m : members_) {
    if (m.qp != qp) continue;
    if (m.mgid == mgid && m.mlid == mlid) return 0;
    ++of_qp;
  }
  if (of_qp >= proto::kMaxMcastQpAttach || members_.size() >= proto::kMaxMcastAttachments)
    return ENOMEM;
  members_.push_back(Member{mgid, mlid, qp});
  return 0;
}

int MulticastGroups::detach(Qp* qp, const proto::Gid& mgid, uint16_t mlid) {
  auto it = std::find_if(members_.begin(), members_.end(), [&](const Member& m) {
    return m.qp == qp && m.mgid == mgid && m.mlid == mlid;
  });
  if (it == members_.end()) return EINVAL;
  members_.erase(it);
  return 0;
}

void MulticastGroups::forget(Qp* qp) {
  std::erase_if(members_, [&](const Member& m) { return m.qp == qp; });
}

void Executor::deliver_multicast_st(uint32_t network_id, const proto::Gid* dgid, uint16_t dlid,
                                    uint32_t qkey, const SegmentList& payload, const uint8_t* grh,
                                    const Origin& from) {
  const auto& members = ctx_.multicast.members();
  auto matches = [&](const MulticastGroups::Member& m) {
    return (dgid != nullptr ? m.mgid == *dgid : m.mlid == dlid) &&
           m.qp->owner->container()->network_id == network_id && can_receive(m.qp->state()) &&
           m.qp->qkey() == qkey;
  };
  // Delivering may move a QP to ERR but never changes the groups. A QP attached to the
  // group under two LIDs still gets one copy.
  for (size_t i = 0; i < members.size(); ++i) {
    if (!matches(members[i])) continue;
    const bool seen = std::any_of(
        members.begin(), members.begin() + static_cast<ptrdiff_t>(i),
        [&](const MulticastGroups::Member& m) { return m.qp == members[i].qp && matches(m); });
    if (!seen) deliver_ud_st(members[i].qp, payload, grh, from);
  }
}

}  // namespace wharf::router
