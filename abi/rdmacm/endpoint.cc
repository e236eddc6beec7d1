// Synchronous endpoints: rdma_create_ep, rdma_destroy_ep, rdma_get_request (rdma-core's
// rdma_verbs-style API over synchronous ids).
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <memory>
#include <new>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/ops.h"

using namespace wharf::rdmacm;

namespace {

constexpr int kEpTimeoutMs = 2000;

int passive_ep(rdma_cm_id* cm_id, const rdma_addrinfo* res, ibv_pd* pd,
               const ibv_qp_init_attr* qp_init_attr) {
  if (rdma_bind_addr(cm_id, res->ai_src_addr) != 0) return -1;
  Id* id = to_id(cm_id);
  if (pd != nullptr) cm_id->pd = pd;
  if (qp_init_attr != nullptr) {
    id->qp_init_attr.reset(new (std::nothrow) ibv_qp_init_attr(*qp_init_attr));
    if (id->qp_init_attr == nullptr) return fail(ENOMEM);
    id->qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  }
  return 0;
}

int active_ep(rdma_cm_id* cm_id, const rdma_addrinfo* res, ibv_pd* pd,
              ibv_qp_init_attr* qp_init_attr) {
  if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, kEpTimeoutMs) != 0) return -1;
  if (res->ai_route_len != 0) {
    if (rdma_set_option(cm_id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, res->ai_route,
                        res->ai_route_len) != 0) {
      return -1;
    }
  }
  if (rdma_resolve_route(cm_id, kEpTimeoutMs) != 0) return -1;
  if (qp_init_attr != nullptr) {
    qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
    if (rdma_create_qp(cm_id, pd, qp_init_attr) != 0) return -1;
  }
  if (res->ai_connect_len != 0 && res->ai_connect != nullptr) {
    const auto* data = static_cast<const uint8_t*>(res->ai_connect);
    to_id(cm_id)->connect_data.assign(data, data + res->ai_connect_len);
  }
  return 0;
}

}  // namespace

WHARF_EXPORT void rdma_destroy_ep(rdma_cm_id* id) {
  try {
    if (id == nullptr) return;
    if (id->qp != nullptr) rdma_destroy_qp(id);
    if (id->srq != nullptr) rdma_destroy_srq(id);
    to_id(id)->qp_init_attr.reset();
    rdma_destroy_id(id);
  } catch (...) {
  }
}

WHARF_EXPORT int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                                ibv_qp_init_attr* qp_init_attr) {
  try {
    if (id == nullptr || res == nullptr) return fail(EINVAL);
    rdma_cm_id* cm_id = nullptr;
    if (id_create(nullptr, &cm_id, nullptr, static_cast<rdma_port_space>(res->ai_port_space),
                  static_cast<ibv_qp_type>(res->ai_qp_type)) != 0) {
      return -1;
    }
    int ret = (res->ai_flags & RAI_PASSIVE) ? passive_ep(cm_id, res, pd, qp_init_attr)
                                            : active_ep(cm_id, res, pd, qp_init_attr);
    if (ret != 0) {
      int err = errno;
      rdma_destroy_ep(cm_id);
      return fail(err);
    }
    *id = cm_id;
    return 0;
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  try {
    if (listen == nullptr || id == nullptr) return fail(EINVAL);
    Id* lid = to_id(listen);
    if (!lid->sync) return fail(EINVAL);
    if (listen->event != nullptr) {
      rdma_ack_cm_event(listen->event);
      listen->event = nullptr;
    }
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(listen->channel, &event) != 0) return -1;
    int ret = 0;
    if (event->event == RDMA_CM_EVENT_REJECTED) {
      ret = fail(ECONNREFUSED);
    } else if (event->status != 0) {
      ret = fail(-event->status);
    } else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      ret = fail(EINVAL);
    } else if (lid->qp_init_attr != nullptr) {
      ibv_qp_init_attr attr = *lid->qp_init_attr;
      ret = rdma_create_qp(event->id, listen->pd, &attr);
    }
    if (ret != 0) {
      listen->event = event;
      return ret;
    }
    *id = event->id;
    (*id)->event = event;
    return 0;
  } catch (...) {
    return fail(ENOMEM);
  }
}
