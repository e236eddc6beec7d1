// Tests for shm/direct_line.h: the router waits for a Busy direct-path line by sleeping, the
// library's hand-back wakes it, and a line kept Busy ends the wait at its deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "shm/direct_line.h"

namespace wharf::shm {
namespace {

constexpr uint64_t kLongNs = 60'000'000'000;  // far beyond the test's own bound

TEST(DirectLineTest, AHandBackWakesTheRouter) {
  QpDirect line{};
  line.state.store(kDirectBusy);
  std::atomic<bool> returned{false}, handed_back{false};
  std::thread router([&] {
    handed_back = wait_while_busy(&line, now_ns() + kLongNs);
    returned = true;
  });
  // Hand the line back only once the router announced it waits: the wake must reach it.
  while (line.router_waits.load() == 0) std::this_thread::yield();
  hand_back_busy_line(&line);
  // Woken, the router returns at once; without the wake it would sleep out its deadline.
  const uint64_t give_up = now_ns() + 10'000'000'000;
  while (!returned && now_ns() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(returned) << "the hand-back did not wake the router";
  futex_wake_all(&line.state);  // ends a wait the hand-back did not
  router.join();
  EXPECT_TRUE(handed_back);
  EXPECT_EQ(line.state.load(), kDirectOn);
  EXPECT_EQ(line.router_waits.load(), 0u);
}

TEST(DirectLineTest, ALineThatIsNotBusyIsNoWait) {
  QpDirect line{};
  // 7: what only a hostile library writes.
  for (uint32_t s : {uint32_t{kDirectOff}, uint32_t{kDirectOn}, 7u}) {
    line.state.store(s);
    EXPECT_TRUE(wait_while_busy(&line, now_ns()));
    EXPECT_EQ(line.router_waits.load(), 0u);
  }
}

TEST(DirectLineTest, ALineKeptBusyEndsTheWaitAtItsDeadline) {
  QpDirect line{};
  line.state.store(kDirectBusy);
  EXPECT_FALSE(wait_while_busy(&line, now_ns() + 2'000'000));
  EXPECT_EQ(line.state.load(), kDirectBusy);
  EXPECT_EQ(line.router_waits.load(), 0u);
}

TEST(DirectLineTest, HandingBackALineTheRouterTurnedOffKeepsItOff) {
  QpDirect line{};
  line.state.store(kDirectOff);
  hand_back_busy_line(&line);
  EXPECT_EQ(line.state.load(), kDirectOff);
}

}  // namespace
}  // namespace wharf::shm
