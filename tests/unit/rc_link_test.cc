// The reliable transport end to end over a simulated link (rc_sim.h): whatever the link loses,
// duplicates or reorders, and across a cut, every request completes exactly once and in
// order, every SEND is delivered exactly once and in order, every atomic executes once; a
// dead link fails the QP only after timeout x (retry_cnt + 1); RNR as IBTA 9.7.5.2.8.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "unit/rc_sim.h"

namespace wharf::rc::sim {
namespace {

struct Mix {
  uint32_t messages, reads, atomics;
};

// Posts a mix of SENDs (1-4 packets), READs (1-3 packets) and fetch-and-adds.
void post_mix(Connection& c, const Mix& m) {
  uint32_t s = 0, r = 0, a = 0;
  for (uint32_t i = 0; s < m.messages || r < m.reads || a < m.atomics; ++i) {
    if (s < m.messages && (i % 3 == 0 || (r >= m.reads && a >= m.atomics))) {
      c.post(RequestKind::kMessage, 1 + s++ % 4);
    } else if (r < m.reads && (i % 3 == 1 || a >= m.atomics)) {
      c.post(RequestKind::kRead, 1 + r++ % 3);
    } else if (a < m.atomics) {
      c.post(RequestKind::kAtomic, 1);
      a++;
    }
  }
}

// Everything completed successfully, once, in order; SENDs arrived once, in order; each
// atomic executed once; each READ placed all its responses before it completed.
void expect_exactly_once_in_order(const Connection& c, const Mix& m) {
  const uint32_t total = m.messages + m.reads + m.atomics;
  ASSERT_FALSE(c.failed);
  ASSERT_FALSE(c.stuck);
  ASSERT_FALSE(c.out_of_sequence);
  ASSERT_EQ(c.completions.size(), total);
  for (uint32_t i = 0; i < total; ++i) {
    EXPECT_EQ(c.completions[i].first, i);
    EXPECT_EQ(c.completions[i].second, IBV_WC_SUCCESS) << "request " << i;
  }
  ASSERT_EQ(c.delivered.size(), m.messages);
  for (size_t i = 1; i < c.delivered.size(); ++i) EXPECT_LT(c.delivered[i - 1], c.delivered[i]);
  EXPECT_EQ(c.counter, m.atomics);
  std::vector<bool> seen(m.atomics, false);
  for (const auto& [id, orig] : c.atomic_results) {
    ASSERT_LT(orig, m.atomics);
    EXPECT_FALSE(seen[orig]) << "two atomics read " << orig;
    seen[orig] = true;
  }
  EXPECT_EQ(c.read_placed.size(), m.reads);
}

struct LinkCase {
  const char* name;
  Faults faults;
};

class LossyLinkTest : public ::testing::TestWithParam<LinkCase> {};

TEST_P(LossyLinkTest, EveryRequestCompletesExactlyOnceInOrder) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Connection c(seed, /*sq_psn=*/0xffff00);  // crosses the 24-bit wrap
    c.faults = GetParam().faults;
    c.limits.timeout = 4;  // 65 us
    c.limits.retry_cnt = 7;
    c.limits.max_rd_atomic = 4;
    const Mix m{60, 20, 20};
    post_mix(c, m);
    c.run(UINT64_MAX);
    expect_exactly_once_in_order(c, m);
    EXPECT_TRUE(c.requester.idle());
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, LossyLinkTest,
                         ::testing::Values(LinkCase{"Perfect", Faults{}},
                                           LinkCase{"Loss10", Faults{0.10, 0, 0}},
                                           LinkCase{"Duplicates30", Faults{0, 0.30, 0}},
                                           LinkCase{"Reorder30", Faults{0, 0, 0.30}},
                                           LinkCase{"Everything", Faults{0.05, 0.10, 0.20}}),
                         [](const ::testing::TestParamInfo<LinkCase>& i) {
                           return std::string(i.param.name);
                         });

// The engine's state is its bytes (what the router's restart relies on): the requester and
// the responder of one connection, copied byte for byte into another connection's place in
// the middle of a lossy run, while the originals are overwritten, carry on there exactly as
// an untouched twin does. A pointer into the original's own storage would read garbage.
TEST(RelocationTest, TheEngineCopiedByItsBytesElsewhereCarriesOnAsItsTwin) {
  static_assert(std::is_trivially_copyable_v<Requester<Work>>);
  static_assert(std::is_trivially_copyable_v<Responder>);
  const Mix mix{300, 60, 40};
  Faults lossy{0.1, 0.05, 0.2};
  Connection twin(11, 0xffff00), from(11, 0xffff00), to(11, 0xffff00);
  for (Connection* c : {&twin, &from, &to}) {
    c->faults = lossy;
    c->limits.max_rd_atomic = 4;
    post_mix(*c, mix);
  }
  for (uint64_t t = 200'000; t <= 1'000'000; t += 200'000) {
    for (Connection* c : {&twin, &from, &to}) c->run(t);
    ASSERT_FALSE(twin.requester.idle()) << "the copies must be taken mid-run";
    std::memcpy(static_cast<void*>(&to.requester), &from.requester, sizeof to.requester);
    std::memcpy(static_cast<void*>(&to.responder), &from.responder, sizeof to.responder);
    std::memset(static_cast<void*>(&from.requester), 0xa5, sizeof from.requester);
    std::memset(static_cast<void*>(&from.responder), 0xa5, sizeof from.responder);
    std::memcpy(static_cast<void*>(&from.requester), &to.requester, sizeof from.requester);
    std::memcpy(static_cast<void*>(&from.responder), &to.responder, sizeof from.responder);
  }
  twin.run(UINT64_MAX);
  to.run(UINT64_MAX);
  expect_exactly_once_in_order(to, mix);
  EXPECT_EQ(to.completions, twin.completions);
  EXPECT_EQ(to.delivered, twin.delivered);
  EXPECT_EQ(to.transmissions, twin.transmissions);
  EXPECT_EQ(to.now, twin.now);
}

TEST(LinkCutTest, AWindowInFlightWhenTheLinkBreaksGoesAgainWhenItReturns) {
  Connection c(7);
  c.limits.timeout = 20;  // 4.3 s: only the replay can explain a quick recovery
  const Mix m{10, 2, 2};
  post_mix(c, m);
  c.run(c.faults.latency_ns / 2);  // requests are on the wire
  c.cut(/*down_ns=*/1000000);
  const uint64_t back = c.now + 1000000;
  c.run(UINT64_MAX);
  expect_exactly_once_in_order(c, m);
  EXPECT_LT(c.now, back + 1000000);  // within a millisecond of the link's return
}

TEST(DeadLinkTest, RetryExceededAfterTimeoutTimesRetryCountPlusOne) {
  for (uint8_t retry_cnt : {0, 1, 3, 7}) {
    Connection c(1);
    c.drop = [](const Packet&) { return true; };
    c.limits.timeout = 8;  // 1.05 ms
    c.limits.retry_cnt = retry_cnt;
    c.post(RequestKind::kMessage, 1);
    c.post(RequestKind::kMessage, 1);
    c.run(UINT64_MAX);
    ASSERT_EQ(c.completions.size(), 1u);
    EXPECT_EQ(c.completions[0].second, IBV_WC_RETRY_EXC_ERR);
    EXPECT_TRUE(c.failed);
    EXPECT_EQ(c.now, ack_timeout_ns(8) * (retry_cnt + 1u));
    EXPECT_EQ(c.transmissions, 2u * (retry_cnt + 1u));  // go-back-N sends the whole window
  }
}

TEST(RnrTest, AReceiverWithoutBuffersFailsTheQpAfterRnrRetryRefusals) {
  Connection c(1);
  c.receives = 0;
  c.limits.rnr_retry = 3;
  c.min_rnr_timer = 5;  // 60 us
  c.post(RequestKind::kMessage, 2);
  c.run(UINT64_MAX);
  ASSERT_EQ(c.completions.size(), 1u);
  EXPECT_EQ(c.completions[0].second, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(c.rnr_naks, 4u);  // the first refusal and three retries
  EXPECT_GE(c.now, 3 * rnr_timer_ns(5));
}

TEST(RnrTest, WithRnrRetrySevenTheRequesterWaitsUntilABufferIsPosted) {
  Connection c(1);
  c.receives = 0;
  c.limits.rnr_retry = kRnrRetryInfinite;
  c.limits.retry_cnt = 0;  // RNR waits are not ACK timeouts
  const Mix m{5, 0, 0};
  post_mix(c, m);
  c.run(10 * rnr_timer_ns(1) * 100);
  EXPECT_TRUE(c.completions.empty());
  EXPECT_GT(c.rnr_naks, 50u);
  c.receives = 5;
  c.run(UINT64_MAX);
  expect_exactly_once_in_order(c, m);
}

}  // namespace
}  // namespace wharf::rc::sim
