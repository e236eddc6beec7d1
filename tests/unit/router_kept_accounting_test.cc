// KeptAccounting (router/kept_accounting.h): what containers moved, in a file that outlives
// the router process. A process "dies" here by dropping its object without releasing anything,
// as a SIGKILL leaves the file; the next one opens the same path. The file's layout and its
// torn copies are KeptSlots' (router_kept_cm_ids_test covers them through KeptCmIds).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/clock.h"
#include "router/kept_accounting.h"
#include "support/temp_dir.h"

namespace wharf::router {
namespace {

KeptAccounting::Account account(const std::string& name, uint64_t tx_bytes) {
  KeptAccounting::Account a;
  a.tenant = "acme";
  a.network = "blue";
  a.name = name;
  a.traffic.tx_msgs = tx_bytes / 64;
  a.traffic.tx_bytes = tx_bytes;
  a.traffic.rx_bytes = tx_bytes / 2;
  a.traffic.errors = 3;
  a.traffic.throttled_ns = 1'500'000'000;
  a.traffic.tx_by_opcode[2] = 7;
  a.traffic.errors_by_status[5] = 3;
  return a;
}

class KeptAccountingTest : public ::testing::Test {
 protected:
  std::unique_ptr<KeptAccounting> open() {
    auto kept = std::make_unique<KeptAccounting>();
    EXPECT_EQ(kept->open(path_), 0);
    EXPECT_TRUE(kept->persistent());
    return kept;
  }
  test_support::TempDir dir_{"wharf-kept-acc"};
  std::string path_ = dir_.path() + "/wharfd.sock.accounting";
};

TEST_F(KeptAccountingTest, EachContainerClaimsItsLatestRecordOnceFromTheNextRouterProcess) {
  auto first = open();
  const uint32_t a = first->keep(KeptAccounting::kNoSlot, 11, account("a", 1000));
  const uint32_t b = first->keep(KeptAccounting::kNoSlot, 12, account("b", 2000));
  ASSERT_NE(a, KeptAccounting::kNoSlot);
  ASSERT_NE(b, a);
  EXPECT_EQ(first->keep(a, 11, account("a", 5000)), a) << "a container keeps its slot";
  first.reset();  // killed

  auto second = open();
  EXPECT_EQ(second->left(), 2u);
  KeptAccounting::Account got;
  uint32_t slot = KeptAccounting::kNoSlot;
  ASSERT_TRUE(second->claim(11, &got, &slot));
  EXPECT_EQ(slot, a);
  EXPECT_EQ(got.tenant, "acme");
  EXPECT_EQ(got.network, "blue");
  EXPECT_EQ(got.name, "a");
  EXPECT_EQ(got.traffic.tx_bytes, 5000u) << "its latest record";
  EXPECT_EQ(got.traffic.tx_msgs, 5000u / 64);
  EXPECT_EQ(got.traffic.rx_bytes, 2500u);
  EXPECT_EQ(got.traffic.errors, 3u);
  EXPECT_EQ(got.traffic.throttled_ns, 1'500'000'000u);
  EXPECT_EQ(got.traffic.tx_by_opcode[2], 7u);
  EXPECT_EQ(got.traffic.errors_by_status[5], 3u);
  EXPECT_FALSE(second->claim(11, &got, &slot)) << "claimed once";
  EXPECT_FALSE(second->claim(13, &got, &slot)) << "a namespace nothing was kept for";
  EXPECT_EQ(second->left(), 1u);

  // The claimed slot stays the container's: written again, it is what a third process finds.
  EXPECT_EQ(second->keep(a, 11, account("a", 9000)), a);
  second.reset();
  auto third = open();
  ASSERT_TRUE(third->claim(11, &got, &slot));
  EXPECT_EQ(got.traffic.tx_bytes, 9000u);
  ASSERT_TRUE(third->claim(12, &got, &slot)) << "still left for its container";
  EXPECT_EQ(got.traffic.tx_bytes, 2000u);
}

TEST_F(KeptAccountingTest, ARecordReleasedWithItsContainerIsNotLeftAndItsSlotIsReused) {
  auto first = open();
  const uint32_t a = first->keep(KeptAccounting::kNoSlot, 11, account("a", 1000));
  first->release(a);
  EXPECT_EQ(first->keep(KeptAccounting::kNoSlot, 12, account("b", 1)), a);
  first.reset();
  auto second = open();
  EXPECT_EQ(second->left(), 1u);
  KeptAccounting::Account got;
  uint32_t slot = 0;
  EXPECT_FALSE(second->claim(11, &got, &slot));
}

// Records nobody claims within kOrphanLifeNs are handed back (to be listed as departed
// containers) and released, in the file too.
TEST_F(KeptAccountingTest, RecordsNobodyClaimedAreHandedBackAfterTheirTime) {
  auto first = open();
  first->keep(KeptAccounting::kNoSlot, 11, account("a", 1000));
  first->keep(KeptAccounting::kNoSlot, 12, account("b", 2000));
  first.reset();
  auto second = open();
  KeptAccounting::Account got;
  uint32_t slot = 0;
  ASSERT_TRUE(second->claim(12, &got, &slot));
  EXPECT_TRUE(second->drop_stale(now_ns()).empty()) << "too early";
  const auto gone = second->drop_stale(now_ns() + KeptAccounting::kOrphanLifeNs);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].name, "a");
  EXPECT_EQ(gone[0].traffic.tx_bytes, 1000u);
  EXPECT_EQ(second->left(), 0u);
  second.reset();
  auto third = open();
  EXPECT_EQ(third->left(), 1u) << "the claimed record stays; the orphan is gone";
  EXPECT_TRUE(third->claim(12, &got, &slot));
}

TEST_F(KeptAccountingTest, ANameLongerThanItsFieldIsCutNotOverflowed) {
  auto first = open();
  first->keep(KeptAccounting::kNoSlot, 11, account(std::string(200, 'x'), 1));
  first.reset();
  KeptAccounting::Account got;
  uint32_t slot = 0;
  ASSERT_TRUE(open()->claim(11, &got, &slot));
  EXPECT_EQ(got.name, std::string(63, 'x'));
}

TEST_F(KeptAccountingTest, EverySlotTakenLeavesTheNextContainerUnkept) {
  auto kept = open();
  for (uint32_t i = 0; i < KeptAccounting::kSlots; ++i)
    ASSERT_NE(kept->keep(KeptAccounting::kNoSlot, i + 1, account("c", i)), KeptAccounting::kNoSlot);
  EXPECT_EQ(kept->keep(KeptAccounting::kNoSlot, 99999, account("d", 1)), KeptAccounting::kNoSlot);
}

TEST_F(KeptAccountingTest, WithoutAPathNothingIsKept) {
  KeptAccounting kept;
  ASSERT_EQ(kept.open(""), 0);
  EXPECT_FALSE(kept.persistent());
  EXPECT_EQ(kept.keep(KeptAccounting::kNoSlot, 11, account("a", 1)), KeptAccounting::kNoSlot);
}

}  // namespace
}  // namespace wharf::router
