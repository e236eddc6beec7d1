// Fuzz target for router/srq_records.h: the records of the receives a router had claimed and
// held, read back by the next router process from an SRQ region its owner can write.
//
// The input fills the records (repeated to their length), then drives the adopted records as
// a program. Checked: adopt keeps at most one claimed receive and one per QPN, and frees the
// rest; a receive read back never has more SGEs than the SRQ allows; every record is either
// kept or free, exactly once (all can be claimed again once released); nothing is read or
// written outside the records (ASan).
#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "router/srq_records.h"

using namespace wharf;
using namespace wharf::router;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint32_t kMaxSge = 2;
  const shm::SrqLayout layout = shm::srq_layout(4, shm::recv_slot_size(kMaxSge));
  std::vector<uint8_t> region(layout.total);
  const size_t records = size_t{shm::kSrqHeldRecords} * layout.record_size;
  for (size_t i = 0; size > 0 && i < records; ++i) region[layout.records_off + i] = data[i % size];
  SrqRecords r;
  const SrqRecords::Left left = r.adopt(region.data(), layout);
  std::set<uint32_t> kept, qpns;
  if (left.claimed != SrqRecords::kNone) kept.insert(left.claimed);
  for (const auto& [qpn, record] : left.held) {
    WHARF_FUZZ_CHECK(qpns.insert(qpn).second, "a QPN held two receives");
    WHARF_FUZZ_CHECK(kept.insert(record).second, "a record kept twice");
  }
  for (uint32_t record : kept) {
    WHARF_FUZZ_CHECK(record < shm::kSrqHeldRecords, "a record out of range");
    RecvWork rw;
    r.read(record, kMaxSge, &rw);
    WHARF_FUZZ_CHECK(rw.hdr.num_sge <= kMaxSge, "a receive read back with too many SGEs");
  }
  // The program: claim, hold or release; then everything released can be claimed again.
  fuzz::Input in(data, size);
  std::vector<uint32_t> mine(kept.begin(), kept.end());
  for (int steps = 0; steps < 64 && !in.empty(); ++steps) {
    const uint8_t op = in.u8();
    if (op % 3 == 0) {
      RecvWork rw{};
      rw.hdr.wr_id = in.u32();
      rw.hdr.num_sge = in.u8() % (kMaxSge + 1);
      const uint32_t record = r.keep_claimed(rw);
      if (record == SrqRecords::kNone) {
        WHARF_FUZZ_CHECK(mine.size() == shm::kSrqHeldRecords, "no record while some are free");
        continue;
      }
      for (uint32_t m : mine) WHARF_FUZZ_CHECK(m != record, "a record in use given out");
      RecvWork back;
      r.read(record, kMaxSge, &back);
      WHARF_FUZZ_CHECK(back.hdr.wr_id == rw.hdr.wr_id && back.hdr.num_sge == rw.hdr.num_sge,
                       "a claimed receive not read back as kept");
      mine.push_back(record);
    } else if (!mine.empty() && op % 3 == 1) {
      r.hold(mine[in.u8() % mine.size()], in.u32());
    } else if (!mine.empty()) {
      const size_t k = in.u8() % mine.size();
      r.release(mine[k]);
      mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  for (uint32_t m : mine) r.release(m);
  uint32_t claimed = 0;
  while (r.keep_claimed(RecvWork{}) != SrqRecords::kNone) ++claimed;
  WHARF_FUZZ_CHECK(claimed == shm::kSrqHeldRecords, "records lost or given twice");
  return 0;
}
