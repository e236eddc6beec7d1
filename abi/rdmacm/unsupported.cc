// What our librdmacm does not implement: ECE. Each entry fails the way its caller checks for:
// -1 with errno EOPNOTSUPP.
#include <rdma/rdma_cma.h>

#include <cerrno>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/id.h"

using wharf::rdmacm::fail;

namespace {

int unsupported() { return fail(EOPNOTSUPP); }

}  // namespace

// ---- ECE ----
WHARF_EXPORT int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) { return unsupported(); }
WHARF_EXPORT int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) { return unsupported(); }
WHARF_EXPORT int rdma_reject_ece(rdma_cm_id*, const void*, uint8_t) { return unsupported(); }
