// Tests for router/qps_by_number.h: the router's QPs by QP number, and the numbers it gives.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "router/qps_by_number.h"

namespace wharf::router {
namespace {

TEST(QpsByNumberTest, ANumberFindsItsQpUntilRemoved) {
  QpsByNumber qps;
  Qp a, b;
  ASSERT_TRUE(qps.add(&a));
  ASSERT_TRUE(qps.add(&b));
  EXPECT_NE(a.qpn, b.qpn);
  EXPECT_EQ(qps.find(a.qpn), &a);
  EXPECT_EQ(qps.find(b.qpn), &b);
  EXPECT_EQ(qps.size(), 2u);
  const uint32_t old = a.qpn;
  qps.remove(old);
  EXPECT_EQ(qps.find(old), nullptr);
  qps.remove(old);  // twice: nothing
  EXPECT_EQ(qps.find(b.qpn), &b);
  EXPECT_EQ(qps.size(), 1u);
  // Numbers no QP has, as a packet or a library may carry, name nothing.
  for (uint32_t qpn : {0u, 1u, 0xffffffu, 0xffffffffu, b.qpn + 1, b.qpn ^ (1u << 16)})
    EXPECT_EQ(qps.find(qpn), nullptr) << qpn;
}

TEST(QpsByNumberTest, NumbersAreNeverSpecialAndFitTheWire) {
  QpsByNumber qps;
  std::vector<Qp> all(3000);
  std::set<uint32_t> given;
  // Churn one QP through every generation of every slot of the first growth, and more.
  const int rounds = 254 * 256 + 300;
  for (int round = 0; round < rounds; ++round) {
    ASSERT_TRUE(qps.add(&all[0]));
    given.insert(all[0].qpn);
    EXPECT_GE(all[0].qpn, 0x10000u);
    EXPECT_LT(all[0].qpn, 0xffffffu);  // 24 bits, and never the multicast QPN
    qps.remove(all[0].qpn);
  }
  EXPECT_EQ(given.size(), 254u * 256u);  // each slot's generations 1..254, then again
  for (Qp& qp : all) {
    ASSERT_TRUE(qps.add(&qp));
    EXPECT_LE(qp.qpn, 0xfeffffu);
  }
}

// Numbers are not sequential (issue #19): a QP's number says nothing about the next one's,
// neither its slot (the low 16 bits) nor its generation.
TEST(QpsByNumberTest, ConsecutiveQpsDoNotGetConsecutiveNumbers) {
  QpsByNumber qps;
  std::vector<Qp> all(200);
  int next_slot = 0;
  std::set<uint32_t> generations;
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(qps.add(&all[i]));
    generations.insert(all[i].qpn >> 16);
    if (i > 0 && (all[i].qpn & 0xffff) == (all[i - 1].qpn & 0xffff) + 1) ++next_slot;
  }
  EXPECT_LT(next_slot, 10);
  EXPECT_GT(generations.size(), 100u);
}

// A destroyed QP's number does not come back while other free slots wait: late packets for
// it find no QP rather than a new one.
TEST(QpsByNumberTest, AFreedNumberComesBackOnlyAfterEveryOtherFreeSlotServed) {
  QpsByNumber qps;
  std::vector<Qp> all(100);
  for (Qp& qp : all) ASSERT_TRUE(qps.add(&qp));
  std::set<uint32_t> freed;
  for (Qp& qp : all) {
    freed.insert(qp.qpn);
    qps.remove(qp.qpn);
  }
  Qp fresh;
  std::set<uint32_t> slots;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(qps.add(&fresh));
    EXPECT_EQ(freed.count(fresh.qpn), 0u);  // each slot comes back with a new generation
    slots.insert(fresh.qpn & (QpsByNumber::kMaxQps - 1));
    qps.remove(fresh.qpn);
  }
  EXPECT_EQ(slots.size(), 100u);  // oldest free first: not the one just freed again
}

TEST(QpsByNumberTest, TheTableHoldsAtMostItsSlotsAndRefusesMore) {
  QpsByNumber qps;
  std::vector<Qp> all(QpsByNumber::kMaxQps + 1);
  for (size_t i = 0; i < QpsByNumber::kMaxQps; ++i) ASSERT_TRUE(qps.add(&all[i]));
  all.back().qpn = 0x77;
  EXPECT_FALSE(qps.add(&all.back()));
  EXPECT_EQ(all.back().qpn, 0x77u);  // untouched
  EXPECT_EQ(qps.size(), QpsByNumber::kMaxQps);
  qps.remove(all[5].qpn);
  EXPECT_TRUE(qps.add(&all.back()));
  EXPECT_EQ(qps.find(all.back().qpn), &all.back());
}

TEST(QpsByNumberTest, ManyQpsAreEachFoundAndEachVisitedOnce) {
  QpsByNumber qps;
  std::vector<Qp> all(20000);
  for (Qp& qp : all) ASSERT_TRUE(qps.add(&qp));
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
