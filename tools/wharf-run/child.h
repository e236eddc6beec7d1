// Starting CMD inside the container's network namespace and supervising it.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace wharf::run {

// Environment for CMD: this process's environment plus WHARF_ROUTER, WHARF_CONTAINER and the
// library injection (LD_PRELOAD=<lib_dir>/libibverbs.so.1, or LD_LIBRARY_PATH=<lib_dir> for
// drop-in), each prepended to any existing value. Paths must be absolute.
std::vector<std::string> container_environment(const std::string& router_path,
                                               const std::string& name, const std::string& lib_dir,
                                               bool dropin);

// The signals wharf-run forwards to CMD, plus SIGCHLD. main() blocks them all before doing
// anything else and receives them through a signalfd.
sigset_t supervised_signals();

// Forks; the child restores `child_mask`, arranges to die with wharf-run, joins netns_fd and
// execs argv[0] (PATH lookup) with `env`. If anything fails the child prints why and exits 127.
// Returns the child's pid, or -1 after printing an error.
pid_t spawn_in_netns(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     int netns_fd, const sigset_t& child_mask);

// Waits for `child`, forwarding SIGINT/SIGTERM/SIGHUP read from `signal_fd` (see
// supervised_signals()). Warns once if `router_fd` hangs up. Returns the exit status for
// wharf-run: the child's, or 128 + signal number if a signal killed it.
int supervise(pid_t child, int signal_fd, int router_fd);

}  // namespace wharf::run
