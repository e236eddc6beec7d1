#include "abi/rdmacm/addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>

#include "abi/rdmacm/router_link.h"

namespace wharf::rdmacm {
namespace {

constexpr uint16_t kDefaultPkey = 0xffff;
constexpr uint8_t kRoceHopLimit = 64;
// IB SA encodings: 10 Gb/s; the packet life times a default fabric gives: the kernel's cma
// for RoCE (CMA_IBOE_PACKET_LIFETIME), an OpenSM subnet manager's default for InfiniBand.
// The local ACK timeout of a connected QP is the packet life time + 1, as ib_cm computes it
// (about 0.5 s on RoCE, 2 s on InfiniBand).
constexpr uint8_t kPathRate = 3;
constexpr uint8_t kRocePacketLifeTime = 16;
constexpr uint8_t kIbPacketLifeTime = 18;

}  // namespace

int to_cm_addr(const sockaddr* sa, proto::CmAddr* out) {
  if (sa == nullptr) return EINVAL;
  *out = proto::CmAddr{};
  if (sa->sa_family == AF_INET) {
    sockaddr_in sin;
    std::memcpy(&sin, sa, sizeof(sin));
    out->family = proto::kCmAf4;
    out->port = ntohs(sin.sin_port);
    std::memcpy(out->addr.data(), &sin.sin_addr, 4);
    return 0;
  }
  if (sa->sa_family == AF_INET6) {
    sockaddr_in6 sin6;
    std::memcpy(&sin6, sa, sizeof(sin6));
    out->family = proto::kCmAf6;
    out->port = ntohs(sin6.sin6_port);
    std::memcpy(out->addr.data(), &sin6.sin6_addr, 16);
    return 0;
  }
  return EAFNOSUPPORT;
}

void to_sockaddr(const proto::CmAddr& a, sockaddr_storage* ss) {
  std::memset(ss, 0, sizeof(*ss));
  if (a.family == proto::kCmAf4) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(a.port);
    std::memcpy(&sin.sin_addr, a.addr.data(), 4);
    std::memcpy(ss, &sin, sizeof(sin));
  } else if (a.family == proto::kCmAf6) {
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(a.port);
    std::memcpy(&sin6.sin6_addr, a.addr.data(), 16);
    std::memcpy(ss, &sin6, sizeof(sin6));
  }
}

void set_src(Id* id, const proto::CmAddr& a) {
  to_sockaddr(a, &id->id.route.addr.src_storage);
  rdma_ib_addr& ib = id->id.route.addr.addr.ibaddr;
  if (RouterLink* link = RouterLink::get()) {
    std::memcpy(ib.sgid.raw, link->info().gid.data(), sizeof(ib.sgid.raw));
  }
  ib.pkey = htons(kDefaultPkey);
}

void set_dst(Id* id, const proto::CmAddr& a, const proto::Gid& remote_gid) {
  to_sockaddr(a, &id->id.route.addr.dst_storage);
  std::memcpy(id->id.route.addr.addr.ibaddr.dgid.raw, remote_gid.data(), remote_gid.size());
}

int attach_device(Id* id) {
  RouterLink* link = RouterLink::get();
  if (link == nullptr) return -1;
  ibv_context* ctx = link->device();
  if (ctx == nullptr) return -1;
  id->id.verbs = ctx;
  id->id.port_num = 1;
  if (id->id.pd == nullptr) {
    id->id.pd = link->pd();
    if (id->id.pd == nullptr) return -1;
  }
  return 0;
}

namespace {

int store_path(Id* id, const ibv_sa_path_rec& path) {
  auto* rec = static_cast<ibv_sa_path_rec*>(std::calloc(1, sizeof(ibv_sa_path_rec)));
  if (rec == nullptr) return fail(ENOMEM);
  *rec = path;
  std::free(id->id.route.path_rec);
  id->id.route.path_rec = rec;
  id->id.route.num_paths = 1;
  return 0;
}

}  // namespace

