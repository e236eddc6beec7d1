// Express lines watched together: see line_set.h.
#include "abi/verbs/line_set.h"

#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include "abi/verbs/provider.h"

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

bool LineSet::list(Qp* qp) {
  for (;;) {
    size_t n;
    {
      std::lock_guard<SpinLock> g(lock_);
      if (qps_.size() < qps_.capacity()) {
        qps_.push_back(qp);  // fits: no allocation
        return true;
      }
      n = qps_.size();
    }
    std::vector<Qp*> grown;
    try {
      grown.reserve(std::max<size_t>(2 * n, 8));
    } catch (const std::bad_alloc&) {
      return false;
    }
    std::lock_guard<SpinLock> g(lock_);
    if (qps_.size() < grown.capacity()) {
      grown.assign(qps_.begin(), qps_.end());  // fits: no allocation
      grown.push_back(qp);
      qps_.swap(grown);
      return true;  // the old list is freed with `grown`, after the lock
    }
  }  // others filled the list meanwhile: again
}

bool LineSet::add(Qp* qp) {
  if (fd() < 0 || !list(qp)) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = qp;
  if (epoll_ctl(fd(), EPOLL_CTL_ADD, qp->express.fd(), &ev) != 0) {
    std::lock_guard<SpinLock> g(lock_);
    std::erase(qps_, qp);
    return false;
  }
  lines_.fetch_add(1, std::memory_order_release);
  return true;
}

void LineSet::remove(Qp* qp) {
  {
    std::lock_guard<SpinLock> g(lock_);
    std::erase(qps_, qp);  // moves pointers, frees nothing
  }
  epoll_ctl(fd(), EPOLL_CTL_DEL, qp->express.fd(), nullptr);
  lines_.fetch_sub(1, std::memory_order_release);
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
    if (!qp->express.usable()) stop_watching_line(qp);  // its end of file stays readable
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
  if (!in_owner(qp) || qp->line_watched.load(std::memory_order_acquire)) return;
  LineSet* sets[Qp::kMaxLineSets];
  const int n = sets_of(qp, sets);
  int added = 0;
  for (int i = 0; i < n; ++i) {
    // A CQ's set is made when its first line comes.
    if (sets[i]->open(-1) != 0 || !sets[i]->add(qp)) continue;  // the helper thread remains
    qp->line_sets[added++] = sets[i];
  }
  qp->n_line_sets = added;
  qp->line_watched.store(true, std::memory_order_release);
}

void stop_watching_line(Qp* qp) {
  if (!qp->line_watched.exchange(false, std::memory_order_acq_rel) || !in_owner(qp)) return;
  for (int i = 0; i < qp->n_line_sets; ++i) qp->line_sets[i]->remove(qp);
}

void unwatch_line(Qp* qp) {
  stop_watching_line(qp);
  // A forked child has no other thread; a count it inherited would never fall.
  if (!in_owner(qp)) return;
  // A reader counted before qp left the sets finishes its service; one counted after does
  // not find it.
  LineSet* sets[Qp::kMaxLineSets];
  const int n = sets_of(qp, sets);
  for (int i = 0; i < n; ++i)
    while (sets[i]->readers_.load(std::memory_order_seq_cst) != 0) sched_yield();
}

}  // namespace wharf::abi
