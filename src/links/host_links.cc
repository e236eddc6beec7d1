#include "links/host_links.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/tcp.h>  // struct tcp_info with tcpi_notsent_bytes (glibc's lacks it)
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/clock.h"
#include "links/link_records.h"
#include "links/listener.h"

namespace wharf::links {
namespace {

constexpr size_t kReadChunk = 256 * 1024;
constexpr size_t kReadBudget = 1u << 20;  // per connection per poll: keeps peers fair
// Placement: a header and an AETH (a READ response's longest headers), read when the next
// packet is expected to be placed; a payload is placed only if this much is still to come
// (less is cheaper copied than received alone).
constexpr size_t kHeadersFirstBytes = proto::host::kPacketHeaderSize + 8;
constexpr size_t kPlaceAtLeast = 4096;
// With `encrypt`: records sealed ahead of the socket, per connection (the rest of what is
// queued waits in plaintext, so a full socket does not keep sealed bytes in memory).
constexpr size_t kSealAhead = 256 * 1024;
constexpr uint64_t kBackoffFirstNs = 50'000'000;
constexpr uint64_t kBackoffMaxNs = 2'000'000'000;

sockaddr_in address_of(const ClusterHost& h) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(h.address);
  a.sin_port = htons(h.port);
  return a;
}

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// What the kernel says of an outgoing connection's bytes in flight.
struct Flight {
  bool outstanding = false;  // bytes sent and not yet acknowledged, or not yet sent
  bool stalled = false;      // unacknowledged bytes went again on a timeout, still unanswered
};

Flight flight_of(int fd) {
  tcp_info ti{};
  socklen_t len = sizeof(ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return {};
  Flight f;
  f.outstanding = ti.tcpi_unacked > 0 || ti.tcpi_notsent_bytes > 0;
  // tcpi_retransmits counts retransmission timeouts since data was last acknowledged; a
  // full receive window (zero-window probes) is a slow peer, not a stall, and is not counted.
  f.stalled = ti.tcpi_unacked > 0 && ti.tcpi_retransmits > 0;
  return f;
}

// The outcome of a nonblocking connect that epoll reported: 0 or its errno.
int connect_error(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

// Closes with a reset: the kernel drops what it still holds instead of retransmitting it.
void reset_on_close(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

}  // namespace

struct HostLinks::Conn {
  explicit Conn(size_t* tx_memory) : tx(tx_memory), sealed_tx(tx_memory) {}
  UniqueFd fd;
  int host = -1;  // outgoing: the peer; incoming: learned from its Hello
  int dscp = 0;   // outgoing: the class it carries
  bool outgoing = false;
  bool connected = false;      // the TCP connection is established
  bool authenticated = false;  // connected, and its TLS handshake (if any) passed
  bool handshake_wants_out = false;
  bool hello_done = false;
  bool watching_out = false;
  bool dirty = false;           // in dirty_: has packets queued since the last flush()
  bool in_flight = false;       // outgoing: wrote since the kernel last held nothing unacked
  uint64_t connect_at_ns = 0;   // outgoing, not yet connected: when to try
  uint64_t probe_at_ns = 0;     // outgoing, stalled: when the next probe may start
  int stalled_checks = 0;       // outgoing: consecutive check_stalls() that found it stalled
  std::unique_ptr<Conn> probe;  // outgoing, stalled: the connection that may replace it
  Conn* probe_for = nullptr;    // a probe: the stalled connection it would replace
  ByteQueue rx;
  // A packet whose payload is received where the handler wants it (payload_destination):
  // `packet` its decoded headers (which also wait in rx), `got` of its payload's len() bytes
  // are at `dest`. With dest null and len() set, the destination went away: the rest is read
  // and dropped with the packet.
  struct Placement {
    uint8_t* dest = nullptr;
    uint32_t got = 0;
    proto::host::Packet packet;
    uint32_t len() const { return packet.payload_len; }
  };
  Placement placing;
  // The packet before was placed and more of its message follows: the next packet's headers
  // are read alone (kHeadersFirstBytes), so that its payload can be placed too.
  bool headers_first = false;
  ByteQueue tx;                        // packets not yet written (with `encrypt`: sealed)
  size_t tx_peak = 0;                  // outgoing: the most tx held since the last trim_queues()
  LinkTls::Session tls;                // the handshake under way
  uint64_t handshake_deadline_ns = 0;  // while tls: when the peer has failed
  LinkTls::Cert peer_cert;             // incoming, authenticated: checked against its Hello
  // Authenticated, with `encrypt` (links/link_records.h): what seals tx into sealed_tx, the
  // records not yet written to the socket, and what opens the records read into sealed_rx (not
  // yet whole) into rx.
  std::unique_ptr<RecordCipher> sealer;
  std::unique_ptr<RecordCipher> opener;
  ByteQueue sealed_tx;
  ByteQueue sealed_rx;
  HostLinks::LinkStats* stats = nullptr;  // outgoing, or incoming once its Hello came
  HostLinks::LinkStats unnamed;           // incoming: moved before its Hello named the peer

  void count(size_t written, size_t read) {
    HostLinks::LinkStats* s = stats != nullptr ? stats : &unnamed;
    s->tx_bytes += written;
    s->rx_bytes += read;
  }
};

void HostLinks::count_transport(int host, uint8_t tclass, uint64_t retransmitted,
                                uint64_t rnr_naks) {
  if (host < 0 || static_cast<size_t>(host) >= out_.size()) return;
  LinkStats& s = stats_[{host, tclass >> 2}];
  s.retransmitted_packets += retransmitted;
  s.rnr_naks += rnr_naks;
}

void HostLinks::for_each_link(
    const std::function<void(int host, int dscp, const LinkStats& stats, bool up)>& fn) const {
  for (const auto& [key, stats] : stats_) {
    const Conn* ours = out_[static_cast<size_t>(key.first)][static_cast<size_t>(key.second)].get();
    fn(key.first, key.second, stats, ours != nullptr && ours->hello_done);
  }
}

uint32_t HostLinks::fresh_incarnation() {
  return static_cast<uint32_t>(now_ns() ^ (now_ns() >> 32) ^ getpid()) | 1u;
}

HostLinks::HostLinks(const AddressDirectory* dir, uint64_t node_guid, Handler* handler,
                     size_t send_budget, const LinkTls* tls, uint32_t incarnation)
    : dir_(dir), handler_(handler), tls_(tls), send_budget_(send_budget) {
  const size_t n = dir->hosts().size();
  out_.resize(n);
  incarnation_.assign(n, 0);
  retry_ns_.assign(n, 0);
  scratch_ = std::make_unique_for_overwrite<uint8_t[]>(kReadChunk);
  hello_.node_guid = node_guid;
  hello_.incarnation = incarnation != 0 ? incarnation : fresh_incarnation();
  const std::string& me = dir->hosts()[static_cast<size_t>(dir->self())].name;
  std::strncpy(hello_.host.data(), me.c_str(), hello_.host.size() - 1);
}

HostLinks::~HostLinks() = default;

int HostLinks::start() {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return errno;
  // Event data 0 (a null Conn*): the listening socket.
  const ClusterHost& me = dir_->hosts()[static_cast<size_t>(dir_->self())];
  return listen_tcp(me.address, me.port, epoll_.get(), &listen_);
}

void HostLinks::watch(Conn* c) {
  if (!c->fd.valid()) return;
  const bool want_out = !c->connected || c->handshake_wants_out ||
                        (c->authenticated && (!c->tx.empty() || !c->sealed_tx.empty()));
  epoll_event ev{};
  ev.events = EPOLLIN | (want_out ? EPOLLOUT : 0u);
  ev.data.ptr = c;
  epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c->fd.get(), &ev);
  c->watching_out = want_out;
}

std::unique_ptr<HostLinks::Conn> HostLinks::outgoing(int host, int dscp) {
  auto c = std::make_unique<Conn>(&tx_memory_);
  c->host = host;
  c->dscp = dscp;
  c->outgoing = true;
  c->stats = &stats_[{host, dscp}];
  proto::host::Hello hello = hello_;
  hello.traffic_class = static_cast<uint8_t>(dscp << 2);
  proto::encode(hello, c->tx.append(proto::host::kHelloSize), proto::host::kHelloSize);
  queued_ += proto::host::kHelloSize;
  return c;
}

void HostLinks::open(int host, int dscp) {
  auto c = outgoing(host, dscp);
  c->connect_at_ns = retry_ns_[static_cast<size_t>(host)];
  place(host, dscp, std::move(c));
}

void HostLinks::place(int host, int dscp, std::unique_ptr<Conn> c) {
  auto& slot = out_[static_cast<size_t>(host)][static_cast<size_t>(dscp)];
  if (slot != nullptr) {
    outgoing_.erase(std::find(outgoing_.begin(), outgoing_.end(), slot.get()));
    bury(std::move(slot));
  }
  if (c != nullptr) outgoing_.push_back(c.get());
  slot = std::move(c);
}

// Starts c's nonblocking connect. Returns 0 or the errno of a connect that failed at once
// (c->fd is then still open) or of a socket that could not be made (c->fd is not).
int HostLinks::dial(Conn* c) {
  c->fd.reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!c->fd.valid()) return errno;
  tune(c->fd.get());
  int tos = c->dscp << 2;  // DSCP in the upper six bits of the TOS byte
  setsockopt(c->fd.get(), IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
  sockaddr_in a = address_of(dir_->hosts()[static_cast<size_t>(c->host)]);
  if (connect(c->fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS)
    return errno;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.ptr = c;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c->fd.get(), &ev);
  c->watching_out = true;
  return 0;
}

// Starts the nonblocking connect of an outgoing connection whose time has come.
bool HostLinks::connect_due(Conn* c, uint64_t now) {
  if (c->fd.valid() || now < c->connect_at_ns) return false;
  const int err = dial(c);
  if (!c->fd.valid()) return false;  // no socket now: the next pass tries again
  if (err != 0) connect_failed(c, err);
  return true;
}

bool HostLinks::send(int host, uint8_t tclass, const proto::host::Packet& p) {
  auto copy = [](void* src, uint8_t* dst, uint32_t len) {
    std::memcpy(dst, src, len);
    return true;
  };
  return send(host, tclass, p, copy, const_cast<uint8_t*>(p.payload));
}

bool HostLinks::send(int host, uint8_t tclass, const proto::host::Packet& p, FillPayload fill,
                     void* ctx) {
  if (host < 0 || static_cast<size_t>(host) >= out_.size() || host == dir_->self()) return false;
  const int dscp = tclass >> 2;
  auto& slot = out_[static_cast<size_t>(host)][static_cast<size_t>(dscp)];
  if (slot == nullptr) open(host, dscp);
  Conn* c = slot.get();
  if (c->tx.size() > kQueueLimit || queued_ > send_budget_) return false;
  const size_t total = proto::host::kPacketHeaderSize + p.hdr.length;
  uint8_t* at = c->tx.append(total);
  const size_t n = proto::host::encode_headers(p, at, total);
  if (n == 0 || n + p.payload_len != total ||
      (p.payload_len != 0 && !fill(ctx, at + n, p.payload_len))) {
    c->tx.unappend(total);
    return false;
  }
  queued_ += total;
  c->tx_peak = std::max(c->tx_peak, c->tx.size());
  // Written by flush(), once per connection however many packets were queued.
  if (c->authenticated && !c->dirty) {
    c->dirty = true;
    dirty_.push_back(c);
  }
  return true;
}

bool HostLinks::flush() {
  const bool did = !dirty_.empty();
  while (!dirty_.empty()) {
    Conn* c = dirty_.back();
    dirty_.pop_back();
    c->dirty = false;
    if (!write_conn(c)) close_conn(c, true);  // its handler may queue more: the loop takes it
  }
  return did;
}

size_t HostLinks::room(int host, uint8_t tclass) const {
  const Conn* c = out_[static_cast<size_t>(host)][tclass >> 2].get();
  const size_t mine = c == nullptr ? 0 : c->tx.size();
  const size_t link = mine >= kQueueLimit ? 0 : kQueueLimit - mine;
  const size_t all = queued_ >= send_budget_ ? 0 : send_budget_ - queued_;
  return std::min(link, all);
}

void HostLinks::close_conn(Conn* c, bool report) {
  const int host = c->host;
  if (c->outgoing) {
    uint64_t& retry = retry_ns_[static_cast<size_t>(host)];
    uint64_t backoff = c->hello_done ? kBackoffFirstNs : std::max(kBackoffFirstNs, backoff_ns_);
    backoff_ns_ = std::min(backoff * 2, kBackoffMaxNs);
    retry = now_ns() + backoff;
    spdlog::warn("link to {} down", dir_->hosts()[static_cast<size_t>(host)].name);
    place(host, c->dscp, nullptr);
    if (report) handler_->on_link_lost(host);
    return;
  }
  // What the peer still had queued on it is lost (it reset a stalled connection, say).
  const bool lost = report && c->hello_done;
  bury_incoming(std::find_if(in_.begin(), in_.end(), [c](const auto& p) { return p.get() == c; }));
  if (lost) handler_->on_link_lost(host);
}

void HostLinks::bury(std::unique_ptr<Conn> c) {
  if (c == nullptr) return;
  bury(std::move(c->probe));
  if (c->dirty) dirty_.erase(std::find(dirty_.begin(), dirty_.end(), c.get()));
  c->dirty = false;
  if (c->outgoing) queued_ -= c->tx.size();
  c->tx.clear();
  if (c->tls != nullptr) --handshakes_;
  c->tls.reset();
  if (c->fd.valid()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c->fd.get(), nullptr);
  c->fd.reset();
  buried_.push_back(std::move(c));
}

HostLinks::Incoming::iterator HostLinks::bury_incoming(Incoming::iterator it) {
  bury(std::move(*it));
  return in_.erase(it);
}

void HostLinks::connect_failed(Conn* c, int err) {
  const int host = c->host;
  close_conn(c, true);
  // A refusal is the peer host's kernel answering for a port nobody listens on; an outage
  // gives timeouts or unreachable routes instead.
  if (err == ECONNREFUSED) handler_->on_peer_gone(host);
}

void HostLinks::accept_all() {
  for (;;) {
    UniqueFd fd(accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;
    tune(fd.get());
    auto c = std::make_unique<Conn>(&tx_memory_);
    c->fd = std::move(fd);
    connected(c.get(), now_ns());
    proto::encode(hello_, c->tx.append(proto::host::kHelloSize), proto::host::kHelloSize);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.ptr = c.get();
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c->fd.get(), &ev);
    c->watching_out = true;
    in_.push_back(std::move(c));
  }
}

// The peer's Hello: who it is (incoming), whether we share a version, whether it restarted.
bool HostLinks::handle_hello(Conn* c, const uint8_t* bytes) {
  proto::host::Hello theirs;
  if (!proto::decode(bytes, proto::host::kHelloSize, &theirs)) return false;
  if (proto::host::negotiate(hello_, theirs) == 0) {
    spdlog::warn("host link: peer speaks no common version ({}-{})", theirs.version_min,
                 theirs.version_max);
    return false;
  }
  std::string name(theirs.host.data(), strnlen(theirs.host.data(), theirs.host.size()));
  int host = -1;
  const auto& hosts = dir_->hosts();
  for (size_t i = 0; i < hosts.size(); ++i)
    if (hosts[i].name == name) host = static_cast<int>(i);
  if (host < 0 || host == dir_->self() || (c->outgoing && host != c->host)) {
    spdlog::warn("host link: unexpected peer '{}'", name);
    return false;
  }
  // An incoming peer is who its certificate says (an outgoing one was checked at the
  // handshake against the host dialled).
  if (tls_ != nullptr && !c->outgoing && !LinkTls::names(c->peer_cert.get(), name)) {
    spdlog::warn(
        "host link: a peer whose certificate does not name it claimed to be '{}'; "
        "disconnected",
        name);
    ++refused_peers_;
    return false;
  }
  c->peer_cert.reset();
  c->host = host;
  c->hello_done = true;
  if (c->outgoing) {
    backoff_ns_ = 0;
    ++c->stats->linked;
    handler_->on_link_up(host);
  }
  uint32_t& known = incarnation_[static_cast<size_t>(host)];
  const bool restarted = known != 0 && known != theirs.incarnation;
  if (known != theirs.incarnation) {
    known = theirs.incarnation;
    spdlog::info("link with {} up", name);
    if (restarted) handler_->on_peer_restarted(host);
  }
  if (c->outgoing) return true;
  c->dscp = theirs.traffic_class >> 2;
  c->stats = &stats_[{host, c->dscp}];
  c->count(c->unnamed.tx_bytes, c->unnamed.rx_bytes);
  hurry_towards(host);
  if (supersede_incoming(c) && !restarted) handler_->on_link_lost(host);
  return true;
}

// A peer keeps one connection per class to us; a new one means it gave up the old one (it
// stalled or broke on its side), and whatever the old one still carries is stale.
bool HostLinks::supersede_incoming(const Conn* c) {
  bool any = false;
  for (auto it = in_.begin(); it != in_.end();) {
    const Conn* old = it->get();
    if (old != c && old->hello_done && old->host == c->host && old->dscp == c->dscp) {
      it = bury_incoming(it);
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

// The path from `host` works now: connections to it that wait out a backoff, or that are
// stalled, try at once instead of at their next turn.
void HostLinks::hurry_towards(int host) {
  const uint64_t now = now_ns();
  retry_ns_[static_cast<size_t>(host)] = now;
  backoff_ns_ = 0;
  for (auto& c : out_[static_cast<size_t>(host)]) {
    if (c == nullptr) continue;
    if (!c->fd.valid()) c->connect_at_ns = now;
    if (c->in_flight) {  // if it is stalled, its next check probes at once
      c->probe_at_ns = now;
      c->stalled_checks = std::max(c->stalled_checks, 1);
      next_check_ns_ = now;
    }
  }
}

// Every kStallCheckNs, each outgoing connection that has written since the kernel last held
// nothing unacknowledged is asked how its bytes fare (one getsockopt each); a stalled one
// gets a probe, a recovered one loses its probe.
void HostLinks::check_stalls(uint64_t now) {
  next_check_ns_ = now + kStallCheckNs;
  for (Conn* c : outgoing_) {
    if (!c->connected || !c->in_flight) continue;
    const Flight f = flight_of(c->fd.get());
    c->in_flight = f.outstanding;
    if (!f.stalled) {
      c->stalled_checks = 0;
      bury(std::move(c->probe));
      continue;
    }
    // One retransmission timeout may be a single loss that its retransmission repairs in a
    // round trip; still stalled a check later, the path is down (or the peer's host is).
    if (++c->stalled_checks < 2) continue;
    if (c->probe == nullptr || now >= c->probe_at_ns) start_probe(c, now);
  }
}

void HostLinks::start_probe(Conn* stalled, uint64_t now) {
  bury(std::move(stalled->probe));
  stalled->probe_at_ns = now + kProbeEveryNs;
  auto p = outgoing(stalled->host, stalled->dscp);
  p->probe_for = stalled;
  if (dial(p.get()) != 0) {
    bury(std::move(p));  // no route yet, say: the next probe is due in kProbeEveryNs
    return;
  }
  stalled->probe = std::move(p);
}

// The probe's connect finished. Established while the old connection is still stalled: the
// path is back and the old connection is only waiting out TCP's backed-off timer.
void HostLinks::probe_answered(Conn* p) {
  Conn* stalled = p->probe_for;
  if (connect_error(p->fd.get()) != 0 || !flight_of(stalled->fd.get()).stalled) {
    bury(std::move(stalled->probe));
    return;
  }
  replace_stalled(stalled);
}

void HostLinks::replace_stalled(Conn* stalled) {
  const int host = stalled->host;
  std::unique_ptr<Conn> fresh = std::move(stalled->probe);
  fresh->probe_for = nullptr;
  Conn* f = fresh.get();
  connected(f, now_ns());
  watch(f);
  reset_on_close(stalled->fd.get());
  place(host, stalled->dscp, std::move(fresh));
  spdlog::warn("link to {} stalled; replaced by a new connection",
               dir_->hosts()[static_cast<size_t>(host)].name);
  handler_->on_link_lost(host);
  // The dialling end speaks first in TLS: no event would start its handshake.
  if (!f->authenticated && !authenticate(f)) close_conn(f, false);
}

// Reads what is ready, up to kReadBudget: a chunk at a time into the scratch buffer all
// connections share, where whole packets are decoded and handed up. The part of a packet (or
// of the Hello) that a chunk cut off goes to c->rx, and the rest of it is read straight
// behind it there (its header tells how much), so those bytes are copied once, not carried
// back into the scratch buffer; or, if the handler places that packet's payload, straight
// where the handler wants it, and the packets of the same message after it have their
// headers read alone so that theirs are placed too. A connection holds at most one packet
// between reads, however busy. False: close the connection.
bool HostLinks::read_conn(Conn* c) {
  if (c->opener != nullptr) return read_records(c);
  if (c->placing.dest != nullptr) recheck_placement(c);
  for (size_t budget = 0; budget < kReadBudget;) {
    Conn::Placement& pl = c->placing;
    const bool placing = pl.len() != 0;
    const bool finishing = !placing && (!c->rx.empty() || c->headers_first);
    if (finishing && c->rx.size() >= proto::host::kPacketHeaderSize && start_placement(c)) continue;
    size_t want = kReadChunk;
    uint8_t* at = scratch_.get();
    if (placing) {
      want = pl.len() - pl.got;
      if (pl.dest != nullptr) at = pl.dest + pl.got;
      want = pl.dest != nullptr ? want : std::min(want, kReadChunk);
    } else if (finishing) {
      want = c->rx.empty() ? kHeadersFirstBytes : unit_size(c) - c->rx.size();
      at = c->rx.append(want);
    }
    const ssize_t n = recv(c->fd.get(), at, want, MSG_DONTWAIT);
    if (finishing) c->rx.unappend(want - static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;  // what arrived before the end was handled by earlier rounds
    budget += static_cast<size_t>(n);
    c->count(0, static_cast<size_t>(n));
    if (placing) {
      pl.got += static_cast<uint32_t>(n);
      if (pl.got == pl.len()) finish_placement(c);
      continue;
    }
    if (finishing) {
      if (c->rx.size() < unit_size(c)) continue;  // the header came: now the rest
      c->headers_first = false;
      size_t used = 0;
      if (!dispatch(c, c->rx.data(), c->rx.size(), &used)) return false;
      c->rx.consume(used);  // whole packets; the rest starts the next one
      continue;
    }
    const size_t len = static_cast<size_t>(n);
    size_t used = 0;
    if (!dispatch(c, at, len, &used)) return false;
    if (used != len) std::memcpy(c->rx.append(len - used), at + used, len - used);
  }
  return true;
}

bool HostLinks::start_placement(Conn* c) {
  namespace host = proto::host;
  host::Packet p;
  size_t headers = 0;
  if (!c->hello_done ||
      host::decode_headers(c->rx.data(), c->rx.size(), &p, &headers) != host::DecodeStatus::kOk)
    return false;  // a malformed header is dispatch()'s to refuse, once the packet is whole
  const size_t have = c->rx.size() - headers;
  if (have >= p.payload_len || p.payload_len - have < kPlaceAtLeast) return false;
  uint8_t* const dest = handler_->payload_destination(c->host, p);
  if (dest == nullptr) return false;
  std::memcpy(dest, c->rx.data() + headers, have);
  c->rx.unappend(have);
  c->placing = Conn::Placement{dest, static_cast<uint32_t>(have), p};
  return true;
}

void HostLinks::recheck_placement(Conn* c) {
  if (handler_->payload_destination(c->host, c->placing.packet) != c->placing.dest)
    c->placing.dest = nullptr;
}

void HostLinks::finish_placement(Conn* c) {
  proto::host::Packet p = c->placing.packet;
  const bool kept = c->placing.dest != nullptr;
  c->headers_first = kept && proto::host::continues_message(p.hdr.opcode & 0x1f);
  p.payload = c->placing.dest;
  c->placing = Conn::Placement{};
  c->rx.clear();
  if (kept)
    handler_->on_packet(c->host, p);
  else
    ++abandoned_placements_;
}

// Records are read into c->sealed_rx, a chunk at a time up to kReadBudget; every whole one is
// opened into c->rx, and the whole packets c->rx then holds are handed up (a packet may span
// records: its part waits in c->rx).
bool HostLinks::read_records(Conn* c) {
  for (size_t budget = 0; budget < kReadBudget;) {
    uint8_t* const at = c->sealed_rx.append(kReadChunk);
    const ssize_t n = recv(c->fd.get(), at, kReadChunk, MSG_DONTWAIT);
    c->sealed_rx.unappend(kReadChunk - static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n <= 0) return false;
    budget += static_cast<size_t>(n);
    c->count(0, static_cast<size_t>(n));
    if (!c->opener->open_queued(&c->sealed_rx, &c->rx)) {
      record_refused(c);
      return false;
    }
    size_t used = 0;
    if (!dispatch(c, c->rx.data(), c->rx.size(), &used)) return false;
    c->rx.consume(used);
  }
  return true;
}

size_t HostLinks::unit_size(const Conn* c) const {
  namespace host = proto::host;
  if (!c->hello_done) return host::kHelloSize;
  const size_t size = host::packet_size(c->rx.data(), c->rx.size());
  return size != 0 ? size : host::kPacketHeaderSize;
}

bool HostLinks::dispatch(Conn* c, const uint8_t* bytes, size_t len, size_t* used) {
  namespace host = proto::host;
  size_t off = 0;
  if (!c->hello_done && len >= host::kHelloSize) {
    if (!handle_hello(c, bytes)) return false;
    off = host::kHelloSize;
  }
  while (c->hello_done) {
    host::Packet p;
    size_t n = 0;
    const auto st = host::decode_packet(bytes + off, len - off, &p, &n);
    if (st == host::DecodeStatus::kNeedMore) break;
    if (st == host::DecodeStatus::kBad) {
      spdlog::warn("host link from {}: malformed packet; closing",
                   dir_->hosts()[static_cast<size_t>(c->host)].name);
      return false;
    }
    handler_->on_packet(c->host, p);
    off += n;
  }
  *used = off;
  return true;
}

bool HostLinks::write_conn(Conn* c) {
  if (!c->authenticated) return true;  // the Hello waits for the handshake
  for (;;) {
    if (c->sealer != nullptr && !seal_queued(c)) return false;
    ByteQueue& out = c->sealer != nullptr ? c->sealed_tx : c->tx;
    if (out.empty()) break;
    const ssize_t n = ::send(c->fd.get(), out.data(), out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      out.consume(static_cast<size_t>(n));
      c->count(static_cast<size_t>(n), 0);
      if (c->outgoing && c->sealer == nullptr) queued_ -= static_cast<size_t>(n);
      c->in_flight = c->outgoing;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  if (!c->outgoing) {
    c->tx.shrink(kQueueKeep);  // it carried just the Hello
    c->sealed_tx.shrink(kQueueKeep);
  } else if (tx_memory_ > queue_memory_limit()) {
    trim_queues(true);
  }
  const bool want_out = !c->tx.empty() || !c->sealed_tx.empty();
  if (want_out != c->watching_out) watch(c);
  return true;
}

bool HostLinks::seal_queued(Conn* c) {
  size_t taken = 0;
  const bool ok = c->sealer->seal_queued(&c->tx, &c->sealed_tx, kSealAhead, &taken);
  if (c->outgoing) queued_ -= taken;
  if (!ok) {
    spdlog::warn("host link {} {}: cannot seal a record; disconnected", c->outgoing ? "to" : "from",
                 peer_name(c));
  }
  return ok;
}

void HostLinks::trim_queues(bool all) {
  for (Conn* c : outgoing_) {
    if (all || c->tx_peak * 4 <= c->tx.capacity()) {
      c->tx.shrink(kQueueKeep);
      c->sealed_tx.shrink(kQueueKeep);
    }
    c->tx_peak = c->tx.size();
  }
}

uint64_t HostLinks::next_wakeup_ns() const {
  uint64_t next = 0;
  auto consider = [&next](uint64_t t) {
    t = std::max<uint64_t>(t, 1);
    if (next == 0 || t < next) next = t;
  };
  for (const Conn* c : outgoing_) {
    if (!c->fd.valid()) consider(c->connect_at_ns);
    if (c->in_flight) consider(next_check_ns_);
    if (c->tls != nullptr) consider(c->handshake_deadline_ns);
  }
  if (handshakes_ > 0)
    for (const auto& c : in_)
      if (c->tls != nullptr) consider(c->handshake_deadline_ns);
  return next;
}

void HostLinks::connected(Conn* c, uint64_t now) {
  c->connected = true;
  if (tls_ == nullptr) {
    c->authenticated = true;
    return;
  }
  c->tls = tls_->start(c->fd.get(), c->outgoing);
  c->handshake_deadline_ns = now + kHandshakeNs;
  ++handshakes_;
}

bool HostLinks::authenticate(Conn* c) {
  std::string why;
  const std::string peer = peer_name(c);
  const LinkTls::Step step =
      c->tls == nullptr ? LinkTls::Step::kFailed : LinkTls::handshake(c->tls.get(), &why);
  if (step == LinkTls::Step::kWantRead || step == LinkTls::Step::kWantWrite) {
    // Watched for output only while TLS must write: a writable socket would otherwise wake
    // the loop on every pass until the peer answers.
    c->handshake_wants_out = step == LinkTls::Step::kWantWrite;
    if (c->handshake_wants_out != c->watching_out) watch(c);
    return true;
  }
  if (step == LinkTls::Step::kFailed) {
    spdlog::warn("host link: {} failed to authenticate: {}; disconnected", peer, why);
    ++refused_peers_;
    return false;
  }
  LinkTls::Cert cert = LinkTls::peer_certificate(c->tls.get());
  if (tls_->encrypts()) {
    RecordCipher::Pair keys;
    if (!RecordCipher::from_session(c->tls.get(), c->outgoing, &keys, &why)) {
      spdlog::warn("host link {} {}: {}; disconnected", c->outgoing ? "to" : "from", peer, why);
      return false;
    }
    c->sealer = std::move(keys.seal);
    c->opener = std::move(keys.open);
  }
  c->tls.reset();
  --handshakes_;
  c->handshake_wants_out = false;
  if (c->outgoing && !LinkTls::names(cert.get(), peer)) {
    spdlog::warn(
        "host link: the certificate of the router at {}'s address does not name it; "
        "disconnected",
        peer);
    ++refused_peers_;
    return false;
  }
  c->peer_cert = std::move(cert);
  c->authenticated = true;
  const uint64_t took_ns = now_ns() + kHandshakeNs - c->handshake_deadline_ns;
  spdlog::info("host link {} {}: authenticated in {:.1f} ms", c->outgoing ? "to" : "from", peer,
               static_cast<double>(took_ns) / 1e6);
  watch(c);
  return true;
}

void HostLinks::record_refused(Conn* c) {
  ++refused_records_;
  spdlog::warn("host link {} {}: a record failed its check; disconnected",
               c->outgoing ? "to" : "from", peer_name(c));
}

std::string HostLinks::peer_name(const Conn* c) const {
  return c->host < 0 ? "a peer" : dir_->hosts()[static_cast<size_t>(c->host)].name;
}

void HostLinks::expire_handshakes(uint64_t now) {
  for (size_t i = 0; i < outgoing_.size();) {
    Conn* c = outgoing_[i];
    if (c->tls != nullptr && now >= c->handshake_deadline_ns) {
      spdlog::warn("host link: {} did not finish its handshake in time; disconnected",
                   dir_->hosts()[static_cast<size_t>(c->host)].name);
      ++refused_peers_;
      close_conn(c, true);  // takes it out of outgoing_
      continue;
    }
    ++i;
  }
  for (auto it = in_.begin(); it != in_.end();) {
    if ((*it)->tls != nullptr && now >= (*it)->handshake_deadline_ns) {
      spdlog::warn("host link: a peer did not finish its handshake in time; disconnected");
      ++refused_peers_;
      it = bury_incoming(it);
    } else {
      ++it;
    }
  }
}

bool HostLinks::poll() {
  bool did = false;
  const uint64_t now = now_ns();
  // connect_due may bury a connection (a refused connect) and so shrink outgoing_.
  for (size_t i = 0; i < outgoing_.size();) {
    Conn* c = outgoing_[i];
    did |= connect_due(c, now);
    if (i < outgoing_.size() && outgoing_[i] == c) ++i;
  }
  if (now >= next_check_ns_) check_stalls(now);
  if (handshakes_ > 0) expire_handshakes(now);
  if (now >= next_trim_ns_) {
    trim_queues(false);
    next_trim_ns_ = now + kTrimEveryNs;
  }
  epoll_event events[64];
  int n = epoll_wait(epoll_.get(), events, 64, 0);
  for (int i = 0; i < n; ++i) {
    auto* c = static_cast<Conn*>(events[i].data.ptr);
    did = true;
    if (c == nullptr) {
      accept_all();
      continue;
    }
    if (!c->fd.valid()) continue;  // buried earlier in this pass
    if (c->probe_for != nullptr) {
      probe_answered(c);
      continue;
    }
    if (!c->connected) {
      if (const int err = connect_error(c->fd.get()); err != 0) {
        connect_failed(c, err);
        continue;
      }
      connected(c, now);
    }
    if (!c->authenticated) {
      if (!authenticate(c)) {
        close_conn(c, true);
        continue;
      }
      if (!c->authenticated) continue;  // the handshake goes on
    }
    const bool readable = (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0;
    if (readable && !read_conn(c)) {
      close_conn(c, true);
      continue;
    }
    if ((!c->tx.empty() || !c->sealed_tx.empty()) && !write_conn(c)) close_conn(c, true);
  }
  did |= flush();
  buried_.clear();
  return did;
}

}  // namespace wharf::links
