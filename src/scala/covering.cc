#include "scala/covering.h"

#include <algorithm>
#include <random>
#include <utility>

#include "scala/constraints.h"

namespace wharf::scala {
namespace {

// Candidate rows grown per row kept. More finds slightly smaller arrays, slowly; 20 already
// covers the default space's pairs in 169 rows, the fewest possible (13 x 13 for ql, qr).
constexpr int kCandidates = 20;

enum class TupleState : uint8_t { kUncovered, kCovered, kInfeasible };

// Every t-tuple of a space: for each set of t dimensions (a "combination"), the state of each
// combination of their levels, indexed in mixed radix (the first dimension most significant).
class TupleTable {
 public:
  TupleTable(const Space& space, int t) : space_(space) {
    std::vector<size_t> dims;
    add_combinations(dims, 0, static_cast<size_t>(t));
  }

  uint64_t feasible() const { return feasible_; }
  uint64_t infeasible() const { return infeasible_; }
  uint64_t uncovered() const { return uncovered_; }

  // The uncovered tuples row holds (in dimensions it sets; a partial row holds fewer).
  uint64_t uncovered_in(const Assignment& row) const {
    uint64_t n = 0;
    for (const Combination& c : combinations_) {
      const size_t i = index_in(c, row);
      if (i != kAbsent && c.states[i] == TupleState::kUncovered) ++n;
    }
    return n;
  }

  void cover(const Assignment& row) {
    for (Combination& c : combinations_) {
      const size_t i = index_in(c, row);
      if (i == kAbsent || c.states[i] != TupleState::kUncovered) continue;
      c.states[i] = TupleState::kCovered;
      --c.uncovered;
      --uncovered_;
    }
  }

  // An uncovered tuple as a partial assignment: a random one of the combination with the most
  // left (the hardest to finish). Only while uncovered() > 0.
  Assignment pick_uncovered(std::mt19937_64& rng) const {
    const Combination& c = *std::max_element(
        combinations_.begin(), combinations_.end(),
        [](const Combination& a, const Combination& b) { return a.uncovered < b.uncovered; });
    size_t i = rng() % c.states.size();
    while (c.states[i] != TupleState::kUncovered) i = (i + 1) % c.states.size();
    return tuple(c, i);
  }

 private:
  static constexpr size_t kAbsent = SIZE_MAX;

  struct Combination {
    std::vector<size_t> dims;  // increasing
    std::vector<TupleState> states;
    uint64_t uncovered = 0;
  };

  // Every combination extending `dims` by `more` dimensions from `from` on.
  void add_combinations(std::vector<size_t>& dims, size_t from, size_t more) {
    if (more == 0) {
      add(dims);
      return;
    }
    for (size_t d = from; d + more <= space_.size(); ++d) {
      dims.push_back(d);
      add_combinations(dims, d + 1, more - 1);
      dims.pop_back();
    }
  }

  void add(const std::vector<size_t>& dims) {
    Combination c{dims, {}, 0};
    size_t count = 1;
    for (size_t d : dims) count *= space_.dims()[d].levels.size();
    for (size_t i = 0; i < count; ++i) {
      if (completable(space_, tuple(c, i))) {
        c.states.push_back(TupleState::kUncovered);
        ++c.uncovered;
      } else {
        c.states.push_back(TupleState::kInfeasible);
        ++infeasible_;
      }
    }
    feasible_ += c.uncovered;
    uncovered_ += c.uncovered;
    combinations_.push_back(std::move(c));
  }

  // Tuple i of c as a partial assignment.
  Assignment tuple(const Combination& c, size_t i) const {
    Assignment a(space_.size(), kUnset);
    for (size_t k = c.dims.size(); k-- > 0;) {
      const size_t levels = space_.dims()[c.dims[k]].levels.size();
      a[c.dims[k]] = static_cast<int>(i % levels);
      i /= levels;
    }
    return a;
  }

  // The index of the tuple of c that row holds; kAbsent when row leaves one of c's dimensions
  // unset (or out of its range).
  size_t index_in(const Combination& c, const Assignment& row) const {
    size_t i = 0;
    for (size_t d : c.dims) {
      const size_t levels = space_.dims()[d].levels.size();
      if (d >= row.size() || row[d] < 0 || static_cast<size_t>(row[d]) >= levels) return kAbsent;
      i = i * levels + static_cast<size_t>(row[d]);
    }
    return i;
  }

  const Space& space_;
  std::vector<Combination> combinations_;
  uint64_t feasible_ = 0;
  uint64_t infeasible_ = 0;
  uint64_t uncovered_ = 0;
};

// Fisher-Yates with rng() taken modulo: the same order for a seed with any standard library.
void shuffle(std::vector<size_t>& items, std::mt19937_64& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng() % i]);
}

// A full runnable row grown from an uncovered tuple: the other dimensions in random order, each
// set to the level that holds the most uncovered tuples among those keeping the row
// completable (ties broken at random).
Assignment grow_row(const Space& space, const TupleTable& table, std::mt19937_64& rng) {
  Assignment row = table.pick_uncovered(rng);
  std::vector<size_t> order;
  for (size_t d = 0; d < space.size(); ++d)
    if (row[d] == kUnset) order.push_back(d);
  shuffle(order, rng);
  for (size_t d : order) {
    int best = kUnset;
    uint64_t best_score = 0;
    uint64_t ties = 0;
    for (int l = 0; l < static_cast<int>(space.dims()[d].levels.size()); ++l) {
      row[d] = l;
      if (!completable(space, row)) continue;
      const uint64_t score = table.uncovered_in(row);
      if (best == kUnset || score > best_score) {
        best = l;
        best_score = score;
        ties = 1;
      } else if (score == best_score && rng() % ++ties == 0) {
        best = l;  // each of the tied levels is kept with equal chance
      }
    }
    row[d] = best;  // some level qualifies: the row was completable before d
  }
  return row;
}

int clamp_strength(const Space& space, int t) {
  return std::clamp(t, 1, static_cast<int>(space.size()));
}

}  // namespace

CoveringArray covering_array(const Space& space, int t, uint64_t seed) {
  TupleTable table(space, clamp_strength(space, t));
  std::mt19937_64 rng(seed);
  CoveringArray out;
  out.tuples = table.feasible();
  out.infeasible_tuples = table.infeasible();
  while (table.uncovered() > 0) {
    // Every candidate holds the uncovered tuple it grew from, so each row kept covers some.
    Assignment best;
    uint64_t best_fresh = 0;
    for (int c = 0; c < kCandidates; ++c) {
      Assignment row = grow_row(space, table, rng);
      const uint64_t fresh = table.uncovered_in(row);
      if (fresh > best_fresh) {
        best = std::move(row);
        best_fresh = fresh;
      }
    }
    table.cover(best);
    out.rows.push_back(std::move(best));
  }
  return out;
}

bool covers(const Space& space, const std::vector<Assignment>& rows, int t) {
  TupleTable table(space, clamp_strength(space, t));
  for (const Assignment& row : rows) table.cover(row);
  return table.uncovered() == 0;
}

}  // namespace wharf::scala
