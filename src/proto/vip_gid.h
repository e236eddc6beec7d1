// GIDs that carry a container's virtual IPv4 address: GID[0] = ::ffff:<vIP>, the IPv4-mapped
// form RoCE v2 uses for IPv4 (issue #1, "Addressing").
#pragma once

#include <cstdint>

#include "proto/messages.h"

namespace wharf::proto {

inline Gid gid_for_vip(uint32_t vip) {  // vip in host order
  Gid g{};
  g[10] = g[11] = 0xff;
  for (int i = 0; i < 4; ++i) g[12 + i] = static_cast<uint8_t>(vip >> (24 - 8 * i));
  return g;
}

// The vIP (host order) in an IPv4-mapped GID; false for any other GID.
inline bool vip_of_gid(const Gid& g, uint32_t* vip) {
  for (int i = 0; i < 10; ++i)
    if (g[i] != 0) return false;
  if (g[10] != 0xff || g[11] != 0xff) return false;
  *vip = uint32_t{g[12]} << 24 | uint32_t{g[13]} << 16 | uint32_t{g[14]} << 8 | g[15];
  return true;
}

}  // namespace wharf::proto
