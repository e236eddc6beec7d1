// Resuming a context's session with a new router process, after the one it had died or was
// replaced (issue #23). The library is the record of what the session holds: it keeps every
// region, memfd and socket end it shares with the router, and the requests that made and
// moved its objects; the new router checks each restored object as a new one, and its
// host-wide number (QPN, MR key) against the proof the old router gave (router/resume_key.h).
// Rings, CQ entries and mapped memory stay where they are: the application's threads go on
// posting and polling meanwhile, and the new router goes on from the rings' indices.
#pragma once

#include "proto/router_client.h"

namespace wharf::abi {

struct Context;

// Connects `fresh` to the router's socket again (retrying for WHARF_RESUME_S seconds, 30 by
// default, while the new router starts), says Hello with what the session had and restores
// its objects, dependencies first. 0 or an errno; EOPNOTSUPP when the session holds objects
// a resumed session cannot restore yet (docs/OPERATIONS.md lists them), ECANCELED when the
// context began to close meanwhile.
int resume_session(Context* ctx, proto::RouterClient* fresh);

}  // namespace wharf::abi
