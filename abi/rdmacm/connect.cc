// The connection exchange: rdma_connect, rdma_accept, rdma_reject, rdma_establish, rdma_notify,
// rdma_disconnect. The router runs the IB CM protocol; the library moves the QP (rdma-core).
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/ops.h"
#include "abi/rdmacm/router_link.h"

using namespace wharf;
using namespace wharf::rdmacm;

namespace {

// rdma-core's ucma_valid_param: resources beyond the device's limits are the caller's error.
int valid_param(Id* id, const rdma_conn_param* param) {
  if (id->id.ps != RDMA_PS_TCP) return 0;
  if (id->id.qp == nullptr && param == nullptr) return fail(EINVAL);
  if (param == nullptr) return 0;
  RouterLink* link = RouterLink::get();
  if (link == nullptr || link->device() == nullptr) return -1;
  if (param->responder_resources != RDMA_MAX_RESP_RES &&
      param->responder_resources > link->max_responder_resources()) {
    return fail(EINVAL);
  }
  if (param->initiator_depth != RDMA_MAX_INIT_DEPTH &&
      param->initiator_depth > link->max_initiator_depth()) {
    return fail(EINVAL);
  }
  return 0;
}

// The wire parameters of a REQ or REP (rdma-core's ucma_copy_conn_param_to_kern). Private data
// beyond `max_private` (the kernel's limit for the message) is EINVAL.
int fill_param(Id* id, const rdma_conn_param* src, uint32_t qp_num, uint8_t srq, size_t max_private,
               proto::CmConnParam* dst) {
  size_t extra = src != nullptr && src->private_data != nullptr ? src->private_data_len : 0;
  if (id->connect_data.size() + extra > max_private) return fail(EINVAL);
  dst->qp_num = qp_num & 0xffffff;
  dst->psn = id->local_psn;
  dst->qkey = is_ud(id->id.qp_type) ? RDMA_UDP_QKEY : 0;
  dst->srq = srq;
  dst->responder_resources = id->responder_resources;
  dst->initiator_depth = id->initiator_depth;
  dst->retry_count = 7;
  dst->rnr_retry_count = 7;
  if (src != nullptr) {
    dst->flow_control = src->flow_control;
    dst->retry_count = std::min<uint8_t>(src->retry_count, 7);
    dst->rnr_retry_count = std::min<uint8_t>(src->rnr_retry_count, 7);
  }
  std::copy(id->connect_data.begin(), id->connect_data.end(), dst->private_data.begin());
  if (extra != 0) {
    std::memcpy(dst->private_data.data() + id->connect_data.size(), src->private_data, extra);
  }
  dst->private_data_len = static_cast<uint8_t>(id->connect_data.size() + extra);
  return 0;
}

// Sends a connection step (`req`: its id and QP transitions); afterwards the library's view of
// the QP is what the router applied.
template <class Req>
int send_step(proto::Op op, Id* id, const Req& req) {
  RouterLink* link = RouterLink::get();
  if (link == nullptr) return -1;
  proto::Empty rep;
  int err = link->call(op, req, &rep);
  if (err != 0) errno = err;
  qp_steps_done(id, req.qp, err == 0);
  return err == 0 ? 0 : -1;
}

}  // namespace

namespace wharf::rdmacm {

int process_conn_resp(Id* id) {
  proto::CmStepReq req;
  req.id = id->handle;
  if (add_rtr_steps(id, RDMA_MAX_RESP_RES, &req.qp) != 0 ||
      add_rts_step(id, RDMA_MAX_INIT_DEPTH, &req.qp) != 0 ||
      send_step(proto::Op::kCmEstablish, id, req) != 0) {
    int err = errno;
    (void)modify_qp_err(id);
    errno = err;
    return -1;
  }
  return 0;
}

}  // namespace wharf::rdmacm

