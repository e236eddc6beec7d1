// The constraint model (ScalaCN's topological restrictions): combinations of levels that
// cannot run or whose ends cannot reach each other, so a sweep never plans them and the
// covering array never tries to cover them. One table (constraints.cc), a row per rule.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "scala/space.h"

namespace wharf::scala {

// A rule. violated() is true only when the levels a sets (kUnset = not yet chosen) already
// break the rule, whatever the unset dimensions become; a dimension the space lacks counts as
// unset. Rules name dimensions of default_space(); in a space without them they never fire.
// `reads` names every dimension violated() looks at. completable() and runnable_count() search
// only dimensions some rule reads: any levels of the others complete a point, so those are
// multiplied in rather than tried.
struct Constraint {
  const char* name;    // e.g. "ud_sends_only"
  const char* reason;  // one line for the report, e.g. "a UD QP has no RDMA READ"
  std::array<std::string_view, 3> reads;  // "" pads
  bool (*violated)(const Space& space, const Assignment& a);
};

std::span<const Constraint> constraints();

// The first rule a (possibly partial) assignment breaks; nullptr when none does.
const Constraint* first_violated(const Space& space, const Assignment& a);

// Whether a (possibly partial) assignment can be completed to a full one breaking no rule
// (a depth-first search over the unset dimensions some rule reads, pruned by first_violated;
// a dimension no rule reads can take any level).
bool completable(const Space& space, Assignment a);

// The number of full assignments that break no rule (the runnable part of the full
// factorial), counted by the same search; saturates at `cap`.
uint64_t runnable_count(const Space& space, uint64_t cap = UINT64_MAX);

}  // namespace wharf::scala
