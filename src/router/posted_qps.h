// The QPs of one session by posted mark (shm/posted_marks.h): hands a mark to each QP it
// makes and finds the QP a mark taken from the session's context page names.
#pragma once

#include <cstdint>
#include <vector>

#include "router/objects.h"
#include "shm/layout.h"

namespace wharf::router {

class PostedQps {
 public:
  // A free mark, now naming qp; shm::kPostedMarks when every mark is taken (a session has
  // at most device::kMaxQp QPs, so the caller refuses the QP before).
  uint32_t add(Qp* qp) {
    if (!free_.empty()) {
      const uint32_t mark = free_.back();
      free_.pop_back();
      by_mark_[mark] = qp;
      return mark;
    }
    if (by_mark_.size() >= shm::kPostedMarks) return shm::kPostedMarks;
    by_mark_.push_back(qp);
    return static_cast<uint32_t>(by_mark_.size() - 1);
  }
  // The mark names no QP any more (reused first, so marks stay few and dense).
  void remove(uint32_t mark) {
    if (mark >= by_mark_.size() || by_mark_[mark] == nullptr) return;
    by_mark_[mark] = nullptr;
    free_.push_back(mark);
  }
  // The QP `mark` names; null for a mark no QP has (the page is the library's to write).
  Qp* at(uint32_t mark) const { return mark < by_mark_.size() ? by_mark_[mark] : nullptr; }

 private:
  std::vector<Qp*> by_mark_;
  std::vector<uint32_t> free_;
};

}  // namespace wharf::router
