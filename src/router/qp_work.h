// What a QP keeps only while it has work under way (issue #18: router memory per idle QP),
// and the pool its records come from.
//
// A QP's record points at a QpWork only while some of it is set: the data path takes one
// from the scheduler's pool when it first has something to keep (an RNR wait, a copy in
// parts, a pacing time) and gives it back when the QP leaves the busy list
// (router/scheduler.h), where a QP with any of it set stays (Router::has_own_work_st). Idle
// QPs, the many, hold none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace wharf::router {

struct QpWork {
  // Requester retry state on this host: the head WQE waits until wait_until_ns (RNR or a
  // missing peer); how many times in a row it met each.
  uint64_t wait_until_ns = 0;
  // The time before which neither its own rate limit nor its container's lets the head WQE go.
  uint64_t paced_until_ns = 0;
  // Bytes of the head WQE's RDMA WRITE or READ that earlier passes copied: a long copy takes
  // at most Executor::copy_part() bytes a pass (router/datapath.cc). A message is at most
  // device::kMaxMsgSize.
  uint32_t copied_bytes = 0;
  uint8_t rnr_attempts = 0;
  uint8_t retry_attempts = 0;

  // Nothing of it matters any more at `now`: a QP holding it may give it back.
  bool idle(uint64_t now) const {
    return wait_until_ns == 0 && paced_until_ns <= now && copied_bytes == 0;
  }
};

// Fixed records handed out and taken back; it allocates only to grow past the most QPs that
// ever had work at once, a slab at a time, and never moves a record.
class QpWorkPool {
 public:
  // A zeroed record.
  QpWork* get() {
    if (free_.empty()) grow();
    QpWork* w = free_.back();
    free_.pop_back();
    *w = QpWork{};
    return w;
  }
  void put(QpWork* w) { free_.push_back(w); }  // never allocates: capacity covers every record
  size_t in_use() const { return slabs_.size() * kSlab - free_.size(); }

 private:
  static constexpr size_t kSlab = 64;

  void grow() {
    slabs_.push_back(std::make_unique<QpWork[]>(kSlab));
    free_.reserve(slabs_.size() * kSlab);
    for (size_t i = kSlab; i-- > 0;) free_.push_back(&slabs_.back()[i]);
  }

  std::vector<std::unique_ptr<QpWork[]>> slabs_;
  std::vector<QpWork*> free_;
};

}  // namespace wharf::router
