// Completion channels, completion queues, polling and completion events.
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "abi/verbs/export.h"
#include "abi/verbs/line_set.h"
#include "abi/verbs/provider.h"
#include "abi/verbs/tunables.h"
#include "common/clock.h"
#include "common/spin_append.h"
#include "proto/datagram.h"

using namespace wharf;
using namespace wharf::abi;

WHARF_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) return nullptr;
  UniqueFd mine(sv[0]), theirs(sv[1]);
  int fds[1] = {theirs.get()};
  proto::Handle rep;
  int err = to_ctx(context)->client.call(proto::Op::kCreateChannel, proto::Empty{}, fds, 1, &rep);
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  Context* ctx = to_ctx(context);
  auto* ch = new (std::nothrow) CompChannel{};
  if (ch == nullptr) return ctx->out_of_memory(proto::Op::kDestroyChannel, rep.handle);
  ch->channel.context = context;
  ch->channel.refcnt = 0;
  ch->handle = rep.handle;
  ch->events = std::move(mine);
  ch->router_end = std::move(theirs);
  if (err = ch->lines.open(ch->events.get()); err != 0) {
    delete ch;
    ctx->release_in_router(proto::Op::kDestroyChannel, rep.handle);
    errno = err;
    return nullptr;
  }
  ch->channel.fd = ch->lines.fd();
  if (!ctx->track(ctx->channels, rep.handle, &ch->channel)) {
    delete ch;
    return ctx->out_of_memory(proto::Op::kDestroyChannel, rep.handle);
  }
  return &ch->channel;
}

WHARF_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  CompChannel* ch = to_channel(channel);
  proto::Handle req{ch->handle};
  proto::Empty rep;
  int err =
      to_ctx(channel->context)->client.call(proto::Op::kDestroyChannel, req, nullptr, 0, &rep);
  if (err != 0) return err;
  to_ctx(channel->context)->untrack(to_ctx(channel->context)->channels, ch->handle);
  delete ch;  // closes its descriptors
  return 0;
}

namespace wharf::abi {

namespace {

// Points cq's consumer, producer and notify line at the CQ region at `base`.
void attach_region(Cq* cq, const uint8_t* base, uint32_t entries) {
  const shm::CqLayout layout = shm::cq_layout(entries);
  uint8_t* data = const_cast<uint8_t*>(base);
  auto* ring_hdr = reinterpret_cast<shm::RingHeader*>(data + layout.ring_off);
  auto* slots = reinterpret_cast<shm::Cqe*>(data + layout.slots_off);
  cq->ring = shm::CqConsumer(ring_hdr, slots, entries);
  cq->producer = shm::CqProducer(ring_hdr, slots, entries);
  cq->notify = reinterpret_cast<shm::CqNotify*>(data + layout.notify_off);
  cq->cq.cqe = static_cast<int>(entries);
}

}  // namespace

Cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
              int comp_vector) {
  if (cqe <= 0 || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
    errno = EINVAL;
    return nullptr;
  }
  Context* ctx = to_ctx(context);
  proto::CreateCqReq req;
  req.cqe = static_cast<uint32_t>(cqe);
  req.channel = channel != nullptr ? to_channel(channel)->handle : 0;
  proto::CreateCqRep rep;
  UniqueFd memfd;
  int err = ctx->client.call(proto::Op::kCreateCq, req, nullptr, 0, &rep, &memfd, 1);
  const bool made = err == 0;
  if (err == 0 && !memfd.valid()) err = EPROTO;
  auto* cq = err == 0 ? new (std::nothrow) Cq{} : nullptr;
  shm::CqLayout layout = shm::cq_layout(rep.entries);
  if (err == 0 && cq == nullptr) err = ENOMEM;
  if (err == 0) err = cq->map.map(memfd.get(), layout.total);
  if (err != 0) {
    delete cq;
    if (made) ctx->release_in_router(proto::Op::kDestroyCq, rep.cq);
    errno = err;
    return nullptr;
  }
  cq->handle = rep.cq;
  cq->region = std::move(memfd);
  cq->request = req;
  attach_region(cq, cq->map.data, rep.entries);
  ibv_cq* c = &cq->cq;
  c->context = context;
  c->channel = channel;
  c->cq_context = cq_context;
  c->handle = rep.cq;
  pthread_mutex_init(&c->mutex, nullptr);
  pthread_cond_init(&c->cond, nullptr);
  if (!ctx->track(ctx->cqs, rep.cq, c)) {
    delete cq;
    return ctx->out_of_memory(proto::Op::kDestroyCq, rep.cq);
  }
  if (channel != nullptr &&
      !append_outside_lock(to_channel(channel)->lock, to_channel(channel)->cqs, cq)) {
    ctx->untrack(ctx->cqs, rep.cq);
    delete cq;
    return ctx->out_of_memory(proto::Op::kDestroyCq, rep.cq);
  }
  if (channel != nullptr) ++channel->refcnt;
  return cq;
}

}  // namespace wharf::abi

