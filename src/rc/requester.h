// The requester side of the reliable transport (IBTA 9.7.5): the window of requests a QP
// sent and the peer has not yet acknowledged, and what happens to it as ACKs, NAKs, READ
// responses, atomic ACKs and time arrive.
//
// Pure and deterministic: no clock, no I/O, no locks. The owner passes time in, feeds the
// response packets that reach the QP, calls tick() when deadline() is due, and does what the
// engine asks through a RequesterPort (transmit a request, complete the oldest one, place a
// READ's data or an atomic's result, move the QP to ERR). Completions leave in PSN order,
// always the oldest first, each exactly once.
//
// Rules, as IBTA states them:
//  - Responses are cumulative: an ACK or NAK for PSN p acknowledges every SEND and WRITE
//    before p; a READ or atomic completes only with its own response data.
//  - Go-back-N: a sequence NAK or an ACK timeout retransmits the whole window; the QP fails
//    with RETRY_EXC_ERR once retry_cnt retransmissions brought no progress.
//  - RNR NAK (9.7.5.2.8): the refused request goes again after the timer the NAK names, alone
//    (a probe); the rest of the window follows once it is acknowledged. rnr_retry refusals in
//    a row fail the QP with RNR_RETRY_EXC_ERR, unless rnr_retry is 7 (for ever).
//  - At most max_rd_atomic READs and atomics in flight (9.4.4).
//  - Progress (a request leaving the window, a READ response placed) restarts both counts,
//    and ends an RNR probe: the rest of the window follows.
//  - At most kWindow requests outstanding: a full window admits nothing more until the peer
//    acknowledges, as an RNIC bounds the WQEs it tracks.
//
// Its state is plain bytes (trivially copyable, no pointers: the window is a FixedRing), so
// an owner may keep it in shared memory and a new process continue it (the router's restart).
#pragma once

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/fixed_ring.h"
#include "proto/host_wire.h"
#include "rc/psn.h"
#include "rc/timers.h"

namespace wharf::rc {

enum class RequestKind : uint8_t {
  kMessage,  // SEND, WRITE, ATOMIC_WRITE: acknowledged by an ACK
  kRead,     // answered by READ response packets, one PSN each
  kAtomic,   // compare-and-swap, fetch-and-add: answered by an atomic ACK
};

// The QP attributes the requester obeys, read from the QP at each call so that a modify_qp
// takes effect at once.
struct RequesterLimits {
  uint8_t timeout = 14;  // local ACK timeout exponent, 0: infinite
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = kRnrRetryInfinite;
  uint8_t max_rd_atomic = 1;
  uint64_t watchdog_ns = 0;  // a peer refusing (RNR) for this long fails the QP; 0: never
};

// One request in the window; `work` is whatever the owner needs to send it again.
template <class Work>
struct Request {
  Work work;
  RequestKind kind = RequestKind::kMessage;
  uint32_t first_psn = 0;
  uint32_t last_psn = 0;
  uint32_t responses = 0;  // READ response packets placed so far
};

template <class Work>
class RequesterPort {
 public:
  virtual ~RequesterPort() = default;
  // Sends every packet of r (again: a READ's responses all come again). False when the link
  // has no room; the ACK timer sends it later. An owner may instead send what fits, keep the
  // rest (and whatever later requests it is asked to transmit meanwhile) and send it as the
  // link drains, telling transmitted(): the ACK timer then waits for the last packet.
  virtual bool transmit(const Request<Work>& r) = 0;
  // r, the oldest request, completed with `status`; it leaves the window right after.
  virtual void complete(const Request<Work>& r, ibv_wc_status status) = 0;
  // READ response packet `index` of r (its data at index * kMaxSegment). False when it
  // cannot be placed: r completes with LOC_PROT_ERR.
  virtual bool place_read(const Request<Work>& r, uint32_t index, const uint8_t* data,
                          uint32_t len) = 0;
  // The original value an atomic r read. False: LOC_PROT_ERR, as for a READ.
  virtual bool place_atomic(const Request<Work>& r, uint64_t original) = 0;
  // The QP goes to ERR: called right after a completion with an error status.
  virtual void fail() = 0;
  // The peer refused with an RNR NAK; it has made no progress for `stalled_ns`; `isolated`:
  // the watchdog ends the QP for it.
  virtual void rnr_refused(uint64_t stalled_ns, bool isolated) = 0;
};

template <class Work, uint32_t kWindow = 256>
class Requester {
 public:
  using Port = RequesterPort<Work>;
  using Window = FixedRing<Request<Work>, kWindow>;

