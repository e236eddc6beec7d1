// router/process_caps.h: reading a client's effective capabilities.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <unistd.h>

#include "router/process_caps.h"

namespace wharf::router {
namespace {

TEST(ProcessCapsTest, ReadsTheEffectiveSetFromAStatusFile) {
  unsigned long long caps = 0;
  EXPECT_TRUE(
      parse_effective_caps("Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t00000000000020"
                           "00\nCapEff:\t0000000000002000\nCapBnd:\t0\n",
                           &caps));
  EXPECT_EQ(caps, 1ull << CAP_NET_RAW);
  EXPECT_FALSE(parse_effective_caps("Name:\tx\nCapPrm:\t1\n", &caps));
  EXPECT_FALSE(parse_effective_caps("Name:\tx\nCapEff:\tzz\n", &caps));
}

TEST(ProcessCapsTest, AProcessThatIsGoneHasNoCapability) {
  EXPECT_FALSE(process_has_capability(0, CAP_NET_RAW));
  EXPECT_FALSE(process_has_capability(getpid(), 64));
  // This test's own process: root (as CI runs it) has CAP_NET_RAW.
  if (geteuid() == 0) {
    EXPECT_TRUE(process_has_capability(getpid(), CAP_NET_RAW));
  }
}

}  // namespace
}  // namespace wharf::router
