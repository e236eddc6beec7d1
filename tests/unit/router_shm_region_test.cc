// ShmRegion and ShmRegionPool: what a region may be, what the pool keeps and what a reused
// region looks like.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "router/shm_region.h"

namespace wharf::router {
namespace {

ShmRegion scribbled(size_t size) {
  ShmRegion r;
  EXPECT_EQ(r.create("wharf-test", size), 0);
  std::memset(r.data(), 0xa5, size);
  return r;
}

bool all_zero(const ShmRegion& r) {
  for (size_t i = 0; i < r.size(); ++i) {
    if (r.data()[i] != 0) return false;
  }
  return true;
}

TEST(ShmRegionTest, ARegionOf4GiBOrMoreIsRefusedAndTheOldOneKept) {
  ShmRegion r;
  ASSERT_EQ(r.create("wharf-test", 4096), 0);
  const uint8_t* data = r.data();
  EXPECT_EQ(r.create("wharf-test", size_t{1} << 32), ENOMEM);
  EXPECT_EQ(r.data(), data);
  EXPECT_EQ(r.size(), 4096u);
}

TEST(ShmRegionPoolTest, AReusedRegionIsTheSameMemfdZeroed) {
  ShmRegionPool pool;
  ShmRegion r = scribbled(8192);
  const uint8_t* data = r.data();
  pool.give(std::move(r));
  EXPECT_EQ(pool.take(4096).size(), 0u);  // another size: none
  ShmRegion again = pool.take(8192);
  ASSERT_EQ(again.size(), 8192u);
  EXPECT_EQ(again.data(), data);
  EXPECT_TRUE(all_zero(again));
  EXPECT_EQ(pool.take(8192).size(), 0u);  // taken once
}

TEST(ShmRegionPoolTest, KeepsOnlySmallRegionsAndABoundedNumber) {
  ShmRegionPool pool;
  pool.give(scribbled(ShmRegionPool::kMaxRegionSize + 4096));
  EXPECT_EQ(pool.take(ShmRegionPool::kMaxRegionSize + 4096).size(), 0u);
  for (size_t i = 0; i < ShmRegionPool::kMaxRegions + 2; ++i) pool.give(scribbled(4096));
  size_t kept = 0;
  while (pool.take(4096).size() != 0) ++kept;
  EXPECT_EQ(kept, ShmRegionPool::kMaxRegions);
  pool.give(ShmRegion{});  // an empty region is not kept
  EXPECT_EQ(pool.take(0).size(), 0u);
}

}  // namespace
}  // namespace wharf::router
