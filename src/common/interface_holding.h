// The network interface that holds an IPv4 address: how a container's address (its GID's)
// maps to its netdev, for the sysfs view and for the MTU rdma_cm derives its path MTU from.
#pragma once

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace wharf {

// The name of the interface of this network namespace whose address is `ip` (host order), or
// "" when none is (or the interfaces cannot be listed).
inline std::string interface_holding(uint32_t ip) {
  ifaddrs* all = nullptr;
  if (ip == 0 || ::getifaddrs(&all) != 0) return {};
  std::string name;
  for (const ifaddrs* a = all; a != nullptr && name.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    sockaddr_in sin{};
    std::memcpy(&sin, a->ifa_addr, sizeof(sin));
    if (ntohl(sin.sin_addr.s_addr) == ip) name = a->ifa_name;
  }
  ::freeifaddrs(all);
  return name;
}

}  // namespace wharf
