// The rules for which containers a QP reaches (isolation between virtual networks) and in
// which traffic class its packets travel between hosts (the container's priority).
#include <gtest/gtest.h>

#include "router/peer_rules.h"

namespace wharf::router {
namespace {

Container container(const char* tenant, const char* network, uint16_t lid, uint8_t gid_tail) {
  Container c;
  c.tenant = tenant;
  c.network = network;
  c.lid = lid;
  c.gid[15] = gid_tail;
  return c;
}

proto::AhAttr by_lid(uint16_t lid) {
  proto::AhAttr ah;
  ah.dlid = lid;
  return ah;
}

proto::AhAttr by_gid(uint8_t gid_tail, uint8_t traffic_class = 0) {
  proto::AhAttr ah;
  ah.is_global = 1;
  ah.dgid[15] = gid_tail;
  ah.traffic_class = traffic_class;
  return ah;
}

TEST(PeerRulesTest, AQpReachesOnlyContainersOfItsOwnTenantAndNetwork) {
  const Container a = container("red", "n1", 1, 1);
  const Container same = container("red", "n1", 2, 2);
  const Container other_network = container("red", "n2", 3, 3);
  const Container other_tenant = container("blue", "n1", 4, 4);
  constexpr uint8_t kIb = IBV_LINK_LAYER_INFINIBAND;
  EXPECT_TRUE(reaches(&a, by_lid(2), &same, kIb));
  EXPECT_TRUE(reaches(&a, by_gid(2), &same, kIb));
  // The right address is not enough.
  EXPECT_FALSE(reaches(&a, by_lid(3), &other_network, kIb));
  EXPECT_FALSE(reaches(&a, by_gid(4), &other_tenant, kIb));
  // Nor is the right network with the wrong address.
  EXPECT_FALSE(reaches(&a, by_lid(9), &same, kIb));
  EXPECT_FALSE(reaches(&a, by_lid(2), &same, IBV_LINK_LAYER_ETHERNET));  // no LIDs on Ethernet
}

TEST(PeerRulesTest, ContainersWithoutAnOrchestratorShareTheHostsDefaultNetwork) {
  const Container x = container("", "", 1, 1);
  const Container y = container("", "", 2, 2);
  const Container tenant = container("red", "n1", 3, 3);
  EXPECT_TRUE(reaches(&x, by_lid(2), &y, IBV_LINK_LAYER_INFINIBAND));
  EXPECT_FALSE(reaches(&x, by_lid(3), &tenant, IBV_LINK_LAYER_INFINIBAND));
  EXPECT_FALSE(reaches(&tenant, by_lid(1), &x, IBV_LINK_LAYER_INFINIBAND));
}

TEST(PeerRulesTest, APriorityClassOverridesTheAddressTrafficClassAsDscpClassSelector) {
  Container c = container("red", "n1", 1, 1);
  EXPECT_EQ(link_class(&c, by_lid(2)), 0);           // no GRH, no priority
  EXPECT_EQ(link_class(&c, by_gid(2, 0x68)), 0x68);  // the application's traffic class
  c.policy.priority = 5;
  EXPECT_EQ(link_class(&c, by_gid(2, 0x68)), 5 << 5);  // CS5: DSCP 40, TOS 0xa0
  EXPECT_EQ(link_class(&c, by_lid(2)), 5 << 5);
  c.policy.priority = ContainerPolicy::kMaxPriority;
  EXPECT_EQ(link_class(&c, by_lid(2)), 0xe0);  // CS7
}

}  // namespace
}  // namespace wharf::router
