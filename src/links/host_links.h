// TCP connections between this router and the other routers of the cluster
// (docs/ARCHITECTURE.md, "Between hosts"; wire format in docs/wire-protocol.md section 2).
//
// A router opens one connection to each peer it has traffic for, per traffic class in use,
// on demand, and sends everything for that peer and class on it; it receives on the
// connections the peer opened. A host pair therefore shares a few connections however many
// QPs talk (SRC: state grows with hosts, not with QP pairs). Each connection's packets carry
// the DSCP of its class (the upper six bits of the IBA traffic class, as RoCE v2 maps it).
// Both ends start with a Hello and agree on a version. With a LinkTls (links/link_tls.h)
// each connection first runs a TLS 1.3 handshake that authenticates both routers: nothing is
// written to or read from it as a link before that, a peer whose certificate the cluster CA
// did not sign or that names another host than its Hello is disconnected, and so is one that
// has not finished the handshake within kHandshakeNs. None of these changes any state. With
// a LinkTls that encrypts, everything after the handshake goes in records sealed with keys
// the handshake derived (links/link_records.h), and a record that fails its check closes the
// connection (counted: refused_records).
// A broken outgoing connection is reopened with exponential backoff; whatever was queued on
// it is dropped (the QPs above retransmit what was not acknowledged).
//
// A connection can also stall without breaking: while the path is cut, TCP retransmits on a
// timer that doubles (0.2, 0.4, 0.8, 1.6 s ...), so after a 2 s cut it may stay silent for
// another second. So an outgoing connection whose kernel has unacknowledged bytes that went
// again on a retransmission timeout, at two looks kStallCheckNs apart, is probed: a new
// connection is attempted every kProbeEveryNs, and the first that is established while the
// old one is still stalled replaces it; the old one is reset.
// The peer, seeing a new connection of the same class from us, drops the old one. Either
// way both ends report on_link_lost, and the QPs above resend at once.
//
// A handler may take a packet's payload where it is to go (Handler::payload_destination): on
// a plain connection the payload is then received there rather than into the link's buffer
// and copied (a READ response into the requester's memory: one copy of each byte less).
//
// Single-threaded and nonblocking: the router's loop calls poll(); epoll_fd() becomes
// readable when poll() has something to do, for the router's sleeping epoll_wait.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "links/byte_queue.h"
#include "links/cluster.h"
#include "links/link_tls.h"
#include "proto/host_wire.h"

namespace wharf::links {

class HostLinks {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // A packet from host `host`; p.payload is valid only during the call.
    virtual void on_packet(int host, const proto::host::Packet& p) = 0;
    // Where the payload of the packet from `host` whose headers `p` holds (p.payload_len
    // bytes, p.payload null) is to go, if the handler wants it received straight there rather
    // than copied from the link's buffer: writable memory of p.payload_len bytes that may take
    // any bytes until on_packet, or nullptr. Asked again (same headers) before every later read
    // of that payload; the first answer that differs drops the packet (the memory is not
    // written again). on_packet then gets it with p.payload at the destination.
    virtual uint8_t* payload_destination(int host, const proto::host::Packet& p) {
      (void)host, (void)p;
      return nullptr;
    }
    // Packets between us and `host` may have been lost: our connection to it broke, stalled
    // or could not be opened (what was queued on it is gone), or `host` replaced its
    // connection to us (what it had queued on the old one is gone).
    virtual void on_link_lost(int host) = 0;
    // `host`'s router is a new incarnation (it restarted): nothing of its old state exists.
    virtual void on_peer_restarted(int host) = 0;
    // Our connection to `host` (the one that carries what we send it) said Hello: its
    // router answers again, and packets can go to it.
    virtual void on_link_up(int host) { (void)host; }
    // `host` refused our connection: no router listens there (it died or was stopped; one
    // that restarts with its state comes back under the same incarnation).
    virtual void on_peer_gone(int host) = 0;
  };

