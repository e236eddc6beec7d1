// The extended QP (ibv_create_qp_ex) and its work-request API (ibv_wr_start, ibv_wr_send,
// ibv_wr_set_sge, ..., ibv_wr_complete). The ibv_wr_* calls build ordinary send work requests
// that ibv_wr_complete posts together through the same path as ibv_post_send, so both APIs
// follow one set of rules (what a WR may do is checked in one place, post_send's).
//
// Supported: RDMA WRITE (with immediate), SEND (with immediate, with invalidate), RDMA READ,
// compare-and-swap, fetch-and-add and atomic write, binding type 2 memory windows and
// LOCAL_INV, on RC, UC (WRITE/SEND, windows), UD (SEND) and XRC initiators (what RC does but
// windows, SEND_WITH_INV and atomic write); not: TSO (creating such a QP is EOPNOTSUPP).
// Unlike mlx5, a batch whose WR fails in ibv_wr_complete keeps the WRs before it posted.
#include <errno.h>
#include <infiniband/verbs.h>

#include <cstring>

#include "abi/verbs/export.h"
#include "abi/verbs/provider.h"
#include "proto/qp_rules.h"

namespace wharf::abi {
namespace {

constexpr uint64_t kConnectedOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                   IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                                   IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
constexpr uint64_t kReliableOps = kConnectedOps | IBV_QP_EX_WITH_RDMA_READ |
                                  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                                  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                  IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_ATOMIC_WRITE;
constexpr uint64_t kDatagramOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
constexpr uint64_t kXrcOps = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                             IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                             IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                             IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;

// The IBV_QP_EX_WITH_* ops a QP of this type may be created with.
uint64_t ops_for(ibv_qp_type type) {
  switch (type) {
    case IBV_QPT_RC: return kReliableOps;
    case IBV_QPT_UC: return kConnectedOps;
    case IBV_QPT_UD: return kDatagramOps;
    case IBV_QPT_XRC_SEND: return kXrcOps;
    case IBV_QPT_RAW_PACKET: return IBV_QP_EX_WITH_SEND;
    default: return 0;
  }
}

Qp* of(ibv_qp_ex* ex) { return reinterpret_cast<Qp*>(ex); }

void fail(Qp* qp, int err) {
  if (qp->batch.error == 0) qp->batch.error = err;
}

// A new WR of the batch with the op, wr_id and flags the application set; nullptr (the error
// kept for wr_complete) when the QP was not created for `op`.
ibv_send_wr* begin(ibv_qp_ex* ex, uint64_t op, ibv_wr_opcode opcode) {
  Qp* qp = of(ex);
  if ((qp->send_ops & op) == 0) {
    fail(qp, EINVAL);
    return nullptr;
  }
  WrBatch& b = qp->batch;
  try {
    if (b.count == b.wrs.size()) b.wrs.emplace_back();
  } catch (const std::bad_alloc&) {
    fail(qp, ENOMEM);
    return nullptr;
  }
  PendingWr& p = b.wrs[b.count++];
  p.sges.clear();
  p.inline_data.clear();
  p.wr = ibv_send_wr{};
  p.wr.wr_id = ex->wr_id;
  p.wr.send_flags = ex->wr_flags;
  p.wr.opcode = opcode;
  return &p.wr;
}

// The WR the data and address setters apply to: the last one begun.
PendingWr* last(ibv_qp_ex* ex) {
  Qp* qp = of(ex);
  if (qp->batch.count == 0) {
    fail(qp, EINVAL);
    return nullptr;
  }
  return &qp->batch.wrs[qp->batch.count - 1];
}

void wr_rdma_write(ibv_qp_ex* ex, uint32_t rkey, uint64_t addr) {
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_RDMA_WRITE, IBV_WR_RDMA_WRITE))
    wr->wr.rdma = {addr, rkey};
}
void wr_rdma_write_imm(ibv_qp_ex* ex, uint32_t rkey, uint64_t addr, __be32 imm) {
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_WRITE_WITH_IMM)) {
    wr->wr.rdma = {addr, rkey};
    wr->imm_data = imm;
  }
}
void wr_rdma_read(ibv_qp_ex* ex, uint32_t rkey, uint64_t addr) {
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_RDMA_READ, IBV_WR_RDMA_READ))
    wr->wr.rdma = {addr, rkey};
}
void wr_send(ibv_qp_ex* ex) { begin(ex, IBV_QP_EX_WITH_SEND, IBV_WR_SEND); }
void wr_send_imm(ibv_qp_ex* ex, __be32 imm) {
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_SEND_WITH_IMM, IBV_WR_SEND_WITH_IMM))
    wr->imm_data = imm;
}
void wr_atomic_cmp_swp(ibv_qp_ex* ex, uint32_t rkey, uint64_t addr, uint64_t compare,
                       uint64_t swap) {
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_CMP_AND_SWP))
    wr->wr.atomic = {addr, compare, swap, rkey};
}
void wr_atomic_fetch_add(ibv_qp_ex* ex, uint32_t rkey, uint64_t addr, uint64_t add) {
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_FETCH_AND_ADD))
    wr->wr.atomic = {addr, add, 0, rkey};
}

