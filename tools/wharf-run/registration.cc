#include "registration.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "proto/codec.h"
#include "proto/datagram.h"
#include "proto/messages.h"

namespace wharf::run {
namespace {

constexpr int kRegisterTimeoutMs = 10000;
constexpr int kUnregisterTimeoutMs = 2000;

proto::Name to_wire_name(const std::string& name) {
  proto::Name wire{};
  std::copy_n(name.begin(), std::min(name.size(), wire.size() - 1), wire.begin());
  return wire;
}

}  // namespace

bool RouterSession::connect(const std::string& socket_path) {
  path_ = socket_path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    std::fprintf(stderr, "wharf-run: router socket path is too long: %s\n", socket_path.c_str());
    return false;
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  sock_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!sock_.valid()) {
    std::fprintf(stderr, "wharf-run: socket: %s\n", std::strerror(errno));
    return false;
  }
  int rc;
  do {
    rc = ::connect(sock_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    std::fprintf(stderr, "wharf-run: cannot connect to router at %s: %s (is wharfd running?)\n",
                 socket_path.c_str(), std::strerror(errno));
    sock_.reset();
    return false;
  }
  return true;
}

pid_t RouterSession::router_pid() const {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(sock_.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return cred.pid;
}

template <class Req>
int RouterSession::call(uint16_t op, const Req& req, const int* fds, int nfds, int timeout_ms,
                        bool quiet, uint8_t* body_out, size_t body_cap, size_t* body_len) {
  auto fail = [&](const char* what, int err) {
    if (!quiet) {
      std::fprintf(stderr, "wharf-run: router %s: %s%s%s\n", path_.c_str(), what,
                   err != 0 ? ": " : "", err != 0 ? std::strerror(err) : "");
    }
    return -1;
  };
  proto::Header hdr;
  hdr.op = op;
  hdr.seq = ++seq_;
  uint8_t buf[proto::kMaxMessage];
  size_t n = proto::encode(hdr, buf, sizeof(buf));
  size_t m = proto::encode(req, buf + n, sizeof(buf) - n);
  if (n != proto::kHeaderSize || (m == 0 && !std::is_same_v<Req, proto::Empty>))
    return fail("request does not encode", 0);
  if (int err = proto::send_datagram(sock_.get(), buf, n + m, fds, nfds, 0); err != 0) {
    return fail("send failed", err);
  }

  pollfd pfd{sock_.get(), POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&pfd, 1, timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) return fail("poll failed", errno);
  if (ready == 0) return fail("no reply within timeout", 0);

  UniqueFd rfds[proto::kMaxFds];
  int nrfds = 0;
  ssize_t got =
      proto::recv_datagram(sock_.get(), buf, sizeof(buf), rfds, proto::kMaxFds, &nrfds, 0);
  if (got < 0) return fail("receive failed", static_cast<int>(-got));
  if (got == 0) return fail("closed the connection without replying", 0);

  proto::Header rep;
  if (static_cast<size_t>(got) < proto::kHeaderSize ||
      !proto::decode(buf, proto::kHeaderSize, &rep)) {
    return fail("reply shorter than a header", 0);
  }
  if (rep.magic != proto::kMagic || rep.version != proto::kVersion) {
    return fail("reply has a bad magic or protocol version", 0);
  }
  if (rep.op != (op | proto::kReplyBit) || rep.seq != hdr.seq) {
    return fail("reply does not match the request (op or seq)", 0);
  }
  size_t body = static_cast<size_t>(got) - proto::kHeaderSize;
  *body_len = std::min(body, body_cap);
  std::memcpy(body_out, buf + proto::kHeaderSize, *body_len);
  return static_cast<int>(rep.status);
}

bool RouterSession::router_host(std::string* host) {
  uint8_t body[proto::kMaxMessage];
  size_t len = 0;
  int status = call(static_cast<uint16_t>(proto::Op::kRouterInfo), proto::Empty{}, nullptr, 0,
                    kRegisterTimeoutMs, false, body, sizeof(body), &len);
  proto::RouterInfoRep rep;
  if (status != 0 || !proto::decode(body, len, &rep)) {
    if (status >= 0)
      std::fprintf(stderr, "wharf-run: router %s did not say its host name (%s)\n", path_.c_str(),
                   status > 0 ? std::strerror(status) : "malformed reply");
    return false;
  }
  host->assign(rep.host.data(), strnlen(rep.host.data(), rep.host.size()));
  return true;
}

bool RouterSession::register_container(const std::string& tenant, const std::string& network,
                                       const std::string& name, uint32_t vip, int netns_fd,
                                       uint16_t* lid) {
  proto::RegisterContainerReq req;
  req.name = to_wire_name(name);
  req.tenant = to_wire_name(tenant);
  req.network = to_wire_name(network);
  req.vip = vip;
  uint8_t body[proto::kMaxMessage];
  size_t len = 0;
  int status = call(static_cast<uint16_t>(proto::Op::kRegisterContainer), req, &netns_fd, 1,
                    kRegisterTimeoutMs, false, body, sizeof(body), &len);
  if (status < 0) return false;
  if (status != 0) {
    std::fprintf(stderr, "wharf-run: router refused to register container %s: %s\n", name.c_str(),
                 std::strerror(status));
    return false;
  }
  proto::RegisterContainerRep rep;
  if (!proto::decode(body, len, &rep)) {
    std::fprintf(stderr, "wharf-run: router %s: malformed RegisterContainer reply (%zu bytes)\n",
                 path_.c_str(), len);
    return false;
  }
  *lid = rep.lid;
  return true;
}

void RouterSession::unregister_container(const std::string& name) {
  if (!sock_.valid()) return;
  proto::UnregisterContainerReq req;
  req.name = to_wire_name(name);
  uint8_t body[proto::kMaxMessage];
  size_t len = 0;
  int status = call(static_cast<uint16_t>(proto::Op::kUnregisterContainer), req, nullptr, 0,
                    kUnregisterTimeoutMs, true, body, sizeof(body), &len);
  if (status > 0) {
    std::fprintf(stderr, "wharf-run: router could not unregister container %s: %s\n", name.c_str(),
                 std::strerror(status));
  }
  sock_.reset();
}

}  // namespace wharf::run
