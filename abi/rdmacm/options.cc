// rdma_set_option: the options of the kernel's ucma. The router acts on REUSEADDR and AFONLY;
// the library keeps TOS, ACK_TIMEOUT and IB_PATH for its path records and QP attributes.
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>

#include "abi/rdmacm/addr.h"
#include "abi/rdmacm/export.h"
#include "abi/rdmacm/ops.h"
#include "abi/rdmacm/router_link.h"

using namespace wharf;
using namespace wharf::rdmacm;

namespace {

int router_option(Id* id, proto::CmRouterOption option, const void* optval, size_t optlen) {
  if (optval == nullptr || optlen != sizeof(int)) return fail(EINVAL);
  int value;
  std::memcpy(&value, optval, sizeof(value));
  RouterLink* link = RouterLink::get();
  if (link == nullptr) return -1;
  proto::CmSetOptionReq req;
  req.id = id->handle;
  req.option = option;
  req.value = value != 0 ? 1 : 0;
  proto::Empty rep;
  int err = link->call(proto::Op::kCmSetOption, req, &rep);
  return err == 0 ? 0 : fail(err);
}

int id_option(Id* id, int optname, const void* optval, size_t optlen) {
  switch (optname) {
    case RDMA_OPTION_ID_TOS:
      if (optval == nullptr || optlen != sizeof(uint8_t)) return fail(EINVAL);
      std::memcpy(&id->tos, optval, 1);
      if (id->id.route.path_rec != nullptr) id->id.route.path_rec->traffic_class = id->tos;
      return 0;
    case RDMA_OPTION_ID_REUSEADDR: return router_option(id, proto::kCmOptReuseAddr, optval, optlen);
    case RDMA_OPTION_ID_AFONLY: return router_option(id, proto::kCmOptAfOnly, optval, optlen);
    case RDMA_OPTION_ID_ACK_TIMEOUT:
      if (optval == nullptr || optlen != sizeof(uint8_t)) return fail(EINVAL);
      std::memcpy(&id->ack_timeout, optval, 1);
      id->ack_timeout_set = true;
      return 0;
    default: return fail(ENOSYS);
  }
}

int ib_option(Id* id, int optname, const void* optval, size_t optlen) {
  if (optname != RDMA_OPTION_IB_PATH) return fail(ENOSYS);
  if (optval == nullptr || optlen == 0 || optlen % sizeof(ibv_path_data) != 0) {
    return fail(EINVAL);
  }
  return set_path_from_records(id, static_cast<const ibv_path_data*>(optval),
                               optlen / sizeof(ibv_path_data));
}

}  // namespace

WHARF_EXPORT int rdma_set_option(rdma_cm_id* cm_id, int level, int optname, void* optval,
                                 size_t optlen) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    switch (level) {
      case RDMA_OPTION_ID: return id_option(id, optname, optval, optlen);
      case RDMA_OPTION_IB: return ib_option(id, optname, optval, optlen);
      default: return fail(ENOSYS);
    }
  } catch (...) {
    return fail(ENOMEM);
  }
}
