// Completion queue rings (shm/cq_ring.h): several producers, one consumer, hostile indices.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "shm/cq_ring.h"

namespace wharf::shm {
namespace {

// A CQ region with guard entries before and after the slots, to catch any stray write.
struct TestCq {
  explicit TestCq(uint32_t capacity)
      : cap(capacity), mem(new Cqe[capacity + 2]()), hdr(std::make_unique<RingHeader>()) {
    std::memset(mem.get(), 0xa5, sizeof(Cqe) * (capacity + 2));
    std::memset(mem.get() + 1, 0, sizeof(Cqe) * capacity);
  }
  Cqe* slots() { return mem.get() + 1; }
  bool guards_intact() const {
    const auto* first = reinterpret_cast<const uint8_t*>(&mem[0]);
    const auto* last = reinterpret_cast<const uint8_t*>(&mem[cap + 1]);
    for (size_t i = 0; i < sizeof(Cqe); ++i)
      if (first[i] != 0xa5 || last[i] != 0xa5) return false;
    return true;
  }
  CqProducer producer() { return CqProducer(hdr.get(), slots(), cap); }
  CqConsumer consumer() { return CqConsumer(hdr.get(), slots(), cap); }

  uint32_t cap;
  std::unique_ptr<Cqe[]> mem;
  std::unique_ptr<RingHeader> hdr;
};

Cqe entry(uint64_t wr_id) {
  Cqe c{};
  c.wr_id = wr_id;
  c.byte_len = static_cast<uint32_t>(wr_id * 3);
  c.seq = 0xdeadbeef;  // ignored by push
  return c;
}

// A restarted producer asks whether it pushed an entry before it died (router restart):
// found whether or not it was consumed, until the ring wraps past it.
TEST(CqRingTest, AnEntryPublishedSinceAPositionIsFoundUntilTheRingWraps) {
  TestCq cq(4);
  CqProducer p = cq.producer();
  CqConsumer c = cq.consumer();
  ASSERT_EQ(p.push(entry(1)), RingStatus::kOk);
  const uint32_t from = p.position();
  Cqe mine = entry(2);
  mine.qp_num = 9;
  bool known = false;
  EXPECT_FALSE(p.published_since(from, mine, &known));
  EXPECT_TRUE(known) << "nothing was pushed: it was not";
  ASSERT_EQ(p.push(mine), RingStatus::kOk);
  EXPECT_TRUE(p.published_since(from, mine, &known));
  Cqe other_qp = mine;
  other_qp.qp_num = 10;
  EXPECT_FALSE(p.published_since(from, other_qp, &known));
  EXPECT_FALSE(p.published_since(from + 1, mine, &known)) << "before the position asked";
  Cqe out;
  while (c.pop(&out)) {
  }
  EXPECT_TRUE(p.published_since(from, mine, &known)) << "consumed, still in its slot";
  for (uint64_t i = 3; i < 7; ++i) {
    ASSERT_EQ(p.push(entry(i)), RingStatus::kOk);
    while (c.pop(&out)) {
    }
  }
  EXPECT_FALSE(p.published_since(from, mine, &known));
  EXPECT_FALSE(known) << "the ring wrapped past it";
}

TEST(CqRingTest, EntriesComeOutInOrderAcrossManyWraps) {
  TestCq cq(4);
  CqProducer p = cq.producer();
  CqConsumer c = cq.consumer();
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 1 + round % 4; ++i) ASSERT_EQ(p.push(entry(next_in++)), RingStatus::kOk);
    Cqe out;
    while (c.pop(&out)) {
      EXPECT_EQ(out.wr_id, next_out);
      EXPECT_EQ(out.byte_len, next_out * 3);
      ++next_out;
    }
    ASSERT_EQ(next_out, next_in);
  }
  EXPECT_TRUE(cq.guards_intact());
}

TEST(CqRingTest, StampIsThePositionPlusOne) {
  TestCq cq(2);
  CqProducer p = cq.producer();
  ASSERT_EQ(p.push(entry(1)), RingStatus::kOk);
  ASSERT_EQ(p.push(entry(2)), RingStatus::kOk);
  EXPECT_EQ(cq.slots()[0].seq, 1u);
  EXPECT_EQ(cq.slots()[1].seq, 2u);
  EXPECT_EQ(cq.hdr->producer.value.load(), 2u);
}

TEST(CqRingTest, EachEntryCarriesTheTimeItWasWritten) {
  TestCq cq(2);
  CqProducer p = cq.producer();
  Cqe forged = entry(1);
  forged.completion_ns = 7;  // a producer's own value is not what the consumer reads
  const uint64_t before = monotonic_raw_ns();
  ASSERT_EQ(p.push(forged), RingStatus::kOk);
  ASSERT_EQ(p.push(entry(2)), RingStatus::kOk);
  const uint64_t after = monotonic_raw_ns();
  EXPECT_GE(cq.slots()[0].completion_ns, before);
  EXPECT_LE(cq.slots()[0].completion_ns, cq.slots()[1].completion_ns);
  EXPECT_LE(cq.slots()[1].completion_ns, after);
}

