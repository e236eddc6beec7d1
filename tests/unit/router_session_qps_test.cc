// Tests for router/session_qps.h: a session's QPs by handle and by posted mark.
#include <gtest/gtest.h>

#include "proto/messages.h"
#include "router/session_qps.h"

namespace wharf::router {
namespace {

TEST(SessionQpsTest, MarksAreDenseAndNameOnlyTheirQp) {
  SessionQps qps;
  Qp* a = qps.add(std::make_unique<Qp>());
  Qp* b = qps.add(std::make_unique<Qp>());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(SessionQps::posted_mark(*a), 0u);
  EXPECT_EQ(SessionQps::posted_mark(*b), 1u);
  EXPECT_EQ(qps.by_mark(0), a);
  EXPECT_EQ(qps.by_mark(1), b);
  EXPECT_EQ(qps.find(a->handle), a);
  EXPECT_EQ(qps.find(b->handle), b);
  EXPECT_EQ(qps.size(), 2u);
  // A mark or handle no QP has, as a hostile page or request may carry, names nothing.
  EXPECT_EQ(qps.by_mark(2), nullptr);
  EXPECT_EQ(qps.by_mark(shm::kPostedMarks - 1), nullptr);
  EXPECT_EQ(qps.by_mark(0xffffffff), nullptr);
  EXPECT_EQ(qps.find(0), nullptr);
  EXPECT_EQ(qps.find(b->handle + 1), nullptr);  // slot 2
  EXPECT_EQ(qps.find(a->handle ^ (1u << SessionQps::kSlotBits)), nullptr);
}

TEST(SessionQpsTest, AStaleHandleNamesNoQpOnceItsSlotServesAnother) {
  SessionQps qps;
  const uint32_t old = qps.add(std::make_unique<Qp>())->handle;
  EXPECT_EQ(qps.take(0x12345), nullptr);
  std::unique_ptr<Qp> gone = qps.take(old);
  ASSERT_NE(gone, nullptr);
  EXPECT_EQ(gone->handle, old);
  EXPECT_EQ(qps.take(old), nullptr);  // twice: nothing
  EXPECT_EQ(qps.size(), 0u);
  Qp* next = qps.add(std::make_unique<Qp>());
  EXPECT_EQ(SessionQps::posted_mark(*next), 0u);  // the slot, reused
  EXPECT_NE(next->handle, old);
  EXPECT_EQ(qps.find(old), nullptr);
  EXPECT_EQ(qps.find(next->handle), next);
}

TEST(SessionQpsTest, HandlesAreNeverZeroNorOpenedAcrossEveryGeneration) {
  SessionQps qps;
  std::vector<uint32_t> seen;
  for (int i = 0; i < 0x7fff + 2; ++i) {
    Qp* qp = qps.add(std::make_unique<Qp>());
    ASSERT_NE(qp->handle, 0u);
    ASSERT_EQ(qp->handle & proto::kOpenedQpBit, 0u);
    ASSERT_EQ(SessionQps::posted_mark(*qp), 0u);
    seen.push_back(qp->handle);
    qps.take(qp->handle);
  }
  // The slot's generations cycle: the first handle comes back only after 0x7fff others.
  EXPECT_EQ(seen[0x7fff], seen[0]);
  EXPECT_NE(seen[0x7ffe], seen[0]);
}

TEST(SessionQpsTest, ASessionHoldsAsManyQpsAsTheDeviceAllowsAndEachHasAMark) {
  SessionQps qps;
  uint32_t h77 = 0;
  for (uint32_t i = 0; i < device::kMaxQp; ++i) {
    Qp* qp = qps.add(std::make_unique<Qp>());
    ASSERT_NE(qp, nullptr);
    ASSERT_LT(SessionQps::posted_mark(*qp), shm::kPostedMarks);
    if (i == 77) h77 = qp->handle;
  }
  EXPECT_EQ(qps.add(std::make_unique<Qp>()), nullptr);
  EXPECT_EQ(qps.handles().size(), device::kMaxQp);
  qps.take(h77);
  Qp* again = qps.add(std::make_unique<Qp>());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(SessionQps::posted_mark(*again), 77u);
  size_t counted = 0;
  qps.for_each([&counted](const Qp*) { ++counted; });
  EXPECT_EQ(counted, device::kMaxQp);
}

}  // namespace
}  // namespace wharf::router