  explicit Requester(uint32_t sq_psn) : next_psn_(sq_psn & kPsnMask) {}

  bool idle() const { return window_.empty(); }
  // Nothing outstanding and no wait pending: all it knows is next_psn(), and
  // Requester(next_psn()) continues it (an owner may keep that alone while the QP is quiet).
  bool quiescent() const {
    return window_.empty() && resend_at_ns_ == 0 && !probing_ && replay_at_ns_ == 0;
  }
  size_t outstanding() const { return window_.size(); }
  uint32_t next_psn() const { return next_psn_; }
  // An RNR wait, or its probe, holds every new request back.
  bool holding() const { return resend_at_ns_ != 0 || probing_; }
  // After an RNR wait only the refused request went again; the rest follows its ACK.
  bool probing() const { return probing_; }
  // The window, oldest first, for an owner whose link takes a request in several goes: it
  // sends the rest of what transmit() could not, in PSN order (see RequesterPort::transmit).
  const Window& window() const { return window_; }
  // Packets of the window went to the link at `now`: the ACK timer runs from the last one
  // sent, so a message that takes longer than the timeout to leave is not sent again before
  // its last packet did.
  void transmitted(uint64_t now, const RequesterLimits& l) {
    if (!window_.empty())
      ack_deadline_ns_ = std::max(ack_deadline_ns_, now + ack_timeout_ns(l.timeout));
  }
  // Whether a request of `kind` may enter the window now: it has room, no RNR wait holds it,
  // and the max_rd_atomic limit allows it.
  bool may_issue(RequestKind kind, const RequesterLimits& l) const {
    if (holding() || window_.full()) return false;
    if (kind == RequestKind::kMessage) return true;
    const auto reads_and_atomics = std::count_if(window_.begin(), window_.end(), [](const auto& r) {
      return r.kind != RequestKind::kMessage;
    });
    return reads_and_atomics < std::max<uint8_t>(1, l.max_rd_atomic);
  }

  // A reliable request of `packets` PSNs enters the window and is transmitted. False, and
  // nothing happens, when the window is full (may_issue() says so beforehand).
  bool issue(Work work, RequestKind kind, uint32_t packets, uint64_t now, const RequesterLimits& l,
             Port& port) {
    if (window_.full()) return false;
    if (window_.empty()) ack_deadline_ns_ = now + ack_timeout_ns(l.timeout);
    window_.push_back(next_request(std::move(work), kind, packets));
    port.transmit(window_.back());
    return true;
  }
  // An unreliable (UC) request: transmitted once, and completed as soon as all of it went:
  // at once when transmit() returns true; else the owner sends the rest as its link drains
  // and completes it then (its buffer is the application's until then).
  void issue_unreliable(Work work, uint32_t packets, Port& port) {
    const Request<Work> r = next_request(std::move(work), RequestKind::kMessage, packets);
    if (port.transmit(r)) port.complete(r, IBV_WC_SUCCESS);
  }

  // The READ that would place a response with `psn` now (the oldest request, a READ whose
  // next response that is; its index is r->responses), or nullptr: such a response would be
  // ignored.
  const Request<Work>* read_awaiting(uint32_t psn) const {
    if (window_.empty()) return nullptr;
    const Request<Work>& r = window_.front();
    return r.kind == RequestKind::kRead && psn == psn_add(r.first_psn, r.responses) ? &r : nullptr;
  }

