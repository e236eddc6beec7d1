// Express lines, the routers' part: see express.h.
#include "router/express.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/clock.h"
#include "links/listener.h"
#include "router/host_objects.h"
#include "router/objects.h"
#include "router/peer_rules.h"
#include "router/remote.h"
#include "router/router_config.h"
#include "router/session.h"

namespace wharf::router {
namespace {

sockaddr_in express_address(const links::ClusterHost& h) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(h.address);
  a.sin_port = htons(static_cast<uint16_t>(h.port + 1));
  return a;
}

void no_delay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

ExpressBroker::ExpressBroker(const RouterConfig& cfg, const HostObjects& objects,
                             const RemotePath& remote, const links::AddressDirectory* dir,
                             uint32_t incarnation, const links::LinkTls* tls)
    : cfg_(cfg),
      objects_(objects),
      remote_(remote),
      dir_(dir),
      incarnation_(incarnation),
      tls_(tls) {}

int ExpressBroker::start() {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return errno;
  const links::ClusterHost& me = dir_->hosts()[static_cast<size_t>(dir_->self())];
  return links::listen_tcp(me.address, static_cast<uint16_t>(me.port + 1), epoll_.get(), &listen_);
}

void ExpressBroker::qp_ready_st(Qp* qp, int host) {
  if (!cfg_.express || qp->type != IBV_QPT_RC || host <= dir_->self() || qp->has_express_line() ||
      !room_for_a_line())
    return;
  Pending p;
  p.outgoing = true;
  p.host = host;
  p.src_qpn = qp->qpn;
  p.dst_qpn = qp->attr.dest_qp_num;
  p.deadline_ns = now_ns() + kPendingNs;
  p.fd.reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!p.fd.valid()) return;
  no_delay(p.fd.get());
  sockaddr_in a = express_address(dir_->hosts()[static_cast<size_t>(host)]);
  if (connect(p.fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS)
    return;  // no express line: the QP's work goes through the routers
  proto::express::Hello h;
  h.src_host = static_cast<uint16_t>(dir_->self());
  h.src_qpn = p.src_qpn;
  h.dst_qpn = p.dst_qpn;
  h.incarnation = incarnation_;
  proto::encode(h, p.hello, sizeof(p.hello));
  epoll_event ev{};
  ev.events = p.events = EPOLLOUT;  // for the connect
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, p.fd.get(), &ev);
  pending_.push_back(std::move(p));
}

