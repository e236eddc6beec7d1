#include "proto/session_watch.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace wharf::proto {

int SessionWatch::start(RouterClient* client) {
  stop_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!stop_.valid()) return errno;
  // The thread starts with every signal blocked: a signal meant for the application (a
  // timer ending a blocking ibv_get_cq_event with EINTR) must never be taken by it.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int err = 0;
  try {
    thread_ = std::make_unique<std::thread>(&SessionWatch::run, this, client);
  } catch (...) {
    err = EAGAIN;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (err != 0) stop_.reset();
  return err;
}

void SessionWatch::stop() {
  if (thread_ == nullptr) return;
  const uint64_t one = 1;
  ssize_t n = ::write(stop_.get(), &one, sizeof(one));
  (void)n;  // an eventfd write of 1 fails only when the counter is full: then it is set
  thread_->join();
  thread_.reset();
  stop_.reset();
}

void SessionWatch::abandon_in_child() {
  (void)thread_.release();  // the parent's thread: not this process's to join or free
  stop_.reset();
}

void SessionWatch::run(RouterClient* client) {
  for (;;) {
    UniqueFd conn = client->watch_fd();
    if (!conn.valid()) return;  // closed for good
    pollfd p[2] = {{stop_.get(), POLLIN, 0}, {conn.get(), POLLRDHUP, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[0].revents != 0) return;
    if ((p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0 && client->recover() != 0) return;
  }
}

}  // namespace wharf::proto