  // `send_budget`: the bytes all outgoing queues together may hold (see kSendBudget).
  // `tls`: authenticates every connection (nullptr: none; it must outlive the links).
  // `incarnation`: what this router's Hellos name (0: fresh_incarnation()); a router that
  // continues its predecessor's state (router/kept_remote_states.h) names the same one.
  HostLinks(const AddressDirectory* dir, uint64_t node_guid, Handler* handler,
            size_t send_budget = kSendBudget, const LinkTls* tls = nullptr,
            uint32_t incarnation = 0);
  // A new incarnation: odd, so never 0 ("never heard from").
  static uint32_t fresh_incarnation();
  ~HostLinks();
  HostLinks(const HostLinks&) = delete;
  HostLinks& operator=(const HostLinks&) = delete;

  // Listens on this host's address and port. Returns 0 or an errno.
  int start();
  int epoll_fd() const { return epoll_.get(); }
  // This router's incarnation, as its Hellos name it.
  uint32_t own_incarnation() const { return hello_.incarnation; }
  // The incarnation of `host`'s router as its last Hello named it (0: never heard from).
  uint32_t incarnation(int host) const { return incarnation_[static_cast<size_t>(host)]; }
  // When a connection to `host` may next be attempted (CLOCK_MONOTONIC ns; past: now).
  uint64_t reconnect_at_ns(int host) const { return retry_ns_[static_cast<size_t>(host)]; }

  // Queues a finished packet (proto::host::finish_packet) for `host` on the connection of
  // traffic class `tclass`, opening it if needed. False when that connection's queue is full,
  // or all queues together hold the send budget: the caller retries later. Nothing is written
  // before flush() (or poll(), which ends with one): a pass of the router's loop costs one send()
  // per connection, not one per packet.
  bool send(int host, uint8_t tclass, const proto::host::Packet& p);
  // The same, but the payload (p.payload_len bytes; p.payload is not read) is written into the
  // queue by fill(ctx, dst, len), so it is copied once; fill returns false to drop the packet.
  using FillPayload = bool (*)(void* ctx, uint8_t* dst, uint32_t len);
  bool send(int host, uint8_t tclass, const proto::host::Packet& p, FillPayload fill, void* ctx);
  // Bytes that may still be queued for `host` and `tclass` before send() refuses.
  size_t room(int host, uint8_t tclass) const;
  // Bytes queued on all outgoing connections together.
  size_t queued() const { return queued_; }
  // Memory the send queues hold (their capacity), queued bytes included.
  size_t queue_memory() const { return tx_memory_; }

  // Writes what send() queued since the last flush, one send() per connection. True if
  // anything was queued.
  bool flush();
  // Accepts, connects, reads, dispatches and writes whatever is ready, then flushes. True if
  // anything moved.
  bool poll();
  // When poll() must run next even without input (CLOCK_MONOTONIC ns), or 0 if never: the
  // earliest pending (re)connect attempt, or the next look for stalled connections while any
  // has bytes in flight. epoll_fd() does not signal these.
  uint64_t next_wakeup_ns() const;

