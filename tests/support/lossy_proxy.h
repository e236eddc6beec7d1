// A TCP proxy on loopback that stands between two routers' host links (links/host_links.h)
// and makes the path between them lossy: it loses, duplicates and reorders whole packets, and
// cuts its connections on demand. Tests of the host-to-host engine (router_remote_lossy_test)
// name its port as the peer's in one host's cluster file, so that host's connections to the
// peer go through it.
//
// Why whole packets inside one TCP stream are a faithful fault: a host link's stream is a
// Hello each way, then packets that are nothing but a length-prefixed header and payload
// (proto/host_wire.h, docs/wire-protocol.md section 2). There is no link-level sequence
// number, checksum or credit on the wire (a link's credits are the sender's own queue
// bytes), so a packet taken out of the stream, repeated or moved behind the next one leaves
// the stream as valid as before, and the receiving router sees exactly what the RC engine
// would see of a lossy network. The Hellos are never touched (a connection without one is
// closed by design, which is a cut, not a loss). Packets are split with the project's own
// decoder (proto::host::decode_packet); a stream it cannot decode is passed on unchanged
// and counted as malformed, so a test can check that it never happened.
//
// Faults follow a deterministic pattern over the packets the proxy carries (counted from 1,
// both directions, across connections). So that every run ends, a packet that was dropped or
// held back once passes untouched ever after: with a fixed pattern, a go-back-N window whose
// length is a multiple of the pattern's period could otherwise lose its first packet on
// every resend for ever (real loss is random and does not repeat like that).
//
// Single-threaded and nonblocking: pump() moves whatever is ready and returns; the test's
// loop calls it between the hosts' passes (the hosts' own I/O is as nonblocking), so no
// locks are needed and nothing outlives the test. Destruction closes every socket.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "common/clock.h"
#include "common/unique_fd.h"
#include "proto/host_wire.h"

