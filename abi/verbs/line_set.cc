// Express lines watched together: see line_set.h.
#include "abi/verbs/line_set.h"

#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "abi/verbs/provider.h"
#include "common/spin_append.h"

namespace wharf::abi {
namespace {

// A service looks at this many ready descriptors, and this many lines that owe a write, at
// once; the rest stay ready (the sets are level-triggered) or owing, for the next service.
constexpr int kAtOnce = 16;

// The process that watches lines: a forked child shares its parent's epoll instances, and a
// change it made would be its parent's.
bool in_owner(const Qp* qp) { return to_ctx(qp->qp.context)->owner_pid == getpid(); }

// The sets a QP's line is on: its CQs' channels' and its CQs' own, each once. Returns the
// number.
int sets_of(const Qp* qp, LineSet** out) {
  int n = 0;
  auto put = [&](LineSet* s) {
    for (int i = 0; i < n; ++i)
      if (out[i] == s) return;
    out[n++] = s;
  };
  for (ibv_cq* c : {qp->qp.send_cq, qp->qp.recv_cq}) {
    if (c == nullptr) continue;
    if (c->channel != nullptr) put(&to_channel(c->channel)->lines);
    put(&to_cq(c)->lines);
  }
  return n;
}

// Drops one entry qp from v (one add's), under its lock.
void drop_one(SpinLock& lock, std::vector<Qp*>& v, Qp* qp) {
  std::lock_guard<SpinLock> g(lock);
  if (auto it = std::find(v.begin(), v.end(), qp); it != v.end()) v.erase(it);
}

}  // namespace

LineSet::~LineSet() {
  if (const int fd = fd_.load(std::memory_order_relaxed); fd >= 0) close(fd);
}

int LineSet::open(int extra) {
  if (fd() >= 0) return 0;
  const int made = epoll_create1(EPOLL_CLOEXEC);
  if (made < 0) return errno;
  if (extra >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the owner's descriptor
    if (epoll_ctl(made, EPOLL_CTL_ADD, extra, &ev) != 0) {
      const int err = errno;
      close(made);
      return err;
    }
  }
  int none = -1;
  if (!fd_.compare_exchange_strong(none, made, std::memory_order_acq_rel)) close(made);
  return 0;
}

bool LineSet::add(Qp* qp) {
  if (fd() < 0 || !append_outside_lock(lock_, qps_, qp)) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = qp;
  if (epoll_ctl(fd(), EPOLL_CTL_ADD, qp->express.fd(), &ev) != 0) {
    drop_one(lock_, qps_, qp);
    return false;
  }
  lines_.fetch_add(1, std::memory_order_release);
  return true;
}

void LineSet::remove(Qp* qp) {
  drop_one(lock_, qps_, qp);
  epoll_ctl(fd(), EPOLL_CTL_DEL, qp->express.fd(), nullptr);
  lines_.fetch_sub(1, std::memory_order_release);
}

void LineSet::wait_for_readers() {
  std::lock_guard<std::mutex> g(waiters_mu_);
  for (int phase = 0; phase < 2; ++phase) {
    const uint32_t left = epoch_.fetch_add(1, std::memory_order_seq_cst) & 1;
    while (readers_[left].load(std::memory_order_seq_cst) != 0) sched_yield();
  }
}

bool LineSet::service(ibv_comp_channel* catching, Cq** caught, bool* extra_ready) {
  *extra_ready = false;
  if (empty()) return false;
  bool did = false;
  auto service_one = [&](Qp* qp) {
    // One event is kept for the caller; any other goes through its channel's socket.
    const bool catch_one = catching != nullptr && *caught == nullptr;
    if (catch_one) catch_express_events(catching);
    did |= qp->express.service(qp);
    if (catch_one) *caught = caught_express_event();
  };
  epoll_event ready[kAtOnce];
  Qp* serviced[kAtOnce];
  int k = 0;
  const int n = epoll_wait(fd(), ready, kAtOnce, 0);
  for (int i = 0; i < n; ++i) {
    if (auto* qp = static_cast<Qp*>(ready[i].data.ptr); qp != nullptr) {
      service_one(qp);
      serviced[k++] = qp;
    } else {
      *extra_ready = true;
    }
  }
  // Each line once: a second service finding nothing new would acknowledge at once what the
  // application is about to answer (express.h).
  Qp* owing[kAtOnce];
  const int m = pick(
      [&](const Qp* qp) {
        return qp->express.owes() && std::find(serviced, serviced + k, qp) == serviced + k;
      },
      owing, kAtOnce);
  for (int i = 0; i < m; ++i) service_one(owing[i]);
  return did;
}

void watch_line(Qp* qp) {
  if (!in_owner(qp)) return;
  LineSet* sets[Qp::kMaxLineSets];
  const int n = sets_of(qp, sets);
  int added = 0;
  for (int i = 0; i < n; ++i) {
    // A CQ's set is made when its first line comes.
    if (sets[i]->open(-1) != 0 || !sets[i]->add(qp)) continue;  // the helper thread remains
    qp->line_sets[added++] = sets[i];
  }
  qp->n_line_sets = added;
  qp->line_state.store(Qp::kLineWatched, std::memory_order_release);
  // Broken meanwhile: its breaker found it not yet watched.
  if (!qp->express.usable()) stop_watching_line(qp);
}

void stop_watching_line(Qp* qp) {
  uint8_t watched = Qp::kLineWatched;
  if (!qp->line_state.compare_exchange_strong(watched, Qp::kLineLeaving, std::memory_order_acq_rel))
    return;  // not on the sets, or another thread is taking it off
  if (in_owner(qp))
    for (int i = 0; i < qp->n_line_sets; ++i) qp->line_sets[i]->remove(qp);
  qp->line_state.store(Qp::kLineUnwatched, std::memory_order_release);
}

void unwatch_line(Qp* qp) {
  stop_watching_line(qp);
  // A forked child has no other thread; a count it inherited would never fall.
  if (!in_owner(qp)) return;
  // A thread that found the line broken may still be taking it off.
  while (qp->line_state.load(std::memory_order_acquire) == Qp::kLineLeaving) sched_yield();
  LineSet* sets[Qp::kMaxLineSets];
  const int n = sets_of(qp, sets);
  for (int i = 0; i < n; ++i) sets[i]->wait_for_readers();
}

}  // namespace wharf::abi
