// Runs helper programs (iproute2's `ip`) synchronously and reports their failures.
#pragma once

#include <string>
#include <vector>

namespace wharf::run {

struct CommandResult {
  int status = -1;     // exit status; -1 when the program could not be started or was killed
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] (a path or a name looked up in PATH, then in /usr/sbin and /sbin) with stdin
// from /dev/null, with the default signal mask, and waits for it.
CommandResult run_command(const std::vector<std::string>& argv);

// Runs `ip ARGS...`. On failure prints "wharf-run: ip ARGS: <ip's message>" unless `quiet`.
// Prints the command line first when `verbose`. Returns true on exit status 0.
[[nodiscard]] bool run_ip(const std::vector<std::string>& args, bool verbose, bool quiet = false);

}  // namespace wharf::run