TEST(CqRingTest, FullUntilTheConsumerFreesASlot) {
  TestCq cq(4);
  CqProducer p = cq.producer();
  CqConsumer c = cq.consumer();
  for (int i = 0; i < 4; ++i) ASSERT_EQ(p.push(entry(i)), RingStatus::kOk);
  EXPECT_FALSE(p.has_room(1));
  EXPECT_EQ(p.push(entry(9)), RingStatus::kFull);
  Cqe out;
  ASSERT_TRUE(c.pop(&out));
  EXPECT_TRUE(p.has_room(1));
  EXPECT_FALSE(p.has_room(2));
  EXPECT_EQ(p.push(entry(4)), RingStatus::kOk);
  EXPECT_EQ(cq.hdr->consumer.value.load(), 1u);
}

TEST(CqRingTest, AnEntryIsNotVisibleBeforeItsStamp) {
  TestCq cq(4);
  CqConsumer c = cq.consumer();
  // A producer that claimed position 0 but has not published it yet.
  cq.hdr->producer.value.store(1);
  cq.slots()[0].wr_id = 77;
  Cqe out;
  EXPECT_FALSE(c.pop(&out));
  cq.slots()[0].seq = 1;
  ASSERT_TRUE(c.pop(&out));
  EXPECT_EQ(out.wr_id, 77u);
}

TEST(CqRingTest, CorruptIndicesAreReportedAndNothingIsWritten) {
  for (uint32_t producer : {5u, 100u, 0x80000000u, 0xffffffffu}) {
    TestCq cq(4);
    cq.hdr->producer.value.store(producer);  // more than capacity ahead of consumer 0
    CqProducer p = cq.producer();
    EXPECT_EQ(p.push(entry(1)), RingStatus::kCorrupt) << producer;
    EXPECT_FALSE(p.has_room(1));
    EXPECT_TRUE(cq.guards_intact());
    for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(cq.slots()[i].wr_id, 0u);
  }
}

