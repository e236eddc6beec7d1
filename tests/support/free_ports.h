// Two consecutive TCP ports on 127.0.0.1 that nothing listens on now, found by letting the
// kernel pick the first: tests that start listeners on fixed ports would collide with each
// other and with ephemeral ports in use.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace wharf::test_support {

// The first of the two ports, or 0 if no pair was found.
inline int free_port_pair() {
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fds[2] = {socket(AF_INET, SOCK_STREAM, 0), socket(AF_INET, SOCK_STREAM, 0)};
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = 0;
    if (bind(fds[0], reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        getsockname(fds[0], reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
      a.sin_port = htons(static_cast<uint16_t>(port + 1));
      if (port >= 65535 || bind(fds[1], reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) port = 0;
    }
    close(fds[0]);
    close(fds[1]);
    if (port != 0) return port;
  }
  return 0;
}

}  // namespace wharf::test_support
