// Multicast group addresses (proto/multicast.h): what counts as a group's GID and LID, and the
// MGIDs and MLIDs rdma_cm's joins get.
#include <gtest/gtest.h>

#include "proto/multicast.h"

namespace wharf::proto {
namespace {

Gid v4_mapped(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  Gid g{};
  g[10] = g[11] = 0xff;
  g[12] = a, g[13] = b, g[14] = c, g[15] = d;
  return g;
}

TEST(MulticastTest, GroupGidsAreIpv6MulticastOrIpv4MappedMulticast) {
  Gid v6{};
  v6[0] = 0xff;
  v6[1] = 0x12;
  EXPECT_TRUE(is_multicast_gid(v6));
  EXPECT_TRUE(is_multicast_gid(v4_mapped(230, 18, 0, 11)));  // RoCE's form of an IPv4 group
  EXPECT_TRUE(is_multicast_gid(v4_mapped(239, 255, 255, 255)));
  EXPECT_FALSE(is_multicast_gid(v4_mapped(198, 18, 0, 11)));
  EXPECT_FALSE(is_multicast_gid(v4_mapped(240, 0, 0, 1)));
  EXPECT_FALSE(is_multicast_gid(Gid{}));
}

TEST(MulticastTest, GroupLidsAreAboveTheUnicastRangeAndNotPermissive) {
  EXPECT_FALSE(is_multicast_lid(0xbfff));
  EXPECT_TRUE(is_multicast_lid(0xc000));
  EXPECT_TRUE(is_multicast_lid(0xfffe));
  EXPECT_FALSE(is_multicast_lid(0xffff));
}

TEST(MulticastTest, JoinsMapAnIpv4GroupAsTheKernelDoes) {
  const uint8_t ip[4] = {230, 18, 0, 11};
  const Gid eth = mgid_of_ipv4(ip, /*ethernet=*/true, /*udp_port_space=*/true);
  EXPECT_EQ(eth, v4_mapped(230, 18, 0, 11));
  EXPECT_TRUE(is_multicast_gid(eth));
  const Gid ib = mgid_of_ipv4(ip, /*ethernet=*/false, /*udp_port_space=*/true);
  const Gid want = {0xff, 0x12, 0x40, 0x01, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x06, 18, 0, 11};
  EXPECT_EQ(ib, want);
  EXPECT_EQ(mgid_of_ipv4(ip, false, false)[3], 0x1b);  // IPoIB's signature outside RDMA_PS_UDP
  // Every router derives one MLID for a group, a multicast one.
  EXPECT_EQ(mlid_of(ib), mlid_of(mgid_of_ipv4(ip, false, true)));
  EXPECT_TRUE(is_multicast_lid(mlid_of(ib)));
  EXPECT_TRUE(is_multicast_lid(mlid_of(eth)));
}

}  // namespace
}  // namespace wharf::proto
