// Tests for router/host_objects.h: what packets, work requests and objects find by number.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "router/host_objects.h"

namespace wharf::router {
namespace {

// Keys are 32 random bits (issue #19): no key says anything about the next, so a forged
// peer or a tenant cannot aim at another's registration by counting from its own.
TEST(HostObjectsTest, KeysAreUniqueRandomAndNameTheirMrUntilRemoved) {
  HostObjects objects;
  Mr a, b;
  std::set<uint32_t> keys;
  std::set<uint32_t> high_bytes, low_bytes;
  int consecutive = 0;
  uint32_t previous = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint32_t k = objects.add_key(i % 2 == 0 ? &a : &b);
    EXPECT_TRUE(keys.insert(k).second) << k;
    EXPECT_NE(k, 0u);
    EXPECT_NE(k, 0xffffffffu);
    EXPECT_EQ(objects.mr_by_key(k), i % 2 == 0 ? &a : &b);
    high_bytes.insert(k >> 24);
    low_bytes.insert(k & 0xff);
    // What a sequential index would give: the same upper 24 bits plus one.
    if (i > 0 && (k >> 8) == (previous >> 8) + 1) ++consecutive;
    previous = k;
  }
  EXPECT_GT(high_bytes.size(), 200u);
  EXPECT_GT(low_bytes.size(), 200u);
  EXPECT_LT(consecutive, 5);
  const uint32_t first = *keys.begin();
  EXPECT_TRUE(objects.key_in_use(first));
  objects.remove_key(first);
  EXPECT_FALSE(objects.key_in_use(first));
  EXPECT_EQ(objects.mr_by_key(first), nullptr);
  for (uint32_t k : {0u, 0xffffffffu}) EXPECT_EQ(objects.mr_by_key(k), nullptr);
}

TEST(HostObjectsTest, AReservedKeyNamesNothingUntilBound) {
  HostObjects objects;
  Mr mr;
  const uint32_t window = objects.add_key(nullptr);
  EXPECT_TRUE(objects.key_in_use(window));
  EXPECT_EQ(objects.mr_by_key(window), nullptr);
  objects.rebind_key(window, &mr);
  EXPECT_EQ(objects.mr_by_key(window), &mr);
  objects.rebind_key(window, nullptr);
  EXPECT_TRUE(objects.key_in_use(window));
  EXPECT_EQ(objects.mr_by_key(window), nullptr);
}

TEST(HostObjectsTest, SrqNumbersStartAtOneAndAreNotReusedWhileTaken) {
  HostObjects objects;
  Srq s, t;
  const uint32_t first = objects.add_srq(&s);
  EXPECT_EQ(first, 1u);
  const uint32_t second = objects.add_srq(&t);
  EXPECT_EQ(second, 2u);
  EXPECT_EQ(objects.srq_by_srqn(first), &s);
  objects.remove_srq(first);
  EXPECT_EQ(objects.srq_by_srqn(first), nullptr);
  EXPECT_EQ(objects.srq_by_srqn(second), &t);
  EXPECT_EQ(objects.srq_by_srqn(0), nullptr);
}

TEST(HostObjectsTest, QpsAreFoundByTheNumberTheyAreGiven) {
  HostObjects objects;
  std::vector<Qp> qps(3);
  for (Qp& qp : qps) ASSERT_TRUE(objects.add_qp(&qp));
  for (Qp& qp : qps) EXPECT_EQ(objects.qp_by_qpn(qp.qpn), &qp);
  objects.remove_qp(qps[1].qpn);
  EXPECT_EQ(objects.qp_by_qpn(qps[1].qpn), nullptr);
  std::set<Qp*> seen;
  objects.for_each_qp([&](Qp* qp) { EXPECT_TRUE(seen.insert(qp).second); });
  EXPECT_EQ(seen, (std::set<Qp*>{&qps[0], &qps[2]}));
}

}  // namespace
}  // namespace wharf::router
