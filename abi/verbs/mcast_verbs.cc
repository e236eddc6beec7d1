// UD multicast: ibv_attach_mcast / ibv_detach_mcast. The router keeps the groups and delivers
// datagrams sent to them (router/multicast.cc); it checks the QP type, the group's GID and LID.
#include <errno.h>
#include <infiniband/verbs.h>

#include <cstring>

#include "abi/verbs/export.h"
#include "abi/verbs/provider.h"

using namespace wharf;
using namespace wharf::abi;

namespace {

int change_membership(ibv_qp* qp, const ibv_gid* gid, uint16_t lid, proto::Op op) {
  if (qp == nullptr || gid == nullptr) return EINVAL;
  proto::McastReq req;
  req.qp = to_qp(qp)->handle;
  std::memcpy(req.gid.data(), gid->raw, req.gid.size());
  req.lid = lid;
  proto::Empty rep;
  return to_ctx(qp->context)->client.call(op, req, nullptr, 0, &rep);
}

}  // namespace

WHARF_EXPORT int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  return change_membership(qp, gid, lid, proto::Op::kAttachMcast);
}

WHARF_EXPORT int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  return change_membership(qp, gid, lid, proto::Op::kDetachMcast);
}
