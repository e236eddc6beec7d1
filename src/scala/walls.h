// Scalability walls (ScalaCN): where bandwidth falls or latency jumps beyond thresholds as a
// scale dimension grows, and which dimensions are on the critical path.
//
// Detection works on scans: groups of ok samples that agree on every dimension but one scale
// dimension D (numeric and Dimension::scale), with at least 3 levels of D (samples at the same
// level count as one point: the median of their bandwidths and of their latencies). Along a
// scan (sorted by D) a wall is at the first level x_k where
//   - bandwidth falls: bw(x_k) < (1 - bw_drop) * max(bw(x_j), j < k), and it stays below that
//     at every later level of the scan (a single low point is noise, not a wall), or
//   - latency jumps: latency grows more than lat_factor times faster than D from the level
//     before: lat_p50(x_j) > lat_factor * lat_p50(x_{k-1}) * x_j / x_{k-1} at x_k and every
//     later level. Growth in proportion is what queueing alone gives (each QP keeps a fixed
//     number of work requests in flight: twice the QPs wait at most twice as long at a
//     saturated device); a wall is the device itself slowing down.
// One wall per scan at most, the earlier of the two; scans of the same dimension that find
// walls merge into one entry at the smallest `at` (the report's `scans` counts them).
//
// Critical path: over all ok samples with a positive bandwidth, each dimension's importance
// for bandwidth is measured two ways: sensitivity (the share of the variance of log bandwidth
// that the dimension's level means explain, eta^2) and removal (the share of that variance an
// additive main-effects model of log bandwidth, fitted by backfitting, loses when the
// dimension's term is dropped and the rest refitted). Both are in [0, 1], and 0 for every
// dimension when log bandwidth does not vary (to within rounding). `critical` lists every
// dimension whose importance by either measure is at least `min_importance`, most important
// first. A wall is kept only if its dimension matters for what walled: a bandwidth wall if the
// dimension is on the critical path; a latency wall if it is by the same measures taken on log
// lat_p50 over the samples with a positive one (so a latency wall along a dimension bandwidth
// ignores is still found, though that dimension need not be in `critical`).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "scala/sample.h"
#include "scala/space.h"

namespace wharf::scala {

struct WallThresholds {
  double bw_drop = 0.5;     // fraction of the best bandwidth before
  double lat_factor = 2.0;  // times faster than the dimension
  double min_importance = 0.1;
};

struct Wall {
  std::string dimension;
  double at = 0;       // the level of `dimension` where the wall is
  double before = 0;   // the level before it in the scan
  double bw_drop = 0;  // 1 - bw(at) / best bw before it; 0 when bandwidth did not fall
  // How many times faster than the dimension latency grew from `before` to `at`:
  // (lat_p50(at) / lat_p50(before)) / (at / before); 1 is growth in proportion.
  double lat_factor = 0;
  int scans = 1;                      // scans that found it
  std::vector<std::string> critical;  // dimensions on the critical path, most important first
};

struct Importance {
  std::string dimension;
  double sensitivity = 0;  // eta^2 of log bandwidth
  double removal = 0;      // share of the variance the additive model loses without it
};

// Every dimension's importance, in the space's order (dimensions with one level: 0, 0).
std::vector<Importance> importance(const Space& space, std::span<const Sample> samples);

// Walls in the space's order of dimensions; samples not ok or not at a full assignment of the
// space are ignored.
std::vector<Wall> find_walls(const Space& space, std::span<const Sample> samples,
                             const WallThresholds& limits = {});

// The points a sweep should measure again before it trusts its walls: the last point of every
// scan whose wall find_walls would count is at that last level, while fewer than `enough`
// samples were taken there. Such a wall rests on one point alone (nothing later in the scan
// confirms it), and one noisy measurement would pass for a wall; measured again, the median
// of the samples decides. Each point once, in the space's order of dimensions.
std::vector<Assignment> walls_to_confirm(const Space& space, std::span<const Sample> samples,
                                         const WallThresholds& limits = {}, size_t enough = 3);

}  // namespace wharf::scala
