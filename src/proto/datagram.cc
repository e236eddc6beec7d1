#include "proto/datagram.h"

#include <errno.h>
#include <sys/socket.h>

#include <cstring>

#include "proto/messages.h"

namespace wharf::proto {

int send_datagram(int sock, const uint8_t* buf, size_t len, const int* fds, int nfds, int flags) {
  iovec iov{const_cast<uint8_t*>(buf), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (nfds > 0) {
    if (nfds > kMaxFds) return EINVAL;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  for (;;) {
    ssize_t n = ::sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n) == len ? 0 : EMSGSIZE;
    if (errno != EINTR) return errno;
  }
}

ssize_t recv_datagram(int sock, uint8_t* buf, size_t cap, UniqueFd* fds, int max_fds, int* nfds,
                      int flags) {
  *nfds = 0;
  iovec iov{buf, cap};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  for (;;) {
    n = ::recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    if (n >= 0) break;
    if (errno != EINTR) return -errno;
  }
  bool truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*nfds < max_fds && !truncated) {
        fds[(*nfds)++].reset(fd);
      } else {
        ::close(fd);
        truncated = true;
      }
    }
  }
  if (truncated) {
    for (int i = 0; i < *nfds; ++i) fds[i].reset();
    *nfds = 0;
    return -EMSGSIZE;
  }
  return n;
}

int send_cq_event(int sock, uint32_t cq) {
  uint8_t buf[kCqEventSize];
  encode(CqEventMsg{cq}, buf, sizeof(buf));
  return send_datagram(sock, buf, sizeof(buf), nullptr, 0, MSG_DONTWAIT);
}

}  // namespace wharf::proto
