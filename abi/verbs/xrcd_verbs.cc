// XRC domains (ibv_open_xrcd, ibv_close_xrcd). The router keeps the domain; a domain named by
// a file is shared by the processes of this container that open the same file.
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include <new>

#include "abi/verbs/provider.h"

namespace wharf::abi {

ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  constexpr uint32_t kKnownMask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  if (attr == nullptr || (attr->comp_mask & ~kKnownMask) != 0 ||
      (attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) == 0 ||
      (attr->oflags & ~static_cast<uint32_t>(O_CREAT | O_EXCL)) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  // As the kernel: no file (fd -1) makes a domain of this context alone, and needs O_CREAT.
  const bool has_file = (attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) != 0 && attr->fd != -1;
  if (!has_file && (attr->oflags & O_CREAT) == 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* x = new (std::nothrow) Xrcd{};
  if (x == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  Context* ctx = to_ctx(context);
  proto::OpenXrcdReq req;
  req.oflags = attr->oflags;
  proto::Handle rep;
  int fd = attr->fd;
  int err =
      ctx->client.call(proto::Op::kOpenXrcd, req, has_file ? &fd : nullptr, has_file ? 1 : 0, &rep);
  if (err != 0) {
    delete x;
    errno = err;
    return nullptr;
  }
  x->handle = rep.handle;
  x->xrcd.context = context;
  ctx->track(ctx->xrcds, rep.handle, &x->xrcd);
  return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
  Context* ctx = to_ctx(xrcd->context);
  Xrcd* x = to_xrcd(xrcd);
  proto::Empty rep;
  int err = ctx->client.call(proto::Op::kCloseXrcd, proto::Handle{x->handle}, nullptr, 0, &rep);
  if (err != 0) return err;
  ctx->untrack(ctx->xrcds, x->handle);
  delete x;
  return 0;
}

}  // namespace wharf::abi
