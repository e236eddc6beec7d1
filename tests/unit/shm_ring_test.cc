// Tests for shm/ring.h: index arithmetic, full/empty, hostile peer indices, wraparound of the
// free-running uint32 counters, and a two-thread run over a real shared mapping.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/bits.h"
#include "shm/ring.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WHARF_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define WHARF_TEST_SANITIZED 1
#endif
#endif

namespace wharf::shm {
namespace {

const char* status_name(RingStatus st) {
  switch (st) {
    case RingStatus::kOk: return "kOk";
    case RingStatus::kEmpty: return "kEmpty";
    case RingStatus::kFull: return "kFull";
    case RingStatus::kCorrupt: return "kCorrupt";
  }
  return "?";
}

}  // namespace

// Lets gtest print statuses by name.
void PrintTo(RingStatus st, std::ostream* os) { *os << status_name(st); }

namespace {

// Both ends of one ring in ordinary memory, for single-threaded tests. Tests that play a
// hostile peer write the peer's index in `hdr` directly.
struct TestRing {
  TestRing(uint32_t capacity, uint32_t slot_bytes)
      : slots(static_cast<size_t>(capacity) * slot_bytes),
        producer(&hdr, slots.data(), capacity, slot_bytes),
        consumer(&hdr, slots.data(), capacity, slot_bytes),
        slot_size(slot_bytes) {}
  TestRing(const TestRing&) = delete;
  TestRing& operator=(const TestRing&) = delete;

  // Reserves, writes `value` into the slot's first 8 bytes and commits.
  RingStatus push(uint64_t value) {
    RingStatus st;
    uint8_t* slot = producer.reserve(&st);
    if (slot == nullptr) return st;
    std::memcpy(slot, &value, sizeof(value));
    producer.commit();
    return st;
  }
  // Peeks, copies out the slot's first 8 bytes and pops.
  RingStatus pop(uint64_t* value) {
    RingStatus st;
    const uint8_t* slot = consumer.peek(&st);
    if (slot == nullptr) return st;
    std::memcpy(value, slot, sizeof(*value));
    consumer.pop();
    return st;
  }
  // Slot that free-running index `i` maps to.
  const uint8_t* slot_of(uint32_t i) const {
    return slots.data() + static_cast<size_t>(i & (producer.capacity() - 1)) * slot_size;
  }

