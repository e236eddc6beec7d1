// A client process's capabilities, for the verbs the kernel reserves to privileged processes
// (a RAW_PACKET QP needs CAP_NET_RAW).
#pragma once

#include <sys/types.h>

namespace wharf::router {

// Whether process `pid` (as this router's PID namespace numbers it) has capability `cap`
// (CAP_*, linux/capability.h) in its effective set, from /proc/PID/status. False when that
// cannot be read or parsed: the process is gone, or another namespace hides it.
bool process_has_capability(pid_t pid, int cap);

// The CapEff line's value in the text of a /proc/PID/status file; false if it has none.
bool parse_effective_caps(const char* status, unsigned long long* caps);

}  // namespace wharf::router
