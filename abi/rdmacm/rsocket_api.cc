// The exported rsocket calls: argument checks and dispatch to the stream and datagram code.
// Every call returns as the socket call it stands for: -1 with errno on failure.
#include <fcntl.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>

#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/id.h"
#include "abi/rdmacm/rsocket.h"

using namespace wharf::rdmacm;
using namespace wharf::rdmacm::rs;

namespace {

// Runs fn(socket, lock) for socket id under its lock; EBADF for an unknown id. Exceptions
// (allocation) become ENOMEM: exported calls never throw.
template <class R, class Fn>
R with_socket(int id, Fn fn) {
  try {
    std::shared_ptr<Socket> s = find(id);
    if (!s) {
      errno = EBADF;
      return static_cast<R>(-1);
    }
    std::unique_lock<std::mutex> lock(s->mu);
    return fn(s.get(), lock);
  } catch (...) {
    errno = ENOMEM;
    return static_cast<R>(-1);
  }
}

int result(int err) {
  if (err == 0) return 0;
  errno = err;
  return -1;
}

bool valid_addr(const Socket* s, const sockaddr* addr, socklen_t len) {
  if (addr == nullptr) return false;
  if (addr->sa_family == AF_INET) return len >= sizeof(sockaddr_in);
  return addr->sa_family == AF_INET6 && s->domain == AF_INET6 && len >= sizeof(sockaddr_in6);
}

ssize_t do_recv(int id, const iovec* iov, int iovcnt, int flags, sockaddr* from,
                socklen_t* fromlen) {
  return with_socket<ssize_t>(id, [&](Socket* s, std::unique_lock<std::mutex>& lock) {
    if (s->kind == Kind::kDgram) return dgram_recv(s, lock, iov, iovcnt, flags, from, fromlen);
    const ssize_t n = stream_recv(s, lock, iov, iovcnt, flags);
    if (n >= 0 && from != nullptr && fromlen != nullptr)
      copy_addr_out(reinterpret_cast<const sockaddr*>(&s->peer_addr), from, fromlen);
    return n;
  });
}

ssize_t do_send(int id, const iovec* iov, int iovcnt, int flags, const sockaddr* to,
                socklen_t tolen) {
  return with_socket<ssize_t>(id, [&](Socket* s, std::unique_lock<std::mutex>& lock) -> ssize_t {
    if (s->kind == Kind::kStream) return stream_send(s, lock, iov, iovcnt, flags);
    if (to != nullptr && !valid_addr(s, to, tolen)) {
      errno = EINVAL;
      return -1;
    }
    return dgram_send(s, lock, iov, iovcnt, flags, to);
  });
}

int get_int(const void* optval, socklen_t optlen, int* out) {
  if (optval == nullptr || optlen < sizeof(int)) return EINVAL;
  std::memcpy(out, optval, sizeof(int));
  return 0;
}

int put_int(int v, void* optval, socklen_t* optlen) {
  if (optval == nullptr || optlen == nullptr || *optlen < sizeof(int)) return EINVAL;
  std::memcpy(optval, &v, sizeof(int));
  *optlen = sizeof(int);
  return 0;
}

}  // namespace

WHARF_EXPORT int rsocket(int domain, int type, int protocol) {
  try {
    return create(domain, type, protocol);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>&) {
    if (!valid_addr(s, addr, addrlen)) return result(EINVAL);
    if (s->kind == Kind::kDgram) return result(dgram_bind(s, addr));
    if (s->bound || s->state != State::kIdle) return result(EINVAL);
    if (s->reuseaddr) {
      int one = 1;
      (void)rdma_set_option(s->cm, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof one);
    }
    if (rdma_bind_addr(s->cm, const_cast<sockaddr*>(addr)) != 0) return -1;
    s->bound = true;
    return 0;
  });
}

WHARF_EXPORT int rlisten(int socket, int backlog) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>&) {
    if (s->kind != Kind::kStream) return result(EOPNOTSUPP);
    if (s->state == State::kListening) return 0;
    if (s->state != State::kIdle) return result(EINVAL);
    if (rdma_listen(s->cm, backlog > 0 ? backlog : 1) != 0) return -1;
    s->bound = true;
    s->state = State::kListening;
    return 0;
  });
}

WHARF_EXPORT int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>& lock) {
    if (s->kind != Kind::kStream) return result(EOPNOTSUPP);
    int accepted = -1;
    if (int err = stream_accept(s, lock, addr, addrlen, &accepted); err != 0) return result(err);
    return accepted;
  });
}

WHARF_EXPORT int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>& lock) {
    if (!valid_addr(s, addr, addrlen)) return result(EINVAL);
    if (s->kind == Kind::kDgram) return result(dgram_connect(s, lock, addr));
    return result(stream_connect(s, lock, addr));
  });
}

