// Thread domains and parent domains (ibv_alloc_td, ibv_alloc_parent_domain). A parent domain
// stands for the PD it wraps wherever a PD is taken (QPs, MRs, AHs, SRQs, extended CQs): it
// carries the same router PD. A thread domain is a promise that one thread uses the objects;
// the library's queues are already safe for any number of threads, so it changes nothing.
// The allocators of a parent domain are accepted and never called (queues live in memory the
// router shares); its pd_context is kept.
#include <errno.h>
#include <infiniband/verbs.h>

#include <new>

#include "abi/verbs/provider.h"

namespace wharf::abi {

ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* attr) {
  if (attr == nullptr || attr->comp_mask != 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* td = new (std::nothrow) ibv_td{};
  if (td == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  td->context = context;
  Context* ctx = to_ctx(context);
  if (ctx->track_local(ctx->tds, td) == 0) {
    delete td;
    errno = ENOMEM;
    return nullptr;
  }
  return td;
}

int dealloc_td(ibv_td* td) {
  Context* ctx = to_ctx(td->context);
  std::lock_guard<std::mutex> g(ctx->objects_mu);
  for (auto& [id, p] : ctx->parent_domains)
    if (to_pd(p)->td == td) return EBUSY;
  for (auto it = ctx->tds.begin(); it != ctx->tds.end(); ++it) {
    if (it->second != td) continue;
    ctx->tds.erase(it);
    delete td;
    return 0;
  }
  return EINVAL;
}

ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  constexpr uint32_t kKnown =
      IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (attr == nullptr || attr->pd == nullptr || attr->pd->context != context ||
      to_pd(attr->pd)->protection != nullptr || (attr->comp_mask & ~kKnown) != 0 ||
      (attr->td != nullptr && attr->td->context != context)) {
    errno = EINVAL;
    return nullptr;
  }
  auto* p = new (std::nothrow) Pd{};
  if (p == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  Pd* protection = to_pd(attr->pd);
  p->pd.context = context;
  p->pd.handle = protection->pd.handle;
  p->handle = protection->handle;
  p->protection = protection;
  p->td = attr->td;
  Context* ctx = to_ctx(context);
  p->local_id = ctx->track_local(ctx->parent_domains, &p->pd);
  if (p->local_id == 0) {
    delete p;
    errno = ENOMEM;
    return nullptr;
  }
  return &p->pd;
}

int dealloc_parent_domain(ibv_pd* pd) {
  Context* ctx = to_ctx(pd->context);
  ctx->untrack(ctx->parent_domains, to_pd(pd)->local_id);
  delete to_pd(pd);
  return 0;
}

}  // namespace wharf::abi