WHARF_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context,
                                   ibv_comp_channel* channel, int comp_vector) {
  Cq* cq = create_cq(context, cqe, cq_context, channel, comp_vector);
  return cq != nullptr ? &cq->cq : nullptr;
}

namespace wharf::abi {

// ibv_modify_cq: event moderation, which the router applies (it alone writes a moderated CQ).
int modify_cq(ibv_cq* ibcq, ibv_modify_cq_attr* attr) {
  if (ibcq == nullptr || attr == nullptr) return EINVAL;
  proto::ModifyCqReq req;
  req.cq = to_cq(ibcq)->handle;
  req.attr_mask = attr->attr_mask;
  req.cq_count = attr->moderate.cq_count;
  req.cq_period = attr->moderate.cq_period;
  proto::Empty rep;
  return to_ctx(ibcq->context)->client.call(proto::Op::kModifyCq, req, nullptr, 0, &rep);
}

}  // namespace wharf::abi

// The router moves the CQ to a new region holding the entries not yet polled (EINVAL when
// more wait than the new size holds); meanwhile this CQ's polls find nothing. Polling or
// arming it from another thread during the call is the application's race, as with providers.
WHARF_EXPORT int ibv_resize_cq(ibv_cq* ibcq, int cqe) {
  if (ibcq == nullptr || cqe <= 0) return EINVAL;
  Cq* cq = to_cq(ibcq);
  {
    std::lock_guard<SpinLock> g(cq->lock);
    cq->resizing.store(true, std::memory_order_relaxed);
  }
  proto::ResizeCqReq req{cq->handle, static_cast<uint32_t>(cqe)};
  proto::CreateCqRep rep;
  UniqueFd memfd;
  int err =
      to_ctx(ibcq->context)->client.call(proto::Op::kResizeCq, req, nullptr, 0, &rep, &memfd, 1);
  Mapping fresh;
  if (err == 0 && (!memfd.valid() || rep.entries == 0)) err = EPROTO;
  if (err == 0) err = fresh.map(memfd.get(), shm::cq_layout(rep.entries).total);
  shm::CqNotify* old_notify = cq->notify;
  {
    std::lock_guard<SpinLock> g(cq->lock);
    if (err == 0) {
      cq->map.swap(fresh);
      attach_region(cq, cq->map.data, rep.entries);
    }
    cq->resizing.store(false, std::memory_order_relaxed);
  }
  if (err == 0) {
    std::lock_guard<std::mutex> g(to_ctx(ibcq->context)->objects_mu);  // read by a resume
    cq->region = std::move(memfd);
    cq->request.cqe = rep.entries;
  }
  // A thread napping on the old region: it would otherwise sleep out its timeout.
  if (err == 0) shm::wake_napping_poller(old_notify);
  return err;  // `fresh` now holds the old region: unmapped here, outside the lock
}

