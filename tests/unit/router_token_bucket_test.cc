// The router's deficit token bucket (router/token_bucket.h), driven by a virtual clock: when it
// admits, when it says the next message may start, and that it holds its rate exactly over
// long runs whatever the message size or polling rate.
#include <gtest/gtest.h>

#include <cstdint>

#include "router/token_bucket.h"

namespace wharf::router {
namespace {

constexpr uint64_t kNsPerS = 1'000'000'000;
constexpr uint64_t kMsgBytes = 64 * 1024;

TEST(TokenBucketTest, RateZeroIsUnlimitedAndAlwaysReady) {
  TokenBucket b;
  b.configure(0, 0, 0);
  EXPECT_FALSE(b.limited());
  uint64_t ready_ns = 12345;
  for (uint64_t now = 0; now < 10; ++now) {
    b.charge(uint64_t{1} << 40);  // a TiB per step never puts it in debt
    EXPECT_TRUE(b.ready(now, &ready_ns)) << now;
  }
  EXPECT_EQ(ready_ns, 12345u);  // not written when ready
}

TEST(TokenBucketTest, AFullBucketAdmitsAndADebtIsRepaidExactlyOnTime) {
  TokenBucket b;
  b.configure(8'000'000, 0, 0);  // 8 Mbit/s = 1 MB/s; default depth is the 64 KiB minimum
  EXPECT_TRUE(b.limited());
  uint64_t ready_ns = 0;
  EXPECT_TRUE(b.ready(0, &ready_ns));  // starts full
  // A message larger than the depth still starts (deficit kind); it leaves a 2 MB debt.
  b.charge(TokenBucket::kMinDepthBytes + 2'000'000);
  ASSERT_FALSE(b.ready(0, &ready_ns));
  EXPECT_EQ(ready_ns, 2 * kNsPerS);  // 2 MB at 1 MB/s
  // Asking again later moves nothing: the answer is the same instant.
  ASSERT_FALSE(b.ready(kNsPerS, &ready_ns));
  EXPECT_EQ(ready_ns, 2 * kNsPerS);
  ASSERT_FALSE(b.ready(2 * kNsPerS - 1, &ready_ns));
  EXPECT_EQ(ready_ns, 2 * kNsPerS);
  EXPECT_TRUE(b.ready(2 * kNsPerS, &ready_ns));
}

TEST(TokenBucketTest, ReadyNsRoundsUpToTheNanosecondTheDebtIsRepaid) {
  TokenBucket b;
  b.configure(24, 1, 0);  // 3 B/s, depth 1 byte
  b.charge(2);            // 1 byte of debt: repaid after 1/3 s, i.e. 333333333.33 ns
  uint64_t ready_ns = 0;
  ASSERT_FALSE(b.ready(0, &ready_ns));
  EXPECT_EQ(ready_ns, 333'333'334u);
  EXPECT_FALSE(b.ready(333'333'333, &ready_ns));
  EXPECT_EQ(ready_ns, 333'333'334u);
  EXPECT_TRUE(b.ready(333'333'334, &ready_ns));
}

TEST(TokenBucketTest, RetuningKeepsTheDebtAndCapsTheTokensAtTheNewDepth) {
  uint64_t ready_ns = 0;
  TokenBucket debtor;
  debtor.configure(8'000'000, 1000, 0);  // 1 MB/s
  debtor.charge(1000 + 1'000'000);
  debtor.retune(16'000'000, 0, 0);  // 2 MB/s: the 1 MB debt is repaid in 0.5 s, not forgiven
  ASSERT_FALSE(debtor.ready(0, &ready_ns));
  EXPECT_EQ(ready_ns, kNsPerS / 2);

  TokenBucket full;
  full.configure(8'000'000, 100'000, 0);
  full.retune(8'000'000, 1000, 0);  // a shallower bucket holds no more than its depth
  full.charge(1000 + 1'000'000);
  ASSERT_FALSE(full.ready(0, &ready_ns));
  EXPECT_EQ(ready_ns, kNsPerS);

  TokenBucket unlimited;
  unlimited.configure(0, 0, 0);
  unlimited.charge(uint64_t{1} << 40);
  unlimited.retune(8'000'000, 1000, 5);  // had no limit: starts full, as configure
  EXPECT_TRUE(unlimited.ready(5, &ready_ns));
  unlimited.charge(1000 + 1'000'000);
  ASSERT_FALSE(unlimited.ready(5, &ready_ns));
  EXPECT_EQ(ready_ns, 5 + kNsPerS);
}

TEST(TokenBucketTest, AnExplicitDepthIsHonoured) {
  TokenBucket b;
  b.configure(8'000'000, 1000, 0);
  b.charge(1000);
  uint64_t ready_ns = 0;
  EXPECT_TRUE(b.ready(0, &ready_ns));  // exactly empty is not in debt
  b.charge(1);
  ASSERT_FALSE(b.ready(0, &ready_ns));
  EXPECT_EQ(ready_ns, 1000u);  // 1 byte at 1 MB/s
}

TEST(TokenBucketTest, TheDefaultDepthIsFiveMillisecondsOfRateAtLeast64KiB) {
  struct Case {
    uint64_t bits_per_s;
    uint64_t depth_bytes;
  } cases[] = {
      {8'000'000, TokenBucket::kMinDepthBytes},  // 5 ms = 5000 B: the minimum applies
      {10'000'000'000, 6'250'000},               // 1.25 GB/s * 5 ms
      {1, TokenBucket::kMinDepthBytes},          // below 1 B/s: still limited, to 1 B/s
  };
  for (const Case& c : cases) {
    TokenBucket b;
    b.configure(c.bits_per_s, 0, 0);
    EXPECT_TRUE(b.limited()) << c.bits_per_s;
    uint64_t ready_ns = 0;
    b.charge(c.depth_bytes);
    EXPECT_TRUE(b.ready(0, &ready_ns)) << c.bits_per_s;
    b.charge(1);
    EXPECT_FALSE(b.ready(0, &ready_ns)) << c.bits_per_s;
  }
}

TEST(TokenBucketTest, ALongIdleRefillsNoMoreThanTheDepth) {
  TokenBucket b;
  b.configure(8'000'000, 0, 0);
  b.charge(TokenBucket::kMinDepthBytes + 1000);  // in debt
  const uint64_t later = 3600 * kNsPerS;         // an hour idle
  uint64_t ready_ns = 0;
  ASSERT_TRUE(b.ready(later, &ready_ns));
  // Full again, and no fuller: one depth passes, one byte more puts it 1 µs in debt.
  b.charge(TokenBucket::kMinDepthBytes);
  EXPECT_TRUE(b.ready(later, &ready_ns));
  b.charge(1);
  ASSERT_FALSE(b.ready(later, &ready_ns));
  EXPECT_EQ(ready_ns, later + 1000);
}

TEST(TokenBucketTest, FrequentPollingLosesNoFractionOfAByte) {
  TokenBucket b;
  b.configure(1000, 0, 0);                      // 1 kbit/s = 125 B/s
  b.charge(TokenBucket::kMinDepthBytes + 125);  // 125 bytes of debt: one second
  // Each 1 µs poll refills 1/8000 of a byte; a bucket counting whole bytes would never refill.
  uint64_t ready_ns = 0;
  uint64_t now = 0;
  while (!b.ready(now, &ready_ns) && now <= 2 * kNsPerS) now += 1000;
  EXPECT_EQ(now, kNsPerS);
}

TEST(TokenBucketTest, ATimeBeforeTheLastRefillDoesNotRefill) {
  TokenBucket b;
  b.configure(8'000'000, 1000, 1000);
  b.charge(2000);  // 1000 bytes of debt at 1 MB/s: 1 ms
  uint64_t ready_ns = 0;
  ASSERT_FALSE(b.ready(1000, &ready_ns));
  EXPECT_EQ(ready_ns, 1000 + 1'000'000u);
  EXPECT_FALSE(b.ready(0, &ready_ns));  // the clock read earlier: no tokens for it
  EXPECT_TRUE(b.ready(1000 + 1'000'000, &ready_ns));
}

// Sends 64 KiB messages as fast as the bucket allows for `seconds` of virtual time (the clock
// jumps to ready_ns whenever the bucket is in debt); returns the bytes that started.
uint64_t send_for(uint64_t bits_per_s, uint64_t seconds) {
  TokenBucket b;
  b.configure(bits_per_s, 0, 0);
  const uint64_t end = seconds * kNsPerS;
  uint64_t now = 0;
  uint64_t sent = 0;
  while (now <= end) {
    uint64_t ready_ns = 0;
    if (b.ready(now, &ready_ns)) {
      b.charge(kMsgBytes);
      sent += kMsgBytes;
    } else {
      if (ready_ns <= now) {  // would never advance
        ADD_FAILURE() << "in debt at " << now << " but ready at " << ready_ns;
        break;
      }
      now = ready_ns;
    }
  }
  return sent;
}

TEST(TokenBucketTest, OverTenSecondsTheBytesSentAreRateTimesTimePlusDepth) {
  struct Case {
    uint64_t bits_per_s;
    uint64_t depth_bytes;  // the default for the rate
  } cases[] = {
      {1'000'000'000, 625'000},                    // 1 Gbit/s: 5 ms of rate
      {100'000'000, TokenBucket::kMinDepthBytes},  // 100 Mbit/s: 5 ms is below the minimum
  };
  for (const Case& c : cases) {
    const double expected = static_cast<double>(c.bits_per_s / 8 * 10 + c.depth_bytes);
    const double sent = static_cast<double>(send_for(c.bits_per_s, 10));
    EXPECT_NEAR(sent, expected, expected * 0.001) << c.bits_per_s;
  }
}

}  // namespace
}  // namespace wharf::router
