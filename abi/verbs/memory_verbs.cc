// Protection domains and memory regions.
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <cstdlib>
#include <new>

#include "abi/verbs/export.h"
#include "abi/verbs/fork.h"
#include "abi/verbs/mr_backing.h"
#include "abi/verbs/provider.h"
#include "common/bits.h"

using namespace wharf;
using namespace wharf::abi;

WHARF_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  proto::Handle rep;
  int err = to_ctx(context)->client.call(proto::Op::kAllocPd, proto::Empty{}, nullptr, 0, &rep);
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  Context* ctx = to_ctx(context);
  auto* pd = new (std::nothrow) Pd{};
  if (pd != nullptr) {
    pd->pd.context = context;
    pd->pd.handle = rep.handle;
    pd->handle = rep.handle;
  }
  if (pd == nullptr || !ctx->track(ctx->pds, rep.handle, &pd->pd)) {
    delete pd;
    return ctx->out_of_memory(proto::Op::kDeallocPd, rep.handle);
  }
  return &pd->pd;
}

WHARF_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  if (to_pd(pd)->protection != nullptr) return dealloc_parent_domain(pd);
  proto::Handle req{to_pd(pd)->handle};
  proto::Empty rep;
  Context* ctx = to_ctx(pd->context);
  int err = ctx->client.call(proto::Op::kDeallocPd, req, nullptr, 0, &rep);
  if (err != 0) return err;
  ctx->untrack(ctx->pds, to_pd(pd)->handle);
  delete to_pd(pd);
  return 0;
}

namespace wharf::abi {

namespace {

proto::RegMrReq mr_request(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                           unsigned int access, const Backing& b) {
  proto::RegMrReq req;
  req.pd = to_pd(pd)->handle;
  req.access = access;
  req.addr = reinterpret_cast<uint64_t>(addr);
  req.length = length;
  req.iova = iova;
  req.mapped_start = b.start;
  req.mapped_len = b.len;
  req.memfd_offset = b.memfd_offset;
  return req;
}

}  // namespace

Mr* register_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access,
                const Backing& b) {
  const proto::RegMrReq req = mr_request(pd, addr, length, iova, access, b);
  int fds[1] = {b.memfd};
  proto::RegMrRep rep;
  int err = to_ctx(pd->context)->client.call(proto::Op::kRegMr, req, fds, b.len != 0 ? 1 : 0, &rep);
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  Context* ctx = to_ctx(pd->context);
  auto* mr = new (std::nothrow) Mr{};
  if (mr == nullptr) return ctx->out_of_memory(proto::Op::kDeregMr, rep.handle);
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
  mr->request = req;
  mr->proof = rep.proof;
  if (b.len != 0) mr->memfd.reset(fcntl(b.memfd, F_DUPFD_CLOEXEC, 0));
  if ((b.len != 0 && !mr->memfd.valid()) || !ctx->track(ctx->mrs, rep.handle, &mr->mr)) {
    delete mr;
    return ctx->out_of_memory(proto::Op::kDeregMr, rep.handle);
  }
  return mr;
}

}  // namespace wharf::abi

WHARF_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                      unsigned int access) {
  // On demand (ODP): nothing is pinned or remapped, the router reaches the pages as they are
  // (process_vm_*); an implicit MR (address NULL, length SIZE_MAX) names the whole space.
  const bool on_demand = (access & IBV_ACCESS_ON_DEMAND) != 0;
  const bool implicit = on_demand && addr == nullptr && length == SIZE_MAX;
  if (pd == nullptr || (addr == nullptr && length != 0 && !implicit)) {
    errno = EINVAL;
    return nullptr;
  }
  install_fork_handlers();
  const Backing b = on_demand ? Backing{} : back_buffer(reinterpret_cast<uint64_t>(addr), length);
  Mr* mr = register_mr(pd, addr, length, iova, access, b);
  return mr != nullptr ? &mr->mr : nullptr;
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
  if (Dm* dm = to_mr(mr)->dm) dm->mrs.fetch_sub(1, std::memory_order_relaxed);
  delete to_mr(mr);
  return 0;
}