WHARF_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  Context* ctx = to_ctx(cq->context);
  proto::Handle req{to_cq(cq)->handle};
  proto::Empty rep;
  int err = ctx->client.call(proto::Op::kDestroyCq, req, nullptr, 0, &rep);
  if (err != 0) return err;
  {
    std::lock_guard<std::mutex> g(ctx->objects_mu);
    ctx->cqs.erase(to_cq(cq)->handle);
  }
  if (cq->channel != nullptr) {
    --cq->channel->refcnt;
    CompChannel* ch = to_channel(cq->channel);
    std::lock_guard<SpinLock> g(ch->lock);
    std::erase(ch->cqs, to_cq(cq));  // moves pointers, frees nothing
  }
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete to_cq(cq);
  return 0;
}

namespace {

// True when one of the channel's CQs has had its event raised since it was armed (the event
// is then in, or about to be in, the channel's socket).
bool event_raised(CompChannel* ch) {
  std::lock_guard<SpinLock> g(ch->lock);
  for (const Cq* cq : ch->cqs)
    if (cq->awaiting_event.load(std::memory_order_relaxed) &&
        cq->notify->arm.load(std::memory_order_acquire) == shm::kCqDisarmed)
      return true;
  return false;
}

// True when a signal in `pending` that `old_mask` lets through has a handler installed
// without SA_RESTART: delivered during a blocked read(), it would have ended it with EINTR.
bool interrupts_a_read(const sigset_t& pending, const sigset_t& old_mask) {
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sigismember(&pending, sig) != 1 || sigismember(&old_mask, sig) == 1) continue;
    struct sigaction sa {};
    if (sigaction(sig, nullptr, &sa) != 0) continue;
    const bool handled =
        (sa.sa_flags & SA_SIGINFO) != 0 || (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
    if (handled && (sa.sa_flags & SA_RESTART) == 0) return true;
  }
  return false;
}

// What one ibv_get_cq_event call knows of its wait. may_wait: the application lets it wait on
// ch (the channel's fd lacks O_NONBLOCK), asked once, when first needed (an application may
// set the flag at any time); a call that may not wait never spins. raised: an event was
// raised on ch (event_raised) and this call has not yet found it missing from the socket;
// once it has (another thread took the datagram, or it was dropped), the call stops looking
// at the notify lines and sleeps on the channel's fd instead of spinning on a stale sign.
class WaitMode {
 public:
  explicit WaitMode(CompChannel* ch) : ch_(ch) {}
  bool may_wait() {
    if (known_ < 0) {
      const int flags = fcntl(ch_->channel.fd, F_GETFL);
      known_ = flags >= 0 && (flags & O_NONBLOCK) == 0 ? 1 : 0;
    }
    return known_ == 1;
  }
  bool raised() const { return !raised_missed_ && event_raised(ch_); }
  void raised_but_missing() { raised_missed_ = true; }

 private:
  CompChannel* ch_;
  int known_ = -1;
  bool raised_missed_ = false;
};

// How a spin ended: look() said the wait is over, the budget ran out, or a signal came that
// would have interrupted a read().
enum class SpinEnd { kLooked, kTimedOut, kInterrupted };

// Spins up to the budget until look() says the wait is over. Signals are held back while it
// spins: one that arrives then would otherwise run its handler and be forgotten, and the
// read() or poll() that follows would sleep through it (a program whose timer signal ends
// its wait, as qperf's does, would hang). kInterrupted when such a signal came and look()
// never said the wait is over: the caller then ends the wait with EINTR, as the read() would
// have. The handlers run before it returns.
template <class Look>
SpinEnd spin_until(Look look) {
  const uint64_t budget = event_spin_ns();
  if (budget == 0) return SpinEnd::kTimedOut;
  sigset_t all, old_mask, pending;
  sigfillset(&all);
  if (pthread_sigmask(SIG_BLOCK, &all, &old_mask) != 0) return SpinEnd::kTimedOut;
  // A signal held back ends the spin early; looking for one costs a system call, so it is
  // done every kSignalCheckNs.
  constexpr uint64_t kSignalCheckNs = 2000;
  uint64_t now = now_ns();
  const uint64_t deadline = now + budget;
  uint64_t next_check = now + kSignalCheckNs;
  bool over = false;
  bool interrupted = false;
  while (!(over = look()) && now < deadline) {
    __builtin_ia32_pause();
    now = now_ns();
    if (now >= next_check) {
      next_check = now + kSignalCheckNs;
      if (sigpending(&pending) == 0 && !sigisemptyset(&pending) &&
          interrupts_a_read(pending, old_mask)) {
        interrupted = true;
        break;
      }
    }
  }
  if (!over && !interrupted)
    interrupted = sigpending(&pending) == 0 && interrupts_a_read(pending, old_mask);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (over) return SpinEnd::kLooked;
  return interrupted ? SpinEnd::kInterrupted : SpinEnd::kTimedOut;
}

