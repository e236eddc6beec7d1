// Tests for shm/posted_marks.h: the library's marks of QPs with new work, taken by the router.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "shm/posted_marks.h"

namespace wharf::shm {
namespace {

std::multiset<uint32_t> take_all(ContextPage* page) {
  std::multiset<uint32_t> got;
  take_posted(page, [&](uint32_t mark) { got.insert(mark); });
  return got;
}

TEST(PostedMarksTest, EachMarkIsTakenOnceHoweverOftenItWasSet) {
  auto page = std::make_unique<ContextPage>();
  EXPECT_TRUE(take_all(page.get()).empty());
  // The first and last mark, both ends of a word and of a summary group, twice each.
  const std::vector<uint32_t> marks = {0,
                                       63,
                                       64,
                                       kPostedWordsPerSummaryBit * 64 - 1,
                                       kPostedWordsPerSummaryBit * 64,
                                       kPostedMarks - 1};
  for (int round = 0; round < 2; ++round)
    for (uint32_t m : marks) mark_posted(page.get(), m);
  EXPECT_EQ(take_all(page.get()), std::multiset<uint32_t>(marks.begin(), marks.end()));
  EXPECT_TRUE(take_all(page.get()).empty());
  EXPECT_EQ(page->posted_summary.load(), 0u);
}

TEST(PostedMarksTest, WordsWithoutTheirSummaryBitWaitForIt) {
  // The library sets the word first: a router passing in between finds nothing yet, and the
  // mark once the summary bit follows.
  auto page = std::make_unique<ContextPage>();
  page->posted[3].store(uint64_t{1} << 5);
  EXPECT_TRUE(take_all(page.get()).empty());
  page->posted_summary.store(1);
  EXPECT_EQ(take_all(page.get()), std::multiset<uint32_t>{3 * 64 + 5});
}

// A library thread publishes work for marks over and over while the router takes them: after
// the last take, the router has seen every mark's last publication (no mark lost).
TEST(PostedMarksTest, NoMarkIsLostWhileTheRouterTakesThem) {
  auto page = std::make_unique<ContextPage>();
  constexpr uint32_t kMarks = 3000;  // across several summary groups
  constexpr uint32_t kRounds = 200;
  std::vector<std::atomic<uint32_t>> published(kMarks);
  std::vector<uint32_t> seen(kMarks, 0);
  std::atomic<bool> done{false};
  auto take = [&] {
    take_posted(page.get(), [&](uint32_t m) {
      ASSERT_LT(m, kMarks);
      seen[m] = published[m].load(std::memory_order_relaxed);
    });
  };
  std::thread router([&] {
    while (!done.load(std::memory_order_acquire)) take();
  });
  for (uint32_t round = 1; round <= kRounds; ++round) {
    for (uint32_t m = (round * 7) % 5; m < kMarks; m += 1 + round % 5) {
      published[m].store(round, std::memory_order_relaxed);
      mark_posted(page.get(), m);
    }
  }
  done.store(true, std::memory_order_release);
  router.join();
  take();
  for (uint32_t m = 0; m < kMarks; ++m) ASSERT_EQ(seen[m], published[m].load()) << "mark " << m;
}

}  // namespace
}  // namespace wharf::shm
