// A simulated connection for the reliable-transport engine (src/rc): one requester and one
// responder joined by a link that may lose, duplicate, delay (reorder) and cut packets, all
// decided by a seeded generator or a caller's program, with time passed in. Shared by the
// engine's unit tests and its fuzz target.
//
// The responder executes as a router would, minimally: a SEND consumes one posted receive
// (none: RNR NAK), a READ answers `packets` response packets, a fetch-and-add adds 1 to one
// counter. What it executed and what the requester completed is recorded, so that tests can
// state exactly-once, in-order delivery.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "proto/host_wire.h"
#include "rc/requester.h"
#include "rc/responder.h"

namespace wharf::rc::sim {

namespace host = proto::host;

struct Work {
  uint32_t id = 0;  // issue order
};

struct Packet {
  bool response = false;
  uint8_t op = 0;  // operation (opcode & 0x1f)
  uint32_t psn = 0;
  bool ack_request = false;
  bool has_aeth = false;
  uint8_t syndrome = 0;
  uint64_t orig = 0;
  uint32_t id = 0;       // the request's Work::id (what the payload would carry)
  uint32_t packets = 0;  // a READ request: response packets asked for
};

// What the link does to each packet; the default is a perfect link with 1 us latency.
struct Faults {
  double loss = 0;
  double duplicate = 0;
  double reorder = 0;  // probability of an extra delay of up to 20 us
  uint64_t latency_ns = 1000;
};

class Connection final : public RequesterPort<Work> {
 public:
  static constexpr int kMaxSteps = 1000000;  // a run that takes more is stuck

  explicit Connection(uint32_t seed, uint32_t sq_psn = 0)
      : requester(sq_psn), responder(sq_psn), rng_(seed) {}

  Faults faults;
  RequesterLimits limits;
  uint8_t min_rnr_timer = 1;     // 10 us
  uint32_t receives = 1u << 30;  // receive buffers the responder has posted
  Requester<Work> requester;
  Responder responder;
  uint64_t now = 0;

  // Recorded outcomes.
  std::vector<std::pair<uint32_t, ibv_wc_status>> completions;  // (id, status), in order
  std::vector<uint32_t> delivered;                              // SEND ids the responder took
  std::map<uint32_t, uint32_t> read_placed;                     // id -> response packets placed
  std::map<uint32_t, uint64_t> atomic_results;                  // id -> original value
  uint64_t counter = 0;        // the responder's fetch-and-add target
  uint32_t transmissions = 0;  // request packets the requester sent (first time or again)
  uint32_t rnr_naks = 0;
  bool failed = false;
  bool stuck = false;              // run() gave up: something keeps happening without end
  bool out_of_sequence = false;    // the responder saw a packet IBTA 9.8.3 does not allow
  std::vector<RequestKind> kinds;  // of each posted request, by id

  // Posts a request: `packets` PSNs for a SEND or READ, one for an atomic.
  void post(RequestKind kind, uint32_t packets) {
    kinds.push_back(kind);
    pending_.push_back({next_id_++, kind, packets});
  }

  // Issues what the window admits, delivers due packets and fires due timers, until `until`
  // or until nothing is left to happen. Returns the time it stopped at.
  uint64_t run(uint64_t until) {
    for (int steps = 0; !failed; ++steps) {
      if (steps == kMaxSteps) {
        stuck = true;
        break;
      }
      issue();
      uint64_t next = UINT64_MAX;
      if (!in_flight_.empty()) next = in_flight_.begin()->first;
      if (const uint64_t d = requester.deadline(); d != 0) next = std::min(next, std::max(d, now));
      if (next == UINT64_MAX) break;  // nothing more will happen
      if (next > until) {
        now = until;
        break;
      }
      now = std::max(now, next);
      if (!in_flight_.empty() && in_flight_.begin()->first <= now) {
        const Packet p = in_flight_.begin()->second;
        in_flight_.erase(in_flight_.begin());
        p.response ? to_requester(p) : to_responder(p);
        if (in_flight_.empty() || in_flight_.begin()->first > now) release_held_ack();
      } else {
        requester.tick(now, limits, *this);
      }
    }
    return now;
  }

  // The link breaks: everything in flight is lost; it carries packets again after `down_ns`.
  void cut(uint64_t down_ns) {
    in_flight_.clear();
    down_until_ = now + down_ns;
    requester.link_lost(down_until_);
  }

  // RequesterPort
  bool transmit(const Request<Work>& r) override {
    const uint32_t psns = ((r.last_psn - r.first_psn) & kPsnMask) + 1;
    const uint32_t count = r.kind == RequestKind::kMessage ? psns : 1;
    for (uint32_t k = 0; k < count; ++k) {
      Packet p;
      p.psn = psn_add(r.first_psn, k);
      p.id = r.work.id;
      if (r.kind == RequestKind::kRead) {
        p.op = host::kReadRequest;
        p.packets = psns;
      } else if (r.kind == RequestKind::kAtomic) {
        p.op = host::kFetchAdd;
      } else {
        p.op = count == 1       ? host::kSendOnly
               : k == 0         ? host::kSendFirst
               : k + 1 == count ? host::kSendLast
                                : host::kSendMiddle;
      }
      p.ack_request = k + 1 == count;
      send(p);
    }
    return true;
  }
  void complete(const Request<Work>& r, ibv_wc_status status) override {
    completions.emplace_back(r.work.id, status);
  }
  bool place_read(const Request<Work>& r, uint32_t index, const uint8_t*, uint32_t) override {
    // In order; after a retransmission the responses come (and are placed) again from 0.
    uint32_t& placed = read_placed[r.work.id];
    if (index > placed) return false;
    placed = std::max(placed, index + 1);
    return true;
  }
  bool place_atomic(const Request<Work>& r, uint64_t original) override {
    return atomic_results.emplace(r.work.id, original).second;
  }
  void fail() override { failed = true; }
  void rnr_refused(uint64_t, bool) override { rnr_naks++; }

