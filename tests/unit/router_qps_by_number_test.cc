// Tests for router/qps_by_number.h: the router's QPs by QP number.
#include <gtest/gtest.h>

#include <vector>

#include "router/qps_by_number.h"

namespace wharf::router {
namespace {

TEST(QpsByNumberTest, ANumberFindsItsQpUntilRemoved) {
  QpsByNumber qps;
  Qp a, b;
  a.qpn = 0x100;
  b.qpn = 0xffffff;
  EXPECT_TRUE(qps.add(&a));
  EXPECT_TRUE(qps.add(&b));
  EXPECT_EQ(qps.find(0x100), &a);
  EXPECT_EQ(qps.find(0xffffff), &b);
  EXPECT_EQ(qps.find(0x101), nullptr);
  EXPECT_EQ(qps.find(0), nullptr);
  EXPECT_EQ(qps.size(), 2u);
  qps.remove(0x100);
  EXPECT_EQ(qps.find(0x100), nullptr);
  EXPECT_FALSE(qps.contains(0x100));
  qps.remove(0x100);  // twice: nothing
  EXPECT_EQ(qps.find(0xffffff), &b);
  EXPECT_EQ(qps.size(), 1u);
}

TEST(QpsByNumberTest, ANumberInUseIsNotTakenTwice) {
  QpsByNumber qps;
  Qp a, b;
  a.qpn = b.qpn = 0x1234;
  EXPECT_TRUE(qps.add(&a));
  EXPECT_FALSE(qps.add(&b));
  EXPECT_EQ(qps.find(0x1234), &a);
}

TEST(QpsByNumberTest, ManyQpsAreEachFoundAndEachVisitedOnce) {
  QpsByNumber qps;
  std::vector<Qp> all(20000);
  for (size_t i = 0; i < all.size(); ++i) {
    all[i].qpn = static_cast<uint32_t>(0x100 + i * 7);
    ASSERT_TRUE(qps.add(&all[i]));
  }
  for (size_t i = 0; i < all.size(); i += 2) qps.remove(all[i].qpn);
  size_t visited = 0;
  qps.for_each([&](Qp* qp) {
    ++visited;
    EXPECT_EQ((qp - all.data()) % 2, 1);
  });
  EXPECT_EQ(visited, all.size() / 2);
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(qps.find(all[i].qpn), i % 2 == 1 ? &all[i] : nullptr);
}

}  // namespace
}  // namespace wharf::router
