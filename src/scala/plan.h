// What a sweep runs, in order: the scans of every scale dimension from the baseline (where
// walls are looked for), the Ql x Qr plane at the baseline (what the model is fitted to), and
// a t-wise covering array of the whole space under the constraint model (the combinations).
// A point planned twice runs once. The budget cuts the plan's tail, never reorders it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scala/space.h"

namespace wharf::scala {

struct PlannedPoint {
  Assignment at;
  std::string phase;  // "scan:ql", "plane", "cover"
};

struct Plan {
  std::vector<PlannedPoint> points;
  uint64_t full_factorial = 0;  // every combination of the space's levels
  uint64_t runnable = 0;        // those the constraint model lets run
  int t = 2;
  size_t covering_rows = 0;
};

// At most kPlaneLevels levels of ql and qr span the plane (every other level, the ends kept);
// the covering array sees at most kCoverLevels levels of each scale dimension (the ends and
// evenly spaced ones between), so that its rows stay few; the scans see every level.
constexpr size_t kPlaneLevels = 7;
constexpr size_t kCoverLevels = 4;

Plan make_plan(const Space& space, int t);

// The indices of at most `n` of `count` levels: the first, the last and evenly spaced ones.
std::vector<int> spread_levels(size_t count, size_t n);

}  // namespace wharf::scala
