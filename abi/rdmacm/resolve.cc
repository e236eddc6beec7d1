// Addresses of ids: rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, rdma_listen and the
// port getters.
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include <cerrno>

#include "abi/rdmacm/addr.h"
#include "abi/rdmacm/export.h"
#include "abi/rdmacm/ops.h"
#include "abi/rdmacm/router_link.h"
#include "proto/cm_addr_kind.h"

using namespace wharf;
using namespace wharf::rdmacm;

namespace {

// As rdma-core's ucma_get_port: network order, 0 for other families.
__be16 port_of(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(&ss)->sin_port;
  if (ss.ss_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port;
  return 0;
}

}  // namespace

WHARF_EXPORT int rdma_bind_addr(rdma_cm_id* cm_id, sockaddr* addr) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    proto::CmBindReq req;
    req.id = id->handle;
    if (int err = to_cm_addr(addr, &req.addr); err != 0) return fail(err);
    RouterLink* link = RouterLink::get();
    if (link == nullptr) return -1;
    proto::CmAddrRep rep;
    if (int err = link->call(proto::Op::kCmBind, req, &rep); err != 0) return fail(err);
    set_src(id, rep.addr);
    // As the kernel's cma (cma_any_addr): an id bound to the wildcard or to a loopback address
    // belongs to no device yet (verbs stays NULL; libfabric and others look for one to tell
    // an address of a device from such a bind); a resolve, or a connection to a listener,
    // gives it one.
    if (proto::cm_addr_is_any(rep.addr) || proto::cm_addr_is_loopback(rep.addr)) return 0;
    return attach_device(id);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_resolve_addr(rdma_cm_id* cm_id, sockaddr* src_addr, sockaddr* dst_addr,
                                   int timeout_ms) {
  try {
    if (cm_id == nullptr || dst_addr == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    proto::CmResolveAddrReq req;
    req.id = id->handle;
    req.timeout_ms = timeout_ms > 0 ? static_cast<uint32_t>(timeout_ms) : 0;
    if (src_addr != nullptr && src_addr->sa_family != AF_UNSPEC) {
      if (int err = to_cm_addr(src_addr, &req.src); err != 0) return fail(err);
    }
    if (int err = to_cm_addr(dst_addr, &req.dst); err != 0) return fail(err);
    RouterLink* link = RouterLink::get();
    if (link == nullptr) return -1;
    proto::CmAddrRep rep;
    if (int err = link->call(proto::Op::kCmResolveAddr, req, &rep); err != 0) return fail(err);
    set_src(id, rep.addr);
    set_dst(id, req.dst, proto::Gid{});
    return complete(id);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_resolve_route(rdma_cm_id* cm_id, int /*timeout_ms*/) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    RouterLink* link = RouterLink::get();
    if (link == nullptr) return -1;
    proto::Empty rep;
    int err = link->call(proto::Op::kCmResolveRoute, proto::Handle{id->handle}, &rep);
    if (err != 0) return fail(err);
    return complete(id);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_listen(rdma_cm_id* cm_id, int backlog) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    RouterLink* link = RouterLink::get();
    if (link == nullptr) return -1;
    proto::CmListenReq req;
    req.id = id->handle;
    req.backlog = backlog > 0 ? static_cast<uint32_t>(backlog) : 0;
    proto::Empty rep;
    if (int err = link->call(proto::Op::kCmListen, req, &rep); err != 0) return fail(err);
    return 0;
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT __be16 rdma_get_src_port(rdma_cm_id* id) {
  return id != nullptr ? port_of(id->route.addr.src_storage) : 0;
}

WHARF_EXPORT __be16 rdma_get_dst_port(rdma_cm_id* id) {
  return id != nullptr ? port_of(id->route.addr.dst_storage) : 0;
}
