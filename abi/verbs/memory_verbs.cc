// Protection domains and memory regions.
#include <errno.h>
#include <infiniband/verbs.h>

#include <cstdlib>
#include <new>

#include "abi/verbs/export.h"
#include "abi/verbs/fork.h"
#include "abi/verbs/mr_backing.h"
#include "abi/verbs/provider.h"

using namespace wharf;
using namespace wharf::abi;

WHARF_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  proto::Handle rep;
  int err = to_ctx(context)->client.call(proto::Op::kAllocPd, proto::Empty{}, nullptr, 0, &rep);
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  auto* pd = new (std::nothrow) Pd{};
  if (pd == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  pd->pd.context = context;
  pd->pd.handle = rep.handle;
  pd->handle = rep.handle;
  to_ctx(context)->track(to_ctx(context)->pds, rep.handle, &pd->pd);
  return &pd->pd;
}

WHARF_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  proto::Handle req{to_pd(pd)->handle};
  proto::Empty rep;
  Context* ctx = to_ctx(pd->context);
  int err = ctx->client.call(proto::Op::kDeallocPd, req, nullptr, 0, &rep);
  if (err != 0) return err;
  ctx->untrack(ctx->pds, to_pd(pd)->handle);
  delete to_pd(pd);
  return 0;
}

WHARF_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                      unsigned int access) {
  if (pd == nullptr || (addr == nullptr && length != 0)) {
    errno = EINVAL;
    return nullptr;
  }
  install_fork_handlers();
  const auto a = reinterpret_cast<uint64_t>(addr);
  Backing b = back_buffer(a, length);
  proto::RegMrReq req;
  req.pd = to_pd(pd)->handle;
  req.access = access;
  req.addr = a;
  req.length = length;
  req.iova = iova;
  req.mapped_start = b.start;
  req.mapped_len = b.len;
  req.memfd_offset = b.memfd_offset;
  int fds[1] = {b.memfd};
  proto::RegMrRep rep;
  int err = to_ctx(pd->context)->client.call(proto::Op::kRegMr, req, fds, b.len != 0 ? 1 : 0, &rep);
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  auto* mr = new (std::nothrow) Mr{};
  if (mr == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  mr->mr.addr = addr;
  mr->mr.length = length;
  mr->mr.handle = rep.handle;
  mr->mr.lkey = rep.lkey;
  mr->mr.rkey = rep.rkey;
  mr->handle = rep.handle;
  mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
  mr->access = access;
  to_ctx(pd->context)->track(to_ctx(pd->context)->mrs, rep.handle, &mr->mr);
  return &mr->mr;
}

#undef ibv_reg_mr_iova
WHARF_EXPORT ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                     int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned int>(access));
}

// The header turns ibv_reg_mr into a macro; the exported ABI symbol keeps its old name.
#undef ibv_reg_mr
WHARF_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uint64_t>(addr),
                          static_cast<unsigned int>(access));
}

WHARF_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  proto::Handle req{to_mr(mr)->handle};
  proto::Empty rep;
  Context* ctx = to_ctx(mr->context);
  int err = ctx->client.call(proto::Op::kDeregMr, req, nullptr, 0, &rep);
  if (err != 0) return err;
  ctx->untrack(ctx->mrs, to_mr(mr)->handle);
  delete to_mr(mr);
  return 0;
}

// Re-registration: not implemented (rdma-core callers fall back to dereg + reg).
WHARF_EXPORT int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}
