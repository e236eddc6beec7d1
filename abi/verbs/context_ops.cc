// The per-context operation tables. The data-path verbs (post/poll/notify) are static
// inline in verbs.h and reach us only through ibv_context.ops; the extended verbs reach us
// through verbs_context. Unfilled extended entries make the inline wrappers return
// EOPNOTSUPP, as rdma-core does for providers without them.
#include <errno.h>
#include <infiniband/verbs.h>

#include "abi/verbs/provider.h"

namespace wharf::abi {

int query_device_ex(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*, size_t);
int query_port(ibv_context*, uint8_t, ibv_port_attr*, size_t);
int query_rt_values(ibv_context*, ibv_values_ex*);
int advise_mr(ibv_pd*, enum ib_uverbs_advise_mr_advice, uint32_t, ibv_sge*, uint32_t);
ibv_dm* alloc_dm(ibv_context*, ibv_alloc_dm_attr*);
int free_dm(ibv_dm*);
ibv_mr* reg_dm_mr(ibv_pd*, ibv_dm*, uint64_t, size_t, unsigned int);
ibv_td* alloc_td(ibv_context*, ibv_td_init_attr*);
int dealloc_td(ibv_td*);
ibv_pd* alloc_parent_domain(ibv_context*, ibv_parent_domain_init_attr*);

ibv_xrcd* open_xrcd(ibv_context*, ibv_xrcd_init_attr*);
int close_xrcd(ibv_xrcd*);
ibv_qp* open_qp(ibv_context*, ibv_qp_open_attr*);
ibv_srq* create_srq_ex(ibv_context*, ibv_srq_init_attr_ex*);
int get_srq_num(ibv_srq*, uint32_t*);
ibv_flow* create_flow(ibv_qp*, ibv_flow_attr*);
int destroy_flow(ibv_flow*);
ibv_wq* create_wq(ibv_context*, ibv_wq_init_attr*);
int modify_wq(ibv_wq*, ibv_wq_attr*);
int destroy_wq(ibv_wq*);
ibv_rwq_ind_table* create_rwq_ind_table(ibv_context*, ibv_rwq_ind_table_init_attr*);
int destroy_rwq_ind_table(ibv_rwq_ind_table*);

ibv_mw* alloc_mw(ibv_pd*, ibv_mw_type);
int bind_mw(ibv_qp*, ibv_mw*, ibv_mw_bind*);
int dealloc_mw(ibv_mw*);

void init_context_ops(Context* ctx) {
  ibv_context_ops& ops = ctx->vctx.context.ops;
  ops.post_send = post_send;
  ops.post_recv = post_recv;
  ops.post_srq_recv = post_srq_recv;
  ops.poll_cq = poll_cq;
  ops.req_notify_cq = req_notify_cq;
  ops.alloc_mw = alloc_mw;
  ops.bind_mw = bind_mw;
  ops.dealloc_mw = dealloc_mw;
  ctx->vctx.query_port = query_port;
  ctx->vctx.query_device_ex = query_device_ex;
  ctx->vctx.modify_qp_rate_limit = modify_qp_rate_limit;
  ctx->vctx.create_cq_ex = create_cq_ex;
  ctx->vctx.modify_cq = modify_cq;
  ctx->vctx.create_qp_ex = create_qp_ex;
  ctx->vctx.query_rt_values = query_rt_values;
  ctx->vctx.advise_mr = advise_mr;
  ctx->vctx.alloc_dm = alloc_dm;
  ctx->vctx.free_dm = free_dm;
  ctx->vctx.reg_dm_mr = reg_dm_mr;
  ctx->vctx.alloc_td = alloc_td;
  ctx->vctx.dealloc_td = dealloc_td;
  ctx->vctx.alloc_parent_domain = alloc_parent_domain;
  ctx->vctx.open_xrcd = open_xrcd;
  ctx->vctx.close_xrcd = close_xrcd;
  ctx->vctx.open_qp = open_qp;
  ctx->vctx.create_srq_ex = create_srq_ex;
  ctx->vctx.get_srq_num = get_srq_num;
  ctx->vctx.post_srq_ops = post_srq_ops;
  ctx->vctx.ibv_create_flow = create_flow;
  ctx->vctx.ibv_destroy_flow = destroy_flow;
  ctx->vctx.create_wq = create_wq;
  ctx->vctx.modify_wq = modify_wq;
  ctx->vctx.destroy_wq = destroy_wq;
  ctx->vctx.create_rwq_ind_table = create_rwq_ind_table;
  ctx->vctx.destroy_rwq_ind_table = destroy_rwq_ind_table;
}

}  // namespace wharf::abi
