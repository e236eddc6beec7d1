// The routers' part of express lines (issue #18 item 5; proto/express_wire.h): for an RC QP
// connected to a QP on another host, the two routers set up one TCP connection between the
// hosts and hand its ends to the two libraries, which then move the QPs' small SENDs
// themselves (abi/verbs/express.h). The routers keep the policy: only they open the
// connection, from the host's own network namespace, with the QP's DSCP; only a QP allowed
// to (RC, no rate limit) gets the right to send on it; and the accepting router hands its end
// only to the QP the Hello names, if that QP names the connecting one as its peer.
// With authenticated links (links/link_tls.h, `--link-security auth`) a line is authenticated
// the same way before its Hello: a mutual TLS 1.3 handshake against the cluster CA, after which
// the connecting router's certificate must name the host its Hello claims, and the accepting
// router's the host it dialled; the line then carries plaintext, as an `auth` link does. A
// connection that fails is closed, logged and counted (refused_lines) and no QP sees it.
//
// Of the two routers, the one with the lower host index connects, when its QP reaches RTS,
// to the other's express port (its host-link port + 1). The accepting router keeps a
// connection whose QP is not ready yet (not in RTR or RTS, or not yet pointing back) for
// kPendingNs and looks again on every pass. A connection ready for its QP is offered to the
// library through the QP's line (shm::QpDirect::express_offer); the library takes it with
// TakeExpress. The router keeps its copy of the descriptor until the QP is reset or goes.
//
// Single-threaded and nonblocking: epoll_fd() becomes readable when there is something to
// do, and the router's loop then calls poll_st(true) (it watches the fd with its control
// input, so a line's set-up may wait up to one control period behind busy data work).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "links/cluster.h"
#include "links/link_tls.h"
#include "proto/express_wire.h"

namespace wharf::router {

class HostObjects;
class RemotePath;
struct Qp;
struct RouterConfig;

class ExpressBroker {
 public:
  // How long an accepted connection waits for its QP to become ready.
  static constexpr uint64_t kPendingNs = 5'000'000'000;

  // remote: the engine whose QPs the lines serve (it owns the broker). tls: authenticates
  // every line (nullptr: none; it must outlive the broker).
  ExpressBroker(const RouterConfig& cfg, const HostObjects& objects, const RemotePath& remote,
                const links::AddressDirectory* dir, uint32_t incarnation,
                const links::LinkTls* tls);
  // Listens on this host's express port. Returns 0 or an errno.
  int start();
  int epoll_fd() const { return epoll_.get(); }

  // `qp` (RC) reached RTS with its peer on `host`: the connecting side dials now (unless
  // RouterConfig::express_lines lines are open or being set up).
  void qp_ready_st(Qp* qp, int host);
  // qp was reset or destroyed: its line, if it had one, is closed (the router's copy).
  void forget_st(Qp* qp);
  // Finishes connects, accepts, reads Hellos and offers ready connections. True if anything
  // moved. `input`: epoll_fd() was readable; without it only connections being set up are
  // looked at (none: no system call).
  bool poll_st(bool input);
  // Connections that failed to authenticate (handshake, or a certificate naming another host
  // than the line's), since start (each is logged).
  uint64_t refused_lines() const { return refused_lines_; }

 private:
  struct Pending {
    UniqueFd fd;
    bool outgoing = false;
    bool connected = false;
    int host = -1;              // outgoing: the peer; incoming: from the Hello
    uint32_t from_address = 0;  // incoming: the peer's address (host order)
    uint32_t src_qpn = 0;       // ours (incoming: once the Hello is read)
    uint32_t dst_qpn = 0;       // the peer's
    uint8_t hello[proto::express::kHelloSize] = {};
    size_t done = 0;  // Hello bytes written (outgoing) or read (incoming)
    uint64_t deadline_ns = 0;
    uint32_t events = 0;             // what epoll watches the fd for
    bool authenticated = false;      // the handshake (if any) is done
    links::LinkTls::Session tls;     // the handshake under way
    links::LinkTls::Cert peer_cert;  // incoming, authenticated: checked against its Hello
  };
  void accept_all(uint64_t now);
  // One step of p; false when p is finished (offered) or failed: remove it.
  bool step(Pending* p, uint64_t now);
  // Moves p's handshake on (or, without a LinkTls, marks it authenticated). False: the peer
  // failed; close it.
  bool authenticate(Pending* p);
  // Counts and logs a connection that failed to authenticate.
  void refuse(const Pending& p, const std::string& why);
  // Has epoll watch p's fd for `events`.
  void watch(Pending* p, uint32_t events);
  // The QP `p` is for, if it is ready for its express line now.
  Qp* match(const Pending& p) const;
  void offer(Qp* qp, UniqueFd fd);
  // Whether another line may be set up: lines held by QPs and being set up stay below
  // RouterConfig::express_lines.
  bool room_for_a_line() const;

  const RouterConfig& cfg_;
  const HostObjects& objects_;
  const RemotePath& remote_;
  const links::AddressDirectory* dir_;
  uint32_t incarnation_;
  const links::LinkTls* tls_;
  uint64_t refused_lines_ = 0;
  UniqueFd epoll_;
  UniqueFd listen_;
  std::vector<Pending> pending_;
  uint32_t lines_ = 0;  // QPs holding a line (QpExtras::express_fd)
};

}  // namespace wharf::router