// Spins for a sign in shared memory that an event was raised (spin_until). True when a
// signal interrupted it.
bool spin_for_event(CompChannel* ch, WaitMode* mode) {
  if (event_spin_ns() == 0 || event_raised(ch) || !mode->may_wait()) return false;
  return spin_until([&] { return event_raised(ch); }) == SpinEnd::kInterrupted;
}

// The express lines the channel watches that polls and waits service
// (ExpressLine::for_polls): their QPs in qps, after fds[0] their descriptors if they want to
// write (-1 otherwise). At most kMaxLines; returns the number. The caller is a LineReader of
// ch's set.
constexpr int kMaxLines = 16;
int express_lines(CompChannel* ch, Qp** qps, pollfd* fds) {
  const int n = ch->lines.pick(
      [](const Qp* qp) { return qp->express.usable() && qp->express.for_polls(); }, qps, kMaxLines);
  // The channel's fd is readable when a line it watches is.
  for (int i = 0; i < n; ++i)
    fds[1 + i] =
        qps[i]->express.wants_write() ? pollfd{qps[i]->express.fd(), POLLOUT, 0} : pollfd{-1, 0, 0};
  return n;
}

// While the channel watches express lines (line_set.h), the Messages and
// acknowledgements that arrive on them raise the events: until one is raised, service the
// lines (spinning first, as spin_for_event does; then asleep in poll() on the channel's fd,
// which is readable when its socket or any of its lines is, and on the lines that want to
// write). An event the service raises on this very channel is handed to this thread in
// *caught instead of through the channel's socket. 0, or -1 with errno EINTR when a signal
// ended the wait.
int wait_with_express_lines(CompChannel* ch, WaitMode* mode, Cq** caught) {
  *caught = nullptr;
  if (ch->lines.empty()) return 0;
  Qp* qps[kMaxLines];
  pollfd fds[kMaxLines + 1];
  // Each line once per look: a second service finding nothing new would acknowledge at once,
  // and the lone Ack would wake the peer just before this thread's next Message carries it
  // (after acknowledge() below, nothing is owed: a look may then be repeated).
  int n = 0;
  auto look = [&] {
    catch_express_events(&ch->channel);
    for (int i = 0; i < n; ++i) qps[i]->express.service(qps[i]);
    *caught = caught_express_event();
    return *caught != nullptr || mode->raised();
  };
  for (bool first = true;; first = false) {
    {
      LineReader reading(ch->lines);
      if (first && mode->raised()) return 0;
      const bool waits = !first || mode->may_wait();  // the application may ask not to wait
      if (!waits || !first) {
        // The lines whose bytes woke the channel's fd (the application's poll() before a
        // call that may not wait, or ours), and those that owe a write. (A first wait looks
        // at its lines while it spins, without the system call.)
        bool socket = false;
        ch->lines.service(&ch->channel, caught, &socket);
        if (socket || *caught != nullptr || !waits || mode->raised()) return 0;
      }
      n = express_lines(ch, qps, fds);
      // About to wait: what was executed is acknowledged now, not with a later frame.
      for (int i = 0; i < n; ++i) qps[i]->express.acknowledge(qps[i]);
      if (first) {
        // A round trip between hosts is about as long as a sleep and its wake-up cost: what
        // comes within the spin budget is taken without either. An event raised after the
        // last look is in the channel's socket, which poll() watches.
        switch (spin_until(look)) {
          case SpinEnd::kLooked: return 0;
          case SpinEnd::kInterrupted: errno = EINTR; return -1;
          case SpinEnd::kTimedOut: break;
        }
      }
    }  // asleep, this thread holds no QP: fds[] are only numbers
    fds[0] = pollfd{ch->channel.fd, POLLIN, 0};
    if (poll(fds, static_cast<nfds_t>(n) + 1, -1) < 0 && errno == EINTR) return -1;
  }
}

