// Starting CMD inside the container's network namespace and supervising it.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "container/sysfs_tree.h"

namespace wharf::run {

class Registration;

// The signals wharf-run forwards to CMD, plus SIGCHLD. main() blocks them all before doing
// anything else and receives them through a signalfd.
sigset_t supervised_signals();

// What the container's first process is given besides its environment.
struct ContainerSetup {
  int netns_fd = -1;
  std::string hostname;  // in a UTS namespace of its own: the container's name
  const std::vector<container::SysfsEntry>* class_tree = nullptr;  // the device view's
};

// Forks; the child restores `child_mask`, arranges to die with wharf-run, joins netns_fd,
// takes its own UTS namespace (hostname) and mount namespace (the device view,
// container/device_view.h) and execs argv[0] (PATH lookup) with `env`. If anything fails the
// child prints why and exits 127. Returns the child's pid, or -1 after printing an error.
pid_t spawn_in_container(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const ContainerSetup& setup, const sigset_t& child_mask);

// Waits for `child`, forwarding SIGINT/SIGTERM/SIGHUP read from `signal_fd` (see
// supervised_signals()), and keeps `registration` up meanwhile (it re-registers the container
// when the router comes back after going away). Returns the exit status for wharf-run: the
// child's, or 128 + signal number if a signal killed it.
int supervise(pid_t child, int signal_fd, Registration* registration);

}  // namespace wharf::run
