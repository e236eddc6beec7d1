// Fuzz target for scala/results.h and what reads its output: wharf-scala's fit, walls and plot
// read sweep files that may come from anywhere (a colleague, a CI artefact).
//
// Checked for every input: an accepted file's samples each hold a level of every dimension;
// the file written back from what was read is accepted again and reads back the same; the
// wall finder and the importance measures take it without a crash, and give walls at a level
// of their dimension with a drop in [0, 1] and importances in [0, 1].
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "scala/results.h"
#include "scala/walls.h"

using namespace wharf::scala;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  SweepFile f;
  std::string error;
  if (!from_json(text, &f, &error)) {
    WHARF_FUZZ_CHECK(!error.empty(), "refused without a reason");
    return 0;
  }
  for (const Sample& s : f.samples) {
    WHARF_FUZZ_CHECK(s.at.size() == f.space.size(), "sample of another space");
    for (size_t d = 0; d < s.at.size(); ++d)
      WHARF_FUZZ_CHECK(
          s.at[d] >= 0 && static_cast<size_t>(s.at[d]) < f.space.dims()[d].levels.size(),
          "level out of range");
  }
  SweepFile again;
  WHARF_FUZZ_CHECK(from_json(to_json(f), &again, &error), "own output refused");
  WHARF_FUZZ_CHECK(again.samples.size() == f.samples.size(), "samples lost in the round trip");
  for (size_t i = 0; i < f.samples.size(); ++i)
    WHARF_FUZZ_CHECK(again.samples[i].at == f.samples[i].at, "sample moved in the round trip");
  if (f.samples.size() > 512) return 0;  // the analyses are for sweeps, not for speed here
  for (const Importance& i : importance(f.space, f.samples))
    WHARF_FUZZ_CHECK(i.sensitivity >= 0 && i.sensitivity <= 1 && i.removal >= 0 && i.removal <= 1,
                     "importance out of [0, 1]");
  for (const Wall& w : find_walls(f.space, f.samples)) {
    const int d = f.space.index_of(w.dimension);
    WHARF_FUZZ_CHECK(d >= 0, "wall on no dimension");
    bool at_level = false;
    for (const std::string& l : f.space.dims()[static_cast<size_t>(d)].levels) {
      double v = 0;
      at_level |= parse_number(l, &v) && v == w.at;
    }
    WHARF_FUZZ_CHECK(at_level, "wall at no level of its dimension");
    WHARF_FUZZ_CHECK(w.bw_drop >= 0 && w.bw_drop <= 1, "drop out of [0, 1]");
    WHARF_FUZZ_CHECK(std::isfinite(w.at) && w.at > w.before, "wall before its predecessor");
  }
  return 0;
}
