// wharf-cni: a CNI 1.0 plugin that makes a pod a Wharf container. Chained after an IP
// plugin, it registers the pod's network namespace with the host's router, its IP as the
// pod's virtual IP; a process in the pod that loads Wharf's libibverbs with WHARF_ROUTER set
// is then that pod. Runtimes run it with CNI_* variables and the configuration on stdin; it
// prints the result or a CNI error on stdout and logs on stderr. See README.md beside this file.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "netconf.h"
#include "proto/router_client.h"

namespace {

using namespace wharf::cni;

constexpr size_t kMaxConfig = 1 << 20;  // a configuration with a prevResult is a few KiB

// All of stdin, or false when it is longer than kMaxConfig or cannot be read.
bool read_stdin(std::string* out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof(buf));
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > kMaxConfig) return false;
  }
}

int report(const std::string& version, const Error& e) {
  std::printf("%s\n", error_json(version, e).c_str());
  std::fprintf(stderr, "wharf-cni: %s%s%s\n", e.msg.c_str(), e.details.empty() ? "" : ": ",
               e.details.c_str());
  return 1;
}

int run() {
  Error err;
  const auto inv =
      read_invocation([](const char* n) -> const char* { return std::getenv(n); }, &err);
  if (!inv) return report("", err);
  std::string text;
  if (!read_stdin(&text))
    return report("", {ErrorCode::kIoFailure,
                       "cannot read the configuration on stdin (at most "
                       "1 MiB)",
                       ""});
  if (inv->command == Command::kVersion) {
    std::printf("%s\n", version_json(read_version_request(text)).c_str());
    return 0;
  }
  const auto conf = read_netconf(text, *inv, wharf::proto::router_socket_path(), &err);
  if (!conf) return report("", err);
  Outcome done;
  switch (inv->command) {
    case Command::kAdd: done = add(*inv, *conf); break;
    case Command::kDel: done = del(*inv, *conf); break;
    case Command::kCheck: done = check(*inv, *conf); break;
    case Command::kVersion: break;
  }
  if (!done.ok) return report(conf->cni_version, done.err);
  if (!done.out.empty()) std::printf("%s\n", done.out.c_str());
  return 0;
}

}  // namespace

int main() {
  // Errors must reach the runtime as CNI errors, even a bad answer from the orchestrator that
  // the JSON library throws at, or memory running out.
  try {
    return run();
  } catch (const std::exception& e) {
    return report("",
                  {ErrorCode::kTryAgainLater, std::string("wharf-cni failed: ") + e.what(), ""});
  }
}
