// Tests for shm/layout.h: the byte layout of WQEs and CQEs (docs/shm-rings.md) and the
// offsets computed by cq_layout / qp_layout / srq_layout, including page rounding edges.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>

#include "common/bits.h"
#include "shm/layout.h"

namespace wharf::shm {
namespace {

// ---- Static facts: these structs are read and written in place in shared memory. ----

template <class T>
constexpr bool kSharedPod = std::is_standard_layout_v<T>&& std::is_trivially_copyable_v<T>;
static_assert(kSharedPod<Sge> && kSharedPod<SendWqe> && kSharedPod<RecvWqe> && kSharedPod<Cqe>);

static_assert(offsetof(Sge, addr) == 0);
static_assert(offsetof(Sge, length) == 8);
static_assert(offsetof(Sge, lkey) == 12);

static_assert(offsetof(SendWqe, wr_id) == 0);
static_assert(offsetof(SendWqe, opcode) == 8);
static_assert(offsetof(SendWqe, flags) == 9);
static_assert(offsetof(SendWqe, num_sge) == 10);
static_assert(offsetof(SendWqe, reserved0) == 11);
static_assert(offsetof(SendWqe, imm_data) == 12);
static_assert(offsetof(SendWqe, remote_addr) == 16);
static_assert(offsetof(SendWqe, rkey) == 24);
static_assert(offsetof(SendWqe, inline_len) == 28);
static_assert(offsetof(SendWqe, compare_add) == 32);
static_assert(offsetof(SendWqe, swap) == 40);
static_assert(offsetof(SendWqe, ah_handle) == 48);
static_assert(offsetof(SendWqe, remote_qpn) == 52);
static_assert(offsetof(SendWqe, remote_qkey) == 56);
static_assert(offsetof(SendWqe, remote_srqn) == 60);

static_assert(offsetof(RecvWqe, wr_id) == 0);
static_assert(offsetof(RecvWqe, num_sge) == 8);
static_assert(offsetof(RecvWqe, reserved) == 12);

static_assert(offsetof(Cqe, wr_id) == 0);
static_assert(offsetof(Cqe, status) == 8);
static_assert(offsetof(Cqe, opcode) == 9);
static_assert(offsetof(Cqe, vendor_err) == 10);
static_assert(offsetof(Cqe, byte_len) == 12);
static_assert(offsetof(Cqe, imm_data) == 16);
static_assert(offsetof(Cqe, qp_num) == 20);
static_assert(offsetof(Cqe, src_qp) == 24);
static_assert(offsetof(Cqe, wc_flags) == 28);
static_assert(offsetof(Cqe, pkey_index) == 32);
static_assert(offsetof(Cqe, slid) == 34);
static_assert(offsetof(Cqe, sl) == 36);
static_assert(offsetof(Cqe, dlid_path_bits) == 37);
static_assert(offsetof(Cqe, discarded) == 38);
static_assert(offsetof(Cqe, completion_ns) == 40);
static_assert(offsetof(Cqe, tm_tag) == 48);
static_assert(offsetof(Cqe, seq) == 60);
static_assert(alignof(Cqe) == 8);

static_assert(offsetof(RingHeader, producer) == 0);
static_assert(offsetof(RingHeader, consumer) == kCacheLine);
static_assert(sizeof(CqNotify) == kCacheLine);
static_assert(sizeof(QpDirect) == kCacheLine);
static_assert(sizeof(QpCounters) == 6 * kCacheLine);
static_assert(offsetof(QpCounters, express_msgs) == 40);
static_assert(offsetof(QpCounters, tx_by_opcode) == kCacheLine);
static_assert(offsetof(QpCounters, errors_by_status) == 3 * kCacheLine);
static_assert(offsetof(ContextPage, mr_epoch) == kCacheLine);
static_assert(offsetof(ContextPage, posted_summary) == 2 * kCacheLine);
static_assert(offsetof(ContextPage, posted) == 2 * kCacheLine + 8);
static_assert(sizeof(ContextPage) <= kContextPageSize);
static_assert(kContextPageSize == 3 * kPageSize);
static_assert(kPostedMarkWords == 64 * kPostedWordsPerSummaryBit);

static_assert(kWqeSignaled == 1 && kWqeSolicited == 2 && kWqeInline == 4 && kWqeFence == 8);
static_assert(kCqDisarmed == 0 && kCqArmedAny == 1 && kCqArmedSolicited == 2);

// Every limit is a power of two where the ring needs one, and fits a SendWqe's num_sge byte.
static_assert(is_pow2(kMaxQueueDepth) && is_pow2(kMaxCqDepth));
static_assert(kMaxSendSge <= UINT8_MAX);

// The layout functions are usable at compile time.
static_assert(cq_layout(0).total == kPageSize);

// ---- Slot sizes ----

struct SendSlotCase {
  uint32_t max_sge, max_inline, expected;
};

void PrintTo(const SendSlotCase& c, std::ostream* os) {
  *os << "sge " << c.max_sge << ", inline " << c.max_inline;
}

class SendSlotSizeTest : public ::testing::TestWithParam<SendSlotCase> {};

TEST_P(SendSlotSizeTest, IsHeaderPlusLargerOfSgesAndInlineRoundedToCacheLine) {
  const SendSlotCase c = GetParam();
  EXPECT_EQ(send_slot_size(c.max_sge, c.max_inline), c.expected);
}

INSTANTIATE_TEST_SUITE_P(Table, SendSlotSizeTest,
                         ::testing::Values(SendSlotCase{0, 0, 64},     // header only
                                           SendSlotCase{1, 0, 128},    // 80 -> 128
                                           SendSlotCase{0, 1, 128},    // 65 -> 128
                                           SendSlotCase{4, 0, 128},    // exactly 128
                                           SendSlotCase{0, 64, 128},   // exactly 128
                                           SendSlotCase{5, 0, 192},    // 144 -> 192
                                           SendSlotCase{1, 64, 128},   // inline wins
                                           SendSlotCase{8, 64, 192},   // SGEs win
                                           SendSlotCase{30, 0, 576},   // 544 -> 576
                                           SendSlotCase{0, 512, 576},  // exactly 576
                                           SendSlotCase{kMaxSendSge, kMaxInline, 576}));

struct RecvSlotCase {
  uint32_t max_sge, expected;
};

void PrintTo(const RecvSlotCase& c, std::ostream* os) { *os << "sge " << c.max_sge; }

class RecvSlotSizeTest : public ::testing::TestWithParam<RecvSlotCase> {};

TEST_P(RecvSlotSizeTest, IsHeaderPlusSgesRoundedTo16) {
  EXPECT_EQ(recv_slot_size(GetParam().max_sge), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(Table, RecvSlotSizeTest,
                         ::testing::Values(RecvSlotCase{0, 16}, RecvSlotCase{1, 32},
                                           RecvSlotCase{2, 48}, RecvSlotCase{kMaxRecvSge, 496}));

TEST(SlotSizeTest, EverySupportedShapeHoldsItsHeaderAndBody) {
  for (uint32_t sge = 0; sge <= kMaxSendSge; ++sge) {
    for (uint32_t inl = 0; inl <= kMaxInline; inl += 13) {
      const uint32_t s = send_slot_size(sge, inl);
      ASSERT_EQ(s % kCacheLine, 0u) << sge << "," << inl;
      ASSERT_GE(s, sizeof(SendWqe) + sge * sizeof(Sge));
      ASSERT_GE(s, sizeof(SendWqe) + inl);
      ASSERT_LT(s - kCacheLine,
                std::max<size_t>(sizeof(SendWqe) + sge * sizeof(Sge), sizeof(SendWqe) + inl));
    }
  }
  for (uint32_t sge = 0; sge <= kMaxRecvSge; ++sge) {
    const uint32_t s = recv_slot_size(sge);
    ASSERT_EQ(s % 16, 0u);
    ASSERT_EQ(s, sizeof(RecvWqe) + sge * sizeof(Sge));  // both are multiples of 16 already
  }
}

// ---- Completion queue ----

struct CqCase {
  uint32_t entries;
  size_t total;
};

void PrintTo(const CqCase& c, std::ostream* os) { *os << c.entries << " entries"; }

class CqLayoutTest : public ::testing::TestWithParam<CqCase> {};

TEST_P(CqLayoutTest, RingThenNotifyLineThenSlotsRoundedToPages) {
  const CqLayout l = cq_layout(GetParam().entries);
  EXPECT_EQ(l.entries, GetParam().entries);
  EXPECT_EQ(l.ring_off, 0u);
  EXPECT_EQ(l.notify_off, 128u);
  EXPECT_EQ(l.slots_off, 192u);
  EXPECT_EQ(l.total, GetParam().total);
  EXPECT_EQ(l.total % kPageSize, 0u);
  EXPECT_LE(l.slots_off + static_cast<size_t>(l.entries) * sizeof(Cqe), l.total);
}

// 61 CQEs end exactly at 4096 (192 + 61 * 64); one more needs a second page.
INSTANTIATE_TEST_SUITE_P(Table, CqLayoutTest,
                         ::testing::Values(CqCase{0, 4096}, CqCase{1, 4096}, CqCase{61, 4096},
                                           CqCase{62, 8192}, CqCase{64, 8192},
                                           CqCase{1024, 69632},  // 192 + 65536 -> 17 pages
                                           CqCase{kMaxCqDepth, (1u << 26) + 4096}));

// ---- Queue pair ----

struct QpCase {
  const char* name;
  uint32_t sq_entries, sq_slot, rq_entries, rq_slot;
  size_t rq_slots_off, total;
};

void PrintTo(const QpCase& c, std::ostream* os) { *os << c.name; }

class QpLayoutTest : public ::testing::TestWithParam<QpCase> {};

TEST_P(QpLayoutTest, RingsDirectLineCountersCmStepsCompletionsThenSendSlotsThenRecvSlots) {
  const QpCase c = GetParam();
  const QpLayout l = qp_layout(c.sq_entries, c.sq_slot, c.rq_entries, c.rq_slot);
  EXPECT_EQ(l.sq_entries, c.sq_entries);
  EXPECT_EQ(l.sq_slot, c.sq_slot);
  EXPECT_EQ(l.rq_entries, c.rq_entries);
  EXPECT_EQ(l.rq_slot, c.rq_slot);
  EXPECT_EQ(l.sq_ring_off, 0u);
  EXPECT_EQ(l.rq_ring_off, 128u);
  EXPECT_EQ(l.direct_off, 256u);
  EXPECT_EQ(l.counters_off, 320u);
  EXPECT_EQ(l.cm_steps_off, 704u);
  EXPECT_EQ(l.completions_off, 1728u);
  EXPECT_EQ(l.sq_slots_off, 1984u);
  EXPECT_EQ(l.rq_slots_off, c.rq_slots_off);
  EXPECT_EQ(l.total, c.total);
}

const uint32_t kBigSend = send_slot_size(kMaxSendSge, kMaxInline);  // 576
const uint32_t kBigRecv = recv_slot_size(kMaxRecvSge);              // 496

INSTANTIATE_TEST_SUITE_P(
    Table, QpLayoutTest,
    ::testing::Values(
        QpCase{"OneOfEach", 1, 64, 1, 16, 2048, 4096},
        // rq_entries == 0 (the QP uses an SRQ): no receive slots, nothing after the send slots.
        QpCase{"NoRecvQueue", 16, 128, 0, 32, 1984 + 2048, 4096},
        QpCase{"NoRecvQueueEndsOnPage", 33, 64, 0, 16, 4096, 4096},  // 1984 + 33*64 = 4096
        QpCase{"OneRecvSlotCrossesPage", 33, 64, 1, 16, 4096, 8192},
        QpCase{"RecvSlotsEndOnPage", 1, 64, 128, 16, 2048, 4096},  // 2048 + 128*16 = 4096
        QpCase{"RecvSlotsOneOver", 1, 64, 129, 16, 2048, 8192},
        QpCase{"Max", kMaxQueueDepth, kBigSend, kMaxQueueDepth, kBigRecv, 1984 + 18874368,
               35131392}),  // 1984 + 32768 * (576 + 496) = 35129280 -> 8577 pages
    [](const ::testing::TestParamInfo<QpCase>& p) { return std::string(p.param.name); });

TEST(QpLayoutTest, RegionsNeverOverlapAndSlotsStayAligned) {
  for (uint32_t sq : {1u, 2u, 3u, 64u, 1000u, kMaxQueueDepth}) {
    for (uint32_t rq : {0u, 1u, 7u, 256u, kMaxQueueDepth}) {
      for (uint32_t sge : {0u, 1u, 5u, kMaxSendSge}) {
        const uint32_t ss = send_slot_size(sge, 0), rs = recv_slot_size(sge);
        const QpLayout l = qp_layout(sq, ss, rq, rs);
        SCOPED_TRACE(std::to_string(sq) + "/" + std::to_string(rq) + "/" + std::to_string(sge));
        ASSERT_GE(l.rq_ring_off, l.sq_ring_off + sizeof(RingHeader));
        ASSERT_GE(l.direct_off, l.rq_ring_off + sizeof(RingHeader));
        ASSERT_GE(l.counters_off, l.direct_off + sizeof(QpDirect));
        ASSERT_GE(l.cm_steps_off, l.counters_off + sizeof(QpCounters));
        ASSERT_GE(l.completions_off, l.cm_steps_off + sizeof(QpCmSteps));
        ASSERT_GE(l.sq_slots_off, l.completions_off + sizeof(QpLocalCompletions));
        ASSERT_EQ(l.rq_slots_off, l.sq_slots_off + static_cast<size_t>(sq) * ss);
        ASSERT_LE(l.rq_slots_off + static_cast<size_t>(rq) * rs, l.total);
        ASSERT_LT(l.total - (l.rq_slots_off + static_cast<size_t>(rq) * rs), kPageSize);
        ASSERT_EQ(l.total % kPageSize, 0u);
        ASSERT_EQ(l.sq_slots_off % kCacheLine, 0u);
        ASSERT_EQ(l.rq_slots_off % kCacheLine, 0u);
      }
    }
  }
}

// ---- Shared receive queue ----

struct SrqCase {
  uint32_t entries, slot;
  size_t total;
};

void PrintTo(const SrqCase& c, std::ostream* os) {
  *os << c.entries << " x " << c.slot << " bytes";
}

class SrqLayoutTest : public ::testing::TestWithParam<SrqCase> {};

TEST_P(SrqLayoutTest, RingThenStateThenSlotsThenRecordsRoundedToPages) {
  const SrqCase c = GetParam();
  const SrqLayout l = srq_layout(c.entries, c.slot);
  EXPECT_EQ(l.entries, c.entries);
  EXPECT_EQ(l.slot, c.slot);
  EXPECT_EQ(l.ring_off, 0u);
  EXPECT_EQ(l.state_off, 128u);
  EXPECT_EQ(l.slots_off, 192u);
  // The held receives' records: a cache line after the slots, each a header and a slot.
  EXPECT_EQ(l.records_off, align_up(l.slots_off + size_t{c.entries} * c.slot, kCacheLine));
  EXPECT_EQ(l.record_size, align_up(sizeof(SrqHeldRecord) + c.slot, 8));
  EXPECT_EQ(l.total, c.total);
}

// 244 slots of 16 end exactly at 4096 (192 + 3904); 256 records of 24 bytes follow.
INSTANTIATE_TEST_SUITE_P(Table, SrqLayoutTest,
                         ::testing::Values(SrqCase{0, 16, 8192}, SrqCase{1, 16, 8192},
                                           SrqCase{244, 16, 12288}, SrqCase{245, 16, 12288},
                                           SrqCase{kMaxQueueDepth, kBigRecv, 16384000}));

// ---- QP counters ----

// What each count_* adds, and that an opcode or status out of the counted range adds only to
// the totals (a library may post anything; the router must not write past the line).
TEST(QpCountersTest, CountsByOpcodeAndStatusWithinTheirRange) {
  QpCounters c{};
  c.count_sent(IBV_WR_RDMA_WRITE, 100);
  c.count_sent(IBV_WR_ATOMIC_WRITE, 8);
  c.count_sent(kCountedOpcodes, 1);  // IBV_WR_TAG_ADD and the like: totals only
  c.count_received(50);
  c.count_error(IBV_WC_REM_ACCESS_ERR);
  c.count_error(1000);
  EXPECT_EQ(c.tx_msgs.load(), 3u);
  EXPECT_EQ(c.tx_bytes.load(), 109u);
  EXPECT_EQ(c.tx_by_opcode[IBV_WR_RDMA_WRITE].load(), 1u);
  EXPECT_EQ(c.tx_by_opcode[IBV_WR_ATOMIC_WRITE].load(), 1u);
  EXPECT_EQ(c.rx_msgs.load(), 1u);
  EXPECT_EQ(c.rx_bytes.load(), 50u);
  EXPECT_EQ(c.errors.load(), 2u);
  EXPECT_EQ(c.errors_by_status[IBV_WC_REM_ACCESS_ERR].load(), 1u);
  uint64_t by_status = 0;
  for (const auto& n : c.errors_by_status) by_status += n.load();
  EXPECT_EQ(by_status, 1u);
}

}  // namespace
}  // namespace wharf::shm
