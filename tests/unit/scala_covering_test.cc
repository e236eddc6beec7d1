// Tests for wharf-scala's covering arrays (scala/covering.h): every runnable t-tuple covered,
// checked against brute force; rows that break no rule; infeasible tuples counted and left
// out; far fewer rows than the full factorial; the same array for the same seed; and covers()
// noticing a missing row.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "scala/constraints.h"
#include "scala/covering.h"

namespace wharf::scala {
namespace {

// A small space the rules bite into, with a dimension no rule reads ("ql").
Space small_space() {
  return Space({{.name = "qp_type", .levels = {"rc", "uc", "ud"}},
                {.name = "opcode", .levels = {"send", "write", "read", "atomic"}},
                {.name = "size", .levels = {"8", "64", "4k", "64k"}, .numeric = true},
                {.name = "ql", .levels = {"1", "2", "4"}, .numeric = true},
                {.name = "srq", .levels = {"off", "on"}}});
}

Space restricted_default_space() {
  Space space = default_space();
  std::string error;
  EXPECT_TRUE(space.set_levels("ql=1,16,64,256", &error)) << error;
  EXPECT_TRUE(space.set_levels("qr=1,16,64,256", &error)) << error;
  return space;
}

// Every full assignment of space.
std::vector<Assignment> all_points(const Space& space) {
  std::vector<Assignment> points;
  Assignment a(space.size(), 0);
  for (;;) {
    points.push_back(a);
    size_t d = 0;
    for (; d < space.size(); ++d) {
      if (++a[d] < static_cast<int>(space.dims()[d].levels.size())) break;
      a[d] = 0;
    }
    if (d == space.size()) return points;
  }
}

// The t-tuples a full assignment holds, each as a partial assignment.
void tuples_of(const Assignment& point, size_t t, size_t from, Assignment& tuple,
               std::set<Assignment>& out) {
  if (t == 0) {
    out.insert(tuple);
    return;
  }
  for (size_t d = from; d + t <= point.size(); ++d) {
    tuple[d] = point[d];
    tuples_of(point, t - 1, d + 1, tuple, out);
    tuple[d] = kUnset;
  }
}

std::set<Assignment> tuples_of(const std::vector<Assignment>& points, int t) {
  std::set<Assignment> out;
  for (const Assignment& p : points) {
    Assignment tuple(p.size(), kUnset);
    tuples_of(p, static_cast<size_t>(t), 0, tuple, out);
  }
  return out;
}

std::vector<Assignment> runnable_points(const Space& space) {
  std::vector<Assignment> runnable;
  for (const Assignment& p : all_points(space))
    if (first_violated(space, p) == nullptr) runnable.push_back(p);
  return runnable;
}

void expect_rows_runnable(const Space& space, const CoveringArray& array) {
  for (const Assignment& row : array.rows) {
    ASSERT_EQ(row.size(), space.size());
    for (size_t d = 0; d < row.size(); ++d) {
      EXPECT_GE(row[d], 0);
      EXPECT_LT(row[d], static_cast<int>(space.dims()[d].levels.size()));
    }
    const Constraint* broken = first_violated(space, row);
    EXPECT_EQ(broken, nullptr) << broken->name;
  }
}

// Whether some row sets dimension a to level la and b to lb.
bool some_row_has(const Space& space, const std::vector<Assignment>& rows, std::string_view a,
                  std::string_view la, std::string_view b, std::string_view lb) {
  for (const Assignment& row : rows)
    if (space.level(row, a) == la && space.level(row, b) == lb) return true;
  return false;
}

TEST(CoveringArray, CoversEveryRunnableTupleAtStrengthsOneToThree) {
  const Space space = small_space();
  const std::vector<Assignment> runnable = runnable_points(space);
  for (int t = 1; t <= 3; ++t) {
    SCOPED_TRACE("t=" + std::to_string(t));
    const CoveringArray array = covering_array(space, t);
    expect_rows_runnable(space, array);
    EXPECT_TRUE(covers(space, array.rows, t));
    // Against brute force: the tuples of the runnable points are exactly those of the rows.
    const std::set<Assignment> needed = tuples_of(runnable, t);
    EXPECT_EQ(tuples_of(array.rows, t), needed);
    EXPECT_EQ(array.tuples, needed.size());
    EXPECT_EQ(array.tuples + array.infeasible_tuples, tuples_of(all_points(space), t).size());
    EXPECT_LT(array.rows.size(), runnable.size());
  }
}

TEST(CoveringArray, PairwiseOnTheDefaultSpace) {
  const Space space = default_space();
  const CoveringArray array = covering_array(space, 2);
  expect_rows_runnable(space, array);
  EXPECT_TRUE(covers(space, array.rows, 2));
  // Every (ql, qr) pair is runnable and needs a row of its own.
  EXPECT_GE(array.rows.size(), 13u * 13);
  EXPECT_LE(array.rows.size(), 190u);
  EXPECT_LT(array.rows.size() * 1000, space.full_factorial());
}

TEST(CoveringArray, PairwiseOnARestrictedDefaultSpaceIsSmall) {
  const Space space = restricted_default_space();
  const CoveringArray array = covering_array(space, 2);
  expect_rows_runnable(space, array);
  EXPECT_TRUE(covers(space, array.rows, 2));
  EXPECT_GE(array.rows.size(), 19u) << "size x mr_size has 19 runnable pairs";
  EXPECT_LE(array.rows.size(), 40u);
}

TEST(CoveringArray, UdWithReadIsInfeasible) {
  const Space space = default_space();
  const CoveringArray array = covering_array(space, 2);
  Assignment ud_read(space.size(), kUnset);
  ud_read[static_cast<size_t>(space.index_of("qp_type"))] = 2;
  ud_read[static_cast<size_t>(space.index_of("opcode"))] = 2;
  EXPECT_FALSE(completable(space, ud_read));
  EXPECT_FALSE(some_row_has(space, array.rows, "qp_type", "ud", "opcode", "read"));
  EXPECT_TRUE(some_row_has(space, array.rows, "qp_type", "ud", "opcode", "send"));
  // The pairs no runnable point holds: ud with write, read, atomic and 64k; uc with read and
  // atomic; atomic with 64, 4k, 64k; inline with 4k, 64k, read, atomic; srq with write, read,
  // atomic; 64k messages in 4k MRs; 64 MRs of 16m.
  EXPECT_EQ(array.infeasible_tuples, 18u);
  EXPECT_EQ(array.tuples + array.infeasible_tuples, 1568u);  // all pairs of levels
}

TEST(CoveringArray, SameSeedSameRows) {
  const Space space = restricted_default_space();
  EXPECT_EQ(covering_array(space, 2, 7).rows, covering_array(space, 2, 7).rows);
  const CoveringArray other = covering_array(space, 2, 8);
  expect_rows_runnable(space, other);
  EXPECT_TRUE(covers(space, other.rows, 2));
}

TEST(CoveringArray, StrengthBeyondTheDimensionsIsClamped) {
  const Space space = small_space();
  const CoveringArray array = covering_array(space, 9);
  // At full strength every runnable point is a tuple only it holds.
  EXPECT_EQ(array.rows.size(), runnable_count(space));
  EXPECT_TRUE(covers(space, array.rows, 9));
}

TEST(CoveringArray, NothingRunnableNeedsNoRows) {
  const Space space({{.name = "qp_type", .levels = {"ud"}},
                     {.name = "opcode", .levels = {"read", "atomic"}},
                     {.name = "cq", .levels = {"shared", "per_qp"}}});
  const CoveringArray array = covering_array(space, 2);
  EXPECT_TRUE(array.rows.empty());
  EXPECT_EQ(array.tuples, 0u);
  EXPECT_EQ(array.infeasible_tuples, 2u + 4 + 2);
  EXPECT_TRUE(covers(space, {}, 2));
}

TEST(Covers, MissesTuplesOfARemovedRow) {
  const Space space = small_space();
  std::vector<Assignment> rows = covering_array(space, 2).rows;
  // Drop rows while the rest still cover: then every row left is needed.
  for (size_t i = rows.size(); i-- > 0;) {
    std::vector<Assignment> fewer = rows;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
    if (covers(space, fewer, 2)) rows = std::move(fewer);
  }
  ASSERT_TRUE(covers(space, rows, 2));
  for (size_t i = 0; i < rows.size(); ++i) {
    std::vector<Assignment> fewer = rows;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(i));
    EXPECT_FALSE(covers(space, fewer, 2)) << "without row " << i;
  }
  EXPECT_FALSE(covers(space, {}, 2));
}

TEST(Covers, IgnoresMalformedRows) {
  const Space space = small_space();
  EXPECT_FALSE(covers(space, {{0}, {kUnset, kUnset, kUnset, kUnset, kUnset}, {9, 9, 9, 9, 9}}, 1));
}

}  // namespace
}  // namespace wharf::scala
