// ByteQueue (links/byte_queue.h): bytes come out in the order they went in, across
// growth and compaction, unappend/consume take back exactly what they say, and a queue's
// memory is reported to its owner's counter.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "links/byte_queue.h"

namespace wharf::links {
namespace {

TEST(ByteQueueTest, KeepsOrderAcrossGrowthAndCompaction) {
  ByteQueue q;
  std::vector<uint8_t> model;
  uint8_t next = 0;
  // Appends outpace consumption, then consumption catches up: the buffer grows, compacts
  // and grows again, and every byte must come out in order.
  for (int round = 0; round < 2000; ++round) {
    const size_t in = 1 + (round * 7919) % 3000;
    uint8_t* at = q.append(in);
    for (size_t i = 0; i < in; ++i) model.push_back(at[i] = next++);
    const size_t out = std::min(q.size(), static_cast<size_t>((round * 104729) % 2500));
    ASSERT_EQ(std::memcmp(q.data(), model.data(), out), 0) << "round " << round;
    q.consume(out);
    model.erase(model.begin(), model.begin() + static_cast<long>(out));
    ASSERT_EQ(q.size(), model.size());
  }
  ASSERT_EQ(std::memcmp(q.data(), model.data(), model.size()), 0);
}

TEST(ByteQueueTest, UnappendAndConsumeTakeBackWhatTheySay) {
  ByteQueue q;
  std::memcpy(q.append(4), "abcd", 4);
  q.unappend(2);
  EXPECT_EQ(q.size(), 2u);
  std::memcpy(q.append(2), "xy", 2);
  EXPECT_EQ(std::memcmp(q.data(), "abxy", 4), 0);
  q.consume(3);
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.data()[0], 'y');
  q.consume(5);  // more than is there: empties it
  EXPECT_TRUE(q.empty());
  q.unappend(1);
  EXPECT_TRUE(q.empty());
}

TEST(ByteQueueTest, ADrainingQueueGivesBackWhatABurstTook) {
  ByteQueue q;
  uint8_t* at = q.append(1u << 20);
  for (size_t i = 0; i < (1u << 20); ++i) at[i] = static_cast<uint8_t>(i);
  const size_t burst = q.capacity();
  EXPECT_GE(burst, 1u << 20);
  q.consume(512u << 10);
  q.shrink(64u << 10);  // half full: keeps its memory
  EXPECT_EQ(q.capacity(), burst);
  q.consume((512u << 10) - 1000);
  q.shrink(64u << 10);  // 1000 bytes left: down to what it keeps at least, bytes intact
  EXPECT_EQ(q.capacity(), 64u << 10);
  ASSERT_EQ(q.size(), 1000u);
  for (size_t i = 0; i < 1000; ++i)
    ASSERT_EQ(q.data()[i], static_cast<uint8_t>((1u << 20) - 1000 + i)) << i;
  q.consume(1000);
  q.shrink(64u << 10);  // within what it may keep
  EXPECT_EQ(q.capacity(), 64u << 10);
  q.shrink(1024);
  EXPECT_EQ(q.capacity(), 0u);
  std::memcpy(q.append(3), "abc", 3);  // and grows again
  EXPECT_EQ(std::memcmp(q.data(), "abc", 3), 0);
  q.clear();
  EXPECT_TRUE(q.empty());
}

TEST(ByteQueueTest, ReportsItsMemoryToTheOwnersCounter) {
  size_t memory = 0;
  {
    ByteQueue a(&memory), b(&memory);
    a.append(100);
    EXPECT_EQ(memory, a.capacity());
    b.append(200u << 10);
    EXPECT_EQ(memory, a.capacity() + b.capacity());
    b.consume(200u << 10);
    b.shrink(64u << 10);  // empty: frees it all
    EXPECT_EQ(memory, a.capacity());
  }
  EXPECT_EQ(memory, 0u);  // and what a queue holds goes when it does
}

}  // namespace
}  // namespace wharf::links
