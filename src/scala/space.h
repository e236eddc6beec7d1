// The test space of wharf-scala (issue #21, ScalaCN's greybox tester): the dimensions a sweep
// varies, their levels, and the baseline scans hold the others at. Pure; no verbs.
//
// A level is text as the user writes it ("64", "4k", "write"); a numeric dimension's levels
// are numbers (with k/m/g suffixes, powers of 1024), kept in increasing order, and walls are
// looked for as they grow. A point of the space is an Assignment: one level index per
// dimension, in the space's order, kUnset where not chosen yet (partial assignments are what
// the constraint model and the covering-array builder work with).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace wharf::scala {

constexpr int kUnset = -1;
using Assignment = std::vector<int>;

struct Dimension {
  std::string name;
  std::vector<std::string> levels;
  bool numeric = false;
  // A numeric dimension whose growth is the system's scale (QPs, registered memory): walls are
  // looked for as it grows, and the sweep scans it. Message size is numeric but not a scale:
  // latency growing with it is no wall.
  bool scale = false;
  size_t baseline = 0;  // index into levels
};

// "64" -> 64, "4k" -> 4096, "1m" -> 1048576, "2g" -> 2^31 (case-insensitive suffix). false on
// anything else (empty, sign, fraction, trailing text, overflow past 2^53).
bool parse_number(std::string_view text, double* out);

class Space {
 public:
  // Throws std::invalid_argument on no dimensions, a dimension without a name or levels, a
  // repeated name, a baseline past its levels, or numeric levels not increasing numbers.
  explicit Space(std::vector<Dimension> dims);

  const std::vector<Dimension>& dims() const { return dims_; }
  size_t size() const { return dims_.size(); }
  int index_of(std::string_view name) const;  // -1 when there is no such dimension

  // Dimension `name`'s level in a: its text, "" when unset or absent.
  std::string_view level(const Assignment& a, std::string_view name) const;
  // A numeric dimension's level in a as a number; NaN when unset, absent or not numeric.
  double number(const Assignment& a, std::string_view name) const;
  // Every dimension at its baseline.
  Assignment baseline() const;
  // The full factorial's size: the product of the level counts (saturating at UINT64_MAX).
  uint64_t full_factorial() const;

  // Replaces one dimension's levels from "NAME=RANGE": RANGE is a comma list ("1,4,16",
  // "send,write") or, numeric dimensions only, "LO..HI" (LO, 2*LO, 4*LO ... up to HI, and HI
  // itself). Numeric levels are sorted and deduplicated. The baseline becomes the level equal
  // to the old baseline's text (a numeric dimension's: its value) if still present, else the
  // first. false and *error (one line) on an unknown dimension, an empty or malformed range, a
  // non-number in a numeric dimension, or a choice not among the dimension's known choices.
  bool set_levels(std::string_view spec, std::string* error);

 private:
  std::vector<Dimension> dims_;
  // What a choice dimension may take at all (its default levels): set_levels keeps to them.
  std::vector<std::vector<std::string>> known_choices_;
};

// The default space (docs/OPERATIONS.md lists it); the scales are ql, qr, mrs, mr_size,
// networks and rules:
//   ql      local QPs sending to the remote   1 2 4 8 16 32 48 64 80 96 128 192 256 (base 4)
//   qr      remote QPs sending to the local   same levels                           (base 4)
//   size    message bytes                     8 64 4k 64k                           (base 4k)
//   opcode  send write read atomic                                                   (base write)
//   qp_type rc uc ud                                                                 (base rc)
//   cq      shared per_qp                                                            (base shared)
//   srq     off on                                                                   (base off)
//   inline  off on                                                                   (base off)
//   mrs     MRs the work spreads over         1 4 16 64                             (base 1)
//   mr_size bytes per MR                      4k 64k 1m 4m 16m                      (base 64k)
//   networks tenant networks on each router   1 10 100 1000                         (base 1)
//   rules   match-action rules on each side   0 10 100 1000                         (base 0)
Space default_space();

}  // namespace wharf::scala
