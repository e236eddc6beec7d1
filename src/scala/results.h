// The sweep's file (wharf-scala sweep -o FILE.json; docs/OPERATIONS.md shows one): the space
// it ran, the plan's figures, and every point with what it measured. fit, walls and plot read
// it back, and treat it as untrusted input: anything malformed is refused with a reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scala/sample.h"
#include "scala/space.h"

namespace wharf::scala {

struct SweepFile {
  std::string local, remote;      // the devices
  Space space = default_space();  // until read or swept
  uint64_t full_factorial = 0, runnable = 0;
  int t = 0;
  size_t covering_rows = 0, planned = 0;
  double budget_s = 0, elapsed_s = 0, measure_s = 0;
  uint32_t depth = 0, threads = 0;
  std::vector<Sample> samples;
};

std::string to_json(const SweepFile& f);
// false and *error (one line) on anything but a well-formed sweep file.
bool from_json(const std::string& text, SweepFile* out, std::string* error);
bool read_sweep_file(const std::string& path, SweepFile* out, std::string* error);

}  // namespace wharf::scala
