// Fuzz target for shm/posted_marks.h: the router taking posted marks from a context page that
// a library sets properly or scribbles on at will.
//
// Input: a program of one-byte operations (some take operand bytes). Single-threaded:
//   - every mark reported is < kPostedMarks and is reported at most once per take;
//   - every mark set since the last take and the last scribble is reported (a scribble may
//     clear what was set before it);
//   - while nothing was ever scribbled, a take reports exactly the marks set since the last;
//   - after a take the summary is 0;
//   - nothing is read or written outside the page (an exactly-sized heap block, for ASan).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "shm/posted_marks.h"

namespace wharf::shm {
namespace {

using fuzz::Input;

uint64_t u64(Input& in) { return uint64_t{in.u32()} | uint64_t{in.u32()} << 32; }

void run(Input& in) {
  auto page = std::make_unique<ContextPage>();
  std::set<uint32_t> marked;       // since the last take
  std::set<uint32_t> must_report;  // since the last take and the last scribble
  bool scribbled = false;          // ever: a scribbled bit may wait for a later take
  for (int budget = 1024; !in.empty() && budget > 0; --budget) {
    switch (in.u8() % 4) {
      case 0: {
        const uint32_t mark = in.u32() % kPostedMarks;
        mark_posted(page.get(), mark);
        marked.insert(mark);
        must_report.insert(mark);
        break;
      }
      case 1:
        page->posted[in.u32() % kPostedMarkWords].store(u64(in));
        scribbled = true;
        must_report.clear();
        break;
      case 2:
        page->posted_summary.store(u64(in));
        scribbled = true;
        must_report.clear();
        break;
      case 3: {
        std::set<uint32_t> taken;
        take_posted(page.get(), [&](uint32_t mark) {
          WHARF_FUZZ_CHECK(mark < kPostedMarks, "mark out of range");
          WHARF_FUZZ_CHECK(taken.insert(mark).second, "mark reported twice");
        });
        WHARF_FUZZ_CHECK(page->posted_summary.load() == 0, "summary left set");
        for (uint32_t mark : must_report) WHARF_FUZZ_CHECK(taken.count(mark) == 1, "mark lost");
        if (!scribbled) WHARF_FUZZ_CHECK(taken == marked, "mark made up");
        marked.clear();
        must_report.clear();
        break;
      }
    }
  }
}

}  // namespace
}  // namespace wharf::shm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wharf::fuzz::Input in(data, size);
  wharf::shm::run(in);
  return 0;
}
