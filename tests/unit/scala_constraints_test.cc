// Tests for wharf-scala's constraint model (scala/constraints.h): each rule rejects the points
// it is about and no others, partial assignments are rejected only when already decided,
// completability looks ahead, and the runnable count agrees with brute force.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "scala/constraints.h"

namespace wharf::scala {
namespace {

using Levels = std::vector<std::pair<std::string_view, std::string_view>>;

// `a` with the named dimensions set to the named levels.
Assignment with(const Space& space, Assignment a, const Levels& levels) {
  for (const auto& [name, level] : levels) {
    const int d = space.index_of(name);
    EXPECT_GE(d, 0) << name;
    const std::vector<std::string>& all = space.dims()[static_cast<size_t>(d)].levels;
    const auto it = std::find(all.begin(), all.end(), level);
    EXPECT_NE(it, all.end()) << name << "=" << level;
    a[static_cast<size_t>(d)] = static_cast<int>(it - all.begin());
  }
  return a;
}

Assignment partial(const Space& space, const Levels& levels) {
  return with(space, Assignment(space.size(), kUnset), levels);
}

// The names of every rule a breaks.
std::vector<std::string> broken(const Space& space, const Assignment& a) {
  std::vector<std::string> names;
  for (const Constraint& c : constraints())
    if (c.violated(space, a)) names.emplace_back(c.name);
  return names;
}

using Names = std::vector<std::string>;

// Calls visit with a for every way to give dims a level (or, with_unset, none: kUnset), the
// other dimensions as they are in a.
template <class Visit>
void for_each_setting(const Space& space, Assignment a, const std::vector<size_t>& dims,
                      bool with_unset, Visit visit) {
  const int first = with_unset ? kUnset : 0;
  for (size_t d : dims) a[d] = first;
  for (;;) {
    visit(a);
    size_t k = 0;
    for (; k < dims.size(); ++k) {
      if (++a[dims[k]] < static_cast<int>(space.dims()[dims[k]].levels.size())) break;
      a[dims[k]] = first;
    }
    if (k == dims.size()) return;
  }
}

std::vector<size_t> all_dims(const Space& space) {
  std::vector<size_t> dims(space.size());
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = d;
  return dims;
}

std::vector<size_t> dims_read_by(const Space& space, const Constraint& c) {
  std::vector<size_t> dims;
  for (std::string_view name : c.reads)
    if (!name.empty()) dims.push_back(static_cast<size_t>(space.index_of(name)));
  return dims;
}

uint64_t brute_force_count(const Space& space) {
  uint64_t n = 0;
  for_each_setting(space, Assignment(space.size()), all_dims(space), false,
                   [&](const Assignment& a) { n += first_violated(space, a) == nullptr; });
  return n;
}

class ConstraintsTest : public ::testing::Test {
 protected:
  // The baseline (which breaks no rule) with some levels changed.
  Assignment point(const Levels& levels) const { return with(space_, space_.baseline(), levels); }
  Names broken_at(const Levels& levels) const { return broken(space_, point(levels)); }

