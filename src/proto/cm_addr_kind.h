// What kind of address an rdma_cm address is, as the kernel's cma tells them apart: IPv4 (or
// IPv4-mapped IPv6), the wildcard, loopback. Shared by the router's connection manager and
// our librdmacm, so both sides classify an address the same way.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>

#include "proto/cm_messages.h"

namespace wharf::proto {

// The IPv4 address (host order) of an IPv4 or IPv4-mapped IPv6 address.
inline std::optional<uint32_t> cm_addr_v4(const CmAddr& a) {
  static constexpr std::array<uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0,    0,
                                                              0, 0, 0, 0, 0xff, 0xff};
  auto be32 = [](const uint8_t* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  };
  if (a.family == kCmAf4) return be32(a.addr.data());
  if (a.family == kCmAf6 && std::memcmp(a.addr.data(), kV4MappedPrefix.data(), 12) == 0)
    return be32(a.addr.data() + 12);
  return std::nullopt;
}

// 0.0.0.0 or ::
inline bool cm_addr_is_any(const CmAddr& a) {
  if (a.family == kCmAf4) return cm_addr_v4(a) == 0u;
  for (uint8_t b : a.addr)
    if (b != 0) return false;
  return true;
}

// 127/8, ::1 or ::ffff:127/104
inline bool cm_addr_is_loopback(const CmAddr& a) {
  if (auto v4 = cm_addr_v4(a)) return (*v4 >> 24) == 127;
  static constexpr std::array<uint8_t, 16> kLoopback6 = {0, 0, 0, 0, 0, 0, 0, 0,
                                                         0, 0, 0, 0, 0, 0, 0, 1};
  return a.addr == kLoopback6;
}

}  // namespace wharf::proto
