// Upgrades in place (issue #23): `wharfd --upgrade` asks the running router (SIGUSR2), which
// executes its binary again as the same process, handing the new image its listening socket;
// the libraries resume their sessions with it as after a crash, with nothing torn down first.
// Keeping the process (rather than starting another) keeps systemd's main PID.
#pragma once

#include <string>

namespace wharf::wharfd {

// The file this process runs from, read at start: executed again on an upgrade, so that a
// binary replaced there since is the one that runs.
std::string own_binary();

// Executes `binary` with argv, its environment naming listen_fd as the socket to adopt
// (router::Router::kInheritedListenEnv). Returns only on failure, with the errno, everything
// as it was.
int execute_again(const std::string& binary, char** argv, int listen_fd);

// `wharfd --upgrade`: signals the router serving `socket_path` and waits (at most
// timeout_ms) until its new image answers there. Prints what happened; returns the exit
// status (0 upgraded, 1 otherwise).
int request_upgrade(const std::string& socket_path, int timeout_ms);

}  // namespace wharf::wharfd
