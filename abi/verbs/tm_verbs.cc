// ibv_post_srq_ops: the matching-list operations of a tag-matching SRQ (ADD, DEL, SYNC;
// rdma-core's Documentation/tag_matching.md). The router applies them in order, up to
// proto::kMaxSrqOpsPerCall per request, and completes each on the SRQ's CQ when it is
// IBV_OPS_SIGNALED or fails; an ADD's handle is written back into its ibv_ops_wr.
#include <errno.h>
#include <infiniband/verbs.h>

#include <array>

#include "abi/verbs/provider.h"
#include "proto/device.h"
#include "proto/verbs_wire.h"

namespace wharf::abi {
namespace {

proto::SrqOp encode_op(const ibv_ops_wr& wr) {
  proto::SrqOp op;
  op.wr_id = wr.wr_id;
  op.opcode = wr.opcode;
  op.flags = static_cast<uint32_t>(wr.flags);
  op.unexpected_cnt = wr.tm.unexpected_cnt;
  op.handle = wr.tm.handle;
  if (wr.opcode != IBV_WR_TAG_ADD) return op;
  op.recv_wr_id = wr.tm.add.recv_wr_id;
  op.tag = wr.tm.add.tag;
  op.mask = wr.tm.add.mask;
  // A count the router refuses (EINVAL) when it is negative or its list is missing.
  op.num_sge = wr.tm.add.num_sge > 0 && wr.tm.add.sg_list == nullptr
                   ? UINT32_MAX
                   : static_cast<uint32_t>(wr.tm.add.num_sge);
  if (op.num_sge == 1) {
    op.addr = wr.tm.add.sg_list[0].addr;
    op.length = wr.tm.add.sg_list[0].length;
    op.lkey = wr.tm.add.sg_list[0].lkey;
  }
  return op;
}

}  // namespace

int post_srq_ops(ibv_srq* ibsrq, ibv_ops_wr* wr, ibv_ops_wr** bad) {
  Srq* srq = to_srq(ibsrq);
  if (!srq->tm) {
    *bad = wr;
    return EINVAL;
  }
  Context* ctx = to_ctx(ibsrq->context);
  while (wr != nullptr) {
    proto::PostSrqOpsReq req;
    req.srq = srq->handle;
    std::array<ibv_ops_wr*, proto::kMaxSrqOpsPerCall> batch{};
    for (; wr != nullptr && req.count < proto::kMaxSrqOpsPerCall; wr = wr->next) {
      req.ops[req.count] = encode_op(*wr);
      batch[req.count++] = wr;
    }
    proto::PostSrqOpsRep rep;
    int err = ctx->client.call(proto::Op::kPostSrqOps, req, nullptr, 0, &rep);
    if (err == 0 && rep.done > req.count) err = EPROTO;
    if (err != 0) {
      *bad = batch[0];
      return err;
    }
    for (uint32_t i = 0; i < rep.done; ++i)
      if (batch[i]->opcode == IBV_WR_TAG_ADD) batch[i]->tm.handle = rep.handles[i];
    if (rep.done < req.count) {
      *bad = batch[rep.done];
      return rep.error != 0 ? static_cast<int>(rep.error) : EPROTO;
    }
  }
  return 0;
}

}  // namespace wharf::abi
