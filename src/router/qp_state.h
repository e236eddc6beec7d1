// The IBTA queue-pair state machine: which modify_qp transitions are legal and which
// attribute-mask bits each one requires and allows (IBTA vol 1, 11.2.5 "Modify Queue Pair",
// table 91 "QP state transition properties"). Pure functions: the router applies the result.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace wharf::router {

// Returns 0 if moving a QP of `type` from `cur` to `next` with `mask` is legal, else EINVAL.
// `mask` includes IBV_QP_STATE when `next` differs from `cur` or a transition is requested.
// Arguments are plain integers because they come from the wire: any value is rejected
// cleanly, before it is ever turned into an enum.
int check_qp_transition(uint32_t type, uint32_t cur, uint32_t next, uint32_t mask);

}  // namespace wharf::router
