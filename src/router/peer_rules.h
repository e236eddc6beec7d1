// When one QP may deliver to another on this host: shared by the router's data path and the
// direct path's eligibility check, so both always agree.
#pragma once

#include <infiniband/verbs.h>

#include "proto/messages.h"
#include "router/objects.h"
#include "router/session.h"

namespace wharf::router {

// States in which a QP's receive side accepts messages (IBTA 10.3.1).
inline bool can_receive(ibv_qp_state s) {
  return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD || s == IBV_QPS_SQE;
}

// Whether containers a and b are in one virtual network (issue #4, "Isolation"): the same
// tenant and network at the orchestrator. Containers without one (anonymous, or registered
// without an orchestrator) share the host's default network.
inline bool same_network(const Container* a, const Container* b) {
  return a->tenant == b->tenant && a->network == b->network;
}

// Whether a QP of container `from` using address vector `ah` reaches container `to`'s port:
// `ah` names it (by GID, or by LID on InfiniBand) and both are in one virtual network. Any
// other destination is unreachable, however well its LID, GID or QPN was guessed: an RC or
// UC requester retries until IBV_WC_RETRY_EXC_ERR, a UD datagram is dropped.
inline bool reaches(const Container* from, const proto::AhAttr& ah, const Container* to,
                    uint8_t link_layer) {
  if (!same_network(from, to)) return false;
  if (ah.is_global) return ah.dgid == to->gid;
  return link_layer == IBV_LINK_LAYER_INFINIBAND && ah.dlid == to->lid;
}

// Whether `peer` answers connected requester `qp` (RC, UC or XRC initiator): of the type that
// answers it (the same, or an XRC target for an initiator), receiving, connected back to qp,
// and reached by qp's address vector.
inline bool answers(const Qp& qp, const Qp& peer, uint8_t link_layer) {
  const ibv_qp_type type = qp.type == IBV_QPT_XRC_SEND ? IBV_QPT_XRC_RECV : qp.type;
  return peer.type == type && can_receive(peer.state()) && peer.attr.dest_qp_num == qp.qpn &&
         reaches(qp.owner->container(), qp.attr.ah_attr, peer.owner->container(), link_layer);
}

// The traffic class (DSCP << 2) in which a QP of container c, using address vector ah,
// travels between hosts: the container's priority class p as DSCP class selector CSp when
// the operator set one (it overrides what the application asked), else the GRH traffic
// class of its address (0 without a GRH).
inline uint8_t link_class(const Container* c, const proto::AhAttr& ah) {
  if (c->policy.priority != 0) return static_cast<uint8_t>(c->policy.priority << 5);
  return ah.is_global ? ah.traffic_class : 0;
}

}  // namespace wharf::router
