// rdma_cm multicast (rdma_join_multicast(_ex), rdma_leave_multicast). The router maps the
// group's address to its MGID and MLID and reports them in MULTICAST_JOIN (router/
// cm_manager.h); on that event the id's QP is attached to the group (events.cc), as
// rdma-core's ucma_process_join does; leaving detaches it.
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "abi/rdmacm/addr.h"
#include "abi/rdmacm/export.h"
#include "abi/rdmacm/id.h"
#include "abi/rdmacm/ops.h"
#include "abi/rdmacm/router_link.h"

using namespace wharf;
using namespace wharf::rdmacm;

namespace {

bool same_addr(const proto::CmAddr& a, const proto::CmAddr& b) {
  return a.family == b.family && a.addr == b.addr;
}

int join(rdma_cm_id* cm_id, const sockaddr* addr, bool send_only, void* context) {
  if (cm_id == nullptr || addr == nullptr) return fail(EINVAL);
  Id* id = to_id(cm_id);
  if (id->id.verbs == nullptr) return fail(ENODEV);  // as the kernel: bound to a device first
  proto::CmBindReq req;
  req.id = id->handle;
  if (int err = to_cm_addr(addr, &req.addr); err != 0) return fail(err);
  if (std::any_of(id->groups.begin(), id->groups.end(),
                  [&](const Id::Group& g) { return same_addr(g.addr, req.addr); }))
    return fail(EADDRINUSE);
  id->groups.push_back(Id::Group{req.addr, context, send_only});
  RouterLink* link = RouterLink::get();
  proto::Empty rep;
  const int err = link == nullptr ? ENODEV : link->call(proto::Op::kCmJoinMulticast, req, &rep);
  if (err != 0) {
    id->groups.pop_back();
    return fail(err);
  }
  return complete(id);
}

}  // namespace

namespace wharf::rdmacm {

int on_multicast_join(Id* id, const proto::CmEventMsg& m, void** context) {
  for (Id::Group& g : id->groups) {
    if (g.joined || !same_addr(g.addr, m.dst)) continue;
    g.joined = true;
    g.mgid = m.remote_gid;
    g.mlid = m.remote_lid;
    *context = g.context;
    if (id->id.qp == nullptr || g.send_only) return 0;
    ibv_gid gid;
    std::memcpy(gid.raw, g.mgid.data(), sizeof(gid.raw));
    return ibv_attach_mcast(id->id.qp, &gid, g.mlid);
  }
  return 0;
}

}  // namespace wharf::rdmacm

WHARF_EXPORT int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  try {
    return join(id, addr, false, context);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr,
                                        void* context) {
  try {
    if (attr == nullptr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
        (attr->comp_mask & ~(RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)))
      return fail(EINVAL);
    uint16_t flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
    if (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) flags = attr->join_flags;
    if (flags != RDMA_MC_JOIN_FLAG_FULLMEMBER && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
      return fail(EINVAL);
    return join(id, attr->addr, flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, context);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_leave_multicast(rdma_cm_id* cm_id, sockaddr* addr) {
  try {
    if (cm_id == nullptr || addr == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    proto::CmAddr a;
    if (int err = to_cm_addr(addr, &a); err != 0) return fail(err);
    auto it = std::find_if(id->groups.begin(), id->groups.end(),
                           [&](const Id::Group& g) { return same_addr(g.addr, a); });
    if (it == id->groups.end()) return fail(EADDRNOTAVAIL);
    if (it->joined && !it->send_only && id->id.qp != nullptr) {
      ibv_gid gid;
      std::memcpy(gid.raw, it->mgid.data(), sizeof(gid.raw));
      (void)ibv_detach_mcast(id->id.qp, &gid, it->mlid);
    }
    id->groups.erase(it);
    return 0;
  } catch (...) {
    return fail(ENOMEM);
  }
}
