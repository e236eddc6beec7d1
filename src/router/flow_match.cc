#include "router/flow_match.h"

#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <algorithm>

namespace wharf::router {
namespace {

constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86dd;
constexpr uint16_t kEtherVlan = 0x8100;

uint16_t be16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

template <size_t N>
bool masked_equal(const std::array<uint8_t, N>& value, const std::array<uint8_t, N>& mask,
                  const std::array<uint8_t, N>& got) {
  for (size_t i = 0; i < N; ++i)
    if ((value[i] & mask[i]) != (got[i] & mask[i])) return false;
  return true;
}

template <class T>
bool masked_equal(T value, T mask, T got) {
  return (value & mask) == (got & mask);
}

template <size_t N>
bool any_set(const std::array<uint8_t, N>& a) {
  return std::any_of(a.begin(), a.end(), [](uint8_t b) { return b != 0; });
}

// The IPv4 or IPv6 header at p (len bytes left); returns the offset of what follows, or 0.
size_t parse_ip(const uint8_t* p, size_t len, uint16_t ether_type, FrameFields* f) {
  if (ether_type == kEtherIpv4 && len >= 20 && (p[0] >> 4) == 4) {
    const size_t ihl = static_cast<size_t>(p[0] & 0xf) * 4;
    if (ihl < 20 || ihl > len) return 0;
    f->ip_version = 4;
    f->tclass = p[1];
    f->hop_limit = p[8];
    f->ip_proto = p[9];
    std::copy(p + 12, p + 16, f->src_ip.begin());
    std::copy(p + 16, p + 20, f->dst_ip.begin());
    // A fragment after the first carries no ports.
    const bool later_fragment = (be16(p + 6) & 0x1fff) != 0;
    return later_fragment ? 0 : ihl;
  }
  if (ether_type == kEtherIpv6 && len >= 40 && (p[0] >> 4) == 6) {
    f->ip_version = 6;
    f->tclass = static_cast<uint8_t>((p[0] & 0xf) << 4 | p[1] >> 4);
    f->flow_label = static_cast<uint32_t>(p[1] & 0xf) << 16 | static_cast<uint32_t>(be16(p + 2));
    f->ip_proto = p[6];
    f->hop_limit = p[7];
    std::copy(p + 8, p + 24, f->src_ip.begin());
    std::copy(p + 24, p + 40, f->dst_ip.begin());
    return 40;
  }
  return 0;
}

}  // namespace

FrameFields parse_frame(const uint8_t* frame, size_t len) {
  FrameFields f;
  if (len < 14) return f;
  std::copy(frame, frame + 6, f.dst_mac.begin());
  std::copy(frame + 6, frame + 12, f.src_mac.begin());
  f.ether_type = be16(frame + 12);
  size_t off = 14;
  if (f.ether_type == kEtherVlan) {
    if (len < 18) return f;
    f.vlan_tag = be16(frame + 14);
    f.ether_type = be16(frame + 16);
    off = 18;
  }
  const size_t ip_len = parse_ip(frame + off, len - off, f.ether_type, &f);
  if (ip_len == 0) return f;
  off += ip_len;
  if ((f.ip_proto == IPPROTO_TCP || f.ip_proto == IPPROTO_UDP) && len - off >= 4) {
    f.l4_proto = f.ip_proto;
    f.src_port = be16(frame + off);
    f.dst_port = be16(frame + off + 2);
  }
  return f;
}

bool flow_matches(const proto::FlowMatch& m, const FrameFields& f) {
  if (!masked_equal(m.dst_mac, m.dst_mac_mask, f.dst_mac) ||
      !masked_equal(m.src_mac, m.src_mac_mask, f.src_mac) ||
      !masked_equal(m.ether_type, m.ether_type_mask, f.ether_type) ||
      !masked_equal(m.vlan_tag, m.vlan_tag_mask, f.vlan_tag))
    return false;
  if (m.ip_version != 0) {
    if (f.ip_version != m.ip_version || !masked_equal(m.src_ip, m.src_ip_mask, f.src_ip) ||
        !masked_equal(m.dst_ip, m.dst_ip_mask, f.dst_ip) ||
        !masked_equal(m.ip_proto, m.ip_proto_mask, f.ip_proto) ||
        !masked_equal(m.tclass, m.tclass_mask, f.tclass) ||
        !masked_equal(m.hop_limit, m.hop_limit_mask, f.hop_limit) ||
        !masked_equal(m.flow_label, m.flow_label_mask, f.flow_label))
      return false;
  }
  if (m.l4_proto != 0) {
    if (f.l4_proto != m.l4_proto || !masked_equal(m.src_port, m.src_port_mask, f.src_port) ||
        !masked_equal(m.dst_port, m.dst_port_mask, f.dst_port))
      return false;
  }
  return true;
}

uint32_t rss_hash(const std::array<uint8_t, proto::kRssKeyLen>& key, uint64_t hash_fields,
                  const FrameFields& f) {
  uint8_t input[2 * 16 + 2 * 2];
  size_t n = 0;
  auto take = [&](uint64_t field, const uint8_t* p, size_t len) {
    if ((hash_fields & field) == 0) return;
    std::copy(p, p + len, input + n);
    n += len;
  };
  const bool v4 = f.ip_version == 4, v6 = f.ip_version == 6;
  if (v4) take(IBV_RX_HASH_SRC_IPV4, f.src_ip.data(), 4);
  if (v4) take(IBV_RX_HASH_DST_IPV4, f.dst_ip.data(), 4);
  if (v6) take(IBV_RX_HASH_SRC_IPV6, f.src_ip.data(), 16);
  if (v6) take(IBV_RX_HASH_DST_IPV6, f.dst_ip.data(), 16);
  const uint8_t sport[2] = {static_cast<uint8_t>(f.src_port >> 8),
                            static_cast<uint8_t>(f.src_port)};
  const uint8_t dport[2] = {static_cast<uint8_t>(f.dst_port >> 8),
                            static_cast<uint8_t>(f.dst_port)};
  if (f.l4_proto == IPPROTO_TCP) {
    take(IBV_RX_HASH_SRC_PORT_TCP, sport, 2);
    take(IBV_RX_HASH_DST_PORT_TCP, dport, 2);
  } else if (f.l4_proto == IPPROTO_UDP) {
    take(IBV_RX_HASH_SRC_PORT_UDP, sport, 2);
    take(IBV_RX_HASH_DST_PORT_UDP, dport, 2);
  }
  // For every set bit of the input, XOR in the key's 32 bits starting at that bit.
  uint32_t hash = 0;
  uint32_t window = static_cast<uint32_t>(key[0]) << 24 | static_cast<uint32_t>(key[1]) << 16 |
                    static_cast<uint32_t>(key[2]) << 8 | key[3];
  for (size_t i = 0; i < n; ++i) {
    const uint8_t next = i + 4 < key.size() ? key[i + 4] : 0;
    for (int bit = 7; bit >= 0; --bit) {
      if ((input[i] >> bit) & 1) hash ^= window;
      window = window << 1 | ((next >> bit) & 1);
    }
  }
  return hash;
}

bool valid_flow_match(const proto::FlowMatch& m) {
  if (m.ip_version != 0 && m.ip_version != 4 && m.ip_version != 6) return false;
  if (m.l4_proto != 0 && m.l4_proto != IPPROTO_TCP && m.l4_proto != IPPROTO_UDP) return false;
  const bool ip_fields = any_set(m.src_ip_mask) || any_set(m.dst_ip_mask) || m.ip_proto_mask != 0 ||
                         m.tclass_mask != 0 || m.hop_limit_mask != 0 || m.flow_label_mask != 0;
  if (ip_fields && m.ip_version == 0) return false;
  if ((m.src_port_mask != 0 || m.dst_port_mask != 0) && m.l4_proto == 0) return false;
  return true;
}

}  // namespace wharf::router
