// The transitions the router applies to a QP for its rdma_cm id, kept in the QP's region
// (shm::QpCmSteps) so that the library's restore after a router restart replays them among
// its own ibv_modify_qp calls, in the order the router applied them (issue #23). Without
// them the QP came back in INIT and librdmacm moved it on again through ibv_modify_qp once
// its own link had resumed, and meanwhile the application saw it in INIT and RTR: its
// ibv_post_send failed with EINVAL.
//
// The router writes (single-threaded, its loop); the library reads and empties the log while
// no router process serves the QP. Either side reads what the other could have written as
// untrusted: counts are clamped to the records there are.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/cm_messages.h"
#include "shm/layout.h"

namespace wharf::proto {

// Router: the QP's owner modified it (ModifyQp succeeded); a reset forgets everything.
void note_owner_modification(shm::QpCmSteps* log, bool reset);
// Router: it applied `step` to the QP for a connection step.
void note_cm_step(shm::QpCmSteps* log, const QpStep& step);

// Library: `own` (the QP's ModifyQp requests since its creation or last reset, in order)
// with the logged steps placed where the router applied them; then the log is emptied.
// EOPNOTSUPP if steps were lost (the log was full), ENOMEM; `own` is then left as it was.
int merge_cm_steps(shm::QpCmSteps* log, uint32_t qp_handle, std::vector<ModifyQpReq>* own);

}  // namespace wharf::proto
