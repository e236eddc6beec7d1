// One measured point of a sweep: where in the space it ran and what it measured.
#pragma once

#include <string>

#include "scala/space.h"

namespace wharf::scala {

struct Sample {
  Assignment at;          // a full assignment of the sweep's space
  std::string phase;      // the part of the plan that ran it: "cover", "scan:ql", "plane"
  double bw_gbps = 0;     // payload bits per second / 1e9, both directions
  double mrate_mps = 0;   // messages per second / 1e6, both directions
  double lat_p50_us = 0;  // post-to-completion time of the work requests
  double lat_p99_us = 0;
  bool ok = true;  // false: the point could not run (error says why)
  std::string error;
};

}  // namespace wharf::scala
