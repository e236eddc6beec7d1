// When one QP may deliver to another on this host: shared by the router's data path and the
// direct path's eligibility check, so both always agree.
#pragma once

#include <infiniband/verbs.h>

#include "proto/messages.h"
#include "router/objects.h"

namespace wharf::router {

// States in which a QP's receive side accepts messages (IBTA 10.3.1).
inline bool can_receive(ibv_qp_state s) {
  return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE;
}

// Whether address vector `ah` names container c's port (by GID, or by LID on InfiniBand).
inline bool address_matches(const proto::AhAttr& ah, const Container* c, uint8_t link_layer) {
  if (ah.is_global) return ah.dgid == c->gid;
  return link_layer == IBV_LINK_LAYER_INFINIBAND && ah.dlid == c->lid;
}

}  // namespace wharf::router