void ExpressBroker::accept_all(uint64_t now) {
  for (;;) {
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    UniqueFd fd(accept4(listen_.get(), reinterpret_cast<sockaddr*>(&from), &len,
                        SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;
    // Only a router of the cluster may offer a line, from its own address (checked against
    // the host its Hello names).
    bool known = false;
    for (const links::ClusterHost& h : dir_->hosts())
      known |= h.address == ntohl(from.sin_addr.s_addr);
    if (!known || !room_for_a_line()) continue;  // the peer's QP goes through the routers
    no_delay(fd.get());
    Pending p;
    p.fd = std::move(fd);
    p.connected = true;
    p.from_address = ntohl(from.sin_addr.s_addr);
    p.deadline_ns = now + kPendingNs;
    epoll_event ev{};
    ev.events = p.events = EPOLLIN;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, p.fd.get(), &ev);
    pending_.push_back(std::move(p));
  }
}

bool ExpressBroker::poll_st(bool input) {
  if (!listen_.valid() || (!input && pending_.empty())) return false;
  const uint64_t now = now_ns();
  accept_all(now);
  const size_t before = pending_.size();
  bool did = false;
  for (size_t i = 0; i < pending_.size();) {
    if (step(&pending_[i], now)) {
      ++i;
      continue;
    }
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
    did = true;
  }
  return did || pending_.size() != before;
}

// Outgoing: connect, write the Hello, read the answer (kAccepted), offer. Incoming: read
// exactly the Hello (what follows it is the libraries'), then, once the QP it names is ready,
// answer kAccepted and offer.
bool ExpressBroker::step(Pending* p, uint64_t now) {
  constexpr size_t kHello = proto::express::kHelloSize;
  if (now > p->deadline_ns) {
    if (!p->authenticated && p->tls != nullptr) refuse(*p, "no handshake within 5 s");
    return false;
  }
  if (p->outgoing) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(p->fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return false;
    if (!p->connected) {
      sockaddr_in peer{};
      socklen_t peer_len = sizeof(peer);
      if (getpeername(p->fd.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
        return errno == ENOTCONN;  // still connecting
      p->connected = true;
    }
    if (!authenticate(p)) return false;
    if (!p->authenticated) return true;
    if (p->done < kHello) {
      const ssize_t n = send(p->fd.get(), p->hello + p->done, kHello - p->done, MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN;
      p->done += static_cast<size_t>(n);
      if (p->done < kHello) return true;
      watch(p, EPOLLIN);  // for the answer (a writable socket would wake the router on and on)
    }
    // The accepting router's answer; a close instead (it turned the line away, or its QP never
    // became ready) means no line, and this router's room for one is free again.
    uint8_t answer = 0;
    const ssize_t n = recv(p->fd.get(), &answer, 1, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN)) return false;
    if (n < 0) return true;
    if (answer != proto::express::kAccepted) return false;
  } else if (p->done < kHello) {
    if (!authenticate(p)) return false;
    if (!p->authenticated) return true;
    const ssize_t n = recv(p->fd.get(), p->hello + p->done, kHello - p->done, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN)) return false;
    if (n < 0) return true;
    p->done += static_cast<size_t>(n);
    if (p->done < kHello) return true;
    proto::express::Hello h;
    const auto& hosts = dir_->hosts();
    if (!proto::express::decode_hello(p->hello, &h) || h.src_host >= hosts.size() ||
        static_cast<int>(h.src_host) == dir_->self() ||
        hosts[h.src_host].address != p->from_address)
      return false;
    if (tls_ != nullptr && !links::LinkTls::names(p->peer_cert.get(), hosts[h.src_host].name)) {
      refuse(*p,
             "its certificate does not name " + hosts[h.src_host].name + ", the host it claims");
      return false;
    }
    p->host = h.src_host;
    p->src_qpn = h.dst_qpn;  // from here on: ours, then the peer's
    p->dst_qpn = h.src_qpn;
  }
  Qp* qp = match(*p);
  if (qp == nullptr) return true;  // not ready yet: looked at again until the deadline
  if (!p->outgoing) {
    const uint8_t accepted = proto::express::kAccepted;
    if (send(p->fd.get(), &accepted, 1, MSG_NOSIGNAL) != 1) return false;
  }
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p->fd.get(), nullptr);
  offer(qp, std::move(p->fd));
  return false;
}

bool ExpressBroker::authenticate(Pending* p) {
  if (p->authenticated) return true;
  if (tls_ == nullptr) {
    p->authenticated = true;
    return true;
  }
  if (p->tls == nullptr) {
    p->tls = tls_->start(p->fd.get(), p->outgoing);
    if (p->tls == nullptr) return false;  // no memory for a session: no line
  }
  std::string why;
  switch (links::LinkTls::handshake(p->tls.get(), &why)) {
    case links::LinkTls::Step::kWantRead: watch(p, EPOLLIN); return true;
    case links::LinkTls::Step::kWantWrite: watch(p, EPOLLOUT); return true;
    case links::LinkTls::Step::kFailed: refuse(*p, why); return false;
    case links::LinkTls::Step::kDone: break;
  }
  p->peer_cert = links::LinkTls::peer_certificate(p->tls.get());
  p->tls.reset();
  if (p->outgoing) {
    const std::string& name = dir_->hosts()[static_cast<size_t>(p->host)].name;
    if (!links::LinkTls::names(p->peer_cert.get(), name)) {
      refuse(*p, "the certificate of the router at " + name + "'s address does not name it");
      return false;
    }
  }
  p->authenticated = true;
  watch(p, p->outgoing ? EPOLLOUT : EPOLLIN);  // outgoing: for the Hello
  return true;
}

void ExpressBroker::refuse(const Pending& p, const std::string& why) {
  ++refused_lines_;
  in_addr a{};
  a.s_addr =
      htonl(p.outgoing ? dir_->hosts()[static_cast<size_t>(p.host)].address : p.from_address);
  char text[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &a, text, sizeof(text));
  spdlog::warn("express line {} {}: failed to authenticate: {}; closed", p.outgoing ? "to" : "from",
               text, why);
}

void ExpressBroker::watch(Pending* p, uint32_t events) {
  if (p->events == events) return;
  epoll_event ev{};
  ev.events = p->events = events;
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, p->fd.get(), &ev);
}

Qp* ExpressBroker::match(const Pending& p) const {
  Qp* qp = objects_.qp_by_qpn(p.src_qpn);
  if (qp == nullptr || qp->type != IBV_QPT_RC || qp->attr.dest_qp_num != p.dst_qpn ||
      qp->has_express_line() || (qp->state() != IBV_QPS_RTR && qp->state() != IBV_QPS_RTS) ||
      remote_.peer_host(qp) != p.host)
    return nullptr;
  return qp;
}

void ExpressBroker::offer(Qp* qp, UniqueFd fd) {
  // The QP's traffic class, as on its host link (DSCP in the upper six bits of the TOS byte).
  int tos = link_class(qp->owner->container(), qp->attr.ah_attr) & 0xfc;
  setsockopt(fd.get(), IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
  qp->extras().express_fd = std::move(fd);
  ++lines_;
  qp->direct()->express_offer.store(1, std::memory_order_release);
}

void ExpressBroker::forget_st(Qp* qp) {
  qp->direct()->express_offer.store(0, std::memory_order_relaxed);
  if (!qp->has_express_line()) return;
  qp->extras().express_fd.reset();
  --lines_;
}

bool ExpressBroker::room_for_a_line() const {
  return lines_ + pending_.size() < cfg_.express_lines;
}

int Session::on_take_express(const proto::Handle& req, UniqueFd*, int, proto::ExpressRep* rep,
                             ReplyFds* out) {
  Qp* qp = qps_.find(req.handle);
  if (qp == nullptr) return EINVAL;
  qp->direct()->express_offer.store(0, std::memory_order_relaxed);
  if (!qp->has_express_line()) return ENOENT;
  rep->peer_qpn = qp->attr.dest_qp_num;
  out->add(qp->extras().express_fd.get());
  if (qp->recv_cq != nullptr && qp->recv_cq->channel != nullptr) {
    rep->flags |= proto::kExpressRecvChannel;
    out->add(qp->recv_cq->channel->sock.get());
  }
  if (qp->send_cq != nullptr && qp->send_cq->channel != nullptr) {
    rep->flags |= proto::kExpressSendChannel;
    out->add(qp->send_cq->channel->sock.get());
  }
  return 0;
}

}  // namespace wharf::router