int set_path(Id* id) {
  RouterLink* link = RouterLink::get();
  if (link == nullptr) return -1;
  if (link->device() == nullptr) return -1;
  const rdma_ib_addr& ib = id->id.route.addr.addr.ibaddr;
  ibv_sa_path_rec p{};
  p.sgid = ib.sgid;
  p.dgid = ib.dgid;
  p.slid = htons(link->info().lid);
  p.dlid = htons(id->remote_lid);
  p.pkey = htons(kDefaultPkey);
  p.reversible = 1;
  p.numb_path = 1;
  p.mtu_selector = 2;  // exactly
  p.mtu = static_cast<uint8_t>(link->path_mtu());
  p.rate_selector = 2;
  p.rate = kPathRate;
  p.packet_life_time_selector = 2;
  p.packet_life_time = link->ethernet() ? kRocePacketLifeTime : kIbPacketLifeTime;
  p.hop_limit = link->ethernet() ? kRoceHopLimit : 0;
  p.traffic_class = id->tos;
  return store_path(id, p);
}

int set_path_from_records(Id* id, const ibv_path_data* paths, size_t count) {
  if (count == 0) return fail(EINVAL);
  // The first record is the primary path; rdma_cm keeps no alternate paths.
  const ibv_path_record& r = paths[0].path;
  ibv_sa_path_rec p{};
  std::memcpy(p.dgid.raw, r.dgid.raw, sizeof(p.dgid.raw));
  std::memcpy(p.sgid.raw, r.sgid.raw, sizeof(p.sgid.raw));
  p.dlid = r.dlid;
  p.slid = r.slid;
  uint32_t fl_hop = ntohl(r.flowlabel_hoplimit);
  p.flow_label = htonl(fl_hop >> 8);
  p.hop_limit = static_cast<uint8_t>(fl_hop & 0xff);
  p.traffic_class = r.tclass;
  p.reversible = (r.reversible_numpath & 0x80) != 0;
  p.numb_path = r.reversible_numpath & 0x7f;
  p.pkey = r.pkey;
  p.sl = static_cast<uint8_t>(ntohs(r.qosclass_sl) & 0xf);
  p.mtu_selector = r.mtu >> 6;
  p.mtu = r.mtu & 0x3f;
  p.rate_selector = r.rate >> 6;
  p.rate = r.rate & 0x3f;
  p.packet_life_time_selector = r.packetlifetime >> 6;
  p.packet_life_time = r.packetlifetime & 0x3f;
  p.preference = r.preference;
  return store_path(id, p);
}

void path_ah_attr(const ibv_sa_path_rec& path, ibv_ah_attr* ah) {
  std::memset(ah, 0, sizeof(*ah));
  ah->dlid = ntohs(path.dlid);
  ah->sl = path.sl;
  ah->port_num = 1;
  RouterLink* link = RouterLink::get();
  if ((link != nullptr && link->ethernet()) || path.hop_limit > 1) {
    ah->is_global = 1;
    ah->grh.dgid = path.dgid;
    ah->grh.sgid_index = 0;
    ah->grh.hop_limit = path.hop_limit;
    ah->grh.traffic_class = path.traffic_class;
    ah->grh.flow_label = ntohl(path.flow_label);
  }
}

void ud_ah_attr(uint16_t remote_lid, const proto::Gid& remote_gid, ibv_ah_attr* ah) {
  std::memset(ah, 0, sizeof(*ah));
  ah->dlid = remote_lid;
  ah->sl = 0;
  ah->port_num = 1;
  RouterLink* link = RouterLink::get();
  if (link != nullptr && link->ethernet()) {
    ah->is_global = 1;
    std::memcpy(ah->grh.dgid.raw, remote_gid.data(), remote_gid.size());
    ah->grh.sgid_index = 0;
    ah->grh.hop_limit = kRoceHopLimit;
  }
}

void mcast_ah_attr(uint16_t mlid, const proto::Gid& mgid, ibv_ah_attr* ah) {
  ud_ah_attr(mlid, mgid, ah);
  ah->is_global = 1;
  std::memcpy(ah->grh.dgid.raw, mgid.data(), mgid.size());
  ah->grh.sgid_index = 0;
  ah->grh.hop_limit = kRoceHopLimit;
}

}  // namespace wharf::rdmacm