WHARF_EXPORT int rshutdown(int socket, int how) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>& lock) {
    if (s->kind == Kind::kDgram) return 0;
    return result(stream_shutdown(s, lock, how));
  });
}

WHARF_EXPORT int rclose(int socket) {
  try {
    return destroy(socket);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  iovec iov{buf, len};
  return do_recv(socket, &iov, 1, flags, nullptr, nullptr);
}

WHARF_EXPORT ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr,
                               socklen_t* addrlen) {
  iovec iov{buf, len};
  return do_recv(socket, &iov, 1, flags, src_addr, addrlen);
}

WHARF_EXPORT ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  if (msg == nullptr) return fail(EINVAL);
  socklen_t len = msg->msg_namelen;
  const ssize_t n = do_recv(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
                            static_cast<sockaddr*>(msg->msg_name), &len);
  if (n >= 0) {
    msg->msg_namelen = msg->msg_name != nullptr ? len : 0;
    msg->msg_controllen = 0;
    msg->msg_flags = 0;
  }
  return n;
}

WHARF_EXPORT ssize_t rread(int socket, void* buf, size_t count) {
  return rrecv(socket, buf, count, 0);
}

WHARF_EXPORT ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
  return do_recv(socket, iov, iovcnt, 0, nullptr, nullptr);
}

WHARF_EXPORT ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  return do_send(socket, &iov, 1, flags, nullptr, 0);
}

WHARF_EXPORT ssize_t rsendto(int socket, const void* buf, size_t len, int flags,
                             const sockaddr* dest_addr, socklen_t addrlen) {
  iovec iov{const_cast<void*>(buf), len};
  return do_send(socket, &iov, 1, flags, dest_addr, addrlen);
}

WHARF_EXPORT ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  if (msg == nullptr) return fail(EINVAL);
  return do_send(socket, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags,
                 static_cast<const sockaddr*>(msg->msg_name), msg->msg_namelen);
}

WHARF_EXPORT ssize_t rwrite(int socket, const void* buf, size_t count) {
  return rsend(socket, buf, count, 0);
}

WHARF_EXPORT ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
  return do_send(socket, iov, iovcnt, 0, nullptr, 0);
}

WHARF_EXPORT int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>&) {
    if (const int err = check_name_buffer(addr, addrlen); err != 0) return result(err);
    if (s->kind == Kind::kDgram) {
      if (!s->has_default) return result(ENOTCONN);
      copy_addr_out(reinterpret_cast<const sockaddr*>(&s->default_dst), addr, addrlen);
      return 0;
    }
    if (s->state != State::kConnected && s->state != State::kAccepting) return result(ENOTCONN);
    copy_addr_out(reinterpret_cast<const sockaddr*>(&s->peer_addr), addr, addrlen);
    return 0;
  });
}

WHARF_EXPORT int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>&) {
    if (const int err = check_name_buffer(addr, addrlen); err != 0) return result(err);
    const sockaddr* local = rdma_get_local_addr(s->cm);
    if (local->sa_family == AF_UNSPEC) {  // not bound: the wildcard, port 0
      sockaddr_storage any{};
      any.ss_family = static_cast<sa_family_t>(s->domain);
      copy_addr_out(reinterpret_cast<const sockaddr*>(&any), addr, addrlen);
      return 0;
    }
    copy_addr_out(local, addr, addrlen);
    return 0;
  });
}

WHARF_EXPORT int rsetsockopt(int socket, int level, int optname, const void* optval,
                             socklen_t optlen) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>&) {
    int v = 0;
    if (level == SOL_RDMA && optname == RDMA_ROUTE) {
      if (rdma_set_option(s->cm, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, const_cast<void*>(optval),
                          optlen) != 0)
        return -1;
      return 0;
    }
    if (int err = get_int(optval, optlen, &v); err != 0) {
      // SO_LINGER and the timeouts take structures: accepted as they come.
      if (level == SOL_SOCKET &&
          (optname == SO_LINGER || optname == SO_RCVTIMEO || optname == SO_SNDTIMEO))
        return 0;
      return result(err);
    }
    switch (level) {
      case SOL_SOCKET:
        switch (optname) {
          case SO_REUSEADDR: s->reuseaddr = v != 0; return 0;
          case SO_KEEPALIVE: s->keepalive = v != 0; return 0;
          case SO_SNDBUF: s->sndbuf = static_cast<uint32_t>(v); return 0;
          case SO_RCVBUF: s->rcvbuf = static_cast<uint32_t>(v); return 0;
          case SO_BROADCAST:
          case SO_LINGER:
          case SO_RCVTIMEO:
          case SO_SNDTIMEO:
          case SO_PRIORITY: return 0;
          default: return result(ENOPROTOOPT);
        }
      case IPPROTO_TCP:
        switch (optname) {
          case TCP_NODELAY: s->nodelay = v != 0; return 0;
          case TCP_KEEPIDLE: s->keepidle = v; return 0;
          case TCP_KEEPINTVL:
          case TCP_KEEPCNT:
          case TCP_MAXSEG: return 0;
          default: return result(ENOPROTOOPT);
        }
      case IPPROTO_IPV6:
        if (optname != IPV6_V6ONLY) return result(ENOPROTOOPT);
        return rdma_set_option(s->cm, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof v) == 0
                   ? 0
                   : -1;
      case SOL_RDMA:
        switch (optname) {
          // Queue sizes and inline data are this library's own (rsocket.h); asked-for values
          // are kept for rgetsockopt.
          case RDMA_SQSIZE:
          case RDMA_RQSIZE: return v > 0 ? 0 : result(EINVAL);
          case RDMA_INLINE: s->inline_size = static_cast<uint32_t>(v); return 0;
          case RDMA_IOMAPSIZE: s->iomap_size = static_cast<uint32_t>(v); return 0;
          default: return result(ENOPROTOOPT);
        }
      default: return result(ENOPROTOOPT);
    }
  });
}

