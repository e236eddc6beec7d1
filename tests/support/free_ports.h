// Consecutive TCP ports on 127.0.0.1 that nothing listens on now, found by letting the kernel
// pick the first: tests that start listeners on fixed ports would collide with each other and
// with ephemeral ports in use.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace wharf::test_support {

// The first of `count` free consecutive ports, or 0 if none were found.
inline int free_ports(int count) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::vector<int> fds;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = 0;
    fds.push_back(socket(AF_INET, SOCK_STREAM, 0));
    if (bind(fds[0], reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        getsockname(fds[0], reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
      for (int i = 1; i < count && port != 0; ++i) {
        fds.push_back(socket(AF_INET, SOCK_STREAM, 0));
        a.sin_port = htons(static_cast<uint16_t>(port + i));
        if (port + i > 65535 || bind(fds.back(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
          port = 0;
      }
    }
    for (int fd : fds) close(fd);
    if (port != 0) return port;
  }
  return 0;
}

}  // namespace wharf::test_support