void wr_bind_mw(ibv_qp_ex* ex, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  if (info == nullptr) return fail(of(ex), EINVAL);
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_BIND_MW, IBV_WR_BIND_MW)) {
    wr->bind_mw.mw = mw;
    wr->bind_mw.rkey = rkey;
    wr->bind_mw.bind_info = *info;
  }
}
void wr_local_inv(ibv_qp_ex* ex, uint32_t key) {
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_LOCAL_INV, IBV_WR_LOCAL_INV))
    wr->invalidate_rkey = key;
}
void wr_send_inv(ibv_qp_ex* ex, uint32_t key) {
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_SEND_WITH_INV, IBV_WR_SEND_WITH_INV))
    wr->invalidate_rkey = key;
}

// Operations the QP can never have been created with (create_qp_ex refuses them).
void wr_send_tso(ibv_qp_ex* ex, void*, uint16_t, uint16_t) { fail(of(ex), EOPNOTSUPP); }
void wr_set_xrc_srqn(ibv_qp_ex* ex, uint32_t remote_srqn) {
  if (PendingWr* p = last(ex)) p->wr.qp_type.xrc.remote_srqn = remote_srqn;
}

void wr_set_ud_addr(ibv_qp_ex* ex, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
  if (PendingWr* p = last(ex)) p->wr.wr.ud = {ah, remote_qpn, remote_qkey};
}
void wr_set_sge_list(ibv_qp_ex* ex, size_t n, const ibv_sge* list) {
  PendingWr* p = last(ex);
  if (p == nullptr) return;
  try {
    p->sges.assign(list, list + n);
  } catch (const std::bad_alloc&) {
    fail(of(ex), ENOMEM);
  }
}
void wr_set_sge(ibv_qp_ex* ex, uint32_t lkey, uint64_t addr, uint32_t length) {
  const ibv_sge sge{addr, length, lkey};
  wr_set_sge_list(ex, 1, &sge);
}
void wr_set_inline_data_list(ibv_qp_ex* ex, size_t n, const ibv_data_buf* bufs) {
  PendingWr* p = last(ex);
  if (p == nullptr) return;
  p->inline_data.clear();
  try {
    for (size_t i = 0; i < n; ++i) {
      const auto* data = static_cast<const uint8_t*>(bufs[i].addr);
      p->inline_data.insert(p->inline_data.end(), data, data + bufs[i].length);
    }
  } catch (const std::bad_alloc&) {
    return fail(of(ex), ENOMEM);
  }
  p->sges.clear();
  p->wr.send_flags |= IBV_SEND_INLINE;
}
void wr_set_inline_data(ibv_qp_ex* ex, void* addr, size_t length) {
  const ibv_data_buf buf{addr, length};
  wr_set_inline_data_list(ex, 1, &buf);
}
// The 8 bytes travel in the work request, as inline data (copied now).
void wr_atomic_write(ibv_qp_ex* ex, uint32_t rkey, uint64_t addr, const void* data) {
  if (data == nullptr) return fail(of(ex), EINVAL);
  if (ibv_send_wr* wr = begin(ex, IBV_QP_EX_WITH_ATOMIC_WRITE, IBV_WR_ATOMIC_WRITE)) {
    wr->wr.rdma = {addr, rkey};
    const ibv_data_buf buf{const_cast<void*>(data), proto::kAtomicWriteSize};
    wr_set_inline_data_list(ex, 1, &buf);
  }
}