// Reads the channel's next event from its socket. 0; 1 when there is none yet and the
// channel watches express lines (another thread took the event this call waited for: wait on
// the lines and the socket again); -1 with errno (EAGAIN: none, and the call may not wait;
// EINTR).
int read_event(CompChannel* ch, WaitMode* mode, proto::CqEventMsg* ev) {
  uint8_t buf[proto::kCqEventSize];
  ssize_t n = recv(ch->events.get(), buf, sizeof(buf), MSG_DONTWAIT);
  if (n < 0 && errno == EAGAIN) {
    if (!mode->may_wait()) return -1;
    if (mode->raised()) {
      // The event is a moment away (its raiser disarms the CQ, then writes it): taken within
      // the spin budget, without a sleep and its wake-up, which cost far more.
      int err = EAGAIN;
      const SpinEnd end = spin_until([&] {
        n = recv(ch->events.get(), buf, sizeof(buf), MSG_DONTWAIT);
        err = n < 0 ? errno : 0;
        return n >= 0 || err != EAGAIN;
      });
      if (end == SpinEnd::kInterrupted) {
        errno = EINTR;
        return -1;
      }
      errno = err;
      if (n < 0 && err == EAGAIN) mode->raised_but_missing();
    }
    if (n < 0 && errno == EAGAIN) {
      if (!ch->lines.empty()) return 1;
      n = recv(ch->events.get(), buf, sizeof(buf), 0);
    }
  }
  if (n != static_cast<ssize_t>(sizeof(buf))) return -1;
  proto::decode(buf, sizeof(buf), ev);
  return 0;
}

}  // namespace

// Waits for the channel's next event: spins (bounded, see event_spin_ns) for a sign in shared
// memory that one was raised, then blocks (in recv(), a cancellation point, or in poll() on
// the channel's fd when it watches express lines; no lock is held across either). As
// rdma-core's, a signal that interrupts the wait ends it: -1, EINTR; a channel whose fd is
// O_NONBLOCK answers EAGAIN when no event is there.
WHARF_EXPORT int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  CompChannel* ch = to_channel(channel);
  WaitMode mode(ch);
  proto::CqEventMsg ev;
  for (;;) {
    Cq* caught = nullptr;
    if (wait_with_express_lines(ch, &mode, &caught) != 0) return -1;
    if (caught != nullptr) {
      caught->awaiting_event.store(false, std::memory_order_relaxed);
      *cq = &caught->cq;
      *cq_context = caught->cq.cq_context;
      return 0;
    }
    if (spin_for_event(ch, &mode)) {
      errno = EINTR;
      return -1;
    }
    const int got = read_event(ch, &mode, &ev);
    if (got < 0) return -1;
    if (got == 0) break;
  }
  Context* ctx = to_ctx(channel->context);
  std::lock_guard<std::mutex> g(ctx->objects_mu);
  auto it = ctx->cqs.find(ev.cq);
  if (it == ctx->cqs.end()) {
    errno = EIO;
    return -1;
  }
  to_cq(it->second)->awaiting_event.store(false, std::memory_order_relaxed);
  *cq = it->second;
  *cq_context = it->second->cq_context;
  return 0;
}

WHARF_EXPORT void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