  // Credits: one connection queues at most kQueueLimit bytes, and all of them together at
  // most the send budget, so a router's send queues stay bounded however many peers are
  // busy (512 peers took 2 GiB before; docs/PERFORMANCE.md has the bound). A full queue
  // pushes back on the QPs above.
  static constexpr size_t kQueueLimit = 4u << 20;
  static constexpr size_t kSendBudget = 32u << 20;
  // Memory of the send queues: a queue keeps what it grew to while its connection is busy
  // (giving it back each time the queue drained made a steady stream allocate and fault in
  // megabytes again and again); every kTrimEveryNs a queue that used at most a quarter of its
  // memory since the last look gives the rest back, down to kQueueKeep (ByteQueue::shrink).
  // If the queues together hold more than kMemoryPerBudget x the send budget (plus
  // kQueueKeep each), every queue gives back what it does not use at once, so they hold at
  // most that however many peers are busy.
  static constexpr size_t kQueueKeep = 64u << 10;
  static constexpr uint64_t kTrimEveryNs = 250'000'000;
  static constexpr size_t kMemoryPerBudget = 4;
  // How often connections with bytes in flight are looked at for a stall.
  static constexpr uint64_t kStallCheckNs = 50'000'000;
  // A probe not established by then is abandoned for a new one (its SYN was lost).
  static constexpr uint64_t kProbeEveryNs = 100'000'000;
  // A connection whose TLS handshake has not finished by then is closed.
  static constexpr uint64_t kHandshakeNs = 2'000'000'000;
  // Packets dropped because their payload_destination changed while they were received
  // (their transport above recovers them as lost), since start.
  uint64_t abandoned_placements() const { return abandoned_placements_; }
  // Peers that failed to authenticate, since start (each is logged).
  uint64_t refused_peers() const { return refused_peers_; }
  // With `encrypt`: connections closed because a record failed its check (changed or
  // forged on the way), since start (each is logged).
  uint64_t refused_records() const { return refused_records_; }

  // What the connections between this router and one peer in one traffic class moved since
  // start, both ways (the one we open carries our packets, the peer's carries its own): the
  // bytes written to and read from their sockets (with `encrypt`, the records' bytes).
  struct LinkStats {
    uint64_t tx_bytes = 0;
    uint64_t rx_bytes = 0;
    uint64_t linked = 0;  // times our connection was linked (Hellos exchanged): 1 + reconnects
    // What the transport above counted of its traffic to the peer in this class
    // (count_transport): request packets it sent again, RNR NAKs the peer answered with.
    uint64_t retransmitted_packets = 0;
    uint64_t rnr_naks = 0;
  };
  // The transport above sent `retransmitted` request packets again to `host` in traffic class
  // `tclass`, or received `rnr_naks` RNR NAKs from it (LinkStats).
  void count_transport(int host, uint8_t tclass, uint64_t retransmitted, uint64_t rnr_naks);
  // fn(host, dscp, stats, up) for every peer and class that had a connection; up: ours is
  // linked now.
  void for_each_link(
      const std::function<void(int host, int dscp, const LinkStats& stats, bool up)>& fn) const;

