#include "proto/router_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdlib>
#include <cstring>

#include "proto/datagram.h"

namespace wharf::proto {

const char* router_socket_path() {
  const char* p = getenv("WHARF_ROUTER");
  return (p != nullptr && *p != '\0') ? p : "/run/wharf/wharfd.sock";
}

int RouterClient::connect(const char* path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(addr.sun_path)) return ENAMETOOLONG;
  strcpy(addr.sun_path, path);
  UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!s.valid()) return errno;
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return errno;
  sock_ = std::move(s);
  return 0;
}

int RouterClient::send_locked(uint16_t op, const uint8_t* body, size_t blen, const int* fds,
                              int nfds, uint32_t* seq) {
  if (!sock_.valid()) return ENODEV;
  uint8_t buf[kMaxMessage];
  Header h;
  h.op = op;
  h.seq = ++seq_;
  size_t hn = encode(h, buf, sizeof(buf));
  if (blen > sizeof(buf) - hn) return EMSGSIZE;
  if (blen != 0) std::memcpy(buf + hn, body, blen);
  if (int err = send_datagram(sock_.get(), buf, hn + blen, fds, nfds, 0); err != 0)
    return broken(err == EPIPE ? ENODEV : err);
  *seq = h.seq;
  return 0;
}

int RouterClient::post_bytes(uint16_t op, const uint8_t* body, size_t blen) {
  std::lock_guard<std::mutex> guard(mu_);
  uint32_t seq = 0;
  return send_locked(op, body, blen, nullptr, 0, &seq);
}

int RouterClient::transact(Op op, const uint8_t* body, size_t blen, const int* fds, int nfds,
                           uint8_t* reply, size_t* rlen, UniqueFd* out_fds, int max_out) {
  std::lock_guard<std::mutex> guard(mu_);
  int err = transact_locked(op, body, blen, fds, nfds, reply, rlen, out_fds, max_out);
  // A request the old router never answered was lost with it (or its effect was: a router
  // keeps nothing a session did not see the reply of): sent again to the new one.
  if (!sock_.valid() && resumer_ && resume_locked() == 0)
    err = transact_locked(op, body, blen, fds, nfds, reply, rlen, out_fds, max_out);
  return err;
}

int RouterClient::resume_locked() {
  if (!resumer_) return ENODEV;
  sock_.reset();
  RouterClient fresh;
  if (int err = resumer_(&fresh); err != 0) return err;
  sock_ = std::move(fresh.sock_);
  return 0;
}

int RouterClient::recover() {
  std::lock_guard<std::mutex> guard(mu_);
  if (sock_.valid()) {
    pollfd p{sock_.get(), POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) return 0;
  }
  return resume_locked();
}

UniqueFd RouterClient::watch_fd() {
  std::lock_guard<std::mutex> guard(mu_);
  return UniqueFd(sock_.valid() ? ::fcntl(sock_.get(), F_DUPFD_CLOEXEC, 0) : -1);
}

int RouterClient::transact_locked(Op op, const uint8_t* body, size_t blen, const int* fds, int nfds,
                                  uint8_t* reply, size_t* rlen, UniqueFd* out_fds, int max_out) {
  Header h;
  h.op = static_cast<uint16_t>(op);
  if (int err = send_locked(h.op, body, blen, fds, nfds, &h.seq); err != 0) return err;
  uint8_t buf[kMaxMessage];
  if (timeout_ms_ >= 0) {
    pollfd p{sock_.get(), POLLIN, 0};
    int ready;
    do {
      ready = ::poll(&p, 1, timeout_ms_);
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) return broken(ready == 0 ? ETIMEDOUT : errno);
  }

  UniqueFd got[kMaxFds];
  int ngot = 0;
  ssize_t n = recv_datagram(sock_.get(), buf, sizeof(buf), got, kMaxFds, &ngot, 0);
  if (n <= 0) return broken(n == 0 ? ENODEV : static_cast<int>(-n));
  Header rh;
  if (static_cast<size_t>(n) < kHeaderSize || !decode(buf, kHeaderSize, &rh) ||
      rh.magic != kMagic || rh.version != kVersion || rh.op != (h.op | kReplyBit) ||
      rh.seq != h.seq)
    return broken(EPROTO);
  if (rh.status != 0) return static_cast<int>(rh.status);
  *rlen = static_cast<size_t>(n) - kHeaderSize;
  std::memcpy(reply, buf + kHeaderSize, *rlen);
  for (int i = 0; i < ngot && i < max_out; ++i) out_fds[i] = std::move(got[i]);
  return 0;
}

}  // namespace wharf::proto
