// SRQs of ids: rdma_create_srq(_ex), rdma_destroy_srq (rdma-core's rules for PDs and CQs).
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <cstring>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/ops.h"
#include "abi/rdmacm/router_link.h"

using namespace wharf::rdmacm;

WHARF_EXPORT int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  try {
    if (id == nullptr || attr == nullptr || id->verbs == nullptr) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) return fail(EINVAL);
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || attr->pd == nullptr) {
      attr->pd = id->pd;
      attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
    }
    if (attr->pd == nullptr) return fail(EINVAL);
    // An XRC SRQ: in the device's domain unless one is given, completing on the id's receive
    // CQ (made here if it has none), as rdma-core's rdma_create_srq_ex does.
    if (attr->srq_type == IBV_SRQT_XRC) {
      if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || attr->xrcd == nullptr) {
        RouterLink* link = RouterLink::get();
        attr->xrcd = link != nullptr ? link->xrcd() : nullptr;
        if (attr->xrcd == nullptr) return -1;
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD;
      }
      if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || attr->cq == nullptr) {
        if (create_cqs(to_id(id), 0, attr->attr.max_wr) != 0) return -1;
        attr->cq = id->recv_cq;
        attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
      }
    }
    ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
    if (srq == nullptr) {
      int err = errno;
      destroy_cqs(to_id(id));
      return fail(err);
    }
    if (id->pd == nullptr) id->pd = attr->pd;
    id->srq = srq;
    return 0;
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (id == nullptr || attr == nullptr) return fail(EINVAL);
  ibv_srq_init_attr_ex attr_ex{};
  std::memcpy(&attr_ex, attr, sizeof(*attr));
  attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  attr_ex.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  attr_ex.pd = pd;
  int ret = rdma_create_srq_ex(id, &attr_ex);
  std::memcpy(attr, &attr_ex, sizeof(*attr));
  return ret;
}

WHARF_EXPORT void rdma_destroy_srq(rdma_cm_id* id) {
  if (id == nullptr) return;
  if (id->srq != nullptr) ibv_destroy_srq(id->srq);
  id->srq = nullptr;
  destroy_cqs(to_id(id));
}