 private:
  struct Conn;
  void accept_all();
  static constexpr int kClasses = 64;  // one connection per DSCP value at most
  // A new outgoing connection to `host` for class `dscp`, its Hello queued, not yet dialled.
  std::unique_ptr<Conn> outgoing(int host, int dscp);
  void open(int host, int dscp);
  int dial(Conn* c);
  bool connect_due(Conn* c, uint64_t now_ns);
  void close_conn(Conn* c, bool report);
  // An outgoing connection failed with `err` before it was established.
  void connect_failed(Conn* c, int err);
  bool read_conn(Conn* c);
  // Payload placement (Handler::payload_destination), for plain connections: c->rx holds an
  // incomplete packet whose headers are whole; if the handler takes its payload, what rx has
  // of it moves there and the rest is received there (true).
  bool start_placement(Conn* c);
  // Before a later read of a placed payload: the handler still wants it where it went.
  void recheck_placement(Conn* c);
  // The placed payload is all there: the packet goes up (or is dropped if abandoned).
  void finish_placement(Conn* c);
  // read_conn for a connection that carries records (`encrypt`).
  bool read_records(Conn* c);
  // The bytes of the Hello, or of the packet that c->rx begins (its header, while that is
  // incomplete), that read_conn completes in c->rx.
  size_t unit_size(const Conn* c) const;
  // Handles the Hello (if due) and the whole packets at the start of bytes[0, len); *used is
  // how many bytes they took. False: close the connection.
  bool dispatch(Conn* c, const uint8_t* bytes, size_t len, size_t* used);
  bool write_conn(Conn* c);
  // With `encrypt`: seals what c->tx holds into c->sealed_tx, up to kSealAhead bytes of
  // records there. False: sealing failed; close the connection.
  bool seal_queued(Conn* c);
  // c is connected: starts its TLS handshake, or with no LinkTls marks it authenticated.
  void connected(Conn* c, uint64_t now_ns);
  // Moves c's handshake on. False: the peer failed; close the connection.
  bool authenticate(Conn* c);
  // c's session refused a record: counts and logs it (the caller closes c).
  void record_refused(Conn* c);
  // The host c leads to or came from, by name ("a peer" before an incoming Hello).
  std::string peer_name(const Conn* c) const;
  // Closes connections whose handshake outlived kHandshakeNs.
  void expire_handshakes(uint64_t now_ns);
  // The peer's Hello, the kHelloSize bytes at `bytes`. False: close the connection.
  bool handle_hello(Conn* c, const uint8_t* bytes);
  void watch(Conn* c);
  // Gives back send-queue memory: of every outgoing queue if `all`, else of those that used at
  // most a quarter of it since the last trim.
  void trim_queues(bool all);
  size_t queue_memory_limit() const {
    return kMemoryPerBudget * send_budget_ + kQueueKeep * outgoing_.size();
  }
  // Stalled connections: probing them, and replacing one by its probe.
  void check_stalls(uint64_t now_ns);
  void start_probe(Conn* stalled, uint64_t now_ns);
  void probe_answered(Conn* probe);
  void replace_stalled(Conn* stalled);
  // The peer's new connection of `c`'s class makes its older ones stale. True if any was.
  bool supersede_incoming(const Conn* c);
  // `host` reached us: whatever waits to reach it tries now.
  void hurry_towards(int host);
  // Takes a connection (and its probe) out of service. Its memory lives until the end of
  // poll(), because events already fetched in this pass may still name it.
  void bury(std::unique_ptr<Conn> c);
  // Makes c (may be null) the connection to `host` for `dscp`, burying the one it replaces.
  void place(int host, int dscp, std::unique_ptr<Conn> c);
  using Incoming = std::vector<std::unique_ptr<Conn>>;
  // Buries the incoming connection at `it`; returns the one after it.
  Incoming::iterator bury_incoming(Incoming::iterator it);

  const AddressDirectory* dir_;
  Handler* handler_;
  const LinkTls* tls_;
  uint64_t refused_peers_ = 0;
  uint64_t refused_records_ = 0;
  uint64_t abandoned_placements_ = 0;
  size_t handshakes_ = 0;  // connections whose handshake is under way
  // The capacity of every connection's tx queue (declared before them: outlives them).
  size_t tx_memory_ = 0;
  proto::host::Hello hello_;
  UniqueFd epoll_;
  UniqueFd listen_;
  // By host index and DSCP: the connections we opened; outgoing_ lists them, so passes look
  // at the connections there are, not at every host and class (place() keeps both).
  std::vector<std::array<std::unique_ptr<Conn>, kClasses>> out_;
  std::vector<Conn*> outgoing_;
  Incoming in_;                        // connections peers opened
  std::vector<Conn*> dirty_;           // connected, with packets queued since the last flush
  std::vector<uint32_t> incarnation_;  // last seen per host (0: never)
  std::vector<uint64_t> retry_ns_;     // per host: no connect attempt before this
  uint64_t backoff_ns_ = 0;            // grows while connects keep failing
  uint64_t next_check_ns_ = 0;         // when check_stalls() runs next
  uint64_t next_trim_ns_ = 0;          // when trim_queues() runs next
  size_t send_budget_;
  size_t queued_ = 0;  // bytes in the tx queues of outgoing connections
  std::vector<std::unique_ptr<Conn>> buried_;
  // By (host, DSCP); nodes stay put, so connections keep pointers to theirs.
  std::map<std::pair<int, int>, LinkStats> stats_;
  // read_conn's buffer for a chunk read from a socket, shared by all connections.
  std::unique_ptr<uint8_t[]> scratch_;
};

}  // namespace wharf::links
