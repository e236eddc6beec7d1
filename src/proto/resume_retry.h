// Reconnecting a library's router connection to a router that is starting again (issue #23):
// the retry loop a verbs context and librdmacm share.
#pragma once

#include <functional>

#include "proto/router_client.h"

namespace wharf::proto {

// Connects `fresh` to the router at `path` and runs `greet` on it (what tells the new router
// who this connection was), again and again while the new router starts (5 ms apart, doubling
// to 50 ms, for WHARF_RESUME_S seconds, 30 by default), then `restore` once, each request
// answered within 5 s (a dead router's backlog accepts and never answers). 0 or the errno of
// the last try; EOPNOTSUPP and EPROTO from `greet` end the tries at once (a router that cannot
// resume will not learn to), and so does `cancelled()` (ECANCELED).
int resume_with_retries(RouterClient* fresh, const char* path, const std::function<int()>& greet,
                        const std::function<int()>& restore,
                        const std::function<bool()>& cancelled);

}  // namespace wharf::proto
