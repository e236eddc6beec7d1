// UD multicast as the library and the router both see it (IBTA 10.5): group addresses,
// the QPN multicast is sent to, how rdma_cm maps an IP group to an MGID and an MLID, and the
// device's limits. Header-only.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/fnv.h"
#include "proto/messages.h"

namespace wharf::proto {

constexpr uint32_t kMulticastQpn = 0xffffff;    // a UD send to a group names this QPN
constexpr uint16_t kMulticastLidBase = 0xc000;  // IB multicast LIDs: 0xc000-0xfffe
constexpr uint16_t kPermissiveLid = 0xffff;
constexpr uint32_t kRdmaUdpQkey = 0x01234567;  // rdma_cm's Q_Key for RDMA_PS_UDP (RDMA_UDP_QKEY)
constexpr uint32_t kMaxMcastAttachments = 1u << 12;  // QP-to-group attachments on a router
constexpr uint32_t kMaxMcastQpAttach = 64;           // groups one QP may join

// An IPv6 multicast address (ff00::/8), or an IPv4-mapped one of 224.0.0.0/4 (RoCE's form of
// an IPv4 group), as the kernel's rdma_is_multicast_addr.
inline bool is_multicast_gid(const Gid& gid) {
  static constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(gid.data(), kV4Mapped, sizeof(kV4Mapped)) == 0) return (gid[12] >> 4) == 0xe;
  return gid[0] == 0xff;
}
inline bool is_multicast_lid(uint16_t lid) {
  return lid >= kMulticastLidBase && lid != kPermissiveLid;
}

// The group's LID: a function of its MGID, so that every router gives one group the same
// LID without asking anyone (FNV-1a folded into 0xc000-0xfffe).
inline uint16_t mlid_of(const Gid& mgid) {
  return static_cast<uint16_t>(kMulticastLidBase +
                               fnv1a32(mgid) % (kPermissiveLid - kMulticastLidBase));
}

// The MGID rdma_cm joins for IPv4 group `ip` (network order bytes), as the kernel's
// cma_set_mgid / cma_iboe_set_mgid: on InfiniBand the IPoIB mapping (RFC 4391, scope 2, P_Key
// 0xffff) with rdma_cm's signature byte for RDMA_PS_UDP; on Ethernet the IPv4-mapped address.
inline Gid mgid_of_ipv4(const uint8_t ip[4], bool ethernet, bool udp_port_space) {
  Gid g{};
  if (ethernet) {
    g[10] = g[11] = 0xff;
    std::memcpy(g.data() + 12, ip, 4);
    return g;
  }
  const uint8_t head[6] = {0xff, 0x12, 0x40, static_cast<uint8_t>(udp_port_space ? 0x01 : 0x1b),
                           0xff, 0xff};
  std::memcpy(g.data(), head, sizeof(head));
  g[12] = ip[0] & 0x0f;
  g[13] = ip[1];
  g[14] = ip[2];
  g[15] = ip[3];
  return g;
}

}  // namespace wharf::proto
