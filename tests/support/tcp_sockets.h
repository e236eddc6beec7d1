// The TCP sockets of this process that are connected through a given local or remote port,
// so that a test can check options its code under test set on them (TCP_NODELAY).
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <filesystem>
#include <string>
#include <vector>

namespace wharf::test_support {

enum class PortSide { kLocal, kRemote };

// The descriptors of connected IPv4 TCP sockets whose local (or remote) port is `port`.
inline std::vector<int> connected_sockets(int port, PortSide side) {
  std::vector<int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    sockaddr_in local{}, peer{};
    socklen_t len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
        local.sin_family != AF_INET)
      continue;
    len = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;  // listener
    const sockaddr_in& which = side == PortSide::kLocal ? local : peer;
    if (ntohs(which.sin_port) == port) out.push_back(fd);
  }
  return out;
}

inline bool has_nodelay(int fd) {
  int on = 0;
  socklen_t len = sizeof(on);
  return getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0 && on != 0;
}

}  // namespace wharf::test_support