  // A response packet for this QP: operation (opcode & 0x1f), PSN, AETH syndrome if it has
  // one, the atomic ACK's original value, a READ response's data. A response for a PSN not
  // sent yet answers nothing this requester asked and is discarded, as hardware drops ghost
  // ACKs: it must not complete, fail or resend anything.
  void on_response(uint8_t op, uint32_t psn, bool has_aeth, uint8_t syndrome, uint64_t atomic_orig,
                   const uint8_t* data, uint32_t len, uint64_t now, const RequesterLimits& l,
                   Port& port) {
    namespace host = proto::host;
    if (!psn_lt(psn, next_psn_)) return;
    const size_t before = window_.size();
    while (!window_.empty() && window_.front().kind == RequestKind::kMessage &&
           psn_lt(window_.front().last_psn, psn))
      retire(port, IBV_WC_SUCCESS);
    // Whatever the response says besides, requests that left the window are progress.
    bool progressed = window_.size() != before;
    if (host::is_read_response(op)) {
      const ReadOutcome got = on_read_response(psn, data, len, now, l, port);
      if (got != ReadOutcome::kFailed && (got == ReadOutcome::kPlaced || progressed))
        progress(port);
      return;
    }
    const host::AethKind kind = has_aeth ? host::aeth_kind(syndrome) : host::AethKind::kReserved;
    if (kind == host::AethKind::kAck && !window_.empty()) {
      const Request<Work>& r = window_.front();
      if (r.kind == RequestKind::kAtomic && op == host::kAtomicAcknowledge && r.first_psn == psn) {
        const bool placed = port.place_atomic(r, atomic_orig);
        retire(port, placed ? IBV_WC_SUCCESS : IBV_WC_LOC_PROT_ERR);
        if (!placed) return port.fail();
        progressed = true;
      } else if (r.kind == RequestKind::kMessage && r.last_psn == psn) {
        retire(port, IBV_WC_SUCCESS);
        progressed = true;
      }
    }
    if (kind == host::AethKind::kRnr) return on_rnr(syndrome, progressed, now, l, port);
    if (kind == host::AethKind::kNak && !window_.empty()) {
      if ((syndrome & 0x1f) != host::kNakPsnSequence)
        return fail_oldest(port, nak_status(syndrome & 0x1f));
      // Go back to the PSN named, unless an RNR wait or its probe will (a sequence NAK left
      // over from before the wait).
      const bool resent = progressed && progress(port);
      if (!resent && !holding()) resend_all(port);
    } else if (progressed) {
      progress(port);  // a repeated ACK for old work is not progress
    }
    if (!has_aeth) return;
    ack_deadline_ns_ = now + ack_timeout_ns(l.timeout);
  }

  // The timers: a link that came back, an RNR wait that ended, an ACK timeout. True if it
  // did anything.
  bool tick(uint64_t now, const RequesterLimits& l, Port& port) {
    bool did = false;
    if (replay_at_ns_ != 0 && now >= replay_at_ns_) {
      replay_at_ns_ = 0;
      if (resend_at_ns_ == 0) {  // else the RNR wait resends
        resend_all(port);
        did = true;
      }
    }
    if (window_.empty()) return did;
    if (resend_at_ns_ != 0) {
      if (now < resend_at_ns_) return did;
      // The receiver had no buffer: only the request it refused goes again, so a receiver
      // that posts nothing for long costs the shared link one message per RNR timer.
      resend_at_ns_ = 0;
      ack_deadline_ns_ = now + ack_timeout_ns(l.timeout);
      window_.front().responses = 0;
      port.transmit(window_.front());
      probing_ = window_.size() > 1;
      return true;
    }
    if (now < ack_deadline_ns_) return did;
    if (out_of_retries(l.timeout, retry_attempts_, l.retry_cnt)) {
      fail_oldest(port, IBV_WC_RETRY_EXC_ERR);
      return true;
    }
    retry_attempts_++;
    ack_deadline_ns_ = now + ack_timeout_ns(l.timeout);
    probing_ = false;
    resend_all(port);
    return true;
  }

  // The QP is in ERR: everything in the window completes with WR_FLUSH_ERR. True if any did.
  bool flush(Port& port) {
    if (window_.empty()) return false;
    while (!window_.empty()) retire(port, IBV_WC_WR_FLUSH_ERR);
    resend_at_ns_ = replay_at_ns_ = 0;
    probing_ = false;
    return true;
  }

  // The peer is gone: the oldest request completes with `status` (the caller moves the QP to
  // ERR). False when nothing was outstanding.
  bool abandon_oldest(ibv_wc_status status, Port& port) {
    if (window_.empty()) return false;
    retire(port, status);
    return true;
  }

  // What was in flight on the link is lost; the link may carry packets again at
  // `reconnect_ns`: the whole window goes again then, not at its ACK timeout. True if
  // anything was outstanding.
  bool link_lost(uint64_t reconnect_ns) {
    if (window_.empty()) return false;
    replay_at_ns_ = reconnect_ns;
    return true;
  }

  // The link is back at `now`, before the time link_lost was told: the window goes again
  // now. True if it was waiting for the link.
  bool link_back(uint64_t now) {
    if (window_.empty() || replay_at_ns_ <= now) return false;
    replay_at_ns_ = now;
    return true;
  }

