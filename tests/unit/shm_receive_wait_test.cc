// Tests for shm/receive_wait.h: a direct-path sender waiting for its peer's next receive.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "shm/receive_wait.h"

namespace wharf::shm {
namespace {

TEST(ReceiveWaitTest, AWaitIsAnnouncedOnlyWhileNoReceiveIsPostedAndAPostEndsIt) {
  QpDirect line{};
  RingHeader rq{};
  rq.producer.value = 5;
  rq.consumer.value = 5;
  EXPECT_TRUE(begin_receive_wait(&line, &rq, 5));
  EXPECT_EQ(line.receive_wanted.load(), 1u);
  rq.producer.value = 6;  // the receiver posts
  wake_receive_waiter(&line);
  EXPECT_EQ(line.receive_wanted.load(), 0u);
  EXPECT_FALSE(begin_receive_wait(&line, &rq, 5)) << "a receive is there: nothing to wait for";
  wake_receive_waiter(&line);  // the announcement left standing is cleared by the next post
  EXPECT_EQ(line.receive_wanted.load(), 0u);
}

TEST(ReceiveWaitTest, APostWakesASenderWaitingForIt) {
  QpDirect line{};
  RingHeader rq{};
  ASSERT_TRUE(begin_receive_wait(&line, &rq, 0));
  std::thread receiver([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it fall asleep
    rq.producer.value.store(1, std::memory_order_release);
    wake_receive_waiter(&line);
  });
  const auto start = std::chrono::steady_clock::now();
  receive_wait(&line, 60'000'000'000ull);  // a minute, unless the receiver's wake ends it
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  receiver.join();
  EXPECT_EQ(rq.producer.value.load(), 1u);
}

}  // namespace
}  // namespace wharf::shm
