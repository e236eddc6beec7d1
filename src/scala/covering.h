// t-wise covering arrays under the constraint model: few rows such that every combination of
// levels of any t dimensions that some runnable point contains appears in at least one row.
// ScalaCN's combinatorial testing replaces the full factorial by such an array.
#pragma once

#include <cstdint>
#include <vector>

#include "scala/space.h"

namespace wharf::scala {

struct CoveringArray {
  std::vector<Assignment> rows;    // full assignments, each breaking no constraint
  uint64_t tuples = 0;             // t-tuples that a runnable point contains (all are covered)
  uint64_t infeasible_tuples = 0;  // t-tuples no runnable point contains (left out)
};

// Greedy, AETG-style: each new row is the best of a few candidates, each grown from an
// uncovered tuple by choosing, dimension by dimension, the level that covers the most
// uncovered tuples among those that keep the row completable. Deterministic for a given seed.
// 1 <= t <= space.size(); t larger than the number of dimensions is clamped.
CoveringArray covering_array(const Space& space, int t, uint64_t seed = 1);

// Whether rows cover every runnable t-tuple of space (a check for tests and the report).
bool covers(const Space& space, const std::vector<Assignment>& rows, int t);

}  // namespace wharf::scala
