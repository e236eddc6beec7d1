// rpoll and rselect over rsockets and ordinary fds together (librspreload passes both).
#include <sys/select.h>

#include <cerrno>
#include <chrono>
#include <vector>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/id.h"
#include "abi/rdmacm/rsocket.h"

namespace wharf::rdmacm::rs {
namespace {

using Clock = std::chrono::steady_clock;

short socket_events(Socket* s, short wanted) {
  short ev = 0;
  if (s->kind == Kind::kStream) {
    if (stream_readable(s)) ev |= POLLIN;
    if (stream_writable(s)) ev |= POLLOUT;
    // As TCP's: a closed connection hangs up once what it delivered has been read.
    if (s->disconnected && s->ready.empty()) ev |= POLLHUP;
  } else {
    if (!s->datagrams.empty()) ev |= POLLIN;
    if (!s->bound || !s->free_send.empty()) ev |= POLLOUT;
  }
  if (s->state == State::kError) ev |= POLLERR;
  return static_cast<short>(ev & (wanted | POLLERR | POLLHUP));
}

// Arms the socket's CQ for a sleep, then takes what came before it was armed (which raises
// no event).
void arm(Socket* s) {
  if (s->cq == nullptr) return;
  ibv_req_notify_cq(s->cq, 0);
  progress(s);
}

}  // namespace

int poll_sockets(pollfd* fds, nfds_t nfds, int timeout) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout);
  std::vector<std::shared_ptr<Socket>> sockets(nfds);
  for (nfds_t i = 0; i < nfds; ++i) sockets[i] = find(fds[i].fd);
  std::vector<pollfd> sleep_on;
  for (;;) {
    int ready = 0;
    std::vector<pollfd> plain;
    for (nfds_t i = 0; i < nfds; ++i) {
      fds[i].revents = 0;
      if (Socket* s = sockets[i].get()) {
        std::lock_guard<std::mutex> g(s->mu);
        progress(s);
        fds[i].revents = socket_events(s, fds[i].events);
      } else if (fds[i].fd >= 0) {
        plain.push_back(pollfd{fds[i].fd, fds[i].events, 0});
      }
    }
    if (!plain.empty() && ::poll(plain.data(), plain.size(), 0) > 0) {
      size_t k = 0;
      for (nfds_t i = 0; i < nfds; ++i)
        if (!sockets[i] && fds[i].fd >= 0) fds[i].revents = plain[k++].revents;
    }
    for (nfds_t i = 0; i < nfds; ++i) ready += fds[i].revents != 0;
    int left = -1;
    if (timeout >= 0) {
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      left = ms > 0 ? static_cast<int>(ms) : 0;
    }
    if (ready != 0 || left == 0) return ready;
    // Sleep on every fd that can bring news: plain ones, and each socket's channels.
    sleep_on = plain;
    for (nfds_t i = 0; i < nfds; ++i) {
      Socket* s = sockets[i].get();
      if (s == nullptr) continue;
      std::lock_guard<std::mutex> g(s->mu);
      arm(s);
      if (socket_events(s, fds[i].events) != 0) {
        left = 0;  // news came while arming
        break;
      }
      pollfd two[2];
      const int n = wait_fds(s, two);
      for (int k = 0; k < n; ++k) sleep_on.push_back(two[k]);
    }
    if (left == 0) continue;
    if (::poll(sleep_on.data(), sleep_on.size(), left) < 0) return -1;  // errno from poll
  }
}

}  // namespace wharf::rdmacm::rs

using namespace wharf::rdmacm;

WHARF_EXPORT int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  try {
    return rs::poll_sockets(fds, nfds, timeout);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds,
                         timeval* timeout) {
  try {
    std::vector<pollfd> fds;
    for (int fd = 0; fd < nfds; ++fd) {
      short ev = 0;
      if (readfds != nullptr && FD_ISSET(fd, readfds)) ev |= POLLIN;
      if (writefds != nullptr && FD_ISSET(fd, writefds)) ev |= POLLOUT;
      if (exceptfds != nullptr && FD_ISSET(fd, exceptfds)) ev |= POLLPRI;
      if (ev != 0) fds.push_back(pollfd{fd, ev, 0});
    }
    const int ms = timeout == nullptr
                       ? -1
                       : static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000);
    const int r = rs::poll_sockets(fds.data(), fds.size(), ms);
    if (r < 0) return -1;
    if (readfds != nullptr) FD_ZERO(readfds);
    if (writefds != nullptr) FD_ZERO(writefds);
    if (exceptfds != nullptr) FD_ZERO(exceptfds);
    int count = 0;
    for (const pollfd& p : fds) {
      if (readfds != nullptr && (p.revents & (POLLIN | POLLHUP | POLLERR)) && (p.events & POLLIN))
        FD_SET(p.fd, readfds), ++count;
      if (writefds != nullptr && (p.revents & (POLLOUT | POLLERR)) && (p.events & POLLOUT))
        FD_SET(p.fd, writefds), ++count;
      if (exceptfds != nullptr && (p.revents & POLLPRI)) FD_SET(p.fd, exceptfds), ++count;
    }
    return count;
  } catch (...) {
    return fail(ENOMEM);
  }
}
