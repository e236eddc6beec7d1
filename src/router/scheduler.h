// Which QPs the data path looks at, and in what order; the records of their work under way
// (router/qp_work.h); how much of a long copy one look may do.
//
// An idle QP costs a pass nothing: it is in no list. It enters the busy list when activated
// (its library marked it posted, or the router gave it work) and stays while a pass did
// something for it, it was activated again, or it has work of its own; leaving, it gives back
// its work record. Each pass resumes after the last QP the previous one did something for
// (one further on when it did something for all or none), so QPs competing for one host link
// take turns however many there are: with thousands, starting one further on each pass left
// those far from the start waiting thousands of passes (wharf-scala: p99 of 0.1-1 s at 5,000
// QPs). Router thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "router/objects.h"
#include "router/qp_work.h"

namespace wharf::router {

class Scheduler {
 public:
  // The most a message between QPs of this host copies in one look: kCopyPart (about 10 us of
  // copying) while no short message ran for kShortWorkNs, kCopyPartShared (a quarter of that)
  // while short messages run too, which wait for a part at each hop: smaller parts cost a long
  // copy throughput, so it pays for them only when someone waits (issue #18 item 4).
  static constexpr uint64_t kCopyPart = 64 * 1024;
  static constexpr uint64_t kCopyPartShared = 16 * 1024;
  static constexpr uint64_t kShortWorkNs = 1'000'000;

  Scheduler() = default;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  // QPs still listed give their records back (their sessions destroy them later).
  ~Scheduler() { clear(); }

  // The data path serves qp's queues (RTS or ERR) and looks at it in the next pass; again for
  // a QP already served: it has new work. A QP without a send CQ (an XRC target, an RSS QP)
  // has no queues of its own and is never looked at.
  void activate(Qp* qp);
  // qp is served no more (left RTS/ERR, or is going away): out of the list, record given back.
  // Never during a pass.
  void deactivate(Qp* qp);

  // qp's work under way, taken from the pool now if it has none: only for a QP in the busy
  // list (one being looked at), which keeps it until it leaves the list.
  QpWork& work(Qp* qp) {
    if (qp->work_under_way == nullptr) qp->work_under_way = pool_.get();
    return *qp->work_under_way;
  }

  // One pass: look(qp) for every busy QP, and for those activated during the pass, which may
  // activate QPs but not deactivate any; true if it did something for qp. Afterwards a QP
  // stays if look did something, it was activated meanwhile, or still_busy(qp) says it has
  // work of its own. Returns whether any look did something.
  template <class Look, class StillBusy>
  bool pass(Look&& look, StillBusy&& still_busy);

  // A short message between local QPs ran at `now`: long copies go in smaller parts a while.
  void saw_short_work(uint64_t now) { short_work_ns_ = now; }
  uint64_t copy_part(uint64_t now) const {
    return now - short_work_ns_ < kShortWorkNs ? kCopyPartShared : kCopyPart;
  }

  // Whether qp's next message of `bytes` may go now under its and its container's rate
  // limits (router/policy.cc sets them); charges them if so, else sets its work's
  // paced_until_ns. Only for a QP in the busy list.
  bool admit(Qp* qp, uint64_t bytes, uint64_t now);

  bool empty() const { return busy_.empty(); }
  size_t size() const { return busy_.size(); }
  const std::vector<Qp*>& busy() const { return busy_; }
  // How many QPs hold a work record. For tests.
  size_t qps_with_work() const { return pool_.in_use(); }

  // Empties the list (shutdown).
  void clear();

 private:
  void drop(Qp* qp);  // qp leaves the list (the caller takes it out); its record goes back

  QpWorkPool pool_;
  std::vector<Qp*> busy_;
  size_t next_start_ = 0;       // where the next pass starts in busy_ (modulo its size)
  uint64_t short_work_ns_ = 0;  // saw_short_work
};

template <class Look, class StillBusy>
bool Scheduler::pass(Look&& look, StillBusy&& still_busy) {
  if (busy_.empty()) return false;
  bool did = false;
  auto look_at = [&](Qp* qp) {
    qp->woken = false;
    const bool worked = look(qp);
    if (worked) qp->woken = true;
    return worked;
  };
  const size_t n = busy_.size();
  const size_t start = next_start_ % n;
  size_t worked_up_to = 0;  // 1 + the last k whose QP worked; 0: none did
  for (size_t k = 0; k < n; ++k)
    if (look_at(busy_[(start + k) % n])) {
      did = true;
      worked_up_to = k + 1;
    }
  for (size_t i = n; i < busy_.size(); ++i) did |= look_at(busy_[i]);  // activated meanwhile
  // The next pass resumes after the last QP that worked: those behind it found the host link
  // (or whatever they share) taken, and go first next time. When all worked, or none did, it
  // starts one further on.
  const size_t resume = (start + (worked_up_to == 0 || worked_up_to == n ? 1 : worked_up_to)) % n;
  size_t kept = 0;
  for (size_t j = 0; j < busy_.size(); ++j) {
    Qp* qp = busy_[j];
    if (j == resume) next_start_ = kept;  // where `resume` (or the next QP kept) lands
    if (qp->woken || still_busy(qp))
      busy_[kept++] = qp;
    else
      drop(qp);
  }
  busy_.resize(kept);
  return did;
}

}  // namespace wharf::router