void wr_start(ibv_qp_ex* ex) {
  Qp* qp = of(ex);
  qp->batch.count = 0;
  qp->batch.error = 0;
}

void wr_abort(ibv_qp_ex* ex) { wr_start(ex); }

int wr_complete(ibv_qp_ex* ex) {
  Qp* qp = of(ex);
  WrBatch& b = qp->batch;
  int err = b.error;
  if (err == 0 && b.count != 0) {
    for (size_t i = 0; i < b.count; ++i) {
      PendingWr& p = b.wrs[i];
      if (!p.inline_data.empty()) {
        p.sges.assign(1, ibv_sge{reinterpret_cast<uintptr_t>(p.inline_data.data()),
                                 static_cast<uint32_t>(p.inline_data.size()), 0});
      }
      p.wr.sg_list = p.sges.empty() ? nullptr : p.sges.data();
      p.wr.num_sge = static_cast<int>(p.sges.size());
      p.wr.next = i + 1 < b.count ? &b.wrs[i + 1].wr : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    err = post_send(&qp->qp, &b.wrs[0].wr, &bad);
  }
  b.count = 0;
  b.error = 0;
  return err;
}

}  // namespace

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  constexpr uint32_t kKnownMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
                                  IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
                                  IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  if (attr == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if ((attr->comp_mask & (IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH)) != 0)
    return create_rss_qp(context, attr);
  // TSO headers and creation flags are not supported.
  if ((attr->comp_mask & ~kKnownMask) != 0 ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) != 0 && attr->create_flags != 0)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // An XRC target is made in a domain, every other QP in a PD.
  const bool target = attr->qp_type == IBV_QPT_XRC_RECV;
  if (target ? (attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) == 0 || attr->xrcd == nullptr
             : (attr->comp_mask & IBV_QP_INIT_ATTR_PD) == 0 || attr->pd == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  uint64_t ops = 0;
  if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0) {
    ops = attr->send_ops_flags;
    if (ops == 0 || (ops & ~ops_for(attr->qp_type)) != 0) {
      errno = EOPNOTSUPP;
      return nullptr;
    }
  }
  // ibv_qp_init_attr is the prefix of ibv_qp_init_attr_ex.
  ibv_qp_init_attr init{};
  std::memcpy(&init, attr, sizeof(init));
  Qp* qp = create_qp(context, target ? nullptr : attr->pd, target ? attr->xrcd : nullptr, &init);
  if (qp == nullptr) return nullptr;
  attr->cap = init.cap;
  if (ops == 0) return &qp->qp;
  qp->send_ops = ops;
  ibv_qp_ex* ex = &qp->qp_ex;
  ex->comp_mask = 0;
  ex->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  ex->wr_atomic_fetch_add = wr_atomic_fetch_add;
  ex->wr_bind_mw = wr_bind_mw;
  ex->wr_local_inv = wr_local_inv;
  ex->wr_rdma_read = wr_rdma_read;
  ex->wr_rdma_write = wr_rdma_write;
  ex->wr_rdma_write_imm = wr_rdma_write_imm;
  ex->wr_send = wr_send;
  ex->wr_send_imm = wr_send_imm;
  ex->wr_send_inv = wr_send_inv;
  ex->wr_send_tso = wr_send_tso;
  ex->wr_set_ud_addr = wr_set_ud_addr;
  ex->wr_set_xrc_srqn = wr_set_xrc_srqn;
  ex->wr_set_inline_data = wr_set_inline_data;
  ex->wr_set_inline_data_list = wr_set_inline_data_list;
  ex->wr_set_sge = wr_set_sge;
  ex->wr_set_sge_list = wr_set_sge_list;
  ex->wr_start = wr_start;
  ex->wr_complete = wr_complete;
  ex->wr_abort = wr_abort;
  ex->wr_atomic_write = wr_atomic_write;
  return &qp->qp;
}

}  // namespace wharf::abi

using namespace wharf::abi;

// NULL for a QP created without send_ops_flags, as rdma-core's providers answer.
WHARF_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  Qp* q = to_qp(qp);
  return q->send_ops != 0 ? &q->qp_ex : nullptr;
}
