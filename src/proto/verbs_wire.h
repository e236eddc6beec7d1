// rdma-core's attribute structs <-> their wire form (messages.h), field by field. Shared by our
// libibverbs and librdmacm, which both send QP attributes to the router.
#pragma once

#include <infiniband/verbs.h>

#include "proto/messages.h"

namespace wharf::proto {

AhAttr to_wire(const ibv_ah_attr& a);
ibv_ah_attr from_wire(const AhAttr& w);
QpAttr to_wire(const ibv_qp_attr& a);
// Every field of *a is written (the ones without a wire form are zeroed).
void from_wire(const QpAttr& w, ibv_qp_attr* a);

}  // namespace wharf::proto
