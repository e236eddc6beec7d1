#include "scala/walls.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

namespace wharf::scala {
namespace {

// Backfitting stops when no effect moved more than this (in log units, so far below any
// measurable difference) or after this many sweeps (on a balanced design it settles in the
// first; unbalanced ones such as scans from a baseline take a few more).
constexpr double kConverged = 1e-10;
constexpr int kMaxSweeps = 200;
// A measure whose log varies less than this per sample (values equal to within about one part
// in a million) does not vary at all: what is left is rounding, which no dimension explains.
constexpr double kNoVariance = 1e-12;

// One level of a scan: the dimension's value and the median of the samples measured there.
struct Point {
  double x = 0;
  double bw = 0;
  double lat = 0;
  int level = 0;       // x's index among the dimension's levels
  size_t samples = 0;  // how many were measured there
};
using Scan = std::vector<Point>;  // sorted by x, distinct x
// A scan and what its samples agree on: every dimension's level but the scanned one's (unset).
struct KeyedScan {
  Assignment rest;
  Scan scan;
};

// Which part of a sample the importance measures look at.
using Measure = double (*)(const Sample&);
double bandwidth(const Sample& s) { return s.bw_gbps; }
double latency(const Sample& s) { return s.lat_p50_us; }

// An ok sample at a full assignment of the space; anything else cannot be placed.
bool usable(const Space& space, const Sample& s) {
  if (!s.ok || s.at.size() != space.size()) return false;
  for (size_t d = 0; d < space.size(); ++d)
    if (s.at[d] < 0 || static_cast<size_t>(s.at[d]) >= space.dims()[d].levels.size()) return false;
  return true;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The scans along numeric dimension `dim`: the usable samples grouped by every other
// dimension's level, each group's samples at the same value of `dim` merged into one point
// (medians), groups with fewer than 3 points left out.
std::vector<KeyedScan> scans_along(const Space& space, std::span<const Sample> samples,
                                   size_t dim) {
  const Dimension& d = space.dims()[dim];
  std::vector<double> value(d.levels.size());
  for (size_t l = 0; l < d.levels.size(); ++l)
    parse_number(d.levels[l], &value[l]);  // Space keeps a numeric dimension's levels numbers

  struct Measured {
    int level = 0;
    std::vector<double> bw, lat;
  };
  std::map<Assignment, std::map<double, Measured>> groups;
  for (const Sample& s : samples) {
    if (!usable(space, s)) continue;
    const double x = value[static_cast<size_t>(s.at[dim])];
    Assignment rest = s.at;
    rest[dim] = kUnset;
    Measured& m = groups[rest][x];
    m.level = s.at[dim];
    m.bw.push_back(s.bw_gbps);
    m.lat.push_back(s.lat_p50_us);
  }

  std::vector<KeyedScan> scans;
  for (const auto& [rest, by_x] : groups) {
    if (by_x.size() < 3) continue;
    KeyedScan& k = scans.emplace_back();
    k.rest = rest;
    for (const auto& [x, m] : by_x)
      k.scan.push_back({x, median(m.bw), median(m.lat), m.level, m.bw.size()});
  }
  return scans;
}

// The first k where bandwidth falls below (1 - drop) times the best before k and stays there.
std::optional<size_t> bandwidth_wall(const Scan& scan, double drop) {
  double best = scan.front().bw;
  for (size_t k = 1; k < scan.size(); ++k) {
    const double threshold = (1 - drop) * best;
    if (std::all_of(scan.begin() + static_cast<ptrdiff_t>(k), scan.end(),
                    [&](const Point& p) { return p.bw < threshold; }))
      return k;
    best = std::max(best, scan[k].bw);
  }
  return std::nullopt;
}

// The first k where latency grows more than `factor` times faster than the dimension from the
// point before, and stays so: lat(x_j) > factor * lat(x_{k-1}) * x_j / x_{k-1} for every j >= k.
// Growth in proportion is what queueing alone gives (each QP keeps a fixed number of work
// requests in flight, so twice the QPs wait at most twice as long at a saturated device); more
// than that is the device slowing down. A point after a latency of 0 (not measured) never
// counts.
std::optional<size_t> latency_wall(const Scan& scan, double factor) {
  for (size_t k = 1; k < scan.size(); ++k) {
    const Point& before = scan[k - 1];
    if (before.lat <= 0 || before.x <= 0) continue;
    if (std::all_of(scan.begin() + static_cast<ptrdiff_t>(k), scan.end(),
                    [&](const Point& p) { return p.lat > factor * before.lat * p.x / before.x; }))
      return k;
  }
  return std::nullopt;
}

Wall wall_at(const Scan& scan, size_t k, const std::string& dimension) {
  double best = 0;
  for (size_t j = 0; j < k; ++j) best = std::max(best, scan[j].bw);
  Wall w;
  w.dimension = dimension;
  w.at = scan[k].x;
  w.before = scan[k - 1].x;
  // A latency wall may come with more bandwidth, not less: then nothing fell.
  w.bw_drop = best > 0 ? std::clamp(1 - scan[k].bw / best, 0.0, 1.0) : 0;
  // Latency's growth against the dimension's: 1 is growth in proportion (queueing).
  w.lat_factor = scan[k - 1].lat > 0 && scan[k].x > 0
                     ? (scan[k].lat / scan[k - 1].lat) / (scan[k].x / scan[k - 1].x)
                     : 0;
  return w;
}

// The log of one measure over the usable samples where it is positive, with their levels.
struct Observations {
  std::vector<const Assignment*> at;
  std::vector<double> y;
  double mean = 0;
  double ss_total = 0;  // sum of squared deviations from the mean
};

Observations observe(const Space& space, std::span<const Sample> samples, Measure measure) {
  Observations o;
  for (const Sample& s : samples) {
    if (!usable(space, s) || !(measure(s) > 0)) continue;
    o.at.push_back(&s.at);
    o.y.push_back(std::log(measure(s)));
  }
  if (o.y.empty()) return o;
  o.mean = std::accumulate(o.y.begin(), o.y.end(), 0.0) / static_cast<double>(o.y.size());
  for (double y : o.y) o.ss_total += (y - o.mean) * (y - o.mean);
  return o;
}

size_t level_of(const Observations& o, size_t i, size_t dim) {
  return static_cast<size_t>((*o.at[i])[dim]);
}

// Per level of `dim`, the mean of values[i] over the observations at that level (0 where
// there are none) and how many there are.
std::pair<std::vector<double>, std::vector<size_t>> level_means(const Space& space,
                                                                const Observations& o, size_t dim,
                                                                const std::vector<double>& values) {
  const size_t levels = space.dims()[dim].levels.size();
  std::vector<double> mean(levels, 0);
  std::vector<size_t> count(levels, 0);
  for (size_t i = 0; i < o.y.size(); ++i) {
    mean[level_of(o, i, dim)] += values[i];
    ++count[level_of(o, i, dim)];
  }
  for (size_t l = 0; l < levels; ++l)
    if (count[l] > 0) mean[l] /= static_cast<double>(count[l]);
  return {mean, count};
}

// eta^2: the share of the total sum of squares between dim's level means.
double eta_squared(const Space& space, const Observations& o, size_t dim) {
  const auto [mean, count] = level_means(space, o, dim, o.y);
  double between = 0;
  for (size_t l = 0; l < mean.size(); ++l)
    between += static_cast<double>(count[l]) * (mean[l] - o.mean) * (mean[l] - o.mean);
  return between / o.ss_total;
}

// The residual sum of squares of the additive main-effects model y ~ mean + sum over the
// dimensions with several levels, except `skip`, of effect[dimension][level], fitted by
// backfitting: each sweep sets every dimension's effects to the level means of what the
// others leave unexplained (Gauss-Seidel on the least-squares normal equations).
double additive_sse(const Space& space, const Observations& o, std::optional<size_t> skip) {
  std::vector<double> residual(o.y.size());
  for (size_t i = 0; i < o.y.size(); ++i) residual[i] = o.y[i] - o.mean;
  std::vector<std::vector<double>> effect(space.size());
  for (size_t d = 0; d < space.size(); ++d) effect[d].assign(space.dims()[d].levels.size(), 0);

  std::vector<double> partial(o.y.size());
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    double moved = 0;
    for (size_t d = 0; d < space.size(); ++d) {
      if (d == skip || effect[d].size() < 2) continue;
      for (size_t i = 0; i < o.y.size(); ++i)
        partial[i] = residual[i] + effect[d][level_of(o, i, d)];
      const std::vector<double> fitted = level_means(space, o, d, partial).first;
      for (size_t i = 0; i < o.y.size(); ++i) residual[i] = partial[i] - fitted[level_of(o, i, d)];
      for (size_t l = 0; l < fitted.size(); ++l)
        moved = std::max(moved, std::abs(fitted[l] - effect[d][l]));
      effect[d] = fitted;
    }
    if (moved <= kConverged) break;
  }
  double sse = 0;
  for (double r : residual) sse += r * r;
  return sse;
}

std::vector<Importance> importance_of(const Space& space, std::span<const Sample> samples,
                                      Measure measure) {
  std::vector<Importance> out(space.size());
  for (size_t d = 0; d < space.size(); ++d) out[d].dimension = space.dims()[d].name;
  const Observations o = observe(space, samples, measure);
  if (o.ss_total <= kNoVariance * static_cast<double>(o.y.size())) return out;
  const double full = additive_sse(space, o, std::nullopt);
  for (size_t d = 0; d < space.size(); ++d) {
    if (space.dims()[d].levels.size() < 2) continue;
    // Both are shares of ss_total; rounding can take them a hair past 0 or 1 (backfitting also
    // stops a hair short of the optimum), never further.
    out[d].sensitivity = std::clamp(eta_squared(space, o, d), 0.0, 1.0);
    out[d].removal = std::clamp((additive_sse(space, o, d) - full) / o.ss_total, 0.0, 1.0);
  }
  return out;
}

double score(const Importance& i) { return std::max(i.sensitivity, i.removal); }

// The dimensions whose importance reaches `min`, most important first (ties in space order).
std::vector<std::string> critical_path(const std::vector<Importance>& importance, double min) {
  std::vector<const Importance*> on;
  for (const Importance& i : importance)
    if (score(i) >= min) on.push_back(&i);
  std::stable_sort(on.begin(), on.end(),
                   [](const Importance* a, const Importance* b) { return score(*a) > score(*b); });
  std::vector<std::string> names;
  for (const Importance* i : on) names.push_back(i->dimension);
  return names;
}

// The earliest wall of one scan among the kinds that count for its dimension.
std::optional<size_t> scan_wall(const Scan& scan, const WallThresholds& limits, bool bw_counts,
                                bool lat_counts) {
  const std::optional<size_t> bw = bw_counts ? bandwidth_wall(scan, limits.bw_drop) : std::nullopt;
  const std::optional<size_t> lat =
      lat_counts ? latency_wall(scan, limits.lat_factor) : std::nullopt;
  if (bw && lat) return std::min(*bw, *lat);
  return bw ? bw : lat;
}

// Calls fn(d, scan, k) for every scan of a dimension d that find_walls considers, whose wall
// is at scan[k]; returns the bandwidth critical path.
template <class F>
std::vector<std::string> each_scan_wall(const Space& space, std::span<const Sample> samples,
                                        const WallThresholds& limits, F&& fn) {
  const std::vector<Importance> for_bw = importance_of(space, samples, bandwidth);
  const std::vector<Importance> for_lat = importance_of(space, samples, latency);
  for (size_t d = 0; d < space.size(); ++d) {
    const Dimension& dim = space.dims()[d];
    const bool bw_counts = score(for_bw[d]) >= limits.min_importance;
    const bool lat_counts = score(for_lat[d]) >= limits.min_importance;
    if (!dim.numeric || !dim.scale || !(bw_counts || lat_counts)) continue;
    for (const KeyedScan& keyed : scans_along(space, samples, d))
      if (const std::optional<size_t> k = scan_wall(keyed.scan, limits, bw_counts, lat_counts))
        fn(d, keyed, *k);
  }
  return critical_path(for_bw, limits.min_importance);
}

}  // namespace

std::vector<Importance> importance(const Space& space, std::span<const Sample> samples) {
  return importance_of(space, samples, bandwidth);
}

std::vector<Wall> find_walls(const Space& space, std::span<const Sample> samples,
                             const WallThresholds& limits) {
  std::vector<std::optional<Wall>> earliest(space.size());  // ties: the first scan's
  const std::vector<std::string> critical =
      each_scan_wall(space, samples, limits, [&](size_t d, const KeyedScan& keyed, size_t k) {
        std::optional<Wall>& w = earliest[d];
        const int scans = w ? w->scans + 1 : 1;
        if (!w || keyed.scan[k].x < w->at) w = wall_at(keyed.scan, k, space.dims()[d].name);
        w->scans = scans;
      });
  std::vector<Wall> walls;
  for (std::optional<Wall>& w : earliest) {
    if (!w) continue;
    w->critical = critical;
    walls.push_back(std::move(*w));
  }
  return walls;
}

std::vector<Assignment> walls_to_confirm(const Space& space, std::span<const Sample> samples,
                                         const WallThresholds& limits, size_t enough) {
  std::vector<Assignment> out;
  each_scan_wall(space, samples, limits, [&](size_t d, const KeyedScan& keyed, size_t k) {
    const Point& p = keyed.scan[k];
    if (k + 1 != keyed.scan.size() || p.samples >= enough) return;
    Assignment at = keyed.rest;
    at[d] = p.level;
    if (std::find(out.begin(), out.end(), at) == out.end()) out.push_back(std::move(at));
  });
  return out;
}

}  // namespace wharf::scala
