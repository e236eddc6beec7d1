// Memory windows (IBTA 10.6.7): binding a window gives remote access to part of a
// registration under the window's own key and access rights; invalidating it takes that
// away. Binds and local invalidations run in send-queue order (the executors call these for
// BIND_MW and LOCAL_INV work requests); a SEND_WITH_INV invalidates at its responder.
// Router thread only.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "router/objects.h"
#include "shm/layout.h"

namespace wharf::router {

class HostObjects;

// Executes a BIND_MW or LOCAL_INV work request of qp (fields: shm::SendWqe). Returns its
// completion status: IBV_WC_SUCCESS, or IBV_WC_MW_BIND_ERR for a bind (or an invalidation)
// the rules refuse, which moves qp to ERR as any failed work request does.
ibv_wc_status execute_window_op(HostObjects& objects, Qp* qp, const shm::SendWqe& w);

// A SEND_WITH_INV arriving at responder QP dst invalidates the type 2 window `key`, which
// must be its owner's, in its PD and bound to it. False (nothing changed) otherwise.
bool invalidate_remotely(HostObjects& objects, Qp* dst, uint32_t key);

// Takes a window's binding away: its key then names nothing (it stays reserved for the
// window until ibv_dealloc_mw).
void unbind_window(HostObjects& objects, Mw* mw);

}  // namespace wharf::router
