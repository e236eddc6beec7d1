// Flow steering's pure parts (router/flow_match.h): what a frame's headers are, which rules
// take it, and the RSS hash (checked against Microsoft's published Toeplitz verification).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>

#include <cstring>
#include <vector>

#include "router/flow_match.h"

namespace wharf::router {
namespace {

// An Ethernet frame: IPv4 (or IPv6) from src to dst, then UDP or TCP ports, then payload.
std::vector<uint8_t> frame4(const char* src, const char* dst, uint8_t proto, uint16_t sport,
                            uint16_t dport, bool vlan = false) {
  std::vector<uint8_t> f = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x24, 0x8a, 0x07, 0xa5, 0x28, 0xc8};
  if (vlan) f.insert(f.end(), {0x81, 0x00, 0x20, 0x05});
  f.insert(f.end(), {0x08, 0x00});
  const uint8_t ip[20] = {0x45, 0x10, 0, 40, 0, 0, 0x40, 0, 63, proto};
  f.insert(f.end(), ip, ip + 20);
  const size_t at = f.size() - 20;
  inet_pton(AF_INET, src, &f[at + 12]);
  inet_pton(AF_INET, dst, &f[at + 16]);
  f.insert(f.end(), {static_cast<uint8_t>(sport >> 8), static_cast<uint8_t>(sport),
                     static_cast<uint8_t>(dport >> 8), static_cast<uint8_t>(dport), 0, 0, 0, 0});
  return f;
}

TEST(FlowMatchTest, ParsesEthernetVlanIpv4AndPorts) {
  auto f = frame4("1.2.3.4", "5.6.7.8", IPPROTO_UDP, 1234, 5678, /*vlan=*/true);
  FrameFields p = parse_frame(f.data(), f.size());
  EXPECT_EQ(p.dst_mac[5], 0x55);
  EXPECT_EQ(p.src_mac[0], 0x24);
  EXPECT_EQ(p.vlan_tag, 0x2005);
  EXPECT_EQ(p.ether_type, 0x0800);
  EXPECT_EQ(p.ip_version, 4);
  EXPECT_EQ(p.tclass, 0x10);
  EXPECT_EQ(p.hop_limit, 63);
  EXPECT_EQ(p.src_ip[0], 1);
  EXPECT_EQ(p.dst_ip[3], 8);
  EXPECT_EQ(p.l4_proto, IPPROTO_UDP);
  EXPECT_EQ(p.src_port, 1234);
  EXPECT_EQ(p.dst_port, 5678);
}

TEST(FlowMatchTest, ATruncatedFrameLacksTheLayersItCannotHold) {
  auto f = frame4("1.2.3.4", "5.6.7.8", IPPROTO_TCP, 1, 2);
  EXPECT_EQ(parse_frame(f.data(), 13).ether_type, 0);         // no Ethernet header
  EXPECT_EQ(parse_frame(f.data(), 14 + 19).ip_version, 0);    // no whole IPv4 header
  EXPECT_EQ(parse_frame(f.data(), 14 + 20 + 3).l4_proto, 0);  // no whole ports
  EXPECT_EQ(parse_frame(f.data(), 14 + 20 + 4).l4_proto, IPPROTO_TCP);
  f[14 + 6] = 0x00, f[14 + 7] = 0x10;  // a later fragment: no ports
  EXPECT_EQ(parse_frame(f.data(), f.size()).l4_proto, 0);
}

TEST(FlowMatchTest, EveryFieldIsComparedUnderItsMaskAndLayersAreDemanded) {
  auto f = frame4("1.2.3.4", "5.6.7.8", IPPROTO_UDP, 1234, 5678);
  const FrameFields p = parse_frame(f.data(), f.size());
  proto::FlowMatch m;
  EXPECT_TRUE(flow_matches(m, p));  // no field: everything
  m.ether_type = 0x0800, m.ether_type_mask = 0xffff;
  m.dst_mac = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55};
  m.dst_mac_mask.fill(0xff);
  EXPECT_TRUE(flow_matches(m, p));
  m.dst_mac[0] = 0x01;
  EXPECT_FALSE(flow_matches(m, p));
  m.dst_mac_mask[0] = 0xfe;  // the differing bit is masked out
  EXPECT_TRUE(flow_matches(m, p));
  m.ip_version = 4;
  inet_pton(AF_INET, "5.6.7.0", m.dst_ip.data());
  std::memset(m.dst_ip_mask.data(), 0xff, 3);
  EXPECT_TRUE(flow_matches(m, p));
  m.l4_proto = IPPROTO_TCP;  // a TCP rule does not take a UDP frame, whatever its ports
  EXPECT_FALSE(flow_matches(m, p));
  m.l4_proto = IPPROTO_UDP;
  m.dst_port = 5678, m.dst_port_mask = 0xffff;
  EXPECT_TRUE(flow_matches(m, p));
  m.ip_version = 6;  // an IPv6 rule does not take an IPv4 frame
  EXPECT_FALSE(flow_matches(m, p));
}

TEST(FlowMatchTest, ARuleWithFieldsOfALayerItDoesNotNameIsInvalid) {
  proto::FlowMatch m;
  EXPECT_TRUE(valid_flow_match(m));
  m.dst_ip_mask[0] = 0xff;
  EXPECT_FALSE(valid_flow_match(m));
  m.ip_version = 4;
  EXPECT_TRUE(valid_flow_match(m));
  m.src_port_mask = 0xffff;
  EXPECT_FALSE(valid_flow_match(m));
  m.l4_proto = IPPROTO_UDP;
  EXPECT_TRUE(valid_flow_match(m));
  m.l4_proto = IPPROTO_ICMP;
  EXPECT_FALSE(valid_flow_match(m));
  m.l4_proto = IPPROTO_UDP;
  m.ip_version = 5;
  EXPECT_FALSE(valid_flow_match(m));
}

// Microsoft's RSS verification suite: the key and the first IPv4 example.
TEST(FlowMatchTest, TheRssHashIsToeplitzAsMicrosoftSpecifiesIt) {
  const uint8_t key_bytes[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
                                 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
                                 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
                                 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};
  std::array<uint8_t, proto::kRssKeyLen> key;
  std::memcpy(key.data(), key_bytes, sizeof(key_bytes));
  auto f = frame4("66.9.149.187", "161.142.100.80", IPPROTO_TCP, 2794, 1766);
  const FrameFields p = parse_frame(f.data(), f.size());
  EXPECT_EQ(rss_hash(key, IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4, p), 0x323e8fc2u);
  EXPECT_EQ(rss_hash(key,
                     IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_PORT_TCP |
                         IBV_RX_HASH_DST_PORT_TCP,
                     p),
            0x51ccc178u);
  // UDP port fields do not apply to a TCP frame.
  EXPECT_EQ(rss_hash(key,
                     IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_PORT_UDP |
                         IBV_RX_HASH_DST_PORT_UDP,
                     p),
            0x323e8fc2u);
}

}  // namespace
}  // namespace wharf::router
