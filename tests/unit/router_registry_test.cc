// The router's container registry: LIDs come from the router's range (picked from the top
// down, or the orchestrator's), are reused once free, and run out cleanly; addresses are
// unique within a virtual network.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <string>

#include "common/unique_fd.h"
#include "router/router.h"

namespace wharf::router {
namespace {

constexpr uint32_t kVip = 0xc6120a00;  // 198.18.10.0 + n

RouterConfig config(uint16_t base, uint16_t count) {
  RouterConfig cfg;
  cfg.socket_path = "/nonexistent/unused.sock";  // never started
  cfg.lid_base = base;
  cfg.lid_count = count;
  return cfg;
}

TEST(RouterRegistryTest, LidsComeFromTheRouterRangeAndRunOut) {
  Router r(config(100, 2));
  uint16_t a = 0, b = 0, c = 0;
  ASSERT_EQ(r.register_container("", "", "a", 1, kVip + 1, 0, &a), 0);
  ASSERT_EQ(r.register_container("", "", "b", 2, kVip + 2, 0, &b), 0);
  EXPECT_EQ(a, 101);
  EXPECT_EQ(b, 100);
  EXPECT_EQ(r.register_container("", "", "c", 3, kVip + 3, 0, &c), ENOSPC);
  r.unregister_container("", "a");
  ASSERT_EQ(r.register_container("", "", "c", 3, kVip + 3, 0, &c), 0);
  EXPECT_EQ(c, 101);
  EXPECT_EQ(r.container_by_lid(100)->name, "b");
}

// The orchestrator gives containers LIDs from the bottom of their host's range; the router
// takes them as given, and refuses one that is not its to give or that is in use.
TEST(RouterRegistryTest, AContainerGetsTheLidTheOrchestratorGaveIt) {
  Router r(config(100, 10));
  uint16_t lid = 0;
  ASSERT_EQ(r.register_container("t", "n", "a", 1, kVip + 1, 100, &lid), 0);
  EXPECT_EQ(lid, 100);
  EXPECT_EQ(r.container_by_lid(100)->name, "a");
  EXPECT_EQ(r.register_container("t", "n", "b", 2, kVip + 2, 99, &lid), ERANGE);
  EXPECT_EQ(r.register_container("t", "n", "b", 2, kVip + 2, 110, &lid), ERANGE);
  EXPECT_EQ(r.register_container("t", "n", "b", 2, kVip + 2, 100, &lid), EADDRINUSE);
  // A namespace whose applications already opened the device keeps the LID they saw.
  Container* early = r.container_for_netns(3);
  ASSERT_NE(early, nullptr);
  EXPECT_EQ(early->lid, 109);  // the router's own pick: the top of the range
  EXPECT_EQ(r.register_container("t", "n", "c", 3, kVip + 3, 101, &lid), EBUSY);
  ASSERT_EQ(r.register_container("t", "n", "c", 3, kVip + 3, 109, &lid), 0);
  ASSERT_EQ(r.register_container("t", "n", "b", 2, kVip + 2, 101, &lid), 0);
  EXPECT_EQ(lid, 101);
  // The router's own picks stay clear of them while it can.
  ASSERT_EQ(r.register_container("", "", "d", 4, kVip + 4, 0, &lid), 0);
  EXPECT_EQ(lid, 108);
}

// Regression: LIDs came from a counter that wrapped to 0 (not a valid LID) and then handed
// out LIDs still in use, after 65535 container starts on one router.
TEST(RouterRegistryTest, ManyContainerStartsNeverYieldAnInvalidOrDuplicateLid) {
  Router r(config(1, 0xbfff));
  uint16_t keep = 0;
  ASSERT_EQ(r.register_container("", "", "long-lived", 1, kVip + 1, 0, &keep), 0);
  for (int i = 0; i < 70000; ++i) {
    uint16_t lid = 0;
    ASSERT_EQ(r.register_container("", "", "short", 2, kVip + 2, 0, &lid), 0) << i;
    ASSERT_GE(lid, 1);
    ASSERT_LE(lid, 0xbfff);
    ASSERT_NE(lid, keep) << i;
    r.unregister_container("", "short");
  }
}

// One address may be in use once per virtual network, as at the orchestrator (two tenants'
// networks may overlap); a name once per tenant. Lookups by address stay within a network.
TEST(RouterRegistryTest, EachNetworkMayHaveAContainerWithOneAddress) {
  Router r(config(1, 100));
  uint16_t lid = 0;
  ASSERT_EQ(r.register_container("red", "n1", "a", 1, kVip + 2, 0, &lid), 0);
  ASSERT_EQ(r.register_container("blue", "n1", "a", 2, kVip + 2, 0, &lid), 0);
  ASSERT_EQ(r.register_container("red", "n2", "b", 3, kVip + 2, 0, &lid), 0);
  ASSERT_EQ(r.register_container("", "", "c", 4, kVip + 2, 0, &lid), 0);
  EXPECT_EQ(r.register_container("red", "n1", "d", 5, kVip + 2, 0, &lid), EEXIST);  // address
  EXPECT_EQ(r.register_container("", "", "e", 6, kVip + 2, 0, &lid), EEXIST);
  EXPECT_EQ(r.register_container("red", "n3", "a", 7, kVip + 3, 0, &lid), EEXIST);  // name

  const Container* red = r.container_with_vip(kVip + 2, "red", "n1");
  const Container* blue = r.container_with_vip(kVip + 2, "blue", "n1");
  ASSERT_NE(red, nullptr);
  ASSERT_NE(blue, nullptr);
  EXPECT_NE(red, blue);
  EXPECT_EQ(red->netns_ino, 1u);
  EXPECT_EQ(blue->netns_ino, 2u);
  EXPECT_EQ(r.container_with_vip(kVip + 2, "red", "n2")->name, "b");
  EXPECT_EQ(r.container_with_vip(kVip + 2, "blue", "n2"), nullptr);

  r.unregister_container("red", "a");
  EXPECT_EQ(r.container_with_vip(kVip + 2, "red", "n1"), nullptr);
  ASSERT_EQ(r.register_container("red", "n1", "d", 5, kVip + 2, 0, &lid), 0);  // free again
}

// wharf-cni's registrations: held for a sandbox, with the namespace's fd, past any session;
// a second hold for the sandbox, or of the pod's name or address, is refused; release names
// the sandbox, and a second release finds nothing.
TEST(RouterRegistryTest, AHeldRegistrationLastsUntilItsSandboxReleasesIt) {
  Router r(config(100, 10));
  uint16_t lid = 0;
  const auto netns = [] { return UniqueFd(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)); };
  ASSERT_EQ(r.hold_container("sb1", "t", "n", "pod-a", netns(), 1, kVip + 1, 0, &lid), 0);
  const Container* held = r.held_container("sb1");
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(held->name, "pod-a");
  EXPECT_EQ(held->vip, kVip + 1);
  EXPECT_EQ(held->lid, lid);
  EXPECT_TRUE(held->held_netns.valid());
  EXPECT_EQ(r.hold_container("sb1", "t", "n", "pod-b", netns(), 2, kVip + 2, 0, &lid), EEXIST);
  EXPECT_EQ(r.hold_container("sb2", "t", "n", "pod-a", netns(), 2, kVip + 2, 0, &lid), EEXIST);
  EXPECT_EQ(r.hold_container("sb2", "t", "n", "pod-b", netns(), 2, kVip + 1, 0, &lid), EEXIST);
  EXPECT_EQ(r.held_container("sb2"), nullptr);
  // Unregistering by name is a session's own registration's business, not a held one's.
  EXPECT_EQ(r.release_held_container("sb2"), ENOENT);
  ASSERT_EQ(r.release_held_container("sb1"), 0);
  EXPECT_EQ(r.held_container("sb1"), nullptr);
  EXPECT_EQ(r.release_held_container("sb1"), ENOENT);
  // Name and address are free again.
  ASSERT_EQ(r.hold_container("sb2", "t", "n", "pod-a", netns(), 2, kVip + 1, 0, &lid), 0);
}

}  // namespace
}  // namespace wharf::router