WHARF_EXPORT int rdma_connect(rdma_cm_id* cm_id, rdma_conn_param* conn_param) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    if (valid_param(id, conn_param) != 0) return -1;
    RouterLink* link = RouterLink::get();
    if (link == nullptr || link->device() == nullptr) return -1;
    id->initiator_depth =
        conn_param != nullptr && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH
            ? conn_param->initiator_depth
            : link->max_initiator_depth();
    id->responder_resources =
        conn_param != nullptr && conn_param->responder_resources != RDMA_MAX_RESP_RES
            ? conn_param->responder_resources
            : link->max_responder_resources();
    uint32_t qp_num = conn_param != nullptr ? conn_param->qp_num : 0;
    uint8_t srq = conn_param != nullptr ? conn_param->srq : 0;
    if (cm_id->qp != nullptr) {
      qp_num = cm_id->qp->qp_num;
      srq = cm_id->qp->srq != nullptr;
    }
    proto::CmConnectReq req;
    req.id = id->handle;
    size_t max_private =
        is_ud(cm_id->qp_type) ? proto::kCmSidrReqPrivateData : proto::kCmReqPrivateData;
    if (fill_param(id, conn_param, qp_num, srq, max_private, &req.param) != 0) return -1;
    // Both sides of an IB CM connection use the REQ's retry count.
    id->peer.retry_count = req.param.retry_count;
    proto::Empty rep;
    if (int err = link->call(proto::Op::kCmConnect, req, &rep); err != 0) return fail(err);
    id->connect_data.clear();
    return complete(id);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_accept(rdma_cm_id* cm_id, rdma_conn_param* conn_param) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    if (cm_id->qp == nullptr && conn_param == nullptr) return fail(EINVAL);
    uint32_t qp_num = cm_id->qp != nullptr ? cm_id->qp->qp_num : conn_param->qp_num;
    uint8_t srq = cm_id->qp != nullptr ? cm_id->qp->srq != nullptr : conn_param->srq;
    if (valid_param(id, conn_param) != 0) return -1;
    RouterLink* link = RouterLink::get();
    if (link == nullptr || link->device() == nullptr) return -1;
    if (conn_param == nullptr || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH) {
      id->initiator_depth = std::min(id->initiator_depth, link->max_initiator_depth());
    } else {
      id->initiator_depth = conn_param->initiator_depth;
    }
    if (conn_param == nullptr || conn_param->responder_resources == RDMA_MAX_RESP_RES) {
      id->responder_resources = std::min(id->responder_resources, link->max_responder_resources());
    } else {
      id->responder_resources = conn_param->responder_resources;
    }
    proto::CmConnectReq req;
    req.id = id->handle;
    size_t max_private =
        is_ud(cm_id->qp_type) ? proto::kCmSidrRepPrivateData : proto::kCmRepPrivateData;
    if (fill_param(id, conn_param, qp_num, srq, max_private, &req.param) != 0) return -1;
    if (!is_ud(cm_id->qp_type)) {
      if (add_rtr_steps(id, id->responder_resources, &req.qp) != 0) return -1;
      if (add_rts_step(id, id->initiator_depth, &req.qp) != 0) return -1;
    }
    if (send_step(proto::Op::kCmAccept, id, req) != 0) {
      // As rdma-core: a QP that reached RTS before the accept itself failed goes to ERR.
      if (cm_id->qp != nullptr && cm_id->qp->state == IBV_QPS_RTS) {
        int err = errno;
        (void)modify_qp_err(id);
        errno = err;
      }
      return -1;
    }
    if (is_ud(cm_id->qp_type)) return 0;
    return complete(id);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_reject(rdma_cm_id* cm_id, const void* private_data,
                             uint8_t private_data_len) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    proto::CmRejectReq req;
    req.id = to_id(cm_id)->handle;
    if (private_data != nullptr && private_data_len != 0) {
      if (private_data_len > proto::kCmRejPrivateData) return fail(EINVAL);
      std::memcpy(req.private_data.data(), private_data, private_data_len);
      req.private_data_len = private_data_len;
    }
    RouterLink* link = RouterLink::get();
    if (link == nullptr) return -1;
    proto::Empty rep;
    if (int err = link->call(proto::Op::kCmReject, req, &rep); err != 0) return fail(err);
    return 0;
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_establish(rdma_cm_id* cm_id) {
  try {
    if (cm_id == nullptr || cm_id->qp != nullptr) return fail(EINVAL);
    // Without a QP this only sends the RTU, as rdma-core's ucma_process_conn_resp.
    return process_conn_resp(to_id(cm_id));
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_notify(rdma_cm_id* cm_id, ibv_event_type /*event*/) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    proto::CmStepReq req;
    req.id = id->handle;
    return send_step(proto::Op::kCmEstablish, id, req);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_disconnect(rdma_cm_id* cm_id) {
  try {
    if (cm_id == nullptr || cm_id->verbs == nullptr || cm_id->verbs->device == nullptr) {
      return fail(EINVAL);
    }
    Id* id = to_id(cm_id);
    if (cm_id->verbs->device->transport_type != IBV_TRANSPORT_IB) return fail(EINVAL);
    proto::CmStepReq req;
    req.id = id->handle;
    add_err_step(id, &req.qp);
    if (send_step(proto::Op::kCmDisconnect, id, req) != 0) return -1;
    return complete(id);
  } catch (...) {
    return fail(ENOMEM);
  }
}
