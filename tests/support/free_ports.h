// Consecutive TCP ports on 127.0.0.1 that nothing listens on now, for tests that start
// listeners on given ports. They are taken below the range the kernel hands out to outgoing
// connections (ip_local_port_range): a port from that range can be taken by any connection
// between the choice and the listener's bind (CI saw a test router's express port, the host-
// link port + 1, taken so). Within the range below, a random start keeps tests that run at
// the same time apart.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <vector>

namespace wharf::test_support {

// The first port the kernel may hand out to an outgoing connection.
inline int first_ephemeral_port() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 32768;
  range >> first;
  return first;
}

// Whether ports [port, port + count) can all be bound on 127.0.0.1 now.
inline bool ports_free(int port, int count) {
  std::vector<int> fds;
  bool ok = port > 0 && port + count - 1 <= 65535;
  for (int i = 0; ok && i < count; ++i) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port + i));
    fds.push_back(socket(AF_INET, SOCK_STREAM, 0));
    ok = fds.back() >= 0 && bind(fds.back(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  return ok;
}

// The first of `count` free consecutive ports below the ephemeral range (anywhere, if the
// system leaves nothing below 10000 outside it), or 0 if none were found.
inline int free_ports(int count) {
  constexpr int kLowest = 10000;
  const int highest =
      first_ephemeral_port() > kLowest + count ? first_ephemeral_port() - count : 65536 - count;
  std::mt19937 pick(std::random_device{}());
  std::uniform_int_distribution<int> start(kLowest, highest);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int port = start(pick);
    if (ports_free(port, count)) return port;
  }
  return 0;
}

}  // namespace wharf::test_support
