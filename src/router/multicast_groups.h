// UD multicast groups (IBTA 10.5): which QPs of this router are attached to which group. A
// group is the QPs attached to one MGID/MLID within one virtual network (the member's).
// Router thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/messages.h"
#include "router/objects.h"

namespace wharf::router {

class MulticastGroups {
 public:
  struct Member {
    proto::Gid mgid{};
    uint16_t mlid = 0;
    Qp* qp = nullptr;
  };

  // link_layer: on InfiniBand a group also needs a multicast LID.
  explicit MulticastGroups(uint8_t link_layer) : link_layer_(link_layer) {}

  // ibv_attach_mcast: 0 (also when already attached), EINVAL (not a UD QP, not a multicast
  // GID, or on InfiniBand not a multicast LID), ENOMEM (the QP's or the router's limit).
  int attach(Qp* qp, const proto::Gid& mgid, uint16_t mlid);
  // ibv_detach_mcast: 0, or EINVAL when qp is not attached to it.
  int detach(Qp* qp, const proto::Gid& mgid, uint16_t mlid);
  void forget(Qp* qp);  // a QP's memberships go with it
  const std::vector<Member>& members() const { return members_; }

 private:
  const uint8_t link_layer_;
  std::vector<Member> members_;
};

}  // namespace wharf::router
