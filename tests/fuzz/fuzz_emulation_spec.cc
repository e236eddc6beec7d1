// Fuzz target for emulator/rnic_emulator.h's parse_emulation and scala/space.h's set_levels:
// the --emulate and --dim texts users type.
//
// Checked for every input: an accepted --emulate spec describes itself in a form that parses
// back to the same settings; an accepted --dim leaves the space valid (numeric levels strictly
// increasing numbers, the baseline among the levels).
#include <cstddef>
#include <cstdint>
#include <string>

#include "emulator/rnic_emulator.h"
#include "fuzz_check.h"
#include "scala/space.h"

using namespace wharf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  emulator::EmulationConfig c;
  std::string error;
  if (emulator::parse_emulation(text, &c, &error)) {
    emulator::EmulationConfig again;
    const std::string canonical = emulator::describe(c);
    if (c.enabled()) {
      WHARF_FUZZ_CHECK(emulator::parse_emulation(canonical, &again, &error), "own form refused");
      WHARF_FUZZ_CHECK(emulator::describe(again) == canonical, "settings changed");
    }
  } else {
    WHARF_FUZZ_CHECK(!error.empty(), "refused without a reason");
  }
  scala::Space space = scala::default_space();
  if (space.set_levels(text, &error)) {
    for (const scala::Dimension& d : space.dims()) {
      WHARF_FUZZ_CHECK(!d.levels.empty() && d.baseline < d.levels.size(), "bad baseline");
      double previous = -1;
      for (const std::string& l : d.levels) {
        double v = 0;
        if (!d.numeric) continue;
        WHARF_FUZZ_CHECK(scala::parse_number(l, &v) && v > previous, "levels out of order");
        previous = v;
      }
    }
  }
  return 0;
}
