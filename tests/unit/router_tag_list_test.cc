// The matching list of a tag-matching SRQ (router/tag_list.h): which posted buffer a tag
// takes, handles that go stale, and the unexpected-count protocol that holds buffers posted
// while software is behind.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "router/tag_list.h"

namespace wharf::router {
namespace {

TaggedBuffer buffer(uint64_t tag, uint64_t mask, uint64_t wr_id) {
  return TaggedBuffer{tag, mask, wr_id, {shm::Sge{0x1000, 64, 7}}};
}

TEST(TagListTest, TheEarliestPostedBufferWhoseMaskedTagAgreesIsTaken) {
  TagList list(8);
  ASSERT_TRUE(list.add(buffer(0x10, 0xff, 1), 0));
  ASSERT_TRUE(list.add(buffer(0x20, 0xf0, 2), 0));  // takes 0x20..0x2f
  ASSERT_TRUE(list.add(buffer(0x21, 0xff, 3), 0));
  EXPECT_FALSE(list.match(0x30));
  EXPECT_FALSE(list.match(0x11));
  std::optional<uint32_t> slot = list.match(0x21);
  ASSERT_TRUE(slot);
  EXPECT_EQ(list.at(*slot).recv_wr_id, 2u);  // posted before the exact one
  EXPECT_EQ(list.take(*slot).recv_wr_id, 2u);
  slot = list.match(0x21);
  ASSERT_TRUE(slot);
  EXPECT_EQ(list.take(*slot).recv_wr_id, 3u);
  EXPECT_FALSE(list.match(0x21));
  EXPECT_EQ(list.size(), 1u);
}

TEST(TagListTest, MaskBitsOutsideTheMaskAreIgnored) {
  TagList list(2);
  ASSERT_TRUE(list.add(buffer(0xabcd, 0, 9), 0));  // mask 0: any tag
  std::optional<uint32_t> slot = list.match(0x1234);
  ASSERT_TRUE(slot);
  EXPECT_EQ(list.at(*slot).recv_wr_id, 9u);
}

TEST(TagListTest, AFullListRefusesAndAFreedSlotServesAgain) {
  TagList list(2);
  std::optional<uint32_t> a = list.add(buffer(1, ~0ull, 1), 0);
  ASSERT_TRUE(a);
  ASSERT_TRUE(list.add(buffer(2, ~0ull, 2), 0));
  EXPECT_TRUE(list.full());
  EXPECT_FALSE(list.add(buffer(3, ~0ull, 3), 0));
  ASSERT_TRUE(list.remove(*a, 0));
  EXPECT_TRUE(list.add(buffer(3, ~0ull, 3), 0));
}

TEST(TagListTest, AHandleGoesStaleOnceItsBufferIsConsumedOrRemoved) {
  TagList list(1);
  std::optional<uint32_t> a = list.add(buffer(5, ~0ull, 1), 0);
  ASSERT_TRUE(a);
  std::optional<uint32_t> slot = list.match(5);
  ASSERT_TRUE(slot);
  list.take(*slot);
  EXPECT_FALSE(list.remove(*a, 0));  // consumed by a message: IBV_WC_TM_ERR
  std::optional<uint32_t> b = list.add(buffer(6, ~0ull, 2), 0);  // the same slot again
  ASSERT_TRUE(b);
  EXPECT_NE(*a, *b);
  EXPECT_FALSE(list.remove(*a, 0));  // the old handle does not reach the new buffer
  EXPECT_TRUE(list.remove(*b, 0));
  EXPECT_FALSE(list.remove(*b, 0));
  EXPECT_FALSE(list.remove(0xdead0000, 0));
}

TEST(TagListTest, ABufferPostedWhileSoftwareIsBehindIsHeldUntilItCatchesUp) {
  TagList list(4);
  ASSERT_TRUE(list.add(buffer(1, ~0ull, 1), 0));  // in step: matches at once
  list.note_unexpected();                         // a message matched nothing
  EXPECT_EQ(list.unexpected_count(), 1u);
  EXPECT_TRUE(list.sync_required(0));
  // Software has not seen that message yet: the buffer it posts now might be its match.
  ASSERT_TRUE(list.add(buffer(2, ~0ull, 2), 0));
  EXPECT_FALSE(list.match(2));
  EXPECT_TRUE(list.match(1));  // posted before the unexpected message: still eligible
  list.sync(0);                // still behind: nothing changes
  EXPECT_FALSE(list.match(2));
  list.sync(1);
  EXPECT_FALSE(list.sync_required(1));
  EXPECT_TRUE(list.match(2));
}

TEST(TagListTest, AnOperationInStepReleasesHeldBuffers) {
  TagList list(4);
  list.note_unexpected();
  ASSERT_TRUE(list.add(buffer(7, ~0ull, 1), 0));  // held
  EXPECT_FALSE(list.match(7));
  ASSERT_TRUE(list.add(buffer(8, ~0ull, 2), 1));  // in step: releases the held one too
  EXPECT_TRUE(list.match(7));
  EXPECT_TRUE(list.match(8));
}

TEST(TagListTest, HeadersAreReadBigEndian) {
  const uint8_t tmh[kTmhSize] = {3, 0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0, 0, 0, 0, 0, 0, 0x12, 0x34};
  const TmHeader h = parse_tmh(tmh);
  EXPECT_EQ(h.opcode, 3);
  EXPECT_EQ(h.app_ctx, 0x01020304u);
  EXPECT_EQ(h.tag, 0x1234u);
  const uint8_t rvh[kRvhSize] = {0, 0, 0x7f, 0, 0, 0, 0x10, 0, 0, 0, 0x01, 0x37, 0, 0, 0x10, 0};
  const RndvHeader r = parse_rvh(rvh);
  EXPECT_EQ(r.va, 0x7f0000001000ull);
  EXPECT_EQ(r.rkey, 0x137u);
  EXPECT_EQ(r.len, 0x1000u);
}

}  // namespace
}  // namespace wharf::router
