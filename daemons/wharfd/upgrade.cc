#include "upgrade.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "proto/messages.h"
#include "proto/router_client.h"
#include "router/router.h"

namespace wharf::wharfd {

std::string own_binary() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string();
}

int execute_again(const std::string& binary, char** argv, int listen_fd) {
  if (binary.empty()) return ENOENT;
  const int flags = fcntl(listen_fd, F_GETFD);
  if (flags < 0 || fcntl(listen_fd, F_SETFD, flags & ~FD_CLOEXEC) != 0) return errno;
  setenv(router::Router::kInheritedListenEnv, std::to_string(listen_fd).c_str(), 1);
  spdlog::info("upgrade: executing {}", binary);
  spdlog::default_logger()->flush();
  execv(binary.c_str(), argv);
  const int err = errno;
  unsetenv(router::Router::kInheritedListenEnv);
  fcntl(listen_fd, F_SETFD, flags);
  return err;
}

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

}  // namespace

int request_upgrade(const std::string& socket_path, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  proto::RouterClient old;
  if (int err = old.connect(socket_path.c_str()); err != 0) {
    fprintf(stderr, "wharfd --upgrade: no router at %s: %s\n", socket_path.c_str(), strerror(err));
    return 1;
  }
  ucred peer{};
  socklen_t len = sizeof(peer);
  if (getsockopt(old.fd(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || peer.pid <= 0 ||
      kill(peer.pid, SIGUSR2) != 0) {
    fprintf(stderr, "wharfd --upgrade: cannot signal the router at %s: %s\n", socket_path.c_str(),
            strerror(errno));
    return 1;
  }
  // The old image's connections close as it executes the new one...
  pollfd p{old.fd(), POLLRDHUP, 0};
  if (poll(&p, 1, remaining_ms(deadline)) != 1) {
    fprintf(stderr, "wharfd --upgrade: router %d did not restart within %d ms\n", peer.pid,
            timeout_ms);
    return 1;
  }
  // ...and the new one answers on the socket it took over.
  for (;;) {
    proto::RouterClient fresh;
    proto::RouterInfoRep info;
    fresh.set_reply_timeout_ms(std::max(1, remaining_ms(deadline)));
    if (fresh.connect(socket_path.c_str()) == 0 &&
        fresh.call(proto::Op::kRouterInfo, proto::Empty{}, nullptr, 0, &info) == 0) {
      printf("wharfd --upgrade: router %d at %s runs its new binary\n", peer.pid,
             socket_path.c_str());
      return 0;
    }
    if (remaining_ms(deadline) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  fprintf(stderr, "wharfd --upgrade: no router answered at %s within %d ms\n", socket_path.c_str(),
          timeout_ms);
  return 1;
}

}  // namespace wharf::wharfd