namespace wharf::abi {

// ibv_advise_mr: a prefetch hint for on-demand MRs. The router reads and writes their pages as
// they are, so there is nothing to fault in ahead; the request is checked as a provider
// would (the keys must be on-demand MRs of the PD, the ranges inside them) and succeeds.
int advise_mr(ibv_pd* pd, enum ib_uverbs_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
              uint32_t num_sge) {
  if (advice != IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH &&
      advice != IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return EINVAL;
  if ((flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) != 0 || sg_list == nullptr ||
      num_sge == 0)
    return EINVAL;
  Context* ctx = to_ctx(pd->context);
  std::lock_guard<std::mutex> g(ctx->objects_mu);
  for (uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sg_list[i];
    ibv_mr* found = nullptr;
    for (const auto& [handle, m] : ctx->mrs)
      if (m->lkey == s.lkey) found = m;
    if (found == nullptr || found->pd != pd || (to_mr(found)->access & IBV_ACCESS_ON_DEMAND) == 0)
      return EINVAL;
    const uint64_t base = reinterpret_cast<uint64_t>(found->addr);
    if (s.addr < base || !range_within(s.addr - base, s.length, found->length)) return EINVAL;
    if (advice == IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
        (to_mr(found)->access & IBV_ACCESS_LOCAL_WRITE) == 0)
      return EINVAL;
  }
  return 0;
}

}  // namespace wharf::abi

// Re-registration in place: the router checks and makes the new registration before it drops
// the old one, so a failure leaves the MR as it was (IBV_REREG_MR_ERR_INPUT for bad
// arguments, IBV_REREG_MR_ERR_CMD when the router refuses), and the keys stay the same, as
// applications that handed them to a peer expect. Device-memory MRs cannot be re-registered.
WHARF_EXPORT int ibv_rereg_mr(ibv_mr* ibmr, int flags, ibv_pd* pd, void* addr, size_t length,
                              int access) {
  constexpr int kKnown =
      IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
  Mr* mr = to_mr(ibmr);
  const bool translation = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) != 0;
  ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) != 0 ? pd : ibmr->pd;
  if (flags == 0 || (flags & ~kKnown) != 0 || new_pd == nullptr ||
      new_pd->context != ibmr->context || (translation && (addr == nullptr || length == 0))) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (mr->dm != nullptr) {
    errno = EOPNOTSUPP;
    return IBV_REREG_MR_ERR_INPUT;
  }
  void* new_addr = translation ? addr : ibmr->addr;
  const size_t new_length = translation ? length : ibmr->length;
  const unsigned int new_access =
      (flags & IBV_REREG_MR_CHANGE_ACCESS) != 0 ? static_cast<unsigned int>(access) : mr->access;
  const uint64_t iova = translation ? reinterpret_cast<uint64_t>(addr) : mr->iova;
  const Backing b = (new_access & IBV_ACCESS_ON_DEMAND) != 0
                        ? Backing{}
                        : back_buffer(reinterpret_cast<uint64_t>(new_addr), new_length);
  proto::ReregMrReq req;
  req.mr = mr->handle;
  req.reg = mr_request(new_pd, new_addr, new_length, iova, new_access, b);
  int fds[1] = {b.memfd};
  proto::RegMrRep rep;
  if (int err = to_ctx(ibmr->context)
                    ->client.call(proto::Op::kReregMr, req, fds, b.len != 0 ? 1 : 0, &rep);
      err != 0) {
    errno = err;
    return IBV_REREG_MR_ERR_CMD;
  }
  ibmr->pd = new_pd;
  ibmr->addr = new_addr;
  ibmr->length = new_length;
  ibmr->lkey = rep.lkey;
  ibmr->rkey = rep.rkey;
  mr->iova = (new_access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
  {
    std::lock_guard<std::mutex> g(to_ctx(ibmr->context)->objects_mu);  // read by a resume
    mr->request = req.reg;
    mr->memfd.reset(b.len != 0 ? fcntl(b.memfd, F_DUPFD_CLOEXEC, 0) : -1);
  }
  mr->access = new_access;
  return 0;
}
