// The RNIC emulator's caches, sequential matching and the penalties they charge (issue #21).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "emulator/lru_set.h"
#include "emulator/rnic_emulator.h"

namespace wharf::emulator {
namespace {

// Records the stalls instead of waiting them out.
struct Stalls {
  std::vector<uint64_t> ns;
  static void record(uint64_t ns, void* arg) { static_cast<Stalls*>(arg)->ns.push_back(ns); }
  uint64_t total() const {
    uint64_t t = 0;
    for (uint64_t n : ns) t += n;
    return t;
  }
};

TEST(LruSet, ForgetsTheLeastRecentlyUsed) {
  LruSet s(3);
  EXPECT_FALSE(s.touch(1));
  EXPECT_FALSE(s.touch(2));
  EXPECT_FALSE(s.touch(3));
  EXPECT_TRUE(s.touch(1));   // 2 is now the least recent
  EXPECT_FALSE(s.touch(4));  // evicts 2
  EXPECT_FALSE(s.contains(2));
  EXPECT_TRUE(s.contains(1));
  EXPECT_TRUE(s.contains(3));
  EXPECT_TRUE(s.contains(4));
  EXPECT_EQ(s.size(), 3u);
}

TEST(LruSet, AgreesWithAReferenceModelUnderRandomUse) {
  // Keys that collide in the index (multiples of a large power of two) and random ones.
  std::mt19937_64 rng(7);
  for (uint32_t cap : {1u, 2u, 5u, 64u, 100u}) {
    LruSet s(cap);
    std::vector<uint64_t> order;  // most recent last
    for (int i = 0; i < 20000; ++i) {
      const uint64_t key = (rng() % (cap * 3 + 2)) << (i % 2 ? 20 : 0);
      bool was = false;
      for (size_t j = 0; j < order.size(); ++j)
        if (order[j] == key) {
          order.erase(order.begin() + static_cast<long>(j));
          was = true;
          break;
        }
      order.push_back(key);
      if (order.size() > cap) order.erase(order.begin());
      ASSERT_EQ(s.touch(key), was) << "cap " << cap << " step " << i;
    }
    for (uint64_t k : order) EXPECT_TRUE(s.contains(k));
    EXPECT_EQ(s.size(), order.size());
  }
}

TEST(QpCache, ChargesNothingWhileTheActiveQpsFit) {
  Stalls st;
  EmulationConfig cfg;
  cfg.qp_cache = 64;
  RnicEmulator e(cfg, Stalls::record, &st);
  for (int round = 0; round < 10; ++round)
    for (uint32_t q = 0; q < 64; ++q) e.touch_qp_st(0x100 + q);
  EXPECT_EQ(e.counters().qp_misses, 64u);  // the first touch of each
  EXPECT_EQ(e.counters().qp_hits, 9u * 64);
  EXPECT_EQ(st.total(), 64 * cfg.qp_miss_ns);
}

TEST(QpCache, ThrashesOnceTheActiveQpsExceedIt) {
  // Round robin over one QP more than the cache holds: LRU misses every time.
  Stalls st;
  EmulationConfig cfg;
  cfg.qp_cache = 64;
  cfg.qp_miss_ns = 1500;
  RnicEmulator e(cfg, Stalls::record, &st);
  for (int round = 0; round < 10; ++round)
    for (uint32_t q = 0; q < 65; ++q) e.touch_qp_st(q);
  EXPECT_EQ(e.counters().qp_hits, 0u);
  EXPECT_EQ(e.counters().qp_misses, 650u);
  EXPECT_EQ(st.total(), 650u * 1500);
  EXPECT_EQ(e.counters().stalled_ns, st.total());
}

TEST(MttCache, ChargesEachMissingPageOfATransfer) {
  Stalls st;
  EmulationConfig cfg;
  cfg.mtt_cache = 16;
  cfg.mtt_page = 4096;
  cfg.mtt_miss_ns = 300;
  RnicEmulator e(cfg, Stalls::record, &st);
  e.touch_memory_st(7, 4096 * 10 + 100, 3 * 4096);  // pages 10..13: 4 misses
  EXPECT_EQ(e.counters().mtt_misses, 4u);
  EXPECT_EQ(st.total(), 4u * 300);
  e.touch_memory_st(7, 4096 * 12, 4096);  // page 12 again: a hit
  EXPECT_EQ(e.counters().mtt_hits, 1u);
  e.touch_memory_st(8, 4096 * 12, 4096);  // the same address of another key: a miss
  EXPECT_EQ(e.counters().mtt_misses, 5u);
  e.touch_memory_st(7, 0, 0);  // nothing translated
  EXPECT_EQ(e.counters().mtt_misses + e.counters().mtt_hits, 6u);
}

TEST(MttCache, AWorkingSetBeyondTheCacheMissesOnEveryPage) {
  Stalls st;
  EmulationConfig cfg;
  cfg.mtt_cache = 256;  // 1 MiB of 4 KiB pages
  RnicEmulator fits(cfg, Stalls::record, &st);
  RnicEmulator spills(cfg, Stalls::record, &st);
  for (int round = 0; round < 4; ++round)
    for (uint64_t off = 0; off < (1u << 20); off += 4096) fits.touch_memory_st(1, off, 4096);
  for (int round = 0; round < 4; ++round)
    for (uint64_t off = 0; off < (2u << 20); off += 4096) spills.touch_memory_st(1, off, 4096);
  EXPECT_EQ(fits.counters().mtt_misses, 256u);  // cold misses only
  EXPECT_EQ(spills.counters().mtt_hits, 0u);
}

TEST(SequentialMatch, EachSteeredMessageTriesEveryRule) {
  Stalls st;
  EmulationConfig cfg;
  cfg.match_sequential = 1;
  cfg.match_ns = 40;
  RnicEmulator e(cfg, Stalls::record, &st);
  e.steer_to_qp_st(1);  // no rules yet: nothing to try
  EXPECT_EQ(st.total(), 0u);
  e.set_match_rules_st(250);
  for (int i = 0; i < 4; ++i) e.steer_to_qp_st(1);
  EXPECT_EQ(st.total(), 4u * 250 * 40);
  e.set_match_rules_st(10);  // rules removed: cheaper again
  e.steer_to_qp_st(2);
  EXPECT_EQ(st.total(), 4u * 250 * 40 + 10 * 40);
  EXPECT_EQ(e.counters().match_lookups, 6u);
  EXPECT_EQ(e.counters().match_rules_tried, 4u * 250 + 10);
  e.touch_qp_st(3);  // a work request starting is not steered
  EXPECT_EQ(e.counters().match_lookups, 6u);
  EXPECT_EQ(e.counters().qp_misses, 0u);  // no QP cache emulated
}

TEST(SequentialMatch, SteeringAlsoNeedsTheQpContext) {
  Stalls st;
  EmulationConfig cfg;
  cfg.qp_cache = 1;
  cfg.qp_miss_ns = 7;
  RnicEmulator e(cfg, Stalls::record, &st);
  e.set_match_rules_st(1000);  // match not emulated: rules cost nothing
  e.steer_to_qp_st(1);
  e.steer_to_qp_st(2);
  EXPECT_EQ(st.total(), 14u);
  EXPECT_EQ(e.counters().qp_misses, 2u);
  EXPECT_EQ(e.counters().match_lookups, 0u);
}

TEST(Emulation, WithNothingEnabledChargesNothing) {
  Stalls st;
  RnicEmulator e(EmulationConfig{}, Stalls::record, &st);
  e.set_match_rules_st(1000);
  for (uint32_t q = 0; q < 1000; ++q) e.touch_qp_st(q);
  for (uint32_t q = 0; q < 1000; ++q) e.steer_to_qp_st(q);
  e.touch_memory_st(1, 0, 1 << 30);
  EXPECT_TRUE(st.ns.empty());
  EXPECT_FALSE(EmulationConfig{}.enabled());
}

TEST(ParseEmulation, AcceptsTheDocumentedSettings) {
  EmulationConfig c;
  std::string err;
  ASSERT_TRUE(parse_emulation("qp_cache=64", &c, &err)) << err;
  EXPECT_EQ(c.qp_cache, 64u);
  EXPECT_EQ(c.mtt_cache, 0u);
  ASSERT_TRUE(parse_emulation("mtt_cache=1k,mtt_page=64k,mtt_miss_ns=700,qp_cache=8,qp_miss_ns=0",
                              &c, &err))
      << err;
  EXPECT_EQ(c.mtt_cache, 1024u);
  EXPECT_EQ(c.mtt_page, 65536u);
  EXPECT_EQ(c.mtt_miss_ns, 700u);
  EXPECT_EQ(c.qp_cache, 8u);
  EXPECT_EQ(c.qp_miss_ns, 0u);
  EXPECT_EQ(describe(c), "qp_cache=8,qp_miss_ns=0,mtt_cache=1024,mtt_page=65536,mtt_miss_ns=700");
  ASSERT_TRUE(parse_emulation("match=sequential,match_ns=250", &c, &err)) << err;
  EXPECT_EQ(c.match_sequential, 1u);
  EXPECT_EQ(c.match_ns, 250u);
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(describe(c), "match=sequential,match_ns=250");
  ASSERT_TRUE(parse_emulation("", &c, &err));
  EXPECT_FALSE(c.enabled());
  EXPECT_EQ(describe(c), "none");
}

TEST(ParseEmulation, RefusesBadInputWithAReason) {
  for (const char* bad : {"qp_cache",
                          "qp_cache=",
                          "qp_cache=0",
                          "qp_cache=-1",
                          "qp_cache=1x",
                          "qp_cache=17m",
                          "mtt_page=3000",
                          "mtt_page=128",
                          "match=hashed",
                          "match=1",
                          "match=",
                          "qp_cache=64,",
                          ",qp_cache=64",
                          "qp_miss_ns=2000000000",
                          "qp_cache=99999999999999999999",
                          "qp_cache=8,qp_cache=9",
                          "qp_miss_ns=5",
                          "mtt_page=64k",
                          "qp_cache=8,mtt_miss_ns=1",
                          "match_ns=50",
                          "qp_cache=8,match_ns=50",
                          "match=sequential,match=sequential"}) {
    EmulationConfig c;
    c.qp_cache = 5;
    std::string err;
    EXPECT_FALSE(parse_emulation(bad, &c, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
    EXPECT_EQ(c.qp_cache, 5u) << bad;  // untouched
  }
}

}  // namespace
}  // namespace wharf::emulator
