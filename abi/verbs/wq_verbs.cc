// Receive work queues, indirection tables and RSS QPs (ibv_create_wq, ibv_modify_wq,
// ibv_destroy_wq, ibv_create_rwq_ind_table, ibv_create_qp_ex with IBV_QP_INIT_ATTR_RX_HASH).
//
// A WQ is a receive queue of its own completing on its CQ: the router keeps it as an SRQ of
// type proto::kSrqTypeWq, which only RSS QPs take receives from. An indirection table is the
// library's list of WQs; an RSS QP is a RAW_PACKET QP with no CQs and no queues to which the
// router gives the table and the hash (SetQpRss): the frames its flow rules take go to the
// table's WQ that the Toeplitz hash of the chosen fields picks (router/flow_steering.cc).
#include <errno.h>
#include <infiniband/verbs.h>

#include <cstring>
#include <new>
#include <vector>

#include "abi/verbs/provider.h"
#include "proto/messages.h"
#include "proto/qp_rules.h"

namespace wharf::abi {
namespace {

struct Wq {
  ibv_wq wq;
  ibv_srq* srq;    // its receive queue
  int tables = 0;  // indirection tables naming it, guarded by the context's objects_mu
};
Wq* to_wq(ibv_wq* w) { return reinterpret_cast<Wq*>(w); }

struct IndTable {
  ibv_rwq_ind_table table;
  std::vector<ibv_wq*> wqs;
  uint32_t log_size = 0;
  int qps = 0;  // RSS QPs using it, guarded by the context's objects_mu
};
IndTable* to_table(ibv_rwq_ind_table* t) { return reinterpret_cast<IndTable*>(t); }

int post_wq_recv(ibv_wq* wq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return post_srq_recv(to_wq(wq)->srq, wr, bad);
}

}  // namespace

ibv_wq* create_wq(ibv_context* context, ibv_wq_init_attr* attr) {
  if (attr == nullptr || attr->pd == nullptr || attr->cq == nullptr ||
      attr->pd->context != context || attr->cq->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  // Receive queues only; no creation flags (scatter FCS, CVLAN stripping, padding).
  if (attr->wq_type != IBV_WQT_RQ || (attr->comp_mask & ~IBV_WQ_INIT_ATTR_FLAGS) != 0 ||
      ((attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) != 0 && attr->create_flags != 0)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  auto* wq = new (std::nothrow) Wq{};
  if (wq == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  ibv_srq_attr sa{};
  sa.max_wr = attr->max_wr;
  sa.max_sge = attr->max_sge;
  wq->srq =
      create_srq_object(attr->pd, &sa, nullptr, proto::kSrqTypeWq, nullptr, attr->cq, nullptr);
  if (wq->srq == nullptr) {
    delete wq;
    return nullptr;
  }
  attr->max_wr = sa.max_wr;
  attr->max_sge = sa.max_sge;
  ibv_wq* w = &wq->wq;
  w->context = context;
  w->wq_context = attr->wq_context;
  w->pd = attr->pd;
  w->cq = attr->cq;
  w->wq_num = to_srq(wq->srq)->srqn;
  w->handle = wq->srq->handle;
  w->state = IBV_WQS_RESET;
  w->wq_type = IBV_WQT_RQ;
  w->post_recv = post_wq_recv;
  return w;
}

int modify_wq(ibv_wq* wq, ibv_wq_attr* attr) {
  if ((attr->attr_mask & ~(IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE)) != 0)
    return EOPNOTSUPP;  // flags
  if ((attr->attr_mask & IBV_WQ_ATTR_CURR_STATE) != 0 && attr->curr_wq_state != wq->state)
    return EINVAL;
  if ((attr->attr_mask & IBV_WQ_ATTR_STATE) == 0) return 0;
  proto::Empty rep;
  int err = to_ctx(wq->context)
                ->client.call(proto::Op::kModifyWq,
                              proto::ModifyWqReq{wq->handle, static_cast<uint32_t>(attr->wq_state)},
                              nullptr, 0, &rep);
  if (err == 0) wq->state = attr->wq_state;
  return err;
}

int destroy_wq(ibv_wq* wq) {
  Context* ctx = to_ctx(wq->context);
  {
    std::lock_guard<std::mutex> g(ctx->objects_mu);
    if (to_wq(wq)->tables != 0) return EBUSY;
  }
  if (int err = ibv_destroy_srq(to_wq(wq)->srq); err != 0) return err;  // EBUSY: an RSS QP
  delete to_wq(wq);
  return 0;
}

ibv_rwq_ind_table* create_rwq_ind_table(ibv_context* context, ibv_rwq_ind_table_init_attr* attr) {
  if (attr == nullptr || attr->comp_mask != 0 || attr->ind_tbl == nullptr ||
      attr->log_ind_tbl_size > proto::kMaxRssTableLog) {
    errno = EINVAL;
    return nullptr;
  }
  auto* t = new (std::nothrow) IndTable{};
  if (t == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  const uint32_t n = 1u << attr->log_ind_tbl_size;
  try {
    t->wqs.reserve(n);
  } catch (const std::bad_alloc&) {
    delete t;
    errno = ENOMEM;
    return nullptr;
  }
  for (uint32_t i = 0; i < n; ++i) {
    ibv_wq* wq = attr->ind_tbl[i];
    if (wq == nullptr || wq->context != context) {
      delete t;
      errno = EINVAL;
      return nullptr;
    }
    t->wqs.push_back(wq);
  }
  t->log_size = attr->log_ind_tbl_size;
  Context* ctx = to_ctx(context);
  std::lock_guard<std::mutex> g(ctx->objects_mu);
  for (ibv_wq* wq : t->wqs) to_wq(wq)->tables++;
  t->table.context = context;
  t->table.ind_tbl_handle = t->table.ind_tbl_num = ctx->next_local_id++;
  return &t->table;
}

// A table an RSS QP still uses is EBUSY, as the kernel's use count makes it.
int destroy_rwq_ind_table(ibv_rwq_ind_table* table) {
  Context* ctx = to_ctx(table->context);
  std::lock_guard<std::mutex> g(ctx->objects_mu);
  if (to_table(table)->qps != 0) return EBUSY;
  for (ibv_wq* wq : to_table(table)->wqs) to_wq(wq)->tables--;
  delete to_table(table);
  return 0;
}

ibv_qp* create_rss_qp(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  constexpr uint32_t kRssMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  const uint32_t both = IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  if ((attr->comp_mask & both) != both || (attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 ||
      attr->pd == nullptr || attr->rwq_ind_tbl == nullptr || attr->qp_type != IBV_QPT_RAW_PACKET ||
      attr->rwq_ind_tbl->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  const ibv_rx_hash_conf& h = attr->rx_hash_conf;
  if ((attr->comp_mask & ~kRssMask) != 0 ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) != 0 && attr->create_flags != 0) ||
      h.rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ ||
      (h.rx_hash_fields_mask & ~proto::kRssHashFields)) {
    errno = EOPNOTSUPP;  // another hash, inner headers, IPsec SPI
    return nullptr;
  }
  if (h.rx_hash_key_len != proto::kRssKeyLen || h.rx_hash_key == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_qp_init_attr init{};
  init.qp_context = attr->qp_context;
  init.qp_type = IBV_QPT_RAW_PACKET;
  Qp* qp = create_qp(context, attr->pd, nullptr, &init, /*rss=*/true);
  if (qp == nullptr) return nullptr;
  const IndTable* t = to_table(attr->rwq_ind_tbl);
  proto::SetQpRssReq req;
  req.qp = qp->handle;
  req.log_table_size = t->log_size;
  for (size_t i = 0; i < t->wqs.size(); ++i) req.wqs[i] = t->wqs[i]->handle;
  req.hash_fields = h.rx_hash_fields_mask;
  std::memcpy(req.hash_key.data(), h.rx_hash_key, proto::kRssKeyLen);
  proto::Empty rep;
  if (int err = to_ctx(context)->client.call(proto::Op::kSetQpRss, req, nullptr, 0, &rep);
      err != 0) {
    ibv_destroy_qp(&qp->qp);
    errno = err;
    return nullptr;
  }
  attr->cap = init.cap;
  {
    std::lock_guard<std::mutex> g(to_ctx(context)->objects_mu);
    to_table(attr->rwq_ind_tbl)->qps++;
  }
  qp->rss_table = attr->rwq_ind_tbl;
  return &qp->qp;
}

void release_rss_table(ibv_rwq_ind_table* table) {
  std::lock_guard<std::mutex> g(to_ctx(table->context)->objects_mu);
  to_table(table)->qps--;
}

}  // namespace wharf::abi