  RingHeader hdr{};
  std::vector<uint8_t> slots;
  RingProducer producer;
  RingConsumer consumer;
  uint32_t slot_size;
};

// Honestly moves `n` entries through the ring, in batches of up to capacity (no content).
// Hot enough to run 2^32 times: no gtest assertion per entry.
void advance(TestRing& r, uint64_t n) {
  RingStatus st = RingStatus::kOk;
  while (n > 0) {
    uint64_t batch = 0;
    while (batch < n && r.producer.reserve(&st) != nullptr) {
      r.producer.commit();
      ++batch;
    }
    uint64_t popped = 0;
    while (r.consumer.peek(&st) != nullptr) {
      r.consumer.pop();
      ++popped;
    }
    if (batch == 0 || popped != batch) {
      FAIL() << "advance stalled: pushed " << batch << ", popped " << popped << ", last "
             << status_name(st);
    }
    n -= batch;
  }
}

// ---------------------------------------------------------------------------------------------
// Honest use, for a table of capacities (1, 2, small, large).

struct Geometry {
  uint32_t capacity;
  uint32_t slot_size;
};

void PrintTo(const Geometry& g, std::ostream* os) {
  *os << "cap " << g.capacity << ", slot " << g.slot_size;
}

class RingGeometryTest : public ::testing::TestWithParam<Geometry> {
 protected:
  void SetUp() override { ring_ = std::make_unique<TestRing>(cap(), GetParam().slot_size); }
  uint32_t cap() const { return GetParam().capacity; }
  std::unique_ptr<TestRing> ring_;
};

TEST_P(RingGeometryTest, NewRingIsEmptyAndWritable) {
  RingStatus st;
  EXPECT_EQ(ring_->consumer.peek(&st), nullptr);
  EXPECT_EQ(st, RingStatus::kEmpty);
  EXPECT_EQ(ring_->consumer.available(), 0u);
  EXPECT_EQ(ring_->producer.in_flight(), 0u);
  EXPECT_EQ(ring_->producer.reserve(&st), ring_->slots.data());
  EXPECT_EQ(st, RingStatus::kOk);
}

TEST_P(RingGeometryTest, AcceptsExactlyCapacityEntriesThenReportsFull) {
  for (uint32_t i = 0; i < cap(); ++i) ASSERT_EQ(ring_->push(i), RingStatus::kOk) << i;
  RingStatus st;
  EXPECT_EQ(ring_->producer.reserve(&st), nullptr);
  EXPECT_EQ(st, RingStatus::kFull);
  EXPECT_EQ(ring_->producer.in_flight(), cap());
  EXPECT_EQ(ring_->consumer.available(), cap());
  // Still full when asked again: kFull does not advance anything.
  EXPECT_EQ(ring_->producer.reserve(&st), nullptr);
  EXPECT_EQ(st, RingStatus::kFull);
}

TEST_P(RingGeometryTest, FullRingAcceptsOneEntryPerPop) {
  for (uint32_t i = 0; i < cap(); ++i) ASSERT_EQ(ring_->push(i), RingStatus::kOk);
  for (uint32_t i = 0; i < 2 * cap() + 3; ++i) {
    uint64_t v;
    ASSERT_EQ(ring_->pop(&v), RingStatus::kOk);
    EXPECT_EQ(v, i);
    ASSERT_EQ(ring_->push(cap() + i), RingStatus::kOk);
    ASSERT_EQ(ring_->push(~0ull), RingStatus::kFull);
  }
}

// A queue moved to a new region by its consumer (ibv_modify_srq): the region holds what
// waited, its producer index their count; a producer that resumes it adds after them, and
// the ring is full after capacity entries in all.
TEST_P(RingGeometryTest, AResumedProducerAddsAfterTheEntriesTheRegionHolds) {
  const uint32_t moved = cap() / 2 + 1;
  for (uint32_t i = 0; i < moved; ++i)
    std::memcpy(ring_->slots.data() + size_t{i} * ring_->slot_size, &i, 4);
  ring_->hdr.producer.value.store(moved);
  ring_->producer.resume();
  for (uint32_t i = moved; i < cap(); ++i) ASSERT_EQ(ring_->push(i), RingStatus::kOk);
  EXPECT_EQ(ring_->push(~0ull), RingStatus::kFull);
  for (uint32_t i = 0; i < cap(); ++i) {
    uint64_t v = 0;
    ASSERT_EQ(ring_->pop(&v), RingStatus::kOk);
    EXPECT_EQ(static_cast<uint32_t>(v), i);
  }
}

TEST_P(RingGeometryTest, DeliversEntriesInOrderOverSeveralLaps) {
  // Uneven batches so that full, empty and partial states land on every slot position.
  uint64_t next_in = 0, next_out = 0;
  const uint32_t batches[] = {1, cap(), cap() / 2 + 1, 3, cap()};
  for (int lap = 0; lap < 3; ++lap) {
    for (uint32_t b : batches) {
      for (uint32_t i = 0; i < b && next_in - next_out < cap(); ++i) {
        ASSERT_EQ(ring_->push(next_in), RingStatus::kOk);
        ++next_in;
      }
      for (uint32_t i = 0; i < (b + 1) / 2 && next_out < next_in; ++i) {
        uint64_t v;
        ASSERT_EQ(ring_->pop(&v), RingStatus::kOk);
        ASSERT_EQ(v, next_out++);
      }
    }
  }
  uint64_t v;
  while (next_out < next_in) {
    ASSERT_EQ(ring_->pop(&v), RingStatus::kOk);
    ASSERT_EQ(v, next_out++);
  }
  EXPECT_EQ(ring_->pop(&v), RingStatus::kEmpty);
}

TEST_P(RingGeometryTest, SlotIsIndexModuloCapacityTimesSlotSize) {
  RingStatus st;
  for (uint32_t i = 0; i < 3 * cap() + 1; ++i) {
    ASSERT_EQ(ring_->producer.reserve(&st), ring_->slot_of(i)) << i;
    ring_->producer.commit();
    ASSERT_EQ(ring_->consumer.peek(&st), ring_->slot_of(i)) << i;
    ring_->consumer.pop();
  }
}

TEST_P(RingGeometryTest, ReservedSlotIsInvisibleUntilCommitted) {
  RingStatus st;
  uint8_t* a = ring_->producer.reserve(&st);
  uint8_t* b = ring_->producer.reserve(&st);
  EXPECT_EQ(a, b);  // reserving twice without commit names the same slot
  EXPECT_EQ(ring_->hdr.producer.value.load(), 0u);
  EXPECT_EQ(ring_->consumer.peek(&st), nullptr);
  EXPECT_EQ(st, RingStatus::kEmpty);
  ring_->producer.commit();
  EXPECT_EQ(ring_->consumer.peek(&st), a);
  EXPECT_EQ(st, RingStatus::kOk);
}

TEST_P(RingGeometryTest, PeekWithoutPopReturnsTheSameSlotAndFreesNothing) {
  for (uint32_t i = 0; i < cap(); ++i) ASSERT_EQ(ring_->push(i), RingStatus::kOk);
  RingStatus st;
  const uint8_t* a = ring_->consumer.peek(&st);
  EXPECT_EQ(ring_->consumer.peek(&st), a);
  EXPECT_EQ(ring_->hdr.consumer.value.load(), 0u);
  EXPECT_EQ(ring_->push(99), RingStatus::kFull);
}

TEST_P(RingGeometryTest, PeekAheadSeesWhatIsProducedBehindHeldSlotsAndFreesNothing) {
  RingStatus st;
  const uint32_t n = cap() > 3 ? 3 : cap();
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT_EQ(ring_->consumer.peek_ahead(i, &st), nullptr) << i;
    EXPECT_EQ(st, RingStatus::kEmpty);
    ASSERT_EQ(ring_->push(i), RingStatus::kOk);
    ASSERT_EQ(ring_->consumer.peek_ahead(i, &st), ring_->slot_of(i)) << i;
    EXPECT_EQ(st, RingStatus::kOk);
    EXPECT_EQ(ring_->consumer.slot_at(i), ring_->slot_of(i));
  }
  EXPECT_EQ(ring_->consumer.peek_ahead(cap(), &st), nullptr);  // never past the ring
  EXPECT_EQ(st, RingStatus::kEmpty);
  EXPECT_EQ(ring_->hdr.consumer.value.load(), 0u);
  ring_->consumer.pop();
  if (n > 1) {
    EXPECT_EQ(ring_->consumer.peek_ahead(0, &st), ring_->slot_of(1));
  }
}

TEST_P(RingGeometryTest, PeekAheadReportsAProducerIndexBeyondTheRingAsCorrupt) {
  ring_->hdr.producer.value.store(cap() + 1);
  RingStatus st;
  EXPECT_EQ(ring_->consumer.peek_ahead(1, &st), nullptr);
  EXPECT_EQ(st, RingStatus::kCorrupt);
}

TEST_P(RingGeometryTest, EachSidePublishesOnlyItsOwnIndex) {
  ASSERT_EQ(ring_->push(1), RingStatus::kOk);
  EXPECT_EQ(ring_->hdr.producer.value.load(), 1u);
  EXPECT_EQ(ring_->hdr.consumer.value.load(), 0u);
  uint64_t v;
  ASSERT_EQ(ring_->pop(&v), RingStatus::kOk);
  EXPECT_EQ(ring_->hdr.producer.value.load(), 1u);
  EXPECT_EQ(ring_->hdr.consumer.value.load(), 1u);
  EXPECT_EQ(ring_->producer.head(), 1u);
  EXPECT_EQ(ring_->consumer.tail(), 1u);
}

std::string geometry_name(const ::testing::TestParamInfo<Geometry>& info) {
  return "cap" + std::to_string(info.param.capacity) + "_slot" +
         std::to_string(info.param.slot_size);
}

INSTANTIATE_TEST_SUITE_P(Capacities, RingGeometryTest,
                         ::testing::Values(Geometry{1, 8}, Geometry{2, 8}, Geometry{4, 16},
                                           Geometry{64, 64}, Geometry{1u << 15, 8}),
                         geometry_name);

// ---------------------------------------------------------------------------------------------
// Hostile peers. `delta` is the peer's published index minus our own, mod 2^32, so the same
// table runs at every starting position, including across the uint32 wrap.

struct HostileCase {
  const char* name;
  // Returns the peer index delta for a ring of capacity c.
  uint32_t (*delta)(uint32_t c);
  RingStatus expected;
};

void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

// Consumer side: the producer publishes tail + delta.
const HostileCase kHostileProducer[] = {
    {"NothingPublished", [](uint32_t) { return 0u; }, RingStatus::kEmpty},
    {"OneEntry", [](uint32_t) { return 1u; }, RingStatus::kOk},
    {"ExactlyFull", [](uint32_t c) { return c; }, RingStatus::kOk},
    {"ClaimsCapacityPlusOne", [](uint32_t c) { return c + 1; }, RingStatus::kCorrupt},
    {"ClaimsTwiceCapacity", [](uint32_t c) { return 2 * c; }, RingStatus::kCorrupt},
    {"BehindConsumerByOne", [](uint32_t) { return UINT32_MAX; }, RingStatus::kCorrupt},
    {"BehindConsumerByCapacity", [](uint32_t c) { return 0u - c; }, RingStatus::kCorrupt},
    {"HalfTheIndexSpaceAway", [](uint32_t) { return 0x80000000u; }, RingStatus::kCorrupt},
};

// Producer side, ring honestly full: the consumer publishes head - delta (delta = entries it
// claims are still in flight).
const HostileCase kHostileConsumer[] = {
    {"ConsumedNothing", [](uint32_t c) { return c; }, RingStatus::kFull},
    {"ConsumedOne", [](uint32_t c) { return c - 1; }, RingStatus::kOk},
    {"ConsumedEverything", [](uint32_t) { return 0u; }, RingStatus::kOk},
    {"RunsAheadOfProducerByOne", [](uint32_t) { return UINT32_MAX; }, RingStatus::kCorrupt},
    {"RunsAheadOfProducerByCapacity", [](uint32_t c) { return 0u - c; }, RingStatus::kCorrupt},
    {"ClaimsCapacityPlusOneInFlight", [](uint32_t c) { return c + 1; }, RingStatus::kCorrupt},
    {"HalfTheIndexSpaceAway", [](uint32_t) { return 0x80000000u; }, RingStatus::kCorrupt},
};

// The consumer at its current tail sees producer index tail + delta.
void expect_consumer_sees(TestRing& r, const HostileCase& c) {
  const uint32_t cap = r.consumer.capacity();
  const uint32_t tail = r.consumer.tail();
  const uint32_t delta = c.delta(cap);
  r.hdr.producer.value.store(tail + delta);
  RingStatus st;
  const uint8_t* slot = r.consumer.peek(&st);
  EXPECT_EQ(st, c.expected);
  if (c.expected == RingStatus::kOk) {
    EXPECT_EQ(slot, r.slot_of(tail));
    EXPECT_EQ(r.consumer.available(), delta);
  } else {
    EXPECT_EQ(slot, nullptr);
    EXPECT_EQ(r.consumer.available(), c.expected == RingStatus::kCorrupt ? cap + 1 : 0u);
  }
  EXPECT_EQ(r.consumer.tail(), tail);
  EXPECT_EQ(r.hdr.consumer.value.load(), tail);  // never publishes in response
}

// The producer, after filling the ring, sees consumer index head - delta.
void expect_producer_sees(TestRing& r, const HostileCase& c) {
  const uint32_t cap = r.producer.capacity();
  RingStatus st;
  while (r.producer.reserve(&st) != nullptr) r.producer.commit();
  ASSERT_EQ(st, RingStatus::kFull);
  const uint32_t head = r.producer.head();
  const uint32_t delta = c.delta(cap);
  r.hdr.consumer.value.store(head - delta);
  uint8_t* slot = r.producer.reserve(&st);
  EXPECT_EQ(st, c.expected);
  EXPECT_EQ(slot, c.expected == RingStatus::kOk ? r.slot_of(head) : nullptr);
  EXPECT_EQ(r.producer.in_flight(), delta);  // raw difference, for diagnostics
  EXPECT_EQ(r.producer.head(), head);
  EXPECT_EQ(r.hdr.producer.value.load(), head);
}

using HostileParam = std::tuple<uint32_t /*capacity*/, uint32_t /*laps before*/, HostileCase>;

std::string hostile_name(const ::testing::TestParamInfo<HostileParam>& info) {
  return std::string(std::get<2>(info.param).name) + "_cap" +
         std::to_string(std::get<0>(info.param)) + "_laps" +
         std::to_string(std::get<1>(info.param));
}

class ConsumerVsHostileProducerTest : public ::testing::TestWithParam<HostileParam> {};

TEST_P(ConsumerVsHostileProducerTest, ClassifiesPublishedProducerIndex) {
  auto [cap, laps, c] = GetParam();
  TestRing r(cap, 8);
  advance(r, static_cast<uint64_t>(laps) * cap + laps);
  expect_consumer_sees(r, c);
}

INSTANTIATE_TEST_SUITE_P(Table, ConsumerVsHostileProducerTest,
                         ::testing::Combine(::testing::Values(1u, 2u, 64u),
                                            ::testing::Values(0u, 3u),
                                            ::testing::ValuesIn(kHostileProducer)),
                         hostile_name);

class ProducerVsHostileConsumerTest : public ::testing::TestWithParam<HostileParam> {};

TEST_P(ProducerVsHostileConsumerTest, ClassifiesPublishedConsumerIndex) {
  auto [cap, laps, c] = GetParam();
  TestRing r(cap, 8);
  advance(r, static_cast<uint64_t>(laps) * cap + laps);
  expect_producer_sees(r, c);
}

INSTANTIATE_TEST_SUITE_P(Table, ProducerVsHostileConsumerTest,
                         ::testing::Combine(::testing::Values(1u, 2u, 64u),
                                            ::testing::Values(0u, 3u),
                                            ::testing::ValuesIn(kHostileConsumer)),
                         hostile_name);

// The two cases the router depends on most, spelled out.
TEST(RingTest, EntriesWrittenAheadAppearTogetherAndOnlyWithinCapacity) {
  TestRing r(4, 16);
  ASSERT_EQ(r.push(1), RingStatus::kOk);
  RingStatus st;
  // Three more fit (one is taken): the next, and two ahead of it.
  for (uint32_t ahead = 0; ahead < 3; ++ahead) {
    uint8_t* slot = r.producer.reserve_ahead(ahead, &st);
    ASSERT_NE(slot, nullptr) << ahead;
    const uint64_t v = 10 + ahead;
    std::memcpy(slot, &v, sizeof(v));
  }
  EXPECT_EQ(r.producer.reserve_ahead(3, &st), nullptr);
  EXPECT_EQ(st, RingStatus::kFull);
  uint64_t v = 0;
  ASSERT_EQ(r.pop(&v), RingStatus::kOk);
  EXPECT_EQ(v, 1u);
  EXPECT_EQ(r.pop(&v), RingStatus::kEmpty) << "an entry written ahead was visible";
  r.producer.commit(3);
  for (uint64_t want = 10; want < 13; ++want) {
    ASSERT_EQ(r.pop(&v), RingStatus::kOk);
    EXPECT_EQ(v, want);
  }
  EXPECT_EQ(r.pop(&v), RingStatus::kEmpty);
}

TEST(RingHostilePeerTest, ProducerReportsCorruptWhenConsumerRunsAhead) {
  TestRing r(4, 8);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(r.push(i), RingStatus::kOk);
  r.hdr.consumer.value.store(5);  // consumed 5 of the 4 entries ever produced
  EXPECT_EQ(r.push(4), RingStatus::kCorrupt);
}

TEST(RingHostilePeerTest, ConsumerReportsCorruptWhenProducerClaimsMoreThanCapacity) {
  TestRing r(4, 8);
  r.hdr.producer.value.store(5);
  uint64_t v;
  EXPECT_EQ(r.pop(&v), RingStatus::kCorrupt);
  EXPECT_EQ(r.consumer.available(), 5u);  // capacity + 1 means corrupt
}

TEST(RingHostilePeerTest, ConsumerTreatsProducerIndexNearUint32MaxAsBehindNotFarAhead) {
  TestRing r(4, 8);
  for (uint32_t p : {UINT32_MAX, UINT32_MAX - 3, 0x80000001u}) {
    r.hdr.producer.value.store(p);
    uint64_t v;
    EXPECT_EQ(r.pop(&v), RingStatus::kCorrupt) << p;
  }
}

TEST(RingHostilePeerTest, HostileSlotBytesAreDeliveredNotInterpreted) {
  // The ring moves bytes; whatever a producer scribbles into a published slot is what the
  // consumer sees (the caller copies it out and validates it).
  TestRing r(2, 16);
  ASSERT_EQ(r.push(7), RingStatus::kOk);
  std::memset(r.slots.data(), 0xff, r.slots.size());
  uint64_t v = 0;
  ASSERT_EQ(r.pop(&v), RingStatus::kOk);
  EXPECT_EQ(v, ~0ull);
}

// ---------------------------------------------------------------------------------------------
// Wraparound of the free-running counters. The ring API starts both indices at 0, so reaching
// UINT32_MAX takes 2^32 honest operations (about 5 s optimized); skipped under sanitizers,
// which do not change this arithmetic.

// Runs both hostile tables at the ring's current position, restoring the honest state after
// each case.
void run_hostile_tables_here(TestRing& r) {
  auto restore = [&r](const RingProducer& p, const RingConsumer& c) {
    r.producer = p;
    r.consumer = c;
    r.hdr.producer.value.store(p.head());
    r.hdr.consumer.value.store(c.tail());
  };
  for (const HostileCase& c : kHostileProducer) {
    SCOPED_TRACE(std::string(c.name) + " at tail " + std::to_string(r.consumer.tail()));
    const RingProducer p = r.producer;
    const RingConsumer q = r.consumer;
    expect_consumer_sees(r, c);
    restore(p, q);
  }
  for (const HostileCase& c : kHostileConsumer) {
    SCOPED_TRACE(std::string(c.name) + " at head " + std::to_string(r.producer.head()));
    const RingProducer p = r.producer;
    const RingConsumer q = r.consumer;
    expect_producer_sees(r, c);
    restore(p, q);
  }
}

TEST(RingWraparoundTest, IndicesWrapPastUint32MaxWithoutLosingOrderOrBounds) {
#ifdef WHARF_TEST_SANITIZED
  GTEST_SKIP() << "2^32 ring operations; run in the optimized tree";
#endif
  constexpr uint32_t kCap = 1u << 12;
  TestRing r(kCap, 8);
  const uint32_t start = UINT32_MAX - kCap / 2 + 1;  // filling the ring crosses 2^32
  advance(r, start);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_EQ(r.producer.head(), start);
  ASSERT_EQ(r.consumer.tail(), start);

  // The hostile tables with our own index just below 2^32: the peer values they publish wrap.
  run_hostile_tables_here(r);

  // Full and empty across the wrap, in order, at the right slots.
  RingStatus st;
  for (uint32_t i = 0; i < kCap; ++i) {
    uint8_t* slot = r.producer.reserve(&st);
    ASSERT_EQ(slot, r.slot_of(start + i)) << i;
    uint64_t v = uint64_t{start} + i;
    std::memcpy(slot, &v, sizeof(v));
    r.producer.commit();
  }
  EXPECT_EQ(r.push(0), RingStatus::kFull);
  EXPECT_EQ(r.hdr.producer.value.load(), start + kCap);  // wrapped to a small number
  EXPECT_LT(r.hdr.producer.value.load(), kCap);
  EXPECT_EQ(r.consumer.available(), kCap);
  for (uint32_t i = 0; i < kCap; ++i) {
    const uint8_t* slot = r.consumer.peek(&st);
    ASSERT_EQ(slot, r.slot_of(start + i)) << i;
    uint64_t v;
    std::memcpy(&v, slot, sizeof(v));
    ASSERT_EQ(v, uint64_t{start} + i);
    r.consumer.pop();
  }
  uint64_t v;
  EXPECT_EQ(r.pop(&v), RingStatus::kEmpty);

  // And just past it: the peer values now wrap backwards.
  ASSERT_EQ(r.consumer.tail(), kCap / 2);
  run_hostile_tables_here(r);
}

// ---------------------------------------------------------------------------------------------
// Two threads, two mappings of one memfd (as the library and the router map it). Bounded by
// the number of entries; a stall fails after a bounded number of empty/full polls.

struct StressParam {
  uint32_t capacity;
  uint32_t slot_size;
  uint32_t entries;
};

void PrintTo(const StressParam& p, std::ostream* os) {
  *os << "cap " << p.capacity << ", slot " << p.slot_size << ", " << p.entries << " entries";
}

class RingStressTest : public ::testing::TestWithParam<StressParam> {};

// Deterministic slot contents for entry `seq`: the sequence number, then bytes derived from it.
void fill_slot(uint8_t* slot, uint32_t slot_size, uint64_t seq) {
  std::memcpy(slot, &seq, sizeof(seq));
  for (uint32_t i = sizeof(seq); i < slot_size; ++i) {
    slot[i] = static_cast<uint8_t>(seq * 131 + i);
  }
}

TEST_P(RingStressTest, TwoThreadsOverSharedMappingPreserveOrderAndContent) {
  const StressParam p = GetParam();
  const size_t slots_off = sizeof(RingHeader);
  const size_t bytes =
      align_up(slots_off + static_cast<size_t>(p.capacity) * p.slot_size, kPageSize);
  int fd = memfd_create("wharf-ring-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  void* a = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  void* b = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(a, MAP_FAILED);
  ASSERT_NE(b, MAP_FAILED);
  ASSERT_NE(a, b);
  auto* base_a = static_cast<uint8_t*>(a);
  auto* base_b = static_cast<uint8_t*>(b);

  constexpr uint64_t kMaxIdlePolls = 50'000'000;
  bool producer_stalled = false;
  std::thread producer_thread([&] {
    RingProducer prod(reinterpret_cast<RingHeader*>(base_a), base_a + slots_off, p.capacity,
                      p.slot_size);
    uint64_t idle = 0;
    for (uint64_t seq = 0; seq < p.entries;) {
      RingStatus st;
      uint8_t* slot = prod.reserve(&st);
      if (slot == nullptr) {
        if (st != RingStatus::kFull || ++idle > kMaxIdlePolls) {
          producer_stalled = true;
          return;
        }
        std::this_thread::yield();
        continue;
      }
      idle = 0;
      fill_slot(slot, p.slot_size, seq);
      prod.commit();
      ++seq;
    }
  });

  RingConsumer cons(reinterpret_cast<RingHeader*>(base_b), base_b + slots_off, p.capacity,
                    p.slot_size);
  std::vector<uint8_t> copy(p.slot_size), expected(p.slot_size);
  uint64_t received = 0, idle = 0, mismatches = 0;
  RingStatus last = RingStatus::kOk;
  while (received < p.entries) {
    const uint8_t* slot = cons.peek(&last);
    if (slot == nullptr) {
      if (last != RingStatus::kEmpty || ++idle > kMaxIdlePolls) break;
      std::this_thread::yield();
      continue;
    }
    idle = 0;
    std::memcpy(copy.data(), slot, p.slot_size);
    cons.pop();
    fill_slot(expected.data(), p.slot_size, received);
    if (copy != expected && mismatches++ == 0) {
      ADD_FAILURE() << "entry " << received << " arrived with wrong contents";
    }
    ++received;
  }
  producer_thread.join();
  EXPECT_FALSE(producer_stalled);
  EXPECT_EQ(received, p.entries) << "consumer stopped with " << status_name(last);
  EXPECT_EQ(mismatches, 0u);
  RingStatus st;
  EXPECT_EQ(cons.peek(&st), nullptr);
  EXPECT_EQ(st, RingStatus::kEmpty);
  munmap(a, bytes);
  munmap(b, bytes);
}

INSTANTIATE_TEST_SUITE_P(Capacities, RingStressTest,
                         ::testing::Values(StressParam{1, 16, 20'000}, StressParam{2, 64, 50'000},
                                           StressParam{64, 64, 1'000'000},
                                           StressParam{1024, 24, 1'000'000}),
                         [](const ::testing::TestParamInfo<StressParam>& p) {
                           return "cap" + std::to_string(p.param.capacity) + "_slot" +
                                  std::to_string(p.param.slot_size);
                         });

}  // namespace
}  // namespace wharf::shm
