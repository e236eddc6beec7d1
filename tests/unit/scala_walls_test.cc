// Tests for wharf-scala's walls and critical path (scala/walls.h): synthetic sweeps over a
// small hand-made space (the full factorial of ql x qr x mr_size x opcode), each measured by a
// formula, with deterministic noise where the test is about noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "scala/walls.h"

namespace wharf::scala {
namespace {

Space test_space() {
  return Space({{.name = "ql",
                 .levels = {"1", "2", "4", "8", "16", "32", "48", "64", "80", "96", "128"},
                 .numeric = true,
                 .scale = true,
                 .baseline = 2},
                {.name = "qr", .levels = {"1", "16", "32"}, .numeric = true, .scale = true},
                {.name = "mr_size",
                 .levels = {"4k", "64k", "1m", "4m", "16m"},
                 .numeric = true,
                 .scale = true,
                 .baseline = 1},
                {.name = "opcode", .levels = {"send", "write"}, .baseline = 1}});
}

// Where a sample ran, as numbers (and its place in the sweep, to seed noise), and what the
// formula says it measured.
struct Where {
  double ql = 0, qr = 0, mr_size = 0;
  std::string opcode;
  uint32_t index = 0;
};
struct Measured {
  double bw = 0;
  double lat = 0;
};
using Formula = std::function<Measured(const Where&)>;

double number(const Space& space, const Assignment& a, const char* name) {
  const double x = space.number(a, name);
  EXPECT_FALSE(std::isnan(x)) << name;
  return x;
}

// One sample at every point of the space's full factorial, measured by `formula`.
std::vector<Sample> sweep(const Space& space, const Formula& formula) {
  std::vector<Sample> samples;
  Assignment a(space.size(), 0);
  for (;;) {
    const Where at{number(space, a, "ql"), number(space, a, "qr"), number(space, a, "mr_size"),
                   std::string(space.level(a, "opcode")), static_cast<uint32_t>(samples.size())};
    const Measured m = formula(at);
    Sample s;
    s.at = a;
    s.phase = "cover";
    s.bw_gbps = m.bw;
    s.lat_p50_us = m.lat;
    s.lat_p99_us = 2 * m.lat;
    samples.push_back(s);
    size_t d = 0;  // the next assignment, odometer-style
    for (; d < a.size(); ++d) {
      if (static_cast<size_t>(++a[d]) < space.dims()[d].levels.size()) break;
      a[d] = 0;
    }
    if (d == a.size()) return samples;
  }
}

// A factor in [0.9, 1.1] that looks random but depends only on the sample and `salt`.
double noisy(const Where& w, uint32_t salt) {
  uint32_t h = (w.index + 1) * 2654435761u ^ salt * 40503u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return 1 + 0.1 * (static_cast<double>(h >> 8) / static_cast<double>(1u << 24) * 2 - 1);
}

std::optional<Wall> wall_on(const std::vector<Wall>& walls, const std::string& dimension) {
  for (const Wall& w : walls)
    if (w.dimension == dimension) return w;
  return std::nullopt;
}

const Importance& of(const std::vector<Importance>& all, const std::string& dimension) {
  return *std::find_if(all.begin(), all.end(),
                       [&](const Importance& i) { return i.dimension == dimension; });
}

double score(const Importance& i) { return std::max(i.sensitivity, i.removal); }

// A QP-context cache of 64 entries: bandwidth 10 while ql + qr QPs fit, 3 once they thrash;
// latency grows linearly with the QPs, and is four times that once they thrash.
Measured qp_cache(const Where& w) {
  const double qps = w.ql + w.qr;
  const double lat = 2 + 0.05 * qps;
  return qps <= 64 ? Measured{10, lat} : Measured{3, 4 * lat};
}

TEST(ScalaWalls, AQpCacheWallIsOnQlAtTheFirstLevelWhereTheQpsNoLongerFit) {
  const Space space = test_space();
  const std::vector<Wall> walls = find_walls(space, sweep(space, qp_cache));

  const std::optional<Wall> ql = wall_on(walls, "ql");
  ASSERT_TRUE(ql);
  EXPECT_EQ(ql->at, 48);  // qr = 32: 48 + 32 > 64, the earliest of the scans
  EXPECT_EQ(ql->before, 32);
  EXPECT_DOUBLE_EQ(ql->bw_drop, 0.7);
  EXPECT_DOUBLE_EQ(ql->lat_factor, 4 * (2 + 0.05 * 80) / (2 + 0.05 * 64) / (48.0 / 32));
  EXPECT_EQ(ql->scans, 3 * 5 * 2);  // every scan along ql hits the wall (at 48 or 64)
  // qr's scans at ql = 48 cross the cache too (48 + 32 > 64), but qr explains far too little of
  // either measure to be on the critical path.
  EXPECT_FALSE(wall_on(walls, "qr"));
  EXPECT_FALSE(wall_on(walls, "mr_size"));
  EXPECT_FALSE(wall_on(walls, "opcode"));
  ASSERT_FALSE(ql->critical.empty());
  EXPECT_EQ(ql->critical.front(), "ql");
  EXPECT_EQ(std::count(ql->critical.begin(), ql->critical.end(), "opcode"), 0);
  EXPECT_EQ(std::count(ql->critical.begin(), ql->critical.end(), "mr_size"), 0);
}

TEST(ScalaWalls, EachScanReportsItsOwnFirstLevelPastTheCache) {
  const Space space = test_space();
  std::vector<Sample> samples = sweep(space, qp_cache);
  std::erase_if(samples, [&](const Sample& s) { return space.number(s.at, "qr") == 32; });
  const std::optional<Wall> ql = wall_on(find_walls(space, samples), "ql");
  ASSERT_TRUE(ql);
  EXPECT_EQ(ql->at, 64);  // qr 1 and 16: 64 + qr > 64
  EXPECT_EQ(ql->before, 48);
}

// Bandwidth falls gently with ql (by a quarter at most), latency grows linearly with it.
Measured gentle(const Where& w) { return {10 - 0.02 * w.ql, 1 + 0.1 * w.ql}; }

TEST(ScalaWalls, FlatNoisyDataHasNoWallAndNoCriticalDimension) {
  const Space space = test_space();
  const std::vector<Sample> samples = sweep(space, [](const Where& w) {
    return Measured{10 * noisy(w, 1), 5 * noisy(w, 2)};
  });
  EXPECT_TRUE(find_walls(space, samples).empty());
  for (const Importance& i : importance(space, samples))
    EXPECT_LT(score(i), WallThresholds{}.min_importance) << i.dimension;
}

// gentle() (no wall, but ql is on the critical path, so a wall along it would be kept) except
// in one scan, where bandwidth is far below it and latency far above at ql = 32 (and later).
std::vector<Sample> gentle_with_a_low_point(const Space& space, bool low_from_then_on) {
  return sweep(space, [&](const Where& w) {
    const bool low = w.qr == 1 && w.mr_size == 65536 && w.opcode == "write" &&
                     (low_from_then_on ? w.ql >= 32 : w.ql == 32);
    const Measured m = gentle(w);
    return low ? Measured{2, 10 * m.lat} : m;
  });
}

TEST(ScalaWalls, ASingleLowPointIsNotAWall) {
  const Space space = test_space();
  EXPECT_TRUE(find_walls(space, gentle_with_a_low_point(space, false)).empty());
}

TEST(ScalaWalls, ALowPointThatLastsToTheEndOfItsScanIsAWall) {
  const Space space = test_space();
  const std::vector<Wall> walls = find_walls(space, gentle_with_a_low_point(space, true));
  const std::optional<Wall> ql = wall_on(walls, "ql");
  ASSERT_TRUE(ql);
  EXPECT_EQ(ql->at, 32);
  EXPECT_EQ(ql->before, 16);
  EXPECT_EQ(ql->scans, 1);
  EXPECT_NEAR(ql->bw_drop, 1 - 2 / (10 - 0.02 * 1), 1e-12);  // the best before is at ql = 1
}

// gentle(), but one scan's last point (ql = 128) measured low: a wall on that point alone.
std::vector<Sample> gentle_with_a_low_last_point(const Space& space) {
  return sweep(space, [&](const Where& w) {
    const bool low = w.qr == 1 && w.mr_size == 65536 && w.opcode == "write" && w.ql == 128;
    return low ? Measured{2, 10 * gentle(w).lat} : gentle(w);
  });
}

TEST(ScalaWalls, AWallOnAScansLastPointAloneIsToBeConfirmed) {
  const Space space = test_space();
  std::vector<Sample> samples = gentle_with_a_low_last_point(space);
  ASSERT_TRUE(wall_on(find_walls(space, samples), "ql"));
  const std::vector<Assignment> again = walls_to_confirm(space, samples);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(space.number(again[0], "ql"), 128);
  EXPECT_EQ(space.number(again[0], "qr"), 1);
  EXPECT_EQ(space.level(again[0], "opcode"), "write");
  // Measured again twice and normal both times: the median of three is no wall.
  const Sample low = *std::find_if(samples.begin(), samples.end(),
                                   [&](const Sample& s) { return s.at == again[0]; });
  for (int i = 0; i < 2; ++i) {
    Sample s = low;
    s.phase = "confirm";
    s.bw_gbps = 10 - 0.02 * 128;
    s.lat_p50_us = 1 + 0.1 * 128;
    samples.push_back(s);
    if (i == 0) EXPECT_EQ(walls_to_confirm(space, samples).size(), 1u);  // two samples: not yet
  }
  EXPECT_FALSE(wall_on(find_walls(space, samples), "ql"));
  EXPECT_TRUE(walls_to_confirm(space, samples).empty());
}

TEST(ScalaWalls, AWallConfirmedByMeasuringAgainStays) {
  const Space space = test_space();
  std::vector<Sample> samples = gentle_with_a_low_last_point(space);
  const std::vector<Assignment> again = walls_to_confirm(space, samples);
  ASSERT_EQ(again.size(), 1u);
  const Sample low = *std::find_if(samples.begin(), samples.end(),
                                   [&](const Sample& s) { return s.at == again[0]; });
  samples.push_back(low);
  samples.push_back(low);
  EXPECT_TRUE(wall_on(find_walls(space, samples), "ql"));
  EXPECT_TRUE(walls_to_confirm(space, samples).empty());  // three samples: enough
}

TEST(ScalaWalls, AWallWithLaterPointsNeedsNoConfirming) {
  const Space space = test_space();
  const std::vector<Sample> samples = gentle_with_a_low_point(space, true);  // ql 32 .. 128
  ASSERT_TRUE(wall_on(find_walls(space, samples), "ql"));
  EXPECT_TRUE(walls_to_confirm(space, samples).empty());
  EXPECT_TRUE(walls_to_confirm(space, sweep(space, gentle)).empty());  // no wall at all
}

// Bandwidth 10 up to 1 MiB per MR, 4 beyond; latency flat; everything +-10%.
Measured mr_bound(const Where& w) {
  return {(w.mr_size <= (1 << 20) ? 10 : 4) * noisy(w, 1), 3 * noisy(w, 2)};
}

TEST(ScalaWalls, AMemoryWallIsNamedOnMrSizeAndNotOnQl) {
  const Space space = test_space();
  const std::vector<Wall> walls = find_walls(space, sweep(space, mr_bound));
  ASSERT_EQ(walls.size(), 1u);
  EXPECT_EQ(walls[0].dimension, "mr_size");
  EXPECT_EQ(walls[0].at, 4 << 20);
  EXPECT_EQ(walls[0].before, 1 << 20);
  EXPECT_GT(walls[0].bw_drop, 0.5);
  EXPECT_EQ(walls[0].critical, std::vector<std::string>{"mr_size"});
}

TEST(ScalaWalls, ANumericDimensionThatIsNotAScaleHasNoWalls) {
  std::vector<Dimension> dims = test_space().dims();
  dims[2].scale = false;  // mr_size, as if it were a message size
  const Space space(dims);
  const std::vector<Sample> samples = sweep(space, mr_bound);
  EXPECT_TRUE(find_walls(space, samples).empty());
  EXPECT_GT(of(importance(space, samples), "mr_size").sensitivity, 0.9);  // still critical
}

// Bandwidth falls steeply with ql, a little with qr, not at all with opcode or mr_size.
Measured ql_bound(const Where& w) { return {100 / std::sqrt(w.ql) * (1 - 0.002 * w.qr), 1}; }

TEST(ScalaWalls, ImportanceRanksTheCausalDimensionFirstAndADimensionWithNoEffectLast) {
  const Space space = test_space();
  const std::vector<Importance> all = importance(space, sweep(space, ql_bound));
  ASSERT_EQ(all.size(), space.size());
  for (size_t d = 0; d < space.size(); ++d) EXPECT_EQ(all[d].dimension, space.dims()[d].name);
  EXPECT_GT(of(all, "ql").sensitivity, 0.9);
  EXPECT_GT(of(all, "ql").removal, 0.9);
  EXPECT_GT(score(of(all, "ql")), score(of(all, "qr")));
  EXPECT_GT(score(of(all, "qr")), 0);
  EXPECT_LT(score(of(all, "qr")), WallThresholds{}.min_importance);
  EXPECT_NEAR(of(all, "opcode").sensitivity, 0, 1e-9);
  EXPECT_NEAR(of(all, "opcode").removal, 0, 1e-9);
  EXPECT_NEAR(of(all, "mr_size").removal, 0, 1e-9);
}

TEST(ScalaWalls, OnAFullFactorialWithAdditiveEffectsRemovalEqualsSensitivity) {
  // The factorial is balanced, so the main effects are orthogonal: dropping one loses exactly
  // what its level means explain.
  const Space space = test_space();
  const std::vector<Importance> all = importance(
      space, sweep(space, [](const Where& w) {
        return Measured{std::sqrt(w.ql) * (w.opcode == "send" ? 2 : 3) / std::log2(w.mr_size), 1};
      }));
  double explained = 0;
  for (const Importance& i : all) {
    EXPECT_NEAR(i.removal, i.sensitivity, 1e-9) << i.dimension;
    explained += i.sensitivity;
  }
  EXPECT_NEAR(explained, 1, 1e-9);  // log bandwidth is exactly additive here
}

// Bandwidth flat; latency linear in ql up to 64, five times that line beyond.
Measured latency_jump(const Where& w) {
  const double line = 1 + 0.1 * w.ql;
  return {10, w.ql <= 64 ? line : 5 * line};
}

TEST(ScalaWalls, ALatencyOnlyWallIsFoundWithItsLatencyFactor) {
  const Space space = test_space();
  const std::vector<Wall> walls = find_walls(space, sweep(space, latency_jump));
  ASSERT_EQ(walls.size(), 1u);
  EXPECT_EQ(walls[0].dimension, "ql");
  EXPECT_EQ(walls[0].at, 80);
  EXPECT_EQ(walls[0].before, 64);
  EXPECT_DOUBLE_EQ(walls[0].bw_drop, 0);
  EXPECT_DOUBLE_EQ(walls[0].lat_factor, 5 * 9.0 / 7.4 / (80.0 / 64));
  EXPECT_EQ(walls[0].scans, 3 * 5 * 2);
  EXPECT_TRUE(walls[0].critical.empty());  // bandwidth depends on nothing
}

// gentle() bandwidth; latency growing steeply, linearly in ql and qr.
Measured steep_linear_latency(const Where& w) {
  return {gentle(w).bw, 1 + 0.5 * w.ql + 0.1 * w.qr};
}

TEST(ScalaWalls, LatencyGrowingLinearlyIsNoWall) {
  const Space space = test_space();
  EXPECT_TRUE(find_walls(space, sweep(space, steep_linear_latency)).empty());
}

// Bandwidth flat; latency flat up to ql 32, then growing `times` as fast as ql.
Measured latency_growing(const Where& w, double times) {
  return {10, w.ql <= 32 ? 10 : 10 * (w.ql / 32) * times};
}

TEST(ScalaWalls, LatencyGrowingUnderTwiceAsFastAsTheScaleIsNoWall) {
  const Space space = test_space();
  EXPECT_TRUE(
      find_walls(space, sweep(space, [](const Where& w) { return latency_growing(w, 1.9); }))
          .empty());
}

TEST(ScalaWalls, LatencyGrowingOverTwiceAsFastAsTheScaleIsAWall) {
  const Space space = test_space();
  const std::vector<Wall> walls =
      find_walls(space, sweep(space, [](const Where& w) { return latency_growing(w, 2.1); }));
  const std::optional<Wall> ql = wall_on(walls, "ql");
  ASSERT_TRUE(ql);
  EXPECT_EQ(ql->at, 48);
  EXPECT_NEAR(ql->lat_factor, 2.1, 1e-9);  // against growth in proportion to ql
}

// Bandwidth flat; latency easing off as MRs grow: falling latency is never a wall.
Measured latency_easing(const Where& w) {
  return {10, w.mr_size <= 4096      ? 3.3
              : w.mr_size <= 65536   ? 3.2
              : w.mr_size <= 1 << 20 ? 3.0
                                     : 2.6};
}

TEST(ScalaWalls, FallingLatencyIsNoWall) {
  const Space space = test_space();
  EXPECT_TRUE(find_walls(space, sweep(space, latency_easing)).empty());
}

TEST(ScalaWalls, SamplesThatAreNotOkAreIgnored) {
  const Space space = test_space();
  const std::vector<Sample> good = sweep(space, gentle);
  std::vector<Sample> samples = good;
  for (Sample s : good) {  // failures that, if counted, would be walls along ql
    if (space.number(s.at, "ql") < 16) continue;
    s.ok = false;
    s.error = "create_qp: ENOMEM";
    s.bw_gbps = 0.5;
    s.lat_p50_us = 1000;
    samples.push_back(s);
    samples.push_back(s);
  }
  EXPECT_TRUE(find_walls(space, samples).empty());
  const std::vector<Importance> with = importance(space, samples);
  const std::vector<Importance> without = importance(space, good);
  for (size_t d = 0; d < space.size(); ++d) {
    EXPECT_DOUBLE_EQ(with[d].sensitivity, without[d].sensitivity) << with[d].dimension;
    EXPECT_DOUBLE_EQ(with[d].removal, without[d].removal) << with[d].dimension;
  }
}

TEST(ScalaWalls, SamplesNotAtAFullAssignmentOfTheSpaceAreIgnored) {
  const Space space = test_space();
  std::vector<Sample> samples = sweep(space, qp_cache);
  const size_t n = samples.size();
  for (size_t i = 0; i < n; ++i) {
    Sample s = samples[i];
    s.bw_gbps = 0.001;
    s.at.back() = kUnset;
    samples.push_back(s);
    s.at.pop_back();
    samples.push_back(s);
  }
  const std::optional<Wall> ql = wall_on(find_walls(space, samples), "ql");
  ASSERT_TRUE(ql);
  EXPECT_EQ(ql->at, 48);
}

TEST(ScalaWalls, RepeatedSamplesAtALevelCountAsTheirMedian) {
  const Space space = test_space();
  std::vector<Sample> samples = sweep(space, gentle);
  const size_t n = samples.size();
  for (size_t i = 0; i < n; ++i) {  // two more runs of each point; one is far off from ql = 16
    Sample s = samples[i];
    samples.push_back(s);
    if (space.number(s.at, "ql") >= 16) s.bw_gbps = 1;
    samples.push_back(s);
  }
  EXPECT_TRUE(find_walls(space, samples).empty());
}

TEST(ScalaWalls, AScanNeedsThreeLevels) {
  const Space space = test_space();
  std::vector<Sample> samples = sweep(space, [](const Where& w) {
    return Measured{w.ql <= 1 ? 10.0 : 2.0, 1};
  });
  std::erase_if(samples, [&](const Sample& s) { return space.number(s.at, "ql") > 4; });
  const std::optional<Wall> ql = wall_on(find_walls(space, samples), "ql");
  ASSERT_TRUE(ql);
  EXPECT_EQ(ql->at, 2);
  std::erase_if(samples, [&](const Sample& s) { return space.number(s.at, "ql") == 4; });
  EXPECT_TRUE(find_walls(space, samples).empty());
}

TEST(ScalaWalls, NothingToAnalyseGivesNoWallsAndZeroImportance) {
  const Space space = test_space();
  EXPECT_TRUE(find_walls(space, {}).empty());
  for (const Importance& i : importance(space, {})) {
    EXPECT_EQ(i.sensitivity, 0);
    EXPECT_EQ(i.removal, 0);
  }
}

}  // namespace
}  // namespace wharf::scala
