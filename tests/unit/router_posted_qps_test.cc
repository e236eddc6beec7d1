// Tests for router/posted_qps.h: a session's QPs by posted mark.
#include <gtest/gtest.h>

#include "router/posted_qps.h"

namespace wharf::router {
namespace {

TEST(PostedQpsTest, MarksAreDenseReusedAndNameOnlyTheirQp) {
  PostedQps marks;
  Qp a, b, c;
  EXPECT_EQ(marks.add(&a), 0u);
  EXPECT_EQ(marks.add(&b), 1u);
  EXPECT_EQ(marks.at(0), &a);
  EXPECT_EQ(marks.at(1), &b);
  // A mark no QP has, as a hostile page may set, names nothing.
  EXPECT_EQ(marks.at(2), nullptr);
  EXPECT_EQ(marks.at(shm::kPostedMarks - 1), nullptr);
  marks.remove(0);
  EXPECT_EQ(marks.at(0), nullptr);
  marks.remove(0);  // twice: no effect
  EXPECT_EQ(marks.add(&c), 0u);
  EXPECT_EQ(marks.add(&a), 2u);
  EXPECT_EQ(marks.at(0), &c);
}

TEST(PostedQpsTest, ASessionHasAsManyMarksAsItMayHaveQps) {
  PostedQps marks;
  Qp q;
  for (uint32_t i = 0; i < shm::kPostedMarks; ++i) ASSERT_EQ(marks.add(&q), i);
  EXPECT_EQ(marks.add(&q), shm::kPostedMarks);
  marks.remove(77);
  EXPECT_EQ(marks.add(&q), 77u);
}

}  // namespace
}  // namespace wharf::router
