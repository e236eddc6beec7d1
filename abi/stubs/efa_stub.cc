// Stub libefa.so.1: every symbol Debian 12's rdma-core 44 libefa.so.1.2.44.0 exports, with the
// same version nodes (libefa.map), each failing as the real library does for a device that is not
// an EFA one (see stub.h). tests/abi/check_exports.py compares the result with Debian's.
//
// Generated once from `readelf --dyn-syms` of Debian's library and the prototypes of
// <infiniband/efadv.h>; grouped by version node.

#include <infiniband/efadv.h>

#include "stub.h"

// ---- EFA_1.0 ----
WHARF_STUB_PTR(struct ibv_qp*, efadv_create_driver_qp, struct ibv_pd*, struct ibv_qp_init_attr*,
               uint32_t)

// ---- EFA_1.1 ----
WHARF_STUB_PTR(struct ibv_qp*, efadv_create_qp_ex, struct ibv_context*, struct ibv_qp_init_attr_ex*,
               struct efadv_qp_init_attr*, uint32_t)
WHARF_STUB_INT(efadv_query_ah, struct ibv_ah*, struct efadv_ah_attr*, uint32_t)
WHARF_STUB_INT(efadv_query_device, struct ibv_context*, struct efadv_device_attr*, uint32_t)

// ---- EFA_1.2 ----
WHARF_STUB_PTR(struct efadv_cq*, efadv_cq_from_ibv_cq_ex, struct ibv_cq_ex*)
WHARF_STUB_PTR(struct ibv_cq_ex*, efadv_create_cq, struct ibv_context*, struct ibv_cq_init_attr_ex*,
               struct efadv_cq_init_attr*, uint32_t)
