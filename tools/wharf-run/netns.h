// Named network namespaces (iproute2's /run/netns/<name> bind mounts) and their processes.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace wharf::run {

// True when the bind-mount file /run/netns/<netns> exists.
bool netns_file_exists(const std::string& path);

// Processes (other than this one) whose network namespace is the one mounted at `path`.
// Empty when the file does not exist or is not a namespace.
std::vector<pid_t> netns_pids(const std::string& path);

// Sends SIGTERM to every process in the namespace, waits up to grace_ms for them to go,
// then SIGKILLs what is left. Returns how many processes were signalled.
size_t terminate_netns_pids(const std::string& path, int grace_ms);

// True when a network interface with this name exists in the calling thread's namespace.
bool link_exists(const std::string& ifname);

// Where the process `pid` (the router) lives: "" when it shares our network namespace, else
// the name under /run/netns of its namespace (a wharf-lab host). False, with *error set,
// when its namespace cannot be read or has no name there.
bool named_netns_of(pid_t pid, std::string* name, std::string* error);

}  // namespace wharf::run
