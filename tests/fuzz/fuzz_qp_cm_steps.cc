// Fuzz target for proto/qp_cm_step_log.h: the rdma_cm transitions a QP's region keeps, which
// the library merges into its own ibv_modify_qp calls before it restores the QP, and which
// the router writes into memory its owner can write.
//
// The input's first byte is how many calls the library kept; the rest fills the log (repeated
// to its size). Checked: a merge takes every call kept, in order, and at most kQpCmStepRecords
// steps, then leaves the log empty, or refuses (a log that lost steps) and leaves the calls as
// they were; writing to any log stays inside its records (ASan).
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "proto/qp_cm_step_log.h"

using namespace wharf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint32_t kept = data[0] % 16;
  shm::QpCmSteps log{};
  auto* bytes = reinterpret_cast<uint8_t*>(&log);
  for (size_t i = 0; size > 1 && i < sizeof(log); ++i) bytes[i] = data[1 + i % (size - 1)];

  shm::QpCmSteps written = log;  // the router writing on whatever is there
  proto::note_owner_modification(&written, false);
  proto::note_cm_step(&written, proto::QpStep{});

  std::vector<proto::ModifyQpReq> calls(kept);
  for (uint32_t i = 0; i < kept; ++i) calls[i].attr.rq_psn = 1000 + i;
  const int err = proto::merge_cm_steps(&log, 7, &calls);
  if (err != 0) {
    WHARF_FUZZ_CHECK(err == EOPNOTSUPP, "an unexpected error");
    WHARF_FUZZ_CHECK(calls.size() == kept, "a refused merge changed the calls");
    return 0;
  }
  WHARF_FUZZ_CHECK(calls.size() >= kept && calls.size() <= kept + shm::kQpCmStepRecords,
                   "a merge took more steps than there are records");
  uint32_t next = 1000;
  for (const proto::ModifyQpReq& c : calls)
    if (c.qp != 7) {
      WHARF_FUZZ_CHECK(c.attr.rq_psn == next, "a call kept was lost or moved");
      ++next;
    }
  WHARF_FUZZ_CHECK(next == 1000 + kept, "a call kept was lost");
  WHARF_FUZZ_CHECK(log.count == 0 && log.modifications == 0, "the log was not emptied");
  return 0;
}