namespace wharf::abi {

thread_local uint64_t thread_idle_since_ns = 0;

namespace {

// Whether the router serving cq's context is awake. A yield is for the router: one that has
// announced sleep holds no work to be given the core for (new work wakes it through the
// doorbell), so polls then go on spinning, as on a NIC, and a yield's system call and lost
// slice do not land in the application's latency (UCX's ucp_put_lat on the direct path, where
// the router has nothing to do: docs/PERFORMANCE.md).
bool router_awake(const Cq* cq) {
  const shm::ContextPage* page = to_ctx(cq->cq.context)->page;
  return page == nullptr || page->router_sleeping.load(std::memory_order_relaxed) == 0;
}

// Called by a poll that found cq empty, holding its lock; releases it. Naps on the CQ for up to
// `length` ns (a CQE written there ends the nap) unless an entry came meanwhile, or yields to
// an awake router.
void nap_or_yield(Cq* cq, uint64_t length) {
  if (length == 0 || !shm::begin_nap(cq->notify, cq->ring)) {
    cq->lock.unlock();
    if (router_awake(cq)) sched_yield();
    return;
  }
  cq->lock.unlock();
  shm::nap(cq->notify, length);
}

// A thread whose polls have found nothing for kIdleBeforeNapNs naps on the CQ it polls, for
// up to WHARF_POLL_NAP_US (default 100 us; 0: never), where it would otherwise yield. On a
// host with fewer cores than busy threads a spinning application takes the core the router
// needs to produce its completions (docs/PERFORMANCE.md); a CQE written to the CQ ends the
// nap at once, so only work the thread awaits elsewhere (another CQ, its own memory) can wait
// up to the nap's length, and only after a millisecond of idleness.
constexpr uint64_t kIdleBeforeNapNs = 1'000'000;

// Called by a poll that found cq empty, holding its lock; releases it.
void idle_after_empty_poll(Cq* cq) {
  const uint64_t now = now_ns();
  if (thread_idle_since_ns == 0) thread_idle_since_ns = now;
  const uint64_t nap = poll_nap_ns();
  // A Message arriving on an express line does not end a nap (only a CQE does): a CQ with
  // lines is polled, not napped on.
  const bool lines =
      !cq->lines.empty() && cq->lines.any([](const Qp* qp) { return qp->express.for_polls(); });
  nap_or_yield(cq, lines || now - thread_idle_since_ns < kIdleBeforeNapNs ? 0 : nap);
}

// Lines that brought something this recently are busy: empty polls read them every time
// (read_lines_when_due) and never nap in a bulk window (bulk_nap).
constexpr uint64_t kLinesBusyNs = 100'000;

// Under cq's lock: how long an empty poll naps at once because the router is moving a long
// message between hosts for a QP of the CQ (shm::bulk_nap_ns): the completion is the
// router's work, many microseconds away, and a poller spinning meanwhile halves the router's
// share of a small host (UCX's rendezvous between hosts, docs/PERFORMANCE.md). 0: no nap. Not
// while the CQ's express lines are busy or owe a write (an acknowledgement, a frame's rest),
// since no CQE announces their traffic and only polls serve it. The clock is read only when
// the window's end moved since it was last found past, so that polls outside bulk transfers
// pay one load.
uint64_t bulk_nap(Cq* cq) {
  const uint64_t until = cq->notify->bulk_until_ns.load(std::memory_order_relaxed);
  if (until == cq->bulk_window_passed) return 0;
  const uint64_t now = now_ns();
  const uint64_t length = shm::bulk_nap_ns(until, now, poll_nap_ns());
  if (length == 0) {
    cq->bulk_window_passed = until;
    return 0;
  }
  if (!cq->lines.empty() &&
      (now - cq->lines_busy_ns.load(std::memory_order_relaxed) < kLinesBusyNs ||
       cq->lines.any([](const Qp* qp) { return qp->express.owes(); })))
    return 0;
  return length;
}

// An empty poll of a CQ with express lines reads them while they are busy, else every
// express_poll_ns (tunables.h).
void read_lines_when_due(Cq* cq) {
  const uint64_t now = now_ns();
  if (now - cq->lines_busy_ns.load(std::memory_order_relaxed) >= kLinesBusyNs &&
      now - cq->lines_read_ns.load(std::memory_order_relaxed) < express_poll_ns())
    return;
  cq->lines_read_ns.store(now, std::memory_order_relaxed);
  if (service_express(cq)) cq->lines_busy_ns.store(now, std::memory_order_relaxed);
}

// Every poll asks whether a line holds a burst to write: one relaxed load when none does, no
// call.
inline void write_bursts_if_any(Cq* cq) {
  if (cq->line_bursts.load(std::memory_order_relaxed)) write_express_bursts(cq);
}

}  // namespace

int poll_completions(ibv_cq* ibcq, int n, ibv_wc* wc, CompletionExtra* extra) {
  Cq* cq = to_cq(ibcq);
  // A burst a line held for this poll is written first: its completions come after.
  write_bursts_if_any(cq);
  // Express lines deliver here when serviced; a CQ that has completions needs none yet.
  if (!cq->ring.has_entry() && !cq->lines.empty()) read_lines_when_due(cq);
  cq->lock.lock();
  if (cq->resizing.load(std::memory_order_relaxed)) {
    cq->lock.unlock();
    return 0;
  }
  int got = 0;
  while (got < n) {
    shm::Cqe c;
    if (!cq->ring.pop(&c)) break;
    if (c.discarded != 0) continue;  // its QP went to RESET (discard_completions)
    ibv_wc& w = wc[got++];
    w.wr_id = c.wr_id;
    w.status = static_cast<ibv_wc_status>(c.status);
    w.opcode = static_cast<ibv_wc_opcode>(c.opcode);
    w.vendor_err = c.vendor_err;
    w.byte_len = c.byte_len;
    w.imm_data = c.imm_data;
    w.qp_num = c.qp_num;
    w.src_qp = c.src_qp;
    w.wc_flags = c.wc_flags;
    w.pkey_index = c.pkey_index;
    w.slid = c.slid;
    w.sl = c.sl;
    w.dlid_path_bits = c.dlid_path_bits;
    if (extra != nullptr) extra[got - 1] = CompletionExtra{c.completion_ns, c.tm_tag};
  }
  if (got == 0) {
    // The second empty poll in a row in a bulk window naps (the first may end a drain that
    // the application follows with posts).
    if (++cq->empty_polls >= 2) {
      if (const uint64_t length = bulk_nap(cq); length != 0) {
        cq->empty_polls = 0;
        nap_or_yield(cq, length);
        return 0;
      }
    }
    // On a host with fewer cores than spinning threads the router only runs when someone
    // yields: an application that keeps finding its CQ empty gives up its time slice.
    if (cq->empty_polls >= kEmptyPollsBeforeYield) {
      cq->empty_polls = 0;
      idle_after_empty_poll(cq);
      return 0;
    }
  } else {
    cq->empty_polls = 0;
    thread_idle_since_ns = 0;
  }
  cq->lock.unlock();
  return got;
}

int poll_cq(ibv_cq* ibcq, int n, ibv_wc* wc) { return poll_completions(ibcq, n, wc, nullptr); }

void discard_completions(ibv_cq* ibcq, uint32_t qp_num) {
  Cq* cq = to_cq(ibcq);
  std::lock_guard<SpinLock> g(cq->lock);
  cq->ring.discard_qp(qp_num);
}

int req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  Cq* cq = to_cq(ibcq);
  // An application about to sleep on the channel (in its own poll() of the fd, which watches
  // the lines only for reading) writes the bursts its lines hold first.
  write_bursts_if_any(cq);
  cq->awaiting_event.store(true, std::memory_order_relaxed);
  cq->notify->arm.store(solicited_only ? shm::kCqArmedSolicited : shm::kCqArmedAny,
                        std::memory_order_relaxed);
  // Pairs with the router's fence between writing a CQE and reading the arm request.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return 0;
}

}  // namespace wharf::abi