  const Space space_ = default_space();
};

TEST_F(ConstraintsTest, TheTableNamesEachRuleOnceWithAReasonAndRealDimensions) {
  std::set<std::string> names;
  for (const Constraint& c : constraints()) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    EXPECT_NE(std::string(c.reason), "") << c.name;
    EXPECT_NE(c.reads[0], "") << c.name;
    for (std::string_view dim : c.reads)
      if (!dim.empty()) {
        EXPECT_GE(space_.index_of(dim), 0) << c.name << " reads " << dim;
      }
  }
  EXPECT_EQ(names.size(), 8u);
}

TEST_F(ConstraintsTest, BaselineBreaksNoRule) {
  EXPECT_EQ(first_violated(space_, space_.baseline()), nullptr);
}

TEST_F(ConstraintsTest, UdOnlySends) {
  EXPECT_EQ(broken_at({{"qp_type", "ud"}, {"opcode", "write"}}), Names{"ud_sends_only"});
  EXPECT_EQ(broken_at({{"qp_type", "ud"}, {"opcode", "send"}}), Names{});
}

TEST_F(ConstraintsTest, UcHasNoReadOrAtomic) {
  EXPECT_EQ(broken_at({{"qp_type", "uc"}, {"opcode", "read"}}), Names{"uc_no_read_or_atomic"});
  EXPECT_EQ(broken_at({{"qp_type", "uc"}, {"opcode", "atomic"}, {"size", "8"}}),
            Names{"uc_no_read_or_atomic"});
  EXPECT_EQ(broken_at({{"qp_type", "uc"}, {"opcode", "write"}}), Names{});
  EXPECT_EQ(broken_at({{"qp_type", "rc"}, {"opcode", "read"}}), Names{});
}

TEST_F(ConstraintsTest, UdMessagesFitOneMtu) {
  EXPECT_EQ(broken_at({{"qp_type", "ud"}, {"opcode", "send"}, {"size", "64k"}}),
            Names{"ud_one_mtu"});
  EXPECT_EQ(broken_at({{"qp_type", "ud"}, {"opcode", "send"}, {"size", "4k"}}), Names{});
}

TEST_F(ConstraintsTest, AtomicsMoveEightBytes) {
  EXPECT_EQ(broken_at({{"opcode", "atomic"}, {"size", "64"}}), Names{"atomic_8_bytes"});
  EXPECT_EQ(broken_at({{"opcode", "atomic"}, {"size", "8"}}), Names{});
}

TEST_F(ConstraintsTest, InlineIsForSmallSendsAndWrites) {
  EXPECT_EQ(broken_at({{"inline", "on"}, {"size", "4k"}}), Names{"inline_small_sends_writes"});
  EXPECT_EQ(broken_at({{"inline", "on"}, {"size", "64"}, {"opcode", "read"}}),
            Names{"inline_small_sends_writes"});
  EXPECT_EQ(broken_at({{"inline", "on"}, {"size", "64"}, {"opcode", "write"}}), Names{});
  EXPECT_EQ(broken_at({{"inline", "on"}, {"size", "64"}, {"opcode", "send"}}), Names{});

  Space sizes = default_space();
  std::string error;
  ASSERT_TRUE(sizes.set_levels("size=512,513", &error)) << error;
  const Assignment at_limit = with(sizes, sizes.baseline(), {{"inline", "on"}, {"size", "512"}});
  EXPECT_EQ(broken(sizes, at_limit), Names{});
  EXPECT_EQ(broken(sizes, with(sizes, at_limit, {{"size", "513"}})),
            Names{"inline_small_sends_writes"});
}

TEST_F(ConstraintsTest, SrqOnlyWithSends) {
  EXPECT_EQ(broken_at({{"srq", "on"}, {"opcode", "write"}}), Names{"srq_sends_only"});
  EXPECT_EQ(broken_at({{"srq", "on"}, {"opcode", "send"}}), Names{});
}

TEST_F(ConstraintsTest, AMessageFitsOneMr) {
  EXPECT_EQ(broken_at({{"size", "64k"}, {"mr_size", "4k"}}), Names{"message_fits_mr"});
  EXPECT_EQ(broken_at({{"size", "4k"}, {"mr_size", "4k"}}), Names{});
}

TEST_F(ConstraintsTest, MrsFitTheMemoryBudget) {
  EXPECT_EQ(broken_at({{"mrs", "64"}, {"mr_size", "16m"}}), Names{"memory_budget"});
  EXPECT_EQ(broken_at({{"mrs", "64"}, {"mr_size", "4m"}}), Names{}) << "exactly 256 MiB";
  EXPECT_EQ(broken_at({{"mrs", "16"}, {"mr_size", "16m"}}), Names{});
}

TEST_F(ConstraintsTest, SetLevelsAloneCanDecide) {
  EXPECT_EQ(broken(space_, partial(space_, {{"qp_type", "ud"}, {"opcode", "read"}})),
            Names{"ud_sends_only"});
  EXPECT_EQ(broken(space_, partial(space_, {{"inline", "on"}, {"opcode", "atomic"}})),
            Names{"inline_small_sends_writes"});
  EXPECT_EQ(broken(space_, partial(space_, {{"inline", "on"}, {"size", "64k"}})),
            Names{"inline_small_sends_writes"});
}

TEST_F(ConstraintsTest, UndecidedPartialAssignmentsAreNotRejected) {
  EXPECT_EQ(first_violated(space_, Assignment(space_.size(), kUnset)), nullptr);
  for (const Levels& levels : std::vector<Levels>{{{"qp_type", "ud"}},
                                                  {{"opcode", "atomic"}},
                                                  {{"inline", "on"}},
                                                  {{"srq", "on"}},
                                                  {{"size", "64k"}},
                                                  {{"mrs", "64"}},
                                                  {{"mr_size", "4k"}},
                                                  {{"qp_type", "ud"}, {"inline", "on"}},
                                                  {{"opcode", "atomic"}, {"mr_size", "4k"}}})
    EXPECT_EQ(broken(space_, partial(space_, levels)), Names{}) << levels.front().first;
}

// The contract itself: whenever a rule rejects a partial assignment of the dimensions it reads,
// it rejects every completion of it.
TEST_F(ConstraintsTest, EveryRejectionHoldsForAllCompletions) {
  const Assignment none(space_.size(), kUnset);
  for (const Constraint& c : constraints()) {
    const std::vector<size_t> dims = dims_read_by(space_, c);
    for_each_setting(space_, none, dims, true, [&](const Assignment& a) {
      if (!c.violated(space_, a)) return;
      std::vector<size_t> unset;
      for (size_t d : dims)
        if (a[d] == kUnset) unset.push_back(d);
      for_each_setting(space_, a, unset, false, [&](const Assignment& completed) {
        EXPECT_TRUE(c.violated(space_, completed)) << c.name;
      });
    });
  }
}

// The search trusts `reads`: a dimension a rule does not list must not change its verdict.
TEST_F(ConstraintsTest, ReadsNameEveryDimensionARuleLooksAt) {
  const Assignment none(space_.size(), kUnset);
  for (const Constraint& c : constraints()) {
    const std::vector<size_t> dims = dims_read_by(space_, c);
    for_each_setting(space_, none, dims, true, [&](const Assignment& a) {
      const bool verdict = c.violated(space_, a);
      for (size_t d = 0; d < space_.size(); ++d) {
        if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
        for_each_setting(space_, a, {d}, false, [&](const Assignment& changed) {
          EXPECT_EQ(c.violated(space_, changed), verdict) << c.name << " looks at " << d;
        });
      }
    });
  }
}

TEST(Constraints, DimensionsTheSpaceLacksCountAsUnset) {
  const Space pair({{.name = "qp_type", .levels = {"rc", "uc", "ud"}},
                    {.name = "opcode", .levels = {"send", "write", "read", "atomic"}}});
  EXPECT_EQ(broken(pair, {2, 1}), Names{"ud_sends_only"});
  EXPECT_EQ(broken(pair, {0, 3}), Names{}) << "no size: atomic_8_bytes cannot fire";
  const Space lone({{.name = "x", .levels = {"a", "b"}}});
  EXPECT_EQ(broken(lone, {1}), Names{});
  EXPECT_EQ(runnable_count(lone), 2u);
}

TEST_F(ConstraintsTest, CompletableLooksPastTheSetLevels) {
  EXPECT_TRUE(completable(space_, Assignment(space_.size(), kUnset)));
  EXPECT_TRUE(completable(space_, space_.baseline()));
  EXPECT_TRUE(completable(space_, partial(space_, {{"qp_type", "ud"}, {"inline", "on"}})));
  EXPECT_FALSE(completable(space_, partial(space_, {{"qp_type", "ud"}, {"opcode", "read"}})));
  EXPECT_FALSE(completable(space_, point({{"srq", "on"}})));
}

TEST(Constraints, IndirectlyInfeasiblePartialIsNotCompletable) {
  Space space = default_space();
  std::string error;
  ASSERT_TRUE(space.set_levels("opcode=write,read", &error)) << error;
  // No rule breaks yet, but every opcode left breaks srq_sends_only or ud_sends_only.
  for (const Levels& levels : std::vector<Levels>{{{"srq", "on"}}, {{"qp_type", "ud"}}}) {
    const Assignment a = partial(space, levels);
    EXPECT_EQ(first_violated(space, a), nullptr);
    EXPECT_FALSE(completable(space, a));
  }
  ASSERT_TRUE(space.set_levels("mr_size=16m", &error)) << error;
  EXPECT_FALSE(completable(space, partial(space, {{"mrs", "64"}})));
  EXPECT_TRUE(completable(space, partial(space, {{"mrs", "16"}})));
}

TEST(Constraints, RunnableCountMatchesBruteForceOnATinySpace) {
  // rc: any opcode, any size (4 points); ud: send of 8 bytes only (1 point); times 3 of "free".
  const Space tiny({{.name = "qp_type", .levels = {"rc", "ud"}},
                    {.name = "free", .levels = {"a", "b", "c"}},
                    {.name = "opcode", .levels = {"send", "read"}},
                    {.name = "size", .levels = {"8", "8k"}, .numeric = true}});
  EXPECT_EQ(brute_force_count(tiny), 15u);
  EXPECT_EQ(runnable_count(tiny), 15u);
}

TEST(Constraints, RunnableCountMatchesBruteForceOnRestrictedDefaultSpaces) {
  for (const std::vector<const char*>& specs : std::vector<std::vector<const char*>>{
           {"ql=1,2", "qr=1,16"},
           {"ql=1", "qr=1", "mrs=1..64", "mr_size=4k..16m"},
           {"ql=4", "qr=4", "size=8,512,513,4k,4097", "opcode=atomic,send"}}) {
    Space space = default_space();
    std::string error;
    for (const char* spec : specs) ASSERT_TRUE(space.set_levels(spec, &error)) << error;
    EXPECT_EQ(runnable_count(space), brute_force_count(space)) << specs.front();
  }
}

TEST(Constraints, RunnableCountSaturatesAtCap) {
  const Space space = default_space();
  const uint64_t all = runnable_count(space);
  EXPECT_GT(all, 0u);
  EXPECT_LT(all, space.full_factorial());
  EXPECT_EQ(runnable_count(space, 10), 10u);
  EXPECT_EQ(runnable_count(space, 0), 0u);
  EXPECT_EQ(runnable_count(space, all), all);
  EXPECT_EQ(runnable_count(space, all + 1), all);
}

TEST(Constraints, NothingRunnableCountsZero) {
  const Space space({{.name = "qp_type", .levels = {"ud"}},
                     {.name = "opcode", .levels = {"read", "atomic"}},
                     {.name = "cq", .levels = {"shared", "per_qp"}}});
  EXPECT_EQ(runnable_count(space), 0u);
  EXPECT_FALSE(completable(space, Assignment(space.size(), kUnset)));
}

}  // namespace
}  // namespace wharf::scala
