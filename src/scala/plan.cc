#include "scala/plan.h"

#include <algorithm>
#include <set>

#include "scala/constraints.h"
#include "scala/covering.h"

namespace wharf::scala {

std::vector<int> spread_levels(size_t count, size_t n) {
  std::vector<int> out;
  if (count == 0 || n == 0) return out;
  if (count <= n) {
    for (size_t i = 0; i < count; ++i) out.push_back(static_cast<int>(i));
    return out;
  }
  if (n == 1) return {0};
  for (size_t k = 0; k < n; ++k) {
    const int i = static_cast<int>((k * (count - 1) + (n - 1) / 2) / (n - 1));
    if (out.empty() || out.back() != i) out.push_back(i);
  }
  return out;
}

namespace {

// A copy of space whose scale dimensions keep only `n` spread levels (the baseline among them
// when it was kept, else the nearest kept level below it). `kept[d]` maps the copy's level indices
// back.
Space thinned(const Space& space, size_t n, std::vector<std::vector<int>>* kept) {
  std::vector<Dimension> dims = space.dims();
  kept->assign(dims.size(), {});
  for (size_t d = 0; d < dims.size(); ++d) {
    Dimension& dim = dims[d];
    std::vector<int>& k = (*kept)[d];
    k = dim.scale ? spread_levels(dim.levels.size(), n)
                  : spread_levels(dim.levels.size(), dim.levels.size());
    std::vector<std::string> levels;
    size_t baseline = 0;
    for (size_t i = 0; i < k.size(); ++i) {
      levels.push_back(dim.levels[static_cast<size_t>(k[i])]);
      if (k[i] <= static_cast<int>(dim.baseline)) baseline = i;
    }
    dim.levels = std::move(levels);
    dim.baseline = baseline;
  }
  return Space(std::move(dims));
}

class Planner {
 public:
  explicit Planner(const Space& space) : space_(space) {}

  void add(const Assignment& a, const std::string& phase) {
    if (first_violated(space_, a) != nullptr || !seen_.insert(a).second) return;
    plan_.points.push_back({a, phase});
  }
  Plan& plan() { return plan_; }

 private:
  const Space& space_;
  std::set<Assignment> seen_;
  Plan plan_;
};

}  // namespace

Plan make_plan(const Space& space, int t) {
  Planner p(space);
  const Assignment base = space.baseline();
  const int ql = space.index_of("ql"), qr = space.index_of("qr");
  auto scan = [&](size_t d) {
    for (size_t l = 0; l < space.dims()[d].levels.size(); ++l) {
      Assignment a = base;
      a[d] = static_cast<int>(l);
      p.add(a, "scan:" + space.dims()[d].name);
    }
  };
  // The QP scans first, then the plane, then the other scales: the walls and the model come
  // before the combinations when the budget is short.
  for (int d : {ql, qr})
    if (d >= 0) scan(static_cast<size_t>(d));
  if (ql >= 0 && qr >= 0) {
    const auto& dims = space.dims();
    for (int i : spread_levels(dims[static_cast<size_t>(ql)].levels.size(), kPlaneLevels))
      for (int j : spread_levels(dims[static_cast<size_t>(qr)].levels.size(), kPlaneLevels)) {
        Assignment a = base;
        a[static_cast<size_t>(ql)] = i;
        a[static_cast<size_t>(qr)] = j;
        p.add(a, "plane");
      }
  }
  for (size_t d = 0; d < space.size(); ++d)
    if (space.dims()[d].scale && static_cast<int>(d) != ql && static_cast<int>(d) != qr) scan(d);

  std::vector<std::vector<int>> kept;
  const Space coarse = thinned(space, kCoverLevels, &kept);
  const CoveringArray cover = covering_array(coarse, t);
  for (const Assignment& row : cover.rows) {
    Assignment a(row.size());
    for (size_t d = 0; d < row.size(); ++d) a[d] = kept[d][static_cast<size_t>(row[d])];
    p.add(a, "cover");
  }
  Plan& plan = p.plan();
  plan.t = std::min<int>(t, static_cast<int>(space.size()));  // as covering_array clamps it
  plan.covering_rows = cover.rows.size();
  plan.full_factorial = space.full_factorial();
  plan.runnable = runnable_count(space);
  return std::move(plan);
}

}  // namespace wharf::scala
