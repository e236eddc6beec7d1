// wharf-scala plot: heatmaps of bandwidth and latency over the ql x qr plane and a chart per
// scale scan, walls marked, as PNG and SVG drawn by gnuplot (its data and script stay in the
// directory, so a picture can be redrawn or restyled).
#pragma once

#include <string>

#include "scala/results.h"
#include "scala/walls.h"

namespace wharf::scala {

// Returns the exit status (1 when gnuplot is missing or fails, or nothing can be drawn).
int draw_plots(const SweepFile& f, const WallThresholds& limits, const std::string& dir);

}  // namespace wharf::scala
