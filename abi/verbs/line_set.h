// Express lines (express.h) watched together through one epoll instance, so that one system
// call finds those that have something to read, however many there are.
//
// Two kinds of owner have a set:
// - A completion channel: its fd, which applications poll or add to their own epoll sets
//   (UCX, libfabric, rsockets, wharf-scala), is the instance, over the channel's event socket
//   and the lines of the QPs whose send or receive CQ reports to the channel. A Message or an
//   acknowledgement arriving on a line makes the fd readable at once, and the
//   ibv_get_cq_event that follows services the lines that are ready, which raises the event.
// - A CQ, over the lines of the QPs completing on it: a poll that finds the CQ empty asks the
//   set once (an epoll_wait with no timeout) instead of reading every line, unless the CQ has
//   one line, which it reads directly.
// Before them, a waiter on a channel's fd, and the lines of a CQ's fifth and later QPs,
// learned of a Message only when the helper thread serviced the line, up to 1 ms later, and
// a poll read each of a CQ's first four lines.
//
// Lifetime: a thread holds QPs it found through a set (its instance or its list) only while
// counted as a reader (LineReader); unwatch_line waits until no thread is, so a QP is never
// freed under a thread servicing its line. A line that
// broke is taken off its sets by the service that finds it broken, so its socket's end of
// file does not keep the set readable. A forked child shares its parent's instances and
// never changes them.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/spinlock.h"

namespace wharf::abi {

struct Qp;
struct Cq;

class LineSet {
 public:
  LineSet() = default;
  ~LineSet();  // closes the instance
  LineSet(const LineSet&) = delete;
  LineSet& operator=(const LineSet&) = delete;

  // Makes the instance, with `extra` (a descriptor of the owner's, -1 for none) reported
  // beside the lines. Threads may race to open it: one instance wins. An errno value, or 0.
  int open(int extra);
  int fd() const { return fd_.load(std::memory_order_acquire); }
  bool empty() const { return lines_.load(std::memory_order_acquire) == 0; }
  uint32_t size() const { return lines_.load(std::memory_order_acquire); }
  // Adds qp's line; false if it could not (no instance, out of memory).
  bool add(Qp* qp);
  void remove(Qp* qp);
  // Services, without blocking, the lines that are ready to read and those that owe a write
  // (ExpressLine::owes, which no descriptor shows); with `catching`, the first event raised
  // for a CQ of that channel is kept for the caller in *caught. The caller is a reader. True
  // if any line was serviced; *extra_ready: `extra` is readable.
  bool service(ibv_comp_channel* catching, Cq** caught, bool* extra_ready);
  // Copies into out up to `max` of the set's QPs for which pick(qp) holds (pick only reads
  // memory: it runs under the set's spinlock). The caller is a reader. Returns the number.
  template <class Pred>
  int pick(Pred pred, Qp** out, int max) {
    int n = 0;
    std::lock_guard<SpinLock> g(lock_);
    for (Qp* qp : qps_) {
      if (n == max) break;
      if (pred(qp)) out[n++] = qp;
    }
    return n;
  }
  // Whether pred(qp) holds for a QP of the set; the caller need not be a reader (it keeps no
  // QP).
  template <class Pred>
  bool any(Pred pred) {
    std::lock_guard<SpinLock> g(lock_);
    for (const Qp* qp : qps_)
      if (pred(qp)) return true;
    return false;
  }
  // Waits until every reader that began before the call has ended. Readers that begin
  // meanwhile count apart (epoch_), so a steady stream of them cannot hold it up.
  void wait_for_readers();

 private:
  friend class LineReader;
  std::atomic<int> fd_{-1};
  std::atomic<uint32_t> lines_{0};
  SpinLock lock_;         // guards qps_; nothing is allocated or freed while it is held
  std::vector<Qp*> qps_;  // the QPs whose lines are in the instance
  // Readers count in readers_[epoch_ & 1]. wait_for_readers moves the epoch on and waits for
  // the count it left to drain, twice, so that both counts drained once after the caller's
  // change (one waiter at a time: waiters_mu_). A reader counted after that change finds it.
  std::atomic<uint32_t> epoch_{0};
  std::atomic<uint32_t> readers_[2] = {0, 0};
  std::mutex waiters_mu_;
};

// Counts the calling thread as a reader of a set while it holds QPs found through it.
class LineReader {
 public:
  explicit LineReader(LineSet& set)
      : set_(set), slot_(set.epoch_.load(std::memory_order_seq_cst) & 1) {
    set_.readers_[slot_].fetch_add(1, std::memory_order_seq_cst);
  }
  ~LineReader() { set_.readers_[slot_].fetch_sub(1, std::memory_order_release); }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

 private:
  LineSet& set_;
  uint32_t slot_;
};

// Adds qp's line (just taken, by this thread alone) to the sets of its CQs and of their
// channels, each once.
void watch_line(Qp* qp);
// Takes qp's line off its sets, if it is on them and no other thread is taking it off; never
// waits. Called by whoever finds the line broken.
void stop_watching_line(Qp* qp);
// Takes qp's line off its sets (or waits until the thread taking it off is done), then waits
// out every reader of the sets of qp's CQs and their channels: no thread still holds qp
// through them. Before qp is reset or freed.
void unwatch_line(Qp* qp);

}  // namespace wharf::abi