  // Decides the fate of every packet put on the link; default: `faults` with the generator.
  std::function<bool(const Packet&)> drop;

 private:
  struct Pending {
    uint32_t id;
    RequestKind kind;
    uint32_t packets;
  };

  void issue() {
    while (!pending_.empty() && requester.may_issue(pending_.front().kind, limits)) {
      const Pending p = pending_.front();
      pending_.erase(pending_.begin());
      requester.issue(Work{p.id}, p.kind, p.kind == RequestKind::kAtomic ? 1 : p.packets, now,
                      limits, *this);
    }
  }

  void send(const Packet& p) {
    if (!p.response) transmissions++;
    if (now < down_until_) return;
    if (drop ? drop(p) : chance(faults.loss)) return;
    const int copies = chance(faults.duplicate) ? 2 : 1;
    for (int c = 0; c < copies; ++c) {
      uint64_t at = now + faults.latency_ns;
      if (chance(faults.reorder)) at += std::uniform_int_distribution<uint64_t>(0, 20000)(rng_);
      in_flight_.emplace(at, p);
    }
  }

  bool chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // Answers go through the responder's queue as the router's do: a plain ACK is held until
  // the batch of packets arriving at one instant is done (the router's pass), and any other
  // answer sends the held one first.
  void answer(uint8_t op, uint32_t psn, uint8_t syndrome, uint64_t orig = 0) {
    if (host::is_read_response(op)) {
      release_held_ack();
      return put_answer(op, psn, syndrome, orig);
    }
    Response r;
    r.kind = op == host::kAtomicAcknowledge ? Response::kAtomicAck : Response::kAck;
    r.psn = psn;
    r.syndrome = syndrome;
    r.orig = orig;
    if (responder.owe(r)) drain_owed();
  }
  void release_held_ack() {
    if (responder.release_ack()) drain_owed();
  }
  void drain_owed() {
    for (; !responder.owed.empty(); responder.owed.pop_front()) {
      const Response& r = responder.owed.front();
      put_answer(r.kind == Response::kAtomicAck ? host::kAtomicAcknowledge : host::kAcknowledge,
                 r.psn, r.syndrome, r.orig);
    }
  }
  void put_answer(uint8_t op, uint32_t psn, uint8_t syndrome, uint64_t orig) {
    Packet a;
    a.response = true;
    a.op = op;
    a.psn = psn;
    a.has_aeth = op != host::kReadResponseMiddle && op != host::kReadResponseLast &&
                 op != host::kReadResponseFirst;
    a.syndrome = syndrome;
    a.orig = orig;
    send(a);
  }

  void read_responses(uint32_t psn, uint32_t n) {
    for (uint32_t k = 0; k < n; ++k) {
      const uint8_t op = n == 1       ? host::kReadResponseOnly
                         : k == 0     ? host::kReadResponseFirst
                         : k + 1 == n ? host::kReadResponseLast
                                      : host::kReadResponseMiddle;
      answer(op, psn_add(psn, k), host::aeth_ack());
    }
  }

  void to_responder(const Packet& p) {
    Responder& rs = responder;
    switch (rs.arrive(p.psn, p.op, true)) {
      case Responder::Arrival::kIgnore: return;
      case Responder::Arrival::kGap:
        return answer(host::kAcknowledge, rs.epsn(), host::aeth_nak(host::kNakPsnSequence));
      case Responder::Arrival::kDuplicate: {
        uint64_t orig = 0;
        if (p.op == host::kReadRequest) return read_responses(p.psn, p.packets);
        if (p.op == host::kFetchAdd) {
          if (rs.recall_atomic(p.psn, &orig))
            answer(host::kAtomicAcknowledge, p.psn, host::aeth_ack(), orig);
          return;
        }
        if (p.ack_request) answer(host::kAcknowledge, rs.last_psn(), host::aeth_ack());
        return;
      }
      case Responder::Arrival::kNext: break;
    }
    if (!rs.fits_sequence(p.op)) {
      out_of_sequence = true;  // the engine must never send this
      return;
    }
    if (p.op == host::kReadRequest) {
      rs.accept(p.psn, p.packets);
      rs.end_message();
      return read_responses(p.psn, p.packets);
    }
    if (p.op == host::kFetchAdd) {
      const uint64_t orig = counter++;
      rs.remember_atomic(p.psn, orig);
      rs.accept(p.psn);
      rs.end_message();
      return answer(host::kAtomicAcknowledge, p.psn, host::aeth_ack(), orig);
    }
    if (host::starts_message(p.op)) {
      if (receives == 0) {
        rs.refuse(p.psn);
        return answer(host::kAcknowledge, p.psn, host::aeth_rnr(min_rnr_timer));
      }
      rs.begin_message(p.op, p.psn);
    }
    if (host::ends_message(p.op)) {
      receives--;
      delivered.push_back(p.id);
      rs.end_message();
    }
    rs.accept(p.psn);
    if (p.ack_request) answer(host::kAcknowledge, p.psn, host::aeth_ack());
  }

  void to_requester(const Packet& p) {
    requester.on_response(p.op, p.psn, p.has_aeth, p.syndrome, p.orig, nullptr, 0, now, limits,
                          *this);
  }

  std::mt19937 rng_;
  std::multimap<uint64_t, Packet> in_flight_;  // by arrival time
  std::vector<Pending> pending_;
  uint32_t next_id_ = 0;
  uint64_t down_until_ = 0;
};

}  // namespace wharf::rc::sim
