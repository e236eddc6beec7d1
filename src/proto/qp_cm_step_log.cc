#include "proto/qp_cm_step_log.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <type_traits>

namespace wharf::proto {

static_assert(std::is_trivially_copyable_v<QpStep> && sizeof(QpStep) <= shm::kQpCmStepBytes,
              "a record holds a QpStep as it is");

void note_owner_modification(shm::QpCmSteps* log, bool reset) {
  if (reset) {
    *log = shm::QpCmSteps{};
    return;
  }
  ++log->modifications;
}

void note_cm_step(shm::QpCmSteps* log, const QpStep& step) {
  const uint32_t at = log->count;
  if (at >= shm::kQpCmStepRecords) {
    log->lost = 1;
    return;
  }
  shm::QpCmStepRecord& r = log->records[at];
  r.after_modifications = log->modifications;
  std::memcpy(r.step, &step, sizeof(step));
  log->count = at + 1;
}

int merge_cm_steps(shm::QpCmSteps* log, uint32_t qp_handle, std::vector<ModifyQpReq>* own) {
  if (log->lost != 0) return EOPNOTSUPP;
  const uint32_t count = std::min(log->count, shm::kQpCmStepRecords);
  if (count == 0) {
    *log = shm::QpCmSteps{};  // the router counts the replayed calls from zero
    return 0;
  }
  std::vector<ModifyQpReq> merged;
  try {
    merged.reserve(own->size() + count);
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  }
  size_t next_own = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const shm::QpCmStepRecord& r = log->records[i];
    // The router's stamps grow; a step after more modifications than the library kept (one
    // whose reply it never had) goes after all of them.
    const size_t before = std::min<size_t>(r.after_modifications, own->size());
    while (next_own < before) merged.push_back((*own)[next_own++]);
    QpStep step;
    std::memcpy(&step, r.step, sizeof(step));
    ModifyQpReq req;
    req.qp = qp_handle;
    req.attr_mask = step.attr_mask;
    req.attr = step.attr;
    merged.push_back(req);
  }
  while (next_own < own->size()) merged.push_back((*own)[next_own++]);
  *own = std::move(merged);
  *log = shm::QpCmSteps{};
  return 0;
}

}  // namespace wharf::proto
