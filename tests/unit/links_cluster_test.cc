// The static cluster file (links/cluster.h): parsing, rejection of bad or overlapping
// entries, and which host serves a LID or a GID.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <string>

#include "links/cluster.h"

namespace wharf::links {
namespace {

const char* kLab =
    "# name address subnet lids port socket\n"
    "h1 198.19.0.1 198.18.1.0/24 1-1024 4791 /run/wharf-lab/h1/wharfd.sock\n"
    "\n"
    "h2 198.19.0.2 198.18.2.0/24 1025-2048 4792   # no socket column\n";

proto::AhAttr by_lid(uint16_t lid) {
  proto::AhAttr a;
  a.dlid = lid;
  return a;
}

proto::AhAttr by_ip(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  proto::AhAttr ah;
  ah.is_global = 1;
  ah.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
  return ah;
}

TEST(ClusterTest, ParsesTheLabFile) {
  StaticCluster c;
  ASSERT_EQ(c.load(kLab, "h2"), "");
  ASSERT_EQ(c.hosts().size(), 2u);
  EXPECT_EQ(c.self(), 1);
  const ClusterHost& h = c.hosts()[1];
  EXPECT_EQ(h.name, "h2");
  EXPECT_EQ(h.address, 0xc6130002u);
  EXPECT_EQ(h.port, 4792);
  EXPECT_EQ(h.subnet, 0xc6120200u);
  EXPECT_EQ(h.prefix, 24);
  EXPECT_EQ(h.lid_first, 1025);
  EXPECT_EQ(h.lid_last, 2048);
}

TEST(ClusterTest, FindsTheHostServingAnAddress) {
  StaticCluster c;
  ASSERT_EQ(c.load(kLab, "h1"), "");
  const uint8_t ib = IBV_LINK_LAYER_INFINIBAND;
  EXPECT_EQ(c.host_for(by_lid(1), ib), 0);
  EXPECT_EQ(c.host_for(by_lid(1024), ib), 0);
  EXPECT_EQ(c.host_for(by_lid(1025), ib), 1);
  EXPECT_EQ(c.host_for(by_lid(4000), ib), -1);
  EXPECT_EQ(c.host_for(by_lid(1025), IBV_LINK_LAYER_ETHERNET), -1);  // no LIDs on Ethernet
  EXPECT_EQ(c.host_for(by_ip(198, 18, 2, 77), ib), 1);
  EXPECT_EQ(c.host_for(by_ip(198, 18, 1, 5), IBV_LINK_LAYER_ETHERNET), 0);
  EXPECT_EQ(c.host_for(by_ip(198, 18, 3, 5), ib), -1);
  proto::AhAttr link_local = by_ip(198, 18, 2, 77);
  link_local.dgid[0] = 0xfe;  // not an IPv4-mapped GID
  EXPECT_EQ(c.host_for(link_local, ib), -1);
}

TEST(ClusterTest, RejectsBadFilesWithTheLine) {
  struct Case {
    const char* text;
    const char* error_contains;
    const char* self = "h1";
  };
  const Case cases[] = {
      {"h1 198.19.0.1 198.18.1.0/24 1-1024\n", "line 1: expected"},
      {"h1 198.19.0.300 198.18.1.0/24 1-1024 4791\n", "bad address"},
      {"h1 198.19.0.1 198.18.1.5/24 1-1024 4791\n", "bad subnet"},
      {"h1 198.19.0.1 198.18.1.0/33 1-1024 4791\n", "bad subnet"},
      {"h1 198.19.0.1 198.18.1.0/24 0-1024 4791\n", "bad LID range"},
      {"h1 198.19.0.1 198.18.1.0/24 5-4 4791\n", "bad LID range"},
      {"h1 198.19.0.1 198.18.1.0/24 1-49152 4791\n", "bad LID range"},
      {"h1 198.19.0.1 198.18.1.0/24 1-1024 0\n", "bad port"},
      {"h1 198.19.0.1 198.18.1.0/24 1-1024 4791 /s extra\n", "unexpected 'extra'"},
      {"h1 198.19.0.1 198.18.1.0/24 1-1024 4791\nh1 198.19.0.2 198.18.2.0/24 1025-2048 4791\n",
       "line 2: host h1 is listed twice"},
      {"h1 198.19.0.1 198.18.0.0/16 1-1024 4791\nh2 198.19.0.2 198.18.2.0/24 1025-2048 4791\n",
       "subnets of h2 and h1 overlap"},
      {"h1 198.19.0.1 198.18.1.0/24 1-1024 4791\nh2 198.19.0.2 198.18.2.0/24 1024-2048 4791\n",
       "LID ranges of h2 and h1 overlap"},
      {"h1 198.19.0.1 198.18.1.0/24 1-1024 4791\n", "host 'me' is not in the cluster file", "me"},
  };
  for (const Case& c : cases) {
    StaticCluster cl;
    std::string err = cl.load(c.text, c.self);
    EXPECT_NE(err.find(c.error_contains), std::string::npos) << c.text << " -> " << err;
  }
}

}  // namespace
}  // namespace wharf::links
