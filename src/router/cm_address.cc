// CmAddress: the IPv4/IPv6 addresses of rdma_cm ids, compared as the kernel's cma does.
#include <rdma/rdma_cma.h>

#include <cstring>

#include "proto/cm_addr_kind.h"
#include "router/cm_objects.h"

namespace wharf::router {

std::optional<uint32_t> CmAddress::v4() const { return proto::cm_addr_v4(to_wire()); }
bool CmAddress::is_any() const { return proto::cm_addr_is_any(to_wire()); }
bool CmAddress::is_loopback() const { return proto::cm_addr_is_loopback(to_wire()); }

bool CmAddress::same_ip(const CmAddress& o) const {
  auto a = v4(), b = o.v4();
  if (a || b) return a == b;
  return ip == o.ip;
}

std::optional<CmAddress> CmAddress::from_wire(const proto::CmAddr& a) {
  if (a.family != proto::kCmAf4 && a.family != proto::kCmAf6) return std::nullopt;
  CmAddress r;
  r.family = a.family;
  r.port = a.port;
  r.ip = a.addr;
  if (r.family == proto::kCmAf4) std::fill(r.ip.begin() + 4, r.ip.end(), 0);
  return r;
}

proto::CmAddr CmAddress::to_wire() const { return proto::CmAddr{family, port, ip}; }

CmAddress CmAddress::ipv4(uint32_t host_order, uint16_t port) {
  CmAddress r;
  r.family = proto::kCmAf4;
  r.port = port;
  for (int i = 0; i < 4; ++i) r.ip[i] = static_cast<uint8_t>(host_order >> (24 - 8 * i));
  return r;
}

const char* cm_state_name(CmState s) {
  switch (s) {
    case CmState::kIdle: return "IDLE";
    case CmState::kBound: return "ADDR_BOUND";
    case CmState::kResolving: return "ADDR_QUERY";
    case CmState::kAddrResolved: return "ADDR_RESOLVED";
    case CmState::kRouteResolved: return "ROUTE_RESOLVED";
    case CmState::kListening: return "LISTEN";
    case CmState::kConnecting: return "CONNECT";
    case CmState::kRequested: return "CONNECT_REQUEST";
    case CmState::kAccepted: return "ACCEPTED";
    case CmState::kResponded: return "CONNECT_RESPONSE";
    case CmState::kEstablished: return "ESTABLISHED";
    case CmState::kClosed: return "DISCONNECT";
  }
  return "?";
}

}  // namespace wharf::router
