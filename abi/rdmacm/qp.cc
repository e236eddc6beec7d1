// QPs of ids: rdma_create_qp(_ex), rdma_destroy_qp, rdma_init_qp_attr and the transitions the
// connection drives. rdma_init_qp_attr answers what the kernel's cma / ib_cm would, from what
// the id learned of its peer (id.h, Peer).
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <cstring>

#include "abi/rdmacm/addr.h"
#include "abi/rdmacm/export.h"
#include "abi/rdmacm/ops.h"
#include "abi/rdmacm/router_link.h"
#include "proto/verbs_wire.h"

using namespace wharf;
using namespace wharf::rdmacm;

namespace {

// The ACK timeout of an id without a path (a connection accepted before a route was known).
constexpr uint8_t kFallbackAckTimeout = 19;

bool reliable(ibv_qp_type t) {
  return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV;
}
// As the kernel's QP state table: RC and XRC targets take responder attributes at RTR, RC and
// XRC initiators requester attributes at RTS.
bool responds(ibv_qp_type t) { return t == IBV_QPT_RC || t == IBV_QPT_XRC_RECV; }
bool requests(ibv_qp_type t) { return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND; }

int init_qp_attr(Id* id, ibv_qp_attr* attr, int* mask) {
  RouterLink* link = RouterLink::get();
  if (link == nullptr || link->device() == nullptr) return -1;
  const ibv_qp_type type = id->id.qp_type;
  switch (attr->qp_state) {
    case IBV_QPS_INIT:
      *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      attr->pkey_index = 0;
      attr->port_num = 1;
      if (is_ud(type)) {
        attr->qkey = RDMA_UDP_QKEY;
        *mask |= IBV_QP_QKEY;
      } else {
        attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        if (id->responder_resources != 0) {
          attr->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        }
        *mask |= IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      if (is_ud(type)) {
        *mask = IBV_QP_STATE;
        return 0;
      }
      if (!id->peer.known || id->id.route.path_rec == nullptr) return fail(EINVAL);
      *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      path_ah_attr(id->id.route.path_rec[0], &attr->ah_attr);
      attr->path_mtu = static_cast<ibv_mtu>(id->id.route.path_rec[0].mtu);
      attr->dest_qp_num = id->peer.qp_num;
      attr->rq_psn = id->peer.psn;
      if (responds(type)) {
        *mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        attr->max_dest_rd_atomic = id->responder_resources;
        attr->min_rnr_timer = 0;  // as the kernel's ib_cm
      }
      return 0;
    case IBV_QPS_RTS:
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      attr->sq_psn = id->local_psn;
      if (is_ud(type)) return 0;
      if (!id->peer.known) return fail(EINVAL);
      if (reliable(type)) {
        *mask |= IBV_QP_TIMEOUT;
        // ib_cm's: the path's packet life time + 1, unless RDMA_OPTION_ID_ACK_TIMEOUT set one.
        attr->timeout = id->ack_timeout_set ? id->ack_timeout
                        : id->id.route.path_rec != nullptr
                            ? static_cast<uint8_t>(id->id.route.path_rec[0].packet_life_time + 1)
                            : kFallbackAckTimeout;
      }
      if (requests(type)) {
        *mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        attr->retry_cnt = id->peer.retry_count;
        attr->rnr_retry = id->peer.rnr_retry_count;
        attr->max_rd_atomic = id->initiator_depth;
      }
      return 0;
    default: return fail(EINVAL);
  }
}

int modify(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  int err = ibv_modify_qp(qp, attr, mask);
  return err == 0 ? 0 : fail(err);
}

// The INIT attributes of a connected QP; `*needed` says whether its access flags changed since
// it was last moved to INIT.
int init_attr(Id* id, ibv_qp_attr* attr, int* mask, bool* needed) {
  attr->qp_state = IBV_QPS_INIT;
  if (init_qp_attr(id, attr, mask) != 0) return -1;
  *needed = id->init_access != attr->qp_access_flags;
  return 0;
}

// Moves a connected QP to INIT with the id's attributes (again, if its access flags changed).
int modify_init(Id* id, ibv_qp* qp) {
  ibv_qp_attr attr{};
  int mask = 0;
  bool needed = false;
  if (init_attr(id, &attr, &mask, &needed) != 0) return -1;
  if (!needed) return 0;
  if (modify(qp, &attr, mask) != 0) return -1;
  id->init_access = attr.qp_access_flags;
  return 0;
}

void add_step(const ibv_qp_attr& attr, int mask, proto::CmQpSteps* steps) {
  proto::QpStep& s = steps->steps[steps->count++];
  s.attr_mask = static_cast<uint32_t>(mask);
  s.attr = proto::to_wire(attr);
}

// rdma-core's ucma_init_conn_qp.
int init_conn_qp(Id* id, ibv_qp* qp) {
  id->init_access = -1;
  return modify_init(id, qp);
}

// rdma-core's ucma_init_ud_qp: a UD QP is ready to send as soon as it exists.
int init_ud_qp(Id* id, ibv_qp* qp) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (init_qp_attr(id, &attr, &mask) != 0 || modify(qp, &attr, mask) != 0) return -1;
  attr.qp_state = IBV_QPS_RTR;
  if (modify(qp, &attr, IBV_QP_STATE) != 0) return -1;
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  return modify(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

}  // namespace

namespace wharf::rdmacm {

int add_rtr_steps(Id* id, uint8_t responder_resources, proto::CmQpSteps* steps) {
  ibv_qp* qp = id->id.qp;
  if (qp == nullptr) return 0;
  steps->qpn = qp->qp_num;
  // Access flags depend on the resources negotiated since the QP was created.
  ibv_qp_attr attr{};
  int mask = 0;
  bool needed = false;
  if (init_attr(id, &attr, &mask, &needed) != 0) return -1;
  if (needed) add_step(attr, mask, steps);
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTR;
  if (init_qp_attr(id, &attr, &mask) != 0) return -1;
  if (responder_resources != RDMA_MAX_RESP_RES) attr.max_dest_rd_atomic = responder_resources;
  add_step(attr, mask, steps);
  return 0;
}

int add_rts_step(Id* id, uint8_t initiator_depth, proto::CmQpSteps* steps) {
  ibv_qp* qp = id->id.qp;
  if (qp == nullptr) return 0;
  steps->qpn = qp->qp_num;
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_RTS;
  if (init_qp_attr(id, &attr, &mask) != 0) return -1;
  if (initiator_depth != RDMA_MAX_INIT_DEPTH) attr.max_rd_atomic = initiator_depth;
  add_step(attr, mask, steps);
  return 0;
}

void add_err_step(Id* id, proto::CmQpSteps* steps) {
  ibv_qp* qp = id->id.qp;
  if (qp == nullptr) return;
  steps->qpn = qp->qp_num;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  add_step(attr, IBV_QP_STATE, steps);
}

void qp_steps_done(Id* id, const proto::CmQpSteps& steps, bool ok) {
  ibv_qp* qp = id->id.qp;
  if (qp == nullptr || steps.count == 0) return;
  if (!ok) {
    // Some of them may have been applied: ask the router where the QP stands (our
    // libibverbs's ibv_query_qp updates qp->state); the INIT attributes are sent again.
    int err = errno;
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    (void)ibv_query_qp(qp, &attr, IBV_QP_STATE, &init);
    id->init_access = -1;
    errno = err;
    return;
  }
  // The router keeps them in the QP's region, for libibverbs to restore the QP with after a
  // router restart (proto/qp_cm_step_log.h).
  for (uint32_t i = 0; i < steps.count; ++i) {
    const proto::QpStep& s = steps.steps[i];
    if (s.attr.qp_state == IBV_QPS_INIT) id->init_access = s.attr.qp_access_flags;
  }
  // What ibv_modify_qp does to the QP on success, for transitions that do not reset it.
  qp->state = static_cast<ibv_qp_state>(steps.steps[steps.count - 1].attr.qp_state);
}

int modify_qp_err(Id* id) {
  if (id->id.qp == nullptr) return 0;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return modify(id->id.qp, &attr, IBV_QP_STATE);
}

void destroy_cqs(Id* id) {
  rdma_cm_id& c = id->id;
  if (c.qp_type == IBV_QPT_XRC_RECV && c.srq != nullptr) return;
  if (c.recv_cq != nullptr) {
    ibv_destroy_cq(c.recv_cq);
    if (c.send_cq != nullptr && c.send_cq != c.recv_cq) ibv_destroy_cq(c.send_cq);
    c.send_cq = nullptr;
    c.recv_cq = nullptr;
  }
  if (c.recv_cq_channel != nullptr) {
    ibv_destroy_comp_channel(c.recv_cq_channel);
    if (c.send_cq_channel != nullptr && c.send_cq_channel != c.recv_cq_channel) {
      ibv_destroy_comp_channel(c.send_cq_channel);
    }
    c.send_cq_channel = nullptr;
    c.recv_cq_channel = nullptr;
  }
}

int create_cqs(Id* id, uint32_t send_size, uint32_t recv_size) {
  rdma_cm_id& c = id->id;
  if (recv_size != 0) {
    c.recv_cq_channel = ibv_create_comp_channel(c.verbs);
    if (c.recv_cq_channel == nullptr) goto err;
    c.recv_cq = ibv_create_cq(c.verbs, static_cast<int>(recv_size), &c, c.recv_cq_channel, 0);
    if (c.recv_cq == nullptr) goto err;
  }
  if (send_size != 0) {
    c.send_cq_channel = ibv_create_comp_channel(c.verbs);
    if (c.send_cq_channel == nullptr) goto err;
    c.send_cq = ibv_create_cq(c.verbs, static_cast<int>(send_size), &c, c.send_cq_channel, 0);
    if (c.send_cq == nullptr) goto err;
  }
  return 0;
err:
  int err = errno;
  destroy_cqs(id);
  errno = err;
  return -1;
}

}  // namespace wharf::rdmacm

WHARF_EXPORT int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  try {
    if (id == nullptr || qp_attr == nullptr || qp_attr_mask == nullptr) return fail(EINVAL);
    return init_qp_attr(to_id(id), qp_attr, qp_attr_mask);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_create_qp_ex(rdma_cm_id* cm_id, ibv_qp_init_attr_ex* attr) {
  try {
    if (cm_id == nullptr || attr == nullptr || cm_id->verbs == nullptr) return fail(EINVAL);
    if (cm_id->qp != nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr) {
      attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
      attr->pd = cm_id->pd;
    } else if (cm_id->verbs != attr->pd->context) {
      return fail(EINVAL);
    }
    if (attr->pd == nullptr) return fail(EINVAL);
    if ((cm_id->recv_cq != nullptr && attr->recv_cq != nullptr &&
         cm_id->recv_cq != attr->recv_cq) ||
        (cm_id->send_cq != nullptr && attr->send_cq != nullptr &&
         cm_id->send_cq != attr->send_cq)) {
      return fail(EINVAL);
    }
    // An XRC target belongs to a domain (the device's unless one is given) and has no queues
    // or CQs of its own; an initiator only sends.
    const bool target = cm_id->qp_type == IBV_QPT_XRC_RECV;
    const bool initiator = cm_id->qp_type == IBV_QPT_XRC_SEND;
    if (target || initiator) attr->qp_type = cm_id->qp_type;
    if (target && (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || attr->xrcd == nullptr)) {
      RouterLink* link = RouterLink::get();
      attr->xrcd = link != nullptr ? link->xrcd() : nullptr;
      if (attr->xrcd == nullptr) return -1;
      attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
    }
    uint32_t send_size =
        target || attr->send_cq != nullptr || cm_id->send_cq != nullptr ? 0 : attr->cap.max_send_wr;
    uint32_t recv_size =
        target || initiator || attr->recv_cq != nullptr || cm_id->recv_cq != nullptr
            ? 0
            : attr->cap.max_recv_wr;
    if (create_cqs(id, send_size, recv_size) != 0) return -1;
    if (!target) {
      if (attr->send_cq == nullptr) attr->send_cq = cm_id->send_cq;
      if (!initiator && attr->recv_cq == nullptr) attr->recv_cq = cm_id->recv_cq;
      if (!initiator && cm_id->srq != nullptr && attr->srq == nullptr) attr->srq = cm_id->srq;
    }
    ibv_qp* qp = ibv_create_qp_ex(cm_id->verbs, attr);
    if (qp == nullptr) {
      int err = errno;
      destroy_cqs(id);
      return fail(err);
    }
    int ret = is_ud(cm_id->qp_type) ? init_ud_qp(id, qp) : init_conn_qp(id, qp);
    if (ret != 0) {
      int err = errno;
      ibv_destroy_qp(qp);
      destroy_cqs(id);
      return fail(err);
    }
    if (qp->pd != nullptr) cm_id->pd = qp->pd;  // an XRC target has none
    cm_id->qp = qp;
    return 0;
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (id == nullptr || qp_init_attr == nullptr) return fail(EINVAL);
  ibv_qp_init_attr_ex attr_ex{};
  std::memcpy(&attr_ex, qp_init_attr, sizeof(*qp_init_attr));
  attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr_ex.pd = pd != nullptr ? pd : id->pd;
  int ret = rdma_create_qp_ex(id, &attr_ex);
  std::memcpy(qp_init_attr, &attr_ex, sizeof(*qp_init_attr));
  return ret;
}

WHARF_EXPORT void rdma_destroy_qp(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->qp != nullptr) ibv_destroy_qp(id->qp);
  id->qp = nullptr;
  destroy_cqs(to_id(id));
}
