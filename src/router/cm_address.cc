// CmAddress: the IPv4/IPv6 addresses of rdma_cm ids, compared as the kernel's cma does.
#include <rdma/rdma_cma.h>

#include <cstring>

#include "router/cm_objects.h"

namespace wharf::router {
namespace {

constexpr std::array<uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

std::optional<uint32_t> CmAddress::v4() const {
  if (family == proto::kCmAf4) return load_be32(ip.data());
  if (family == proto::kCmAf6 && std::memcmp(ip.data(), kV4MappedPrefix.data(), 12) == 0)
    return load_be32(ip.data() + 12);
  return std::nullopt;
}

bool CmAddress::is_any() const {
  if (family == proto::kCmAf4) return v4() == 0u;
  for (uint8_t b : ip)
    if (b != 0) return false;
  return true;
}

bool CmAddress::is_loopback() const {
  if (auto a = v4()) return (*a >> 24) == 127;
  static constexpr std::array<uint8_t, 16> kLoopback6 = {0, 0, 0, 0, 0, 0, 0, 0,
                                                         0, 0, 0, 0, 0, 0, 0, 1};
  return ip == kLoopback6;
}

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
