// What a sweep plans (scala/plan.h): scans, the plane and the covering array, in that order,
// each point once and runnable, far fewer than the full factorial.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "scala/constraints.h"
#include "scala/covering.h"
#include "scala/plan.h"

namespace wharf::scala {
namespace {

TEST(SpreadLevels, KeepsTheEndsAndSpacesTheRest) {
  EXPECT_EQ(spread_levels(13, 7), (std::vector<int>{0, 2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(spread_levels(13, 4), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(spread_levels(3, 7), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(spread_levels(5, 1), (std::vector<int>{0}));
  EXPECT_TRUE(spread_levels(0, 3).empty());
  EXPECT_TRUE(spread_levels(4, 0).empty());
}

TEST(Plan, RunsScansThenThePlaneThenTheCoveringArray) {
  const Space space = default_space();
  const Plan plan = make_plan(space, 2);
  ASSERT_FALSE(plan.points.empty());
  // Phases come in blocks, in this order.
  std::vector<std::string> order;
  for (const PlannedPoint& p : plan.points)
    if (order.empty() || order.back() != p.phase) order.push_back(p.phase);
  EXPECT_EQ(order,
            (std::vector<std::string>{"scan:ql", "scan:qr", "plane", "scan:mrs", "scan:mr_size",
                                      "scan:networks", "scan:rules", "cover"}));
  // The ql scan sees every level of ql, from the baseline.
  size_t ql_scan = 0;
  for (const PlannedPoint& p : plan.points) ql_scan += p.phase == "scan:ql" ? 1 : 0;
  EXPECT_EQ(ql_scan, space.dims()[static_cast<size_t>(space.index_of("ql"))].levels.size());
}

TEST(Plan, PlansEachPointOnceAndOnlyRunnableOnes) {
  const Space space = default_space();
  const Plan plan = make_plan(space, 2);
  std::set<Assignment> seen;
  for (const PlannedPoint& p : plan.points) {
    EXPECT_TRUE(seen.insert(p.at).second) << p.phase;
    EXPECT_EQ(first_violated(space, p.at), nullptr) << p.phase;
  }
}

TEST(Plan, IsFarSmallerThanTheFullFactorialAndSaysSo) {
  const Space space = default_space();
  const Plan plan = make_plan(space, 2);
  EXPECT_EQ(plan.full_factorial, space.full_factorial());
  EXPECT_EQ(plan.runnable, runnable_count(space));
  EXPECT_GE(plan.full_factorial, 10 * plan.points.size());
  EXPECT_GT(plan.covering_rows, 0u);
  EXPECT_LT(plan.points.size(), 200u);  // about a minute at the default measurement
}

TEST(Plan, KeepsTheCoveringRowsNoEarlierPhasePlanned) {
  // A covering row the scans or the plane already planned runs once, under their phase.
  const Space space = default_space();
  const Plan plan = make_plan(space, 2);
  size_t cover = 0;
  for (const PlannedPoint& p : plan.points) cover += p.phase == "cover" ? 1 : 0;
  EXPECT_LE(cover, plan.covering_rows);
  EXPECT_GT(cover, 0u);
}

TEST(Plan, FollowsRestrictedLevels) {
  Space space = default_space();
  std::string error;
  ASSERT_TRUE(space.set_levels("ql=1,64", &error)) << error;
  ASSERT_TRUE(space.set_levels("opcode=send", &error)) << error;
  const Plan plan = make_plan(space, 2);
  for (const PlannedPoint& p : plan.points) {
    EXPECT_EQ(space.level(p.at, "opcode"), "send");
    const double ql = space.number(p.at, "ql");
    EXPECT_TRUE(ql == 1 || ql == 64);
  }
}

}  // namespace
}  // namespace wharf::scala
