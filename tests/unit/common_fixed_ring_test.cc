// FixedRing: FIFO order through wrap-around, a full ring refusing and unchanged, and a ring
// whose bytes were copied elsewhere carrying on from the copy.
#include <gtest/gtest.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "common/fixed_ring.h"

namespace wharf {
namespace {

TEST(FixedRingTest, KeepsFifoOrderThroughWrapAround) {
  FixedRing<int, 8> q;
  int next_in = 0, next_out = 0;
  for (int round = 0; round < 100; ++round) {
    const int burst = 1 + round % 5;
    for (int i = 0; i < burst; ++i) ASSERT_TRUE(q.push_back(next_in++));
    for (int i = 0; i < burst - 1; ++i) {
      ASSERT_EQ(q.front(), next_out++);
      q.pop_front();
    }
    ASSERT_EQ(q.back(), next_in - 1);
    if (q.size() > 3) {
      while (!q.empty()) {
        ASSERT_EQ(q.front(), next_out++);
        q.pop_front();
      }
    }
  }
  std::vector<int> rest(q.begin(), q.end());
  for (int v : rest) EXPECT_EQ(v, next_out++);
  EXPECT_EQ(next_out, next_in);
}

TEST(FixedRingTest, AFullRingRefusesAndKeepsWhatItHas) {
  FixedRing<int, 4> q;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.push_back(i));
  EXPECT_TRUE(q.full());
  EXPECT_FALSE(q.push_back(99));
  EXPECT_EQ(q.size(), 4u);
  EXPECT_EQ(std::vector<int>(q.begin(), q.end()), (std::vector<int>{0, 1, 2, 3}));
  q.pop_front();
  EXPECT_TRUE(q.push_back(4));
  EXPECT_EQ(std::vector<int>(q.begin(), q.end()), (std::vector<int>{1, 2, 3, 4}));
}

TEST(FixedRingTest, ItsBytesAreItsStateAndOnlyPossiblePositionsAreValid) {
  static_assert(std::is_trivially_copyable_v<FixedRing<int, 4>>);
  FixedRing<int, 4> q;
  for (int i = 0; i < 6; ++i) {  // wrapped
    q.push_back(i);
    if (i >= 3) q.pop_front();
  }
  alignas(FixedRing<int, 4>) unsigned char elsewhere[sizeof q];
  std::memcpy(elsewhere, &q, sizeof q);
  std::memset(static_cast<void*>(&q), 0xa5, sizeof q);
  FixedRing<int, 4> copy;
  std::memcpy(static_cast<void*>(&copy), elsewhere, sizeof copy);
  ASSERT_TRUE(copy.valid());
  EXPECT_EQ(std::vector<int>(copy.begin(), copy.end()), (std::vector<int>{3, 4, 5}));
  EXPECT_FALSE(q.valid());  // garbage positions are caught
}

}  // namespace
}  // namespace wharf