WHARF_EXPORT int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>&) {
    switch (level) {
      case SOL_SOCKET:
        switch (optname) {
          case SO_REUSEADDR: return result(put_int(s->reuseaddr, optval, optlen));
          case SO_KEEPALIVE: return result(put_int(s->keepalive, optval, optlen));
          case SO_SNDBUF: return result(put_int(static_cast<int>(s->sndbuf), optval, optlen));
          case SO_RCVBUF: return result(put_int(static_cast<int>(s->rcvbuf), optval, optlen));
          case SO_TYPE:
            return result(
                put_int(s->kind == Kind::kStream ? SOCK_STREAM : SOCK_DGRAM, optval, optlen));
          case SO_ERROR: {
            const int err = s->so_error;
            s->so_error = 0;
            return result(put_int(err, optval, optlen));
          }
          default: return result(ENOPROTOOPT);
        }
      case IPPROTO_TCP:
        switch (optname) {
          case TCP_NODELAY: return result(put_int(s->nodelay, optval, optlen));
          case TCP_KEEPIDLE: return result(put_int(s->keepidle, optval, optlen));
          case TCP_MAXSEG: return result(put_int(static_cast<int>(kSlotSize), optval, optlen));
          default: return result(ENOPROTOOPT);
        }
      case SOL_RDMA:
        switch (optname) {
          case RDMA_SQSIZE: return result(put_int(static_cast<int>(kSendSlots), optval, optlen));
          case RDMA_RQSIZE: return result(put_int(static_cast<int>(kRecvSlots), optval, optlen));
          case RDMA_INLINE:
            return result(put_int(static_cast<int>(s->inline_size), optval, optlen));
          case RDMA_IOMAPSIZE:
            return result(put_int(static_cast<int>(s->iomap_size), optval, optlen));
          default: return result(ENOPROTOOPT);
        }
      default: return result(ENOPROTOOPT);
    }
  });
}

WHARF_EXPORT int rfcntl(int socket, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = cmd == F_SETFL || cmd == F_SETFD ? va_arg(ap, long) : 0;
  va_end(ap);
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>&) {
    switch (cmd) {
      case F_GETFL: return O_RDWR | (s->nonblocking ? O_NONBLOCK : 0);
      case F_SETFL: s->nonblocking = (arg & O_NONBLOCK) != 0; return 0;
      case F_GETFD: return FD_CLOEXEC;
      case F_SETFD: return 0;
      default: return result(EINVAL);
    }
  });
}

WHARF_EXPORT off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  return with_socket<off_t>(socket, [&](Socket* s, std::unique_lock<std::mutex>& lock) -> off_t {
    if (s->kind != Kind::kStream || flags != 0) {
      errno = s->kind != Kind::kStream ? EOPNOTSUPP : EINVAL;
      return -1;
    }
    return stream_iomap(s, lock, buf, len, prot, offset);
  });
}

WHARF_EXPORT int riounmap(int socket, void* buf, size_t len) {
  return with_socket<int>(socket, [&](Socket* s, std::unique_lock<std::mutex>& lock) {
    if (s->kind != Kind::kStream) return result(EOPNOTSUPP);
    return result(stream_iounmap(s, lock, buf, len));
  });
}

// rsocket.h declares a size_t result; -1 converts to SIZE_MAX, which callers compare with -1.
WHARF_EXPORT size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  return static_cast<size_t>(
      with_socket<ssize_t>(socket, [&](Socket* s, std::unique_lock<std::mutex>& lock) -> ssize_t {
        if (s->kind != Kind::kStream) {
          errno = EOPNOTSUPP;
          return -1;
        }
        return stream_iowrite(s, lock, buf, count, offset, flags);
      }));
}
