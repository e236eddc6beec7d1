// What fit and walls print: tables for people, JSON (-j) for programs.
#pragma once

#include <string>
#include <vector>

#include "scala/model_fit.h"
#include "scala/results.h"
#include "scala/walls.h"

namespace wharf::scala {

struct WallOptions {
  WallThresholds limits;
};

// The ok samples of one configuration: every dimension but ql and qr alike. `config` names the
// dimensions that differ from the baseline ("baseline" when none does).
struct ConfigGroup {
  std::string config;
  std::vector<const Sample*> samples;
};
// The configurations with enough of the plane to fit: at least 5 samples, 2 levels of ql and 2
// of qr. Largest first.
std::vector<ConfigGroup> plane_groups(const SweepFile& f);

struct Fit {
  BwModel bw;
  LatModel lat;
};
Fit fit_group(const Space& space, const ConfigGroup& g);

// predict: "QL,QR" each. Returns the exit status (1: nothing to fit, 2: a bad --predict).
int print_fits(const SweepFile& f, const std::vector<std::string>& predict, bool json);
int print_walls(const SweepFile& f, const WallOptions& o, bool json);

}  // namespace wharf::scala
