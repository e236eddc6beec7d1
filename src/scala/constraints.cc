#include "scala/constraints.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

namespace wharf::scala {
namespace {

constexpr double kUdMtu = 4096;                        // a UD message is one packet
constexpr double kMaxInline = 512;                     // the device's max_inline_data
constexpr double kAtomicBytes = 8;                     // what an atomic moves
constexpr double kMemoryBudget = 256.0 * 1024 * 1024;  // bytes of MRs one side may register

// Whether `dim` is set to `level`.
bool is(const Space& s, const Assignment& a, std::string_view dim, std::string_view level) {
  return s.level(a, dim) == level;
}

// Whether `dim` is set to one of `levels`.
bool is_any(const Space& s, const Assignment& a, std::string_view dim,
            std::initializer_list<std::string_view> levels) {
  return std::find(levels.begin(), levels.end(), s.level(a, dim)) != levels.end();
}

// Whether `dim` is set to something other than `level`.
bool is_not(const Space& s, const Assignment& a, std::string_view dim, std::string_view level) {
  const std::string_view set = s.level(a, dim);
  return !set.empty() && set != level;
}

// Whether numeric `dim` is set to more than `limit`. An unset dimension reads as NaN, and a
// comparison with NaN is false: the numeric rules below wait until every number they use is
// set.
bool above(const Space& s, const Assignment& a, std::string_view dim, double limit) {
  return s.number(a, dim) > limit;
}

constexpr Constraint kRules[] = {
    {"ud_sends_only",
     "a UD QP has only SEND",
     {"qp_type", "opcode"},
     [](const Space& s, const Assignment& a) {
       return is(s, a, "qp_type", "ud") && is_not(s, a, "opcode", "send");
     }},
    {"uc_no_read_or_atomic",
     "a UC QP has no RDMA READ and no atomics",
     {"qp_type", "opcode"},
     [](const Space& s, const Assignment& a) {
       return is(s, a, "qp_type", "uc") && is_any(s, a, "opcode", {"read", "atomic"});
     }},
    {"ud_one_mtu",
     "a UD message is one packet: at most 4096 bytes",
     {"qp_type", "size"},
     [](const Space& s, const Assignment& a) {
       return is(s, a, "qp_type", "ud") && above(s, a, "size", kUdMtu);
     }},
    {"atomic_8_bytes",
     "an atomic moves exactly 8 bytes",
     {"opcode", "size"},
     [](const Space& s, const Assignment& a) {
       const double size = s.number(a, "size");
       return is(s, a, "opcode", "atomic") && !std::isnan(size) && size != kAtomicBytes;
     }},
    {"inline_small_sends_writes",
     "inline data is for SEND and WRITE of at most 512 bytes (max_inline_data)",
     {"inline", "size", "opcode"},
     [](const Space& s, const Assignment& a) {
       return is(s, a, "inline", "on") &&
              (above(s, a, "size", kMaxInline) || is_any(s, a, "opcode", {"read", "atomic"}));
     }},
    {"srq_sends_only",
     "an SRQ only serves receives: without SEND it changes nothing",
     {"srq", "opcode"},
     [](const Space& s, const Assignment& a) {
       return is(s, a, "srq", "on") && is_not(s, a, "opcode", "send");
     }},
    {"message_fits_mr",
     "a message lies within one MR",
     {"size", "mr_size"},
     [](const Space& s, const Assignment& a) {
       return s.number(a, "size") > s.number(a, "mr_size");
     }},
    {"memory_budget",
     "one side's MRs fit in 256 MiB",
     {"mrs", "mr_size"},
     [](const Space& s, const Assignment& a) {
       return s.number(a, "mrs") * s.number(a, "mr_size") > kMemoryBudget;
     }},
};

bool read_by_some_rule(const Space& space, size_t d) {
  const std::string_view name = space.dims()[d].name;
  for (const Constraint& c : kRules)
    if (std::find(c.reads.begin(), c.reads.end(), name) != c.reads.end()) return true;
  return false;
}

uint64_t saturating_product(uint64_t x, uint64_t y) {
  return y != 0 && x > UINT64_MAX / y ? UINT64_MAX : x * y;
}

// The number of ways, at most cap, to set dims[next...] (unset in a) so that a breaks no rule;
// a comes back as it went in.
uint64_t count_completions(const Space& space, Assignment& a, const std::vector<size_t>& dims,
                           size_t next, uint64_t cap) {
  if (first_violated(space, a) != nullptr) return 0;
  if (next == dims.size()) return 1;
  const size_t d = dims[next];
  const auto levels = static_cast<int>(space.dims()[d].levels.size());
  uint64_t total = 0;
  for (int l = 0; l < levels && total < cap; ++l) {
    a[d] = l;
    total += count_completions(space, a, dims, next + 1, cap - total);
  }
  a[d] = kUnset;
  return total;
}

}  // namespace

std::span<const Constraint> constraints() { return kRules; }

const Constraint* first_violated(const Space& space, const Assignment& a) {
  for (const Constraint& c : kRules)
    if (c.violated(space, a)) return &c;
  return nullptr;
}

// Only the unset dimensions some rule reads are searched: once those are set without breaking
// a rule, any levels of the others complete the assignment.
bool completable(const Space& space, Assignment a) {
  a.resize(space.size(), kUnset);
  std::vector<size_t> searched;
  for (size_t d = 0; d < space.size(); ++d)
    if (a[d] == kUnset && read_by_some_rule(space, d)) searched.push_back(d);
  return count_completions(space, a, searched, 0, 1) == 1;
}

// Every runnable completion of the dimensions rules read combines with every level of the
// others, so those are counted by multiplying rather than searched.
uint64_t runnable_count(const Space& space, uint64_t cap) {
  Assignment a(space.size(), kUnset);
  std::vector<size_t> searched;
  uint64_t free_product = 1;
  for (size_t d = 0; d < space.size(); ++d) {
    if (read_by_some_rule(space, d))
      searched.push_back(d);
    else
      free_product = saturating_product(free_product, space.dims()[d].levels.size());
  }
  // Enough searched completions to reach cap once multiplied by free_product.
  // (free_product >= 1: a Space has no dimension without levels.)
  free_product = std::max<uint64_t>(free_product, 1);
  const uint64_t needed = cap / free_product + (cap % free_product != 0 ? 1 : 0);
  return std::min(
      cap, saturating_product(count_completions(space, a, searched, 0, needed), free_product));
}

}  // namespace wharf::scala
