// RingQueue: FIFO order through wrap-around and growth, no allocation while there is room,
// memory given back when a large queue empties, popped elements released.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/ring_queue.h"

namespace wharf {
namespace {

TEST(RingQueueTest, KeepsFifoOrderThroughWrapAroundAndGrowth) {
  RingQueue<int> q;
  EXPECT_EQ(q.capacity(), 0u);  // never used: no memory
  int next_in = 0, next_out = 0;
  // Wrap around a small array many times, then grow while wrapped, then shrink again.
  for (int round = 0; round < 100; ++round) {
    const int burst = round < 50 ? 3 : 1 + round % 17;
    for (int i = 0; i < burst; ++i) q.push_back(next_in++);
    for (int i = 0; i < burst - 1; ++i) {
      ASSERT_EQ(q.front(), next_out++);
      q.pop_front();
    }
    ASSERT_EQ(q.back(), next_in - 1);
  }
  std::vector<int> rest(q.begin(), q.end());
  for (int v : rest) EXPECT_EQ(v, next_out++);
  EXPECT_EQ(next_out, next_in);
  EXPECT_EQ(q.size(), rest.size());
}

TEST(RingQueueTest, AllocatesOnlyWhenFullAndGivesALargeArrayBackWhenEmptied) {
  RingQueue<int> q;
  for (int i = 0; i < 4; ++i) q.push_back(i);
  EXPECT_EQ(q.capacity(), 4u);
  for (int round = 0; round < 1000; ++round) {  // steady state: pop one, push one
    q.pop_front();
    q.push_back(round);
    ASSERT_EQ(q.capacity(), 4u);
  }
  q.clear();
  EXPECT_EQ(q.capacity(), 4u);  // small: kept for the next use
  for (int i = 0; i < 100; ++i) q.push_back(i);
  EXPECT_EQ(q.capacity(), 128u);
  while (!q.empty()) q.pop_front();
  EXPECT_EQ(q.capacity(), 0u);  // a burst's memory goes with it
}

TEST(RingQueueTest, APoppedElementIsReleasedAtOnce) {
  RingQueue<std::shared_ptr<int>> q;
  auto p = std::make_shared<int>(7);
  q.push_back(p);
  q.push_back(std::make_shared<int>(8));
  EXPECT_EQ(p.use_count(), 2);
  q.pop_front();
  EXPECT_EQ(p.use_count(), 1);  // not held by the array's old slot
  RingQueue<std::shared_ptr<int>> moved(std::move(q));
  EXPECT_TRUE(q.empty());  // NOLINT(bugprone-use-after-move): a moved-from queue is empty
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(*moved.front(), 8);
}

}  // namespace
}  // namespace wharf
