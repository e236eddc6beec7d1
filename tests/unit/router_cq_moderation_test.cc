// CQ event moderation (router/cq_moderation.h): when held completions make the event due.
#include <gtest/gtest.h>

#include <cstdint>

#include "router/cq_moderation.h"

namespace wharf::router {
namespace {

TEST(CqModerationTest, WithoutLimitsEveryCompletionRaisesTheEvent) {
  CqModeration m;
  EXPECT_FALSE(m.active());
  EXPECT_TRUE(m.hold(10));
  m.set(1, 0);  // a count of one is no moderation either
  EXPECT_FALSE(m.active());
}

TEST(CqModerationTest, TheCountIsReachedByTheNthCompletion) {
  CqModeration m;
  m.set(3, 0);
  EXPECT_TRUE(m.active());
  EXPECT_FALSE(m.hold(10));
  EXPECT_FALSE(m.hold(20));
  EXPECT_EQ(m.due_ns(), UINT64_MAX);  // no period: only the count ends the wait
  EXPECT_TRUE(m.hold(30));
  m.fired();
  EXPECT_EQ(m.held(), 0u);
  EXPECT_FALSE(m.hold(40));  // counting again from zero
}

TEST(CqModerationTest, ThePeriodRunsFromTheFirstHeldCompletion) {
  CqModeration m;
  m.set(0, 5);  // time only
  EXPECT_EQ(m.due_ns(), UINT64_MAX);
  EXPECT_FALSE(m.hold(1000));
  EXPECT_FALSE(m.hold(4000));
  EXPECT_EQ(m.due_ns(), 6000u);
  m.fired();
  EXPECT_EQ(m.due_ns(), UINT64_MAX);
}

TEST(CqModerationTest, CountAndPeriodWhicheverComesFirst) {
  CqModeration m;
  m.set(2, 100);
  EXPECT_FALSE(m.hold(0));
  EXPECT_EQ(m.due_ns(), 100000u);
  EXPECT_TRUE(m.hold(50));
}

}  // namespace
}  // namespace wharf::router