namespace wharf::test_support {

// What a LossyProxy does to the packets it carries. Packet n (see above) is dropped when n is
// a multiple of drop_every, else sent twice when a multiple of duplicate_every, else held
// back behind the next packet of its direction when a multiple of swap_every (0: never).
struct Faults {
  uint32_t drop_every = 0;
  uint32_t duplicate_every = 0;
  uint32_t swap_every = 0;
  bool black_hole = false;  // drops every packet, even one dropped before
};

struct FaultCounts {
  uint64_t packets = 0;     // packets decoded, in both directions
  uint64_t dropped = 0;     // the black hole's too
  uint64_t duplicated = 0;  // sent twice
  uint64_t swapped = 0;     // sent after the packet that followed it
  uint64_t accepted = 0;    // connections accepted (and forwarded)
  uint64_t malformed = 0;   // streams that could not be decoded (then passed on unchanged)
};

class LossyProxy {
 public:
  // Listens on 127.0.0.1 at a port the kernel picks (made before the routers' ports are
  // chosen, it cannot take one of them).
  LossyProxy() {
    listen_.reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    sockaddr_in a = loopback(0);
    socklen_t len = sizeof(a);
    if (!listen_.valid() || bind(listen_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(listen_.get(), 16) != 0 ||
        getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;  // port() is 0: the test's cluster then names no reachable host
    port_ = ntohs(a.sin_port);
  }
  LossyProxy(const LossyProxy&) = delete;
  LossyProxy& operator=(const LossyProxy&) = delete;

  // The port it listens on; 0 if it could not listen.
  int port() const { return port_; }
  // Each connection it accepts from now on goes on to 127.0.0.1:port.
  void forward_to(int port) { target_port_ = port; }
  // Takes effect from the next packet on.
  void set_faults(const Faults& f) { faults_ = f; }
  const FaultCounts& counts() const { return counts_; }
  // The headers of the packets dropped so far, in the order they were dropped.
  const std::vector<proto::host::PacketHeader>& dropped() const { return dropped_; }

  // Accepts, reads, decodes and writes whatever is ready without waiting. True if anything
  // moved.
  bool pump() {
    bool did = accept_all();
    const uint64_t now = now_ns();
    for (auto it = pairs_.begin(); it != pairs_.end();) {
      Pair& p = **it;
      const bool alive = relay(p.up, now, &did) && relay(p.down, now, &did);
      it = alive ? it + 1 : pairs_.erase(it);  // both ends close: the routers see it break
    }
    return did;
  }

  // Closes every connection it carries, both ends, with what it still held for them: each
  // router sees its connection break, as when a middlebox on the path restarts. It keeps
  // listening, so the routers' reconnections go through it again.
  void cut() { pairs_.clear(); }

 private:
  // One direction of a forwarded connection.
  struct Stream {
    int from = -1, to = -1;     // the Pair's sockets
    size_t hello_left = 0;      // bytes of the Hello still to pass on unchanged
    bool raw = false;           // could not be decoded: passed on unchanged
    std::vector<uint8_t> in;    // read, not yet decoded
    std::vector<uint8_t> out;   // decided on, not yet written
    std::vector<uint8_t> held;  // a packet held back behind the next one
    uint64_t held_ns = 0;       // when it was held back
  };
  struct Pair {
    UniqueFd client, server;  // the router that dialled, the router dialled
    Stream up, down;          // client to server, server to client
  };
  // A packet held back is let go after this even if none followed it: reordered, not lost.
  static constexpr uint64_t kHoldNs = 1'000'000;
  // A direction holding this much is not read further: bounded memory, and a pump that
  // ends however fast its source writes.
  static constexpr size_t kMaxOut = 8u << 20;
  static constexpr size_t kReadChunk = 64u << 10;

  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    return a;
  }

  bool accept_all() {
    bool did = false;
    for (;;) {
      UniqueFd client(accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!client.valid()) return did;
      did = true;
      // A connect to a listener on loopback completes at once (the kernel's backlog takes
      // it); one that fails leaves the router's connection to be closed, as a refusal would.
      UniqueFd server(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      const sockaddr_in a = loopback(target_port_);
      if (!server.valid() ||
          connect(server.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 ||
          fcntl(server.get(), F_SETFL, O_NONBLOCK) != 0)
        continue;
      const int one = 1;
      setsockopt(client.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      setsockopt(server.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto p = std::make_unique<Pair>();
      p->client = std::move(client);
      p->server = std::move(server);
      p->up.from = p->down.to = p->client.get();
      p->up.to = p->down.from = p->server.get();
      p->up.hello_left = p->down.hello_left = proto::host::kHelloSize;
      pairs_.push_back(std::move(p));
      ++counts_.accepted;
    }
  }

  // Reads what s's source has, decides on its packets and writes what its destination takes;
  // `now` is the time of this pump. False when either end closed or failed.
  bool relay(Stream& s, uint64_t now, bool* did) {
    uint8_t chunk[kReadChunk];
    while (s.in.size() + s.out.size() < kMaxOut) {
      const ssize_t n = recv(s.from, chunk, sizeof(chunk), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) return false;
      s.in.insert(s.in.end(), chunk, chunk + n);
      *did = true;
    }
    decode(s, now);
    if (!s.held.empty() && now - s.held_ns >= kHoldNs) release_held(s);
    while (!s.out.empty()) {
      const ssize_t n = send(s.to, s.out.data(), s.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) return false;
      s.out.erase(s.out.begin(), s.out.begin() + n);
      *did = true;
    }
    return true;
  }

  // Passes the Hello on, then decides on each whole packet in s.in.
  void decode(Stream& s, uint64_t now) {
    size_t off = std::min(s.hello_left, s.in.size());
    s.out.insert(s.out.end(), s.in.begin(), s.in.begin() + static_cast<ptrdiff_t>(off));
    s.hello_left -= off;
    while (s.hello_left == 0 && !s.raw) {
      proto::host::Packet p;
      size_t n = 0;
      const auto st = proto::host::decode_packet(s.in.data() + off, s.in.size() - off, &p, &n);
      if (st == proto::host::DecodeStatus::kNeedMore) break;
      if (st == proto::host::DecodeStatus::kBad) {
        s.raw = true;
        ++counts_.malformed;
        break;
      }
      carry(s, p.hdr, s.in.data() + off, n, now);
      off += n;
    }
    if (s.raw) {  // from here on everything passes unchanged
      s.out.insert(s.out.end(), s.in.begin() + static_cast<ptrdiff_t>(off), s.in.end());
      off = s.in.size();
    }
    s.in.erase(s.in.begin(), s.in.begin() + static_cast<ptrdiff_t>(off));
  }

  // Decides on packet `bytes` (n bytes, header h) of s, the next one the proxy carries, at
  // `now`.
  void carry(Stream& s, const proto::host::PacketHeader& h, const uint8_t* bytes, size_t n,
             uint64_t now) {
    const uint64_t k = ++counts_.packets;
    auto hits = [k](uint32_t every) { return every != 0 && k % every == 0; };
    if (faults_.black_hole || (hits(faults_.drop_every) && first_fault(h))) {
      ++counts_.dropped;
      dropped_.push_back(h);
      return;
    }
    const bool twice = hits(faults_.duplicate_every);
    if (!twice && s.held.empty() && hits(faults_.swap_every) && first_fault(h)) {
      s.held.assign(bytes, bytes + n);
      s.held_ns = now;
      return;
    }
    s.out.insert(s.out.end(), bytes, bytes + n);
    if (twice) {
      s.out.insert(s.out.end(), bytes, bytes + n);
      ++counts_.duplicated;
    }
    if (!s.held.empty()) {
      ++counts_.swapped;
      release_held(s);
    }
  }

  static void release_held(Stream& s) {
    s.out.insert(s.out.end(), s.held.begin(), s.held.end());
    s.held.clear();
  }

  // Whether the packet with header h was never dropped or held back before (a resent packet
  // has the same header as the first).
  bool first_fault(const proto::host::PacketHeader& h) {
    return faulted_.insert({h.opcode, h.dest_qpn, h.psn, h.length}).second;
  }

  int target_port_ = 0;
  int port_ = 0;
  UniqueFd listen_;
  Faults faults_;
  FaultCounts counts_;
  std::vector<proto::host::PacketHeader> dropped_;
  std::set<std::tuple<uint8_t, uint32_t, uint32_t, uint32_t>> faulted_;
  std::vector<std::unique_ptr<Pair>> pairs_;
};

}  // namespace wharf::test_support
