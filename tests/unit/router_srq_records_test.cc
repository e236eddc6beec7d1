// The records of the receives a router claimed from an SRQ and held for its QPs' messages
// (router/srq_records.h): what one process kept, the next finds in the same bytes, and what
// it could not have left is freed.
#include <gtest/gtest.h>

#include <vector>

#include "router/srq_records.h"

namespace wharf::router {
namespace {

constexpr uint32_t kMaxSge = 2;

class SrqRecordsTest : public ::testing::Test {
 protected:
  SrqRecordsTest()
      : layout_(shm::srq_layout(8, shm::recv_slot_size(kMaxSge))), region_(layout_.total) {
    records_.attach_fresh(region_.data(), layout_);
  }
  static RecvWork receive(uint64_t wr_id, uint32_t sges) {
    RecvWork rw{};
    rw.hdr.wr_id = wr_id;
    rw.hdr.num_sge = sges;
    for (uint32_t i = 0; i < sges; ++i) rw.sge[i] = shm::Sge{0x1000 * (i + 1), 64, 7};
    return rw;
  }
  // What a new process finds in the region as this one left it.
  SrqRecords::Left restart(SrqRecords* next) { return next->adopt(region_.data(), layout_); }
  shm::SrqHeldRecord* header(uint32_t i) {
    return reinterpret_cast<shm::SrqHeldRecord*>(region_.data() + layout_.records_off +
                                                 size_t{i} * layout_.record_size);
  }

  shm::SrqLayout layout_;
  std::vector<uint8_t> region_;
  SrqRecords records_;
};

TEST_F(SrqRecordsTest, AClaimedAndAHeldReceiveAreFoundByTheNextProcess) {
  const uint32_t claimed = records_.keep_claimed(receive(11, 2));
  const uint32_t held = records_.keep_claimed(receive(12, 1));
  ASSERT_NE(claimed, SrqRecords::kNone);
  ASSERT_NE(held, SrqRecords::kNone);
  records_.hold(held, 0x42);
  const uint32_t done = records_.keep_claimed(receive(13, 1));
  records_.release(done);  // completed: not found again

  SrqRecords next;
  const SrqRecords::Left left = restart(&next);
  ASSERT_EQ(left.claimed, claimed);
  ASSERT_EQ(left.held.size(), 1u);
  EXPECT_EQ(left.held[0].first, 0x42u);
  EXPECT_EQ(left.held[0].second, held);
  RecvWork rw;
  next.read(claimed, kMaxSge, &rw);
  EXPECT_EQ(rw.hdr.wr_id, 11u);
  ASSERT_EQ(rw.hdr.num_sge, 2u);
  EXPECT_EQ(rw.sge[1].addr, 0x2000u);
  next.read(held, kMaxSge, &rw);
  EXPECT_EQ(rw.hdr.wr_id, 12u);
  // The two kept records are not given out again; every other one is.
  uint32_t free = 0;
  for (uint32_t r; (r = next.keep_claimed(receive(1, 1))) != SrqRecords::kNone; ++free) {
    EXPECT_NE(r, claimed);
    EXPECT_NE(r, held);
  }
  EXPECT_EQ(free, shm::kSrqHeldRecords - 2);
}

TEST_F(SrqRecordsTest, WhenAllRecordsAreInUseAClaimIsNotKeptUntilOneIsReleased) {
  std::vector<uint32_t> in_use;
  for (uint32_t i = 0; i < shm::kSrqHeldRecords; ++i) {
    in_use.push_back(records_.keep_claimed(receive(i, 1)));
    ASSERT_NE(in_use.back(), SrqRecords::kNone);
  }
  EXPECT_EQ(records_.keep_claimed(receive(999, 1)), SrqRecords::kNone);
  records_.release(in_use[5]);
  EXPECT_EQ(records_.keep_claimed(receive(1000, 1)), in_use[5]);
}

TEST_F(SrqRecordsTest, RecordsNoProcessCouldHaveLeftAreFreed) {
  const uint32_t first = records_.keep_claimed(receive(1, 1));
  const uint32_t second = records_.keep_claimed(receive(2, 1));
  const uint32_t a = records_.keep_claimed(receive(3, 1));
  const uint32_t b = records_.keep_claimed(receive(4, 1));
  records_.hold(a, 9);
  records_.hold(b, 9);      // a QPN holds one receive at most
  header(7)->state = 1234;  // no such state
  // A receive with more SGEs than the SRQ allows is read back with none.
  const uint32_t wide = records_.keep_claimed(receive(5, 2));
  records_.hold(wide, 10);

  SrqRecords next;
  const SrqRecords::Left left = restart(&next);
  // One claimed receive at most (the first found) and one per QPN.
  EXPECT_TRUE(left.claimed == first || left.claimed == second);
  ASSERT_EQ(left.held.size(), 2u);
  RecvWork rw;
  next.read(wide, 1, &rw);
  EXPECT_EQ(rw.hdr.num_sge, 0u);
  EXPECT_EQ(header(7)->state.load(), shm::kSrqRecordFree);
  uint32_t free = 0;
  while (next.keep_claimed(receive(1, 1)) != SrqRecords::kNone) ++free;
  EXPECT_EQ(free, shm::kSrqHeldRecords - 3);
}

TEST_F(SrqRecordsTest, RecordsMoveWithTheRegionUnderTheirIndices) {
  const uint32_t claimed = records_.keep_claimed(receive(21, 1));
  std::vector<uint8_t> moved(region_.size());
  records_.move_to(moved.data(), layout_);
  records_.hold(claimed, 3);
  region_.swap(moved);  // what a restart finds is the moved region
  SrqRecords next;
  const SrqRecords::Left left = restart(&next);
  EXPECT_EQ(left.claimed, SrqRecords::kNone);
  ASSERT_EQ(left.held.size(), 1u);
  EXPECT_EQ(left.held[0], std::make_pair(3u, claimed));
}

}  // namespace
}  // namespace wharf::router
