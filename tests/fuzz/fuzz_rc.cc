// Fuzz target for the reliable-transport engine (src/rc): a requester and a responder over a
// simulated link (tests/unit/rc_sim.h) whose losses, duplicates, reordering, cuts, receive
// buffers, timers and requests all come from the input.
//
// The input is a program: a seed and fault rates, then steps that post requests, run the
// clock, cut the link or change what the responder has posted. At the end the link heals and
// everything runs to its end. Checked, whatever happened: requests complete exactly once and
// in issue order; SENDs are delivered at most once and in order, and every SEND that
// completed successfully was delivered; each atomic executed at most once; the engine never
// sends out of sequence and never runs without end.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "unit/rc_sim.h"

using namespace wharf;
using namespace wharf::rc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  sim::Connection c(in.u32(), in.u32() & kPsnMask);
  c.faults.loss = (in.u8() % 64) / 100.0;
  c.faults.duplicate = (in.u8() % 64) / 100.0;
  c.faults.reorder = (in.u8() % 101) / 100.0;
  c.limits.timeout = 1 + in.u8() % 12;
  c.limits.retry_cnt = in.u8() % 8;
  c.limits.rnr_retry = in.u8() % 8;
  c.limits.max_rd_atomic = in.u8() % 17;
  c.min_rnr_timer = in.u8() % 32;
  uint32_t posted = 0;
  for (int step = 0; !in.empty() && step < 200 && !c.failed; ++step) {
    const uint8_t op = in.u8();
    switch (op % 4) {
      case 0:
        if (posted < 300) {
          c.post(static_cast<RequestKind>(in.u8() % 3), 1 + in.u8() % 5);
          posted++;
        }
        break;
      case 1: c.run(c.now + uint64_t{in.u8()} * 10000); break;
      case 2: c.cut(uint64_t{in.u8()} * 10000); break;
      default: c.receives = in.u8() % 4; break;
    }
  }
  c.faults = sim::Faults{};
  c.receives = 1u << 20;
  c.run(UINT64_MAX);

  WHARF_FUZZ_CHECK(!c.stuck, "the engine ran without end");
  WHARF_FUZZ_CHECK(!c.out_of_sequence, "a packet out of IBTA's message sequence");
  uint32_t next = 0;
  for (const auto& [id, status] : c.completions) {
    WHARF_FUZZ_CHECK(id == next++, "a completion out of order or twice");
    WHARF_FUZZ_CHECK(status == IBV_WC_SUCCESS || c.failed || status == IBV_WC_WR_FLUSH_ERR,
                     "an error completion without the QP failing");
  }
  WHARF_FUZZ_CHECK(c.failed || next == posted, "a request never completed on a healed link");
  const std::set<uint32_t> delivered(c.delivered.begin(), c.delivered.end());
  WHARF_FUZZ_CHECK(delivered.size() == c.delivered.size(), "a SEND delivered twice");
  for (size_t i = 1; i < c.delivered.size(); ++i)
    WHARF_FUZZ_CHECK(c.delivered[i - 1] < c.delivered[i], "SENDs delivered out of order");
  for (const auto& [id, status] : c.completions)
    WHARF_FUZZ_CHECK(status != IBV_WC_SUCCESS || c.kinds[id] != RequestKind::kMessage ||
                         delivered.count(id) == 1,
                     "a SEND completed but was never delivered");
  std::set<uint64_t> origs;
  for (const auto& [id, orig] : c.atomic_results)
    WHARF_FUZZ_CHECK(origs.insert(orig).second, "two atomics read the same value");
  const auto atomics = std::count(c.kinds.begin(), c.kinds.end(), RequestKind::kAtomic);
  WHARF_FUZZ_CHECK(c.counter <= static_cast<uint64_t>(atomics), "an atomic executed twice");
  return 0;
}