TEST(CqRingTest, ConcurrentProducersLoseNothingAndKeepTheirOwnOrder) {
  constexpr uint32_t kPerProducer = 200000;
  constexpr int kProducers = 2;
  TestCq cq(64);
  std::vector<std::thread> threads;
  for (int t = 0; t < kProducers; ++t) {
    threads.emplace_back([&cq, t] {
      CqProducer p = cq.producer();
      for (uint32_t i = 0; i < kPerProducer;) {
        RingStatus st = p.push(entry((uint64_t{static_cast<uint32_t>(t)} << 32) | i));
        ASSERT_NE(st, RingStatus::kCorrupt);
        if (st == RingStatus::kOk)
          ++i;
        else
          std::this_thread::yield();
      }
    });
  }
  CqConsumer c = cq.consumer();
  uint32_t next[kProducers] = {};
  for (uint64_t got = 0; got < uint64_t{kPerProducer} * kProducers;) {
    Cqe out;
    if (!c.pop(&out)) continue;
    const auto t = static_cast<uint32_t>(out.wr_id >> 32);
    ASSERT_LT(t, static_cast<uint32_t>(kProducers));
    ASSERT_EQ(static_cast<uint32_t>(out.wr_id), next[t]) << "producer " << t;
    ++next[t];
    ++got;
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(cq.guards_intact());
}

TEST(CqRingTest, CompletionEventsFollowTheArmRequest) {
  CqNotify n{};
  EXPECT_FALSE(claim_cq_event(&n, false, true));  // disarmed
  n.arm = kCqArmedAny;
  EXPECT_TRUE(claim_cq_event(&n, false, true));
  EXPECT_EQ(n.arm.load(), kCqDisarmed);  // one shot
  EXPECT_FALSE(claim_cq_event(&n, true, true));
  n.arm = kCqArmedSolicited;
  EXPECT_FALSE(claim_cq_event(&n, false, true));  // unsolicited success: stays armed
  EXPECT_EQ(n.arm.load(), kCqArmedSolicited);
  EXPECT_TRUE(claim_cq_event(&n, true, true));
  n.arm = kCqArmedSolicited;
  EXPECT_TRUE(claim_cq_event(&n, false, false));  // errors always fire
}

TEST(CqRingTest, ANapIsAnnouncedOnlyOnAnEmptyRingAndAPublishedEntryEndsIt) {
  TestCq cq(4);
  CqProducer p = cq.producer();
  CqConsumer c = cq.consumer();
  CqNotify notify{};
  ASSERT_TRUE(begin_nap(&notify, c));
  EXPECT_EQ(notify.napping.load(), 1u);
  // A producer publishing now ends the announcement (and wakes whoever sleeps on it).
  ASSERT_EQ(p.push(entry(1)), RingStatus::kOk);
  wake_napping_poller(&notify);
  EXPECT_EQ(notify.napping.load(), 0u);
  // With an entry waiting, no nap starts.
  EXPECT_TRUE(c.has_entry());
  EXPECT_FALSE(begin_nap(&notify, c));
  Cqe out;
  ASSERT_TRUE(c.pop(&out));
  EXPECT_FALSE(c.has_entry());
}

// Two threads polling one CQ: the one whose nap ends (its timeout, or an entry it found) must
// not end the other's announcement, or the next producer would not wake the other, which
// would then sleep out its whole nap through a completion.
TEST(CqRingTest, APollerWhoseNapEndsLeavesAnotherPollersNapAnnounced) {
  TestCq cq(4);
  CqProducer p = cq.producer();
  CqConsumer c = cq.consumer();
  CqNotify notify{};
  ASSERT_TRUE(begin_nap(&notify, c));  // thread B announces (and would sleep)
  ASSERT_TRUE(begin_nap(&notify, c));  // thread A too,
  nap(&notify, 1'000'000);             // and wakes by its 1 ms timeout
  EXPECT_EQ(notify.napping.load(), 1u);
  ASSERT_EQ(p.push(entry(1)), RingStatus::kOk);
  EXPECT_FALSE(begin_nap(&notify, c));  // A finds the entry and does not nap
  EXPECT_EQ(notify.napping.load(), 1u);
  wake_napping_poller(&notify);  // the producer ends B's nap
  EXPECT_EQ(notify.napping.load(), 0u);
}

TEST(CqRingTest, AProducerWakesAThreadNappingOnTheCq) {
  TestCq cq(4);
  CqProducer p = cq.producer();
  CqConsumer c = cq.consumer();
  CqNotify notify{};
  ASSERT_TRUE(begin_nap(&notify, c));
  std::thread producer([&] {
    while (notify.napping.load() != 1) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it fall asleep
    ASSERT_EQ(p.push(entry(7)), RingStatus::kOk);
    wake_napping_poller(&notify);
  });
  const auto start = std::chrono::steady_clock::now();
  nap(&notify, 60'000'000'000ull);  // a minute, unless the producer's wake ends it
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  producer.join();
  Cqe out;
  ASSERT_TRUE(c.pop(&out));
  EXPECT_EQ(out.wr_id, 7u);
}

TEST(CqRingTest, ABulkWindowCallsForNapsUntilItEndsAndNeverLongerThanTheNapAllowed) {
  CqNotify n{};
  constexpr uint64_t kNap = 100'000;
  EXPECT_EQ(bulk_nap_ns(n.bulk_until_ns.load(), 5'000'000, kNap), 0u);  // never opened
  extend_bulk_window(&n.bulk_until_ns, 5'000'000);
  EXPECT_EQ(n.bulk_until_ns.load(), 5'000'000 + kBulkWindowNs);
  EXPECT_EQ(bulk_nap_ns(n.bulk_until_ns.load(), 5'000'000, kNap), std::min(kNap, kBulkWindowNs));
  EXPECT_EQ(bulk_nap_ns(n.bulk_until_ns.load(), 5'000'000 + kBulkWindowNs - 10, kNap),
            10u);  // not past its end
  EXPECT_EQ(bulk_nap_ns(n.bulk_until_ns.load(), 5'000'000 + kBulkWindowNs, kNap), 0u);
  EXPECT_EQ(bulk_nap_ns(n.bulk_until_ns.load(), 5'000'000, 0),
            0u);  // naps off (WHARF_POLL_NAP_US=0)
}

TEST(CqRingTest, ABulkWindowMovesOnlyByMoreThanATenthOfItselfAndReplacesAHostileEnd) {
  CqNotify n{};
  extend_bulk_window(&n.bulk_until_ns, 1'000'000);
  const uint64_t first = n.bulk_until_ns.load();
  extend_bulk_window(&n.bulk_until_ns,
                     1'000'000 + kBulkWindowNs / 10);  // too little to write the line
  EXPECT_EQ(n.bulk_until_ns.load(), first);
  extend_bulk_window(&n.bulk_until_ns, 1'000'000 + kBulkWindowNs / 10 + 1);
  EXPECT_EQ(n.bulk_until_ns.load(), first + kBulkWindowNs / 10 + 1);
  // The word is in memory the application writes: an end far ahead is brought back.
  n.bulk_until_ns = ~uint64_t{0};
  extend_bulk_window(&n.bulk_until_ns, 2'000'000);
  EXPECT_EQ(n.bulk_until_ns.load(), 2'000'000 + kBulkWindowNs);
}

}  // namespace
}  // namespace wharf::shm
