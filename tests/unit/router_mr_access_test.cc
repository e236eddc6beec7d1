// Bounds checks and copies over registered memory (router/mr_access.h). The process_vm_*
// paths are exercised against this very process, which is allowed to access itself.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "router/mr_access.h"

namespace wharf::router {
namespace {

TEST(MrAccessTest, ContainsHandlesEdgesAndOverflow) {
  Mr mr;
  mr.iova = 1000;
  mr.length = 100;
  EXPECT_TRUE(mr_contains(mr, 1000, 100));
  EXPECT_TRUE(mr_contains(mr, 1099, 1));
  EXPECT_TRUE(mr_contains(mr, 1100, 0));
  EXPECT_FALSE(mr_contains(mr, 999, 1));
  EXPECT_FALSE(mr_contains(mr, 1050, 51));
  EXPECT_FALSE(mr_contains(mr, 1101, 0));
  EXPECT_FALSE(mr_contains(mr, UINT64_MAX - 10, 20));  // would wrap around
  EXPECT_FALSE(mr_contains(mr, 1000, UINT64_MAX));
  mr.iova = UINT64_MAX - 50;
  mr.length = 50;
  EXPECT_TRUE(mr_contains(mr, UINT64_MAX - 50, 50));
  EXPECT_FALSE(mr_contains(mr, UINT64_MAX - 50, 51));
}

TEST(MrAccessTest, RemoteAccessNeedsOwnerPdRightsRangeAndForAWindowItsQp) {
  Session* owner = reinterpret_cast<Session*>(0x1000);  // compared, never used
  Pd pd, other_pd;
  Mr mr;
  mr.owner = owner;
  mr.pd = &pd;
  mr.iova = 4096;
  mr.length = 4096;
  mr.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  // At responder QP 0x42 whose memory is owner's in pd.
  auto allowed = [&](const Mr* m, uint32_t need, uint64_t va, uint64_t len) {
    return remote_access_allowed(m, owner, &pd, 0x42, need, va, len);
  };
  EXPECT_TRUE(allowed(&mr, IBV_ACCESS_REMOTE_WRITE, 4096, 4096));
  EXPECT_FALSE(allowed(nullptr, IBV_ACCESS_REMOTE_WRITE, 4096, 1));
  EXPECT_FALSE(allowed(&mr, IBV_ACCESS_REMOTE_READ, 4096, 1));
  EXPECT_FALSE(allowed(&mr, IBV_ACCESS_REMOTE_WRITE, 4096, 4097));
  mr.pd = &other_pd;
  EXPECT_FALSE(allowed(&mr, IBV_ACCESS_REMOTE_WRITE, 4096, 1));
  mr.pd = &pd;
  mr.owner = reinterpret_cast<Session*>(0x2000);
  EXPECT_FALSE(allowed(&mr, IBV_ACCESS_REMOTE_WRITE, 4096, 1));
  mr.owner = owner;
  // A type 2 window's binding: only through the QP that bound it.
  mr.bound_qpn = 0x43;
  EXPECT_FALSE(allowed(&mr, IBV_ACCESS_REMOTE_WRITE, 4096, 1));
  mr.bound_qpn = 0x42;
  EXPECT_TRUE(allowed(&mr, IBV_ACCESS_REMOTE_WRITE, 4096, 1));
}

// An MR over `app` whose bytes [map_off, map_off+map_len) are "mapped" at `view` (a second
// buffer standing for the router's memfd mapping) and the rest reached through the pid.
struct Fixture {
  std::vector<uint8_t> app = std::vector<uint8_t>(3 * 4096);
  std::vector<uint8_t> view = std::vector<uint8_t>(4096);
  Mr mr;
  Fixture() {
    for (size_t i = 0; i < app.size(); ++i) app[i] = static_cast<uint8_t>(i * 7);
    mr.addr = reinterpret_cast<uint64_t>(app.data());
    mr.length = app.size();
    mr.iova = 0x500000;  // keys are used in iova space
    mr.pid = getpid();
    mr.mapped_start = mr.addr + 4096;
    mr.mapped_len = 4096;
    mr.mapping = view.data();
    std::memcpy(view.data(), app.data() + 4096, 4096);
  }
  ~Fixture() { mr.mapping = nullptr; }  // not ours to munmap
};

TEST(MrAccessTest, RangeSplitsIntoHeadMappedBodyAndTail) {
  Fixture f;
  SegmentList l;
  ASSERT_TRUE(append_mr_range(&l, f.mr, f.mr.iova + 100, 3 * 4096 - 200));
  ASSERT_EQ(l.count, 3u);
  EXPECT_EQ(l.seg[0].local, nullptr);
  EXPECT_EQ(l.seg[0].remote, f.mr.addr + 100);
  EXPECT_EQ(l.seg[0].len, 4096u - 100);
  EXPECT_EQ(l.seg[1].local, f.view.data());
  EXPECT_EQ(l.seg[1].len, 4096u);
  EXPECT_EQ(l.seg[2].remote, f.mr.addr + 2 * 4096);
  EXPECT_EQ(l.seg[2].len, 4096u - 100);
  EXPECT_EQ(l.total, 3u * 4096 - 200);

  SegmentList inside;  // wholly inside the mapped page: one direct segment
  ASSERT_TRUE(append_mr_range(&inside, f.mr, f.mr.iova + 5000, 10));
  ASSERT_EQ(inside.count, 1u);
  EXPECT_EQ(inside.seg[0].local, f.view.data() + 5000 - 4096);
  SegmentList outside;  // wholly in the tail: one process_vm segment
  ASSERT_TRUE(append_mr_range(&outside, f.mr, f.mr.iova + 9000, 10));
  ASSERT_EQ(outside.count, 1u);
  EXPECT_EQ(outside.seg[0].local, nullptr);
}

TEST(MrAccessTest, CopyCrossesSegmentBoundariesOnBothSides) {
  Fixture src, dst;
  std::memset(dst.app.data(), 0, dst.app.size());
  std::memset(dst.view.data(), 0, dst.view.size());
  SegmentList s, d;
  ASSERT_TRUE(append_mr_range(&s, src.mr, src.mr.iova + 10, 3 * 4096 - 20));
  ASSERT_TRUE(append_mr_range(&d, dst.mr, dst.mr.iova + 300, 3 * 4096 - 300));
  ASSERT_EQ(copy_segments(s, d, 3 * 4096 - 400), 0);
  // Reassemble dst as the application would see it (its middle page lives in the view).
  std::vector<uint8_t> seen(dst.app);
  std::memcpy(seen.data() + 4096, dst.view.data(), 4096);
  std::vector<uint8_t> expect(src.app);
  for (size_t i = 0; i < 3 * 4096 - 400; ++i) ASSERT_EQ(seen[300 + i], expect[10 + i]) << i;
  EXPECT_EQ(seen[299], 0);
  EXPECT_EQ(seen[300 + 3 * 4096 - 400], 0);
}

// A part of a message: copy_spans starts its offsets inside later segments of each side,
// and a streaming copy lands the same bytes.
TEST(MrAccessTest, APartCopiedAtOffsetsLandsWhereTheWholeCopyWould) {
  Fixture src, dst;
  std::memset(dst.app.data(), 0, dst.app.size());
  std::memset(dst.view.data(), 0, dst.view.size());
  SegmentList s, d;
  ASSERT_TRUE(append_mr_range(&s, src.mr, src.mr.iova + 10, 3 * 4096 - 20));
  ASSERT_TRUE(append_mr_range(&d, dst.mr, dst.mr.iova + 300, 3 * 4096 - 300));
  constexpr uint64_t kFrom = 5000, kPart = 4000;  // from the second segments into the third
  ASSERT_EQ(copy_spans(s.seg, s.count, kFrom, d.seg, d.count, kFrom, kPart, CopyHint::kStreaming),
            0);
  std::vector<uint8_t> seen(dst.app);
  std::memcpy(seen.data() + 4096, dst.view.data(), 4096);
  for (uint64_t i = 0; i < kPart; ++i)
    ASSERT_EQ(seen[300 + kFrom + i], src.app[10 + kFrom + i]) << i;
  EXPECT_EQ(seen[300 + kFrom - 1], 0);
  EXPECT_EQ(seen[300 + kFrom + kPart], 0);
  EXPECT_EQ(copy_spans(s.seg, s.count, 3 * 4096, d.seg, d.count, 0, 1), EFAULT);  // past src
}

TEST(MrAccessTest, CopyIntoAnUnmappedAddressFails) {
  Fixture f;
  Mr gone;
  gone.length = f.mr.length;
  gone.iova = f.mr.iova;
  gone.pid = f.mr.pid;
  gone.addr = 0x10;  // nothing is mapped at the bottom of the address space
  SegmentList s, d;
  ASSERT_TRUE(append_mr_range(&s, f.mr, f.mr.iova, 64));
  ASSERT_TRUE(append_mr_range(&d, gone, gone.iova, 64));
  EXPECT_EQ(copy_segments(s, d, 64), EFAULT);
}

TEST(MrAccessTest, MappedWordIsFoundOnlyInsideTheMapping) {
  Fixture f;
  EXPECT_EQ(mapped_u64(f.mr, f.mr.iova + 4096), reinterpret_cast<uint64_t*>(f.view.data()));
  EXPECT_EQ(mapped_u64(f.mr, f.mr.iova + 2 * 4096 - 8),
            reinterpret_cast<uint64_t*>(f.view.data() + 4096 - 8));
  EXPECT_EQ(mapped_u64(f.mr, f.mr.iova + 2 * 4096 - 4), nullptr);  // straddles the end
  EXPECT_EQ(mapped_u64(f.mr, f.mr.iova + 8), nullptr);
}

TEST(MrAccessTest, SegmentListRefusesToOverflow) {
  SegmentList l;
  uint8_t b[1];
  for (uint32_t i = 0; i < kMaxSegments; ++i) ASSERT_TRUE(l.push(Segment{b, 0, 0, 1}));
  EXPECT_FALSE(l.push(Segment{b, 0, 0, 1}));
  EXPECT_TRUE(l.push(Segment{b, 0, 0, 0}));  // empty pieces are dropped, not stored
  EXPECT_EQ(l.total, kMaxSegments);
}

// Atomics on both kinds of memory: in the mapping (a real atomic) and beyond it (through the
// pid). `at` is an iova in f.mr; the word is read and written where the MR keeps it.
class AtomicOnMrTest : public ::testing::TestWithParam<bool> {
 protected:
  uint64_t at() const { return f_.mr.iova + (GetParam() ? 4096 : 8); }
  uint64_t* word() {
    return reinterpret_cast<uint64_t*>(GetParam() ? f_.view.data() : f_.app.data() + 8);
  }
  // The atomic as request `request`; its result, or ~0 if it failed.
  uint64_t run(const AtomicChange& change, uint32_t request) {
    uint64_t orig = 0;
    return atomic_on_mr(f_.mr, at(), change, &intent_, request, &orig) == 0 ? orig : ~0ull;
  }
  Fixture f_;
  AtomicIntent intent_ = {};
};

TEST_P(AtomicOnMrTest, ChangesTheWordAndNotesWhatItReadFirst) {
  *word() = 40;
  EXPECT_EQ(run({true, 2, 0}, 7), 40u);
  EXPECT_EQ(*word(), 42u);
  EXPECT_EQ(intent_.state, kAtomicIntentNoted);
  EXPECT_EQ(intent_.id, 7u);
  EXPECT_EQ(intent_.orig, 40u);
  EXPECT_EQ(run({false, 42, 5}, 8), 42u);  // compare-and-swap that matches
  EXPECT_EQ(*word(), 5u);
  EXPECT_EQ(intent_.id, 8u);
  intent_.clear();
  EXPECT_EQ(run({false, 1, 9}, 9), 5u);  // one that does not: nothing written, nothing noted
  EXPECT_EQ(*word(), 5u);
  EXPECT_EQ(intent_.state, kAtomicIntentNone);
}

// The request a previous process noted and changed the word for comes again: answered from
// the note, the word changed once (before: the add made twice, a crashed router's FETCH_ADD
// counted two).
TEST_P(AtomicOnMrTest, ARequestWhoseChangeWasMadeIsAnsweredFromTheNote) {
  *word() = 40;
  ASSERT_EQ(run({true, 2, 0}, 7), 40u);
  EXPECT_EQ(run({true, 2, 0}, 7), 40u);
  EXPECT_EQ(*word(), 42u);
  intent_.note(8, 42);  // noted, then the compare-and-swap was made: 42 -> 5
  *word() = 5;
  EXPECT_EQ(run({false, 42, 5}, 8), 42u);
  EXPECT_EQ(*word(), 5u);
}

// Noted, but the process died before the change: the word still holds what was read, and
// the request makes it. Another request, or a note cleared, is not answered from the note.
TEST_P(AtomicOnMrTest, ARequestWhoseChangeWasNotMadeOrAnotherOneIsExecuted) {
  *word() = 40;
  intent_.note(7, 40);
  EXPECT_EQ(run({true, 2, 0}, 7), 40u);
  EXPECT_EQ(*word(), 42u);
  intent_.note(7, 40);
  EXPECT_EQ(run({true, 2, 0}, 8), 42u);
  EXPECT_EQ(*word(), 44u);
  intent_.note(9, 40);
  intent_.clear();
  EXPECT_EQ(run({true, 2, 0}, 9), 44u);
  EXPECT_EQ(*word(), 46u);
}

INSTANTIATE_TEST_SUITE_P(MappedOrNot, AtomicOnMrTest, ::testing::Bool());

}  // namespace
}  // namespace wharf::router