  // When tick() has something to do; 0 when nothing is outstanding.
  uint64_t deadline() const {
    if (window_.empty()) return 0;
    uint64_t t = resend_at_ns_ != 0 ? resend_at_ns_ : ack_deadline_ns_;
    if (replay_at_ns_ != 0) t = std::min(t, replay_at_ns_);
    return t;
  }

 private:
  static ibv_wc_status nak_status(uint8_t code) {
    switch (code) {
      case proto::host::kNakInvalidRequest: return IBV_WC_REM_INV_REQ_ERR;
      case proto::host::kNakRemoteAccess: return IBV_WC_REM_ACCESS_ERR;
      default: return IBV_WC_REM_OP_ERR;
    }
  }

  Request<Work> next_request(Work work, RequestKind kind, uint32_t packets) {
    Request<Work> r{std::move(work), kind, next_psn_, psn_add(next_psn_, packets - 1), 0};
    next_psn_ = psn_add(next_psn_, packets);
    return r;
  }

  void retire(Port& port, ibv_wc_status status) {
    port.complete(window_.front(), status);
    window_.pop_front();
  }
  void fail_oldest(Port& port, ibv_wc_status status) {
    retire(port, status);
    port.fail();
  }

  void restart_counts() {
    retry_attempts_ = rnr_attempts_ = 0;
    stalled_since_ns_ = 0;
  }
  // The peer took something: both counts restart. Ends an RNR wait or probe (the refused
  // request, the oldest, is what completed), sending the rest of the window; true if it did.
  bool progress(Port& port) {
    restart_counts();
    if (!holding()) return false;
    probing_ = false;
    resend_at_ns_ = 0;
    resend_all(port);
    return true;
  }

  // RNR NAK (9.7.5.2.8) for the oldest request: wait the timer it names, then probe with it.
  void on_rnr(uint8_t syndrome, bool progressed, uint64_t now, const RequesterLimits& l,
              Port& port) {
    if (progressed) {  // the NAK acknowledged what preceded the refused request
      restart_counts();
      probing_ = false;  // the wait probes again
    }
    if (window_.empty()) return;
    if (stalled_since_ns_ == 0) stalled_since_ns_ = now;
    const uint64_t stalled = now - stalled_since_ns_;
    const bool isolated = l.watchdog_ns != 0 && stalled >= l.watchdog_ns;
    port.rnr_refused(stalled, isolated);
    if (isolated || (l.rnr_retry != kRnrRetryInfinite && rnr_attempts_ >= l.rnr_retry))
      return fail_oldest(port, IBV_WC_RNR_RETRY_EXC_ERR);
    rnr_attempts_++;
    resend_at_ns_ = now + rnr_timer_ns(syndrome & 0x1f);
  }

  void resend_all(Port& port) {
    for (Request<Work>& r : window_) {
      r.responses = 0;
      if (!port.transmit(r)) break;  // the next timeout tries again
    }
  }

  // A READ response: only the next one the oldest READ expects is placed; anything else is a
  // duplicate and ignored. The last one completes it.
  enum class ReadOutcome { kIgnored, kPlaced, kFailed };
  ReadOutcome on_read_response(uint32_t psn, const uint8_t* data, uint32_t len, uint64_t now,
                               const RequesterLimits& l, Port& port) {
    if (read_awaiting(psn) == nullptr) return ReadOutcome::kIgnored;
    Request<Work>& r = window_.front();
    if (!port.place_read(r, r.responses, data, len)) {
      fail_oldest(port, IBV_WC_LOC_PROT_ERR);
      return ReadOutcome::kFailed;
    }
    r.responses++;
    ack_deadline_ns_ = now + ack_timeout_ns(l.timeout);
    if (psn == r.last_psn) retire(port, IBV_WC_SUCCESS);
    return ReadOutcome::kPlaced;
  }

  uint32_t next_psn_;
  Window window_;
  uint64_t ack_deadline_ns_ = 0;   // the window is retransmitted after this
  uint64_t resend_at_ns_ = 0;      // RNR: the oldest request goes again at this time
  bool probing_ = false;           // after an RNR wait only the oldest went again
  uint64_t stalled_since_ns_ = 0;  // the first RNR NAK since the last progress; 0: progressing
  uint64_t replay_at_ns_ = 0;      // the link broke: the window goes again at this time
  uint8_t retry_attempts_ = 0;
  uint8_t rnr_attempts_ = 0;
};

}  // namespace wharf::rc
