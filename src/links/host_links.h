// TCP connections between this router and the other routers of the cluster
// (docs/ARCHITECTURE.md, "Between hosts"; wire format in docs/wire-protocol.md section 2).
//
// A router opens one connection to each peer it has traffic for, per traffic class in use,
// on demand, and sends everything for that peer and class on it; it receives on the
// connections the peer opened. A host pair therefore shares a few connections however many
// QPs talk (SRC: state grows with hosts, not with QP pairs). Each connection's packets carry
// the DSCP of its class (the upper six bits of the IBA traffic class, as RoCE v2 maps it).
// Both ends start with a Hello and agree on a version.
// A broken outgoing connection is reopened with exponential backoff; whatever was queued on
// it is dropped (the QPs above retransmit what was not acknowledged).
//
// Single-threaded and nonblocking: the router's loop calls poll(); epoll_fd() becomes
// readable when poll() has something to do, for the router's sleeping epoll_wait.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/unique_fd.h"
#include "links/byte_queue.h"
#include "links/cluster.h"
#include "proto/host_wire.h"

namespace wharf::links {

class HostLinks {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // A packet from host `host`; p.payload is valid only during the call.
    virtual void on_packet(int host, const proto::host::Packet& p) = 0;
    // Our connection to `host` broke or could not be opened (queued packets are gone).
    virtual void on_link_down(int host) = 0;
    // `host`'s router is a new incarnation (it restarted): nothing of its old state exists.
    virtual void on_peer_restarted(int host) = 0;
    // `host` refused our connection: no router listens there (it died or was stopped), so
    // nothing of its state exists any more.
    virtual void on_peer_gone(int host) = 0;
  };

  HostLinks(const AddressDirectory* dir, uint64_t node_guid, Handler* handler);
  ~HostLinks();
  HostLinks(const HostLinks&) = delete;
  HostLinks& operator=(const HostLinks&) = delete;

  // Listens on this host's address and port. Returns 0 or an errno.
  int start();
  int epoll_fd() const { return epoll_.get(); }
  // The incarnation of `host`'s router as its last Hello named it (0: never heard from).
  uint32_t incarnation(int host) const { return incarnation_[static_cast<size_t>(host)]; }
  // When a connection to `host` may next be attempted (CLOCK_MONOTONIC ns; past: now).
  uint64_t reconnect_at_ns(int host) const { return retry_ns_[static_cast<size_t>(host)]; }

  // Queues a finished packet (proto::host::finish_packet) for `host` on the connection of
  // traffic class `tclass`, opening it if needed. False when that connection's queue is full:
  // the caller retries later. Nothing is written before flush() (or poll(), which ends with
  // one): a pass of the router's loop costs one send() per connection, not one per packet.
  bool send(int host, uint8_t tclass, const proto::host::Packet& p);
  // The same, but the payload (p.payload_len bytes; p.payload is not read) is written into the
  // queue by fill(ctx, dst, len), so it is copied once; fill returns false to drop the packet.
  using FillPayload = bool (*)(void* ctx, uint8_t* dst, uint32_t len);
  bool send(int host, uint8_t tclass, const proto::host::Packet& p, FillPayload fill, void* ctx);
  // Bytes that may still be queued for `host` and `tclass` before send() refuses.
  size_t room(int host, uint8_t tclass) const;

  // Writes what send() queued since the last flush, one send() per connection. True if
  // anything was queued.
  bool flush();
  // Accepts, connects, reads, dispatches and writes whatever is ready, then flushes. True if
  // anything moved.
  bool poll();
  // When poll() must run next even without input: the earliest pending (re)connect attempt
  // (CLOCK_MONOTONIC ns), or 0 if none. epoll_fd() does not signal these.
  uint64_t next_connect_ns() const;

  static constexpr size_t kQueueLimit = 4u << 20;

 private:
  struct Conn;
  void accept_all();
  static constexpr int kClasses = 64;  // one connection per DSCP value at most
  void open(int host, int dscp);
  bool connect_due(Conn* c, uint64_t now_ns);
  void close_conn(Conn* c, bool report);
  // An outgoing connection failed with `err` before it was established.
  void connect_failed(Conn* c, int err);
  bool read_conn(Conn* c);
  bool write_conn(Conn* c);
  bool handle_hello(Conn* c);
  void watch(Conn* c);

  const AddressDirectory* dir_;
  Handler* handler_;
  proto::host::Hello hello_;
  UniqueFd epoll_;
  UniqueFd listen_;
  // By host index and DSCP: the connections we opened.
  std::vector<std::array<std::unique_ptr<Conn>, kClasses>> out_;
  std::vector<std::unique_ptr<Conn>> in_;  // connections peers opened
  std::vector<Conn*> dirty_;               // connected, with packets queued since the last flush
  std::vector<uint32_t> incarnation_;      // last seen per host (0: never)
  std::vector<uint64_t> retry_ns_;         // per host: no connect attempt before this
  uint64_t backoff_ns_ = 0;                // grows while connects keep failing
};

}  // namespace wharf::links
