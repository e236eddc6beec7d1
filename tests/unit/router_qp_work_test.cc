// Tests for router/qp_work.h: the records of QPs with work under way, and their pool.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "router/qp_work.h"

namespace wharf::router {
namespace {

TEST(QpWorkPoolTest, ARecordComesZeroedAndGoesBackForReuse) {
  QpWorkPool pool;
  QpWork* w = pool.get();
  EXPECT_EQ(pool.in_use(), 1u);
  w->wait_until_ns = 5;
  w->copied_bytes = 7;
  w->rnr_attempts = 2;
  pool.put(w);
  EXPECT_EQ(pool.in_use(), 0u);
  QpWork* again = pool.get();
  EXPECT_EQ(again, w);  // the record just given back
  EXPECT_EQ(again->wait_until_ns, 0u);
  EXPECT_EQ(again->copied_bytes, 0u);
  EXPECT_EQ(again->rnr_attempts, 0);
}

TEST(QpWorkPoolTest, GrowingMovesNoRecordInUse) {
  QpWorkPool pool;
  std::vector<QpWork*> held;
  for (uint64_t i = 0; i < 1000; ++i) {
    held.push_back(pool.get());
    held.back()->wait_until_ns = i + 1;
  }
  EXPECT_EQ(pool.in_use(), 1000u);
  EXPECT_EQ(std::set<QpWork*>(held.begin(), held.end()).size(), held.size());  // all distinct
  for (uint64_t i = 0; i < held.size(); ++i) EXPECT_EQ(held[i]->wait_until_ns, i + 1);
  for (QpWork* w : held) pool.put(w);
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST(QpWorkTest, IdleOnlyWhenNothingIsWaitingCopyingOrPacedAhead) {
  QpWork w;
  EXPECT_TRUE(w.idle(100));
  w.paced_until_ns = 100;
  EXPECT_TRUE(w.idle(100));  // a pacing time passed holds nothing
  EXPECT_FALSE(w.idle(99));
  w.paced_until_ns = 0;
  w.wait_until_ns = 1;
  EXPECT_FALSE(w.idle(100));  // a wait is work until the pass that ends it
  w.wait_until_ns = 0;
  w.copied_bytes = 1;
  EXPECT_FALSE(w.idle(100));
  w.copied_bytes = 0;
  w.retry_attempts = 3;  // counts alone keep nothing: they matter only during a wait
  EXPECT_TRUE(w.idle(100));
}

}  // namespace
}  // namespace wharf::router
