// The responder side of the reliable transport (IBTA 9.7.4, 9.7.5.1): which request packets
// a QP takes, in which order, what it owes its requester, and what it must answer again
// without executing twice.
//
// Pure and deterministic, like the requester (rc/requester.h). The owner asks arrive() where
// each request packet stands, executes the ones that are next (placing data, taking receive
// buffers: the router's business), and records the outcome here (accept, end_message,
// refuse, drop_message). Answers queue in `owed` in PSN order (owe()); the owner sends them
// while its link has room. Plain ACKs are cumulative, so owe() holds one back until the
// owner's release_ack() (at the end of its pass): many requests answered in one pass cost
// one ACK.
//
//  - Reliable (RC, XRC): a packet before the expected PSN is a duplicate, answered again but
//    never executed again (a READ is read again, an atomic answered from the cache of the
//    last kAtomicCache results, anything else acknowledged up to the last PSN taken); one
//    after it is a gap, NAKed once (PSN sequence error) and then ignored until the expected
//    PSN comes.
//  - Unreliable (UC): nothing is answered; after a gap the responder takes the next packet
//    that starts a message and drops packets until then.
//
// The answers owed are bounded (kOwed): a responder whose link has left that many unsent
// takes no more requests until they drain (has_room()); what it does not take the requester
// sends again, as from an RNIC out of responder resources. Its state is plain bytes
// (trivially copyable, no pointers), so an owner may keep it in shared memory and a new
// process continue it (the router's restart).
#pragma once

#include <cstdint>

#include "common/atomic_intent.h"
#include "common/fixed_ring.h"
#include "rc/psn.h"

namespace wharf::rc {

// What a responder owes its requester, sent strictly in PSN order.
struct Response {
  enum Kind : uint8_t { kAck, kAtomicAck, kRead } kind = kAck;
  uint32_t psn = 0;
  uint8_t syndrome = 0;  // AETH
  uint32_t msn = 0;
  uint64_t orig = 0;  // atomic ACK: the value read
  // READ: the source, and how many response packets went out so far.
  uint32_t rkey = 0;
  uint64_t va = 0;
  uint64_t len = 0;
  uint32_t sent = 0;
  uint32_t srqn = 0;  // READ at an XRC target: the SRQ whose PD protects the source
};

class Responder {
 public:
  static constexpr int kAtomicCache = 16;
  // Answers that may wait for the link: each READ or atomic in flight (at most 16, the
  // device's max_dest_rd_atomic), the ACK or NAK before each, and the repeats a requester's
  // go-back-N asks for.
  static constexpr uint32_t kOwed = 64;

  enum class Arrival {
    kNext,       // the expected packet: execute it
    kDuplicate,  // already executed: answer again, do not execute
    kGap,        // packets were lost: NAK (PSN sequence error) from epsn()
    kIgnore,     // drop silently (a gap already NAKed, or UC resynchronising)
  };

  explicit Responder(uint32_t rq_psn) : epsn_(rq_psn & kPsnMask) {}
  // Continues a quiescent responder from its epsn() and msn().
  Responder(uint32_t rq_psn, uint32_t msn) : epsn_(rq_psn & kPsnMask), msn_(msn) {}

  // Between messages with nothing owed, held back, NAKed or cached: all it knows is epsn()
  // and msn(). A responder that executed an atomic keeps its cache of results (a duplicate
  // may come at any time) and is never quiescent.
  bool quiescent() const {
    return !in_send_ && !in_write_ && !dropping_ && !nak_sent_ && !ack_held_ && owed.empty() &&
           !atomics_used_;
  }

  // Where request packet `psn` with operation `op` (opcode & 0x1f) stands.
  Arrival arrive(uint32_t psn, uint8_t op, bool reliable);
  // Whether `op` may come now (IBTA 9.8.3): a READ, an atomic or a new message only between
  // messages; a middle or last packet only inside a message of its kind.
  bool fits_sequence(uint8_t op) const;

  // The packet `psn`, which starts a SEND or WRITE message, is being executed.
  void begin_message(uint8_t op, uint32_t psn);
  // Request packet `psn` was taken; it used `packets` PSNs (a READ one per response).
  void accept(uint32_t psn, uint32_t packets = 1) { epsn_ = psn_add(psn, packets); }
  // A message, READ or atomic ended: the message sequence number advances.
  void end_message() {
    in_send_ = in_write_ = false;
    msn_ = psn_add(msn_, 1);
  }
  // The message in progress is abandoned (the QP fails, or it is refused).
  void abort_message() { in_send_ = in_write_ = false; }
  // RNR: the requester must start again from `restart_psn` (the first packet of the
  // message); the rest of what it sent meanwhile is ignored.
  void refuse(uint32_t restart_psn) {
    abort_message();
    epsn_ = restart_psn;
    nak_sent_ = true;
  }
  // UC: the message of packet `psn` is dropped with the rest of its packets.
  void drop_message(uint32_t psn) {
    abort_message();
    dropping_ = true;
    epsn_ = psn_add(psn, 1);
  }

  void remember_atomic(uint32_t psn, uint64_t orig);
  // Takes over `other`'s cache of atomic results (a process continuing a responder whose
  // state another left: a duplicate of an atomic that one executed is answered, not run
  // again). Any bytes: the cache's cursor is bounded.
  void keep_atomics_of(const Responder& other);
  // The result the atomic at `psn` returned, if it is still in the cache.
  bool recall_atomic(uint32_t psn, uint64_t* orig) const;
  // Where the atomic being executed notes the value it read (common/atomic_intent.h), by its
  // PSN; cleared once its result is remembered and its PSN taken. Kept by keep_atomics_of.
  AtomicIntent* atomic_intent() { return &atomic_intent_; }

  uint32_t epsn() const { return epsn_; }
  // The last PSN taken: what an ACK for a duplicate names.
  uint32_t last_psn() const { return psn_add(epsn_, kPsnMask); }
  uint32_t msn() const { return msn_; }
  bool in_send() const { return in_send_; }
  bool in_write() const { return in_write_; }
  bool in_message() const { return in_send_ || in_write_; }
  uint32_t message_psn() const { return message_psn_; }

  // The message in progress: bytes placed so far, and a WRITE's target.
  uint64_t offset = 0;
  uint32_t rkey = 0;
  uint64_t va = 0;
  uint64_t dma_length = 0;
  // Queues an answer in `owed`, except a plain ACK, which is held back instead: a later one
  // replaces it. Any other answer first releases the held ACK, so `owed` stays in PSN order.
  // True if `owed` grew. Call only while has_room(): an answer with no room is lost (the
  // requester's timer then asks again).
  bool owe(const Response& r);
  // Moves the held ACK, if any, to `owed`; a plain ACK still waiting at its end is replaced
  // instead (ACKs are cumulative). True if there was one.
  bool release_ack();
  bool holding_ack() const { return ack_held_; }
  // Whether a request may be taken: the answers it leads to (at most two: a held ACK and its
  // own) fit in `owed`. A request that arrives without room is dropped unseen.
  bool has_room() const { return owed.size() + 2 <= kOwed; }
  // Answers not yet sent, in PSN order.
  FixedRing<Response, kOwed> owed;

 private:
  uint32_t epsn_;
  uint32_t msn_ = 0;
  bool nak_sent_ = false;
  bool in_send_ = false;  // between a SEND's first and last packet
  bool in_write_ = false;
  bool dropping_ = false;     // UC: ignoring the rest of a message
  uint32_t message_psn_ = 0;  // first PSN of the message in progress
  bool ack_held_ = false;
  Response held_ack_;
  // The last kAtomicCache atomics' results, kept once the QP executed one (a duplicate may
  // come at any time).
  struct AtomicResult {
    uint32_t psn = 0;
    bool valid = false;
    uint64_t orig = 0;
  };
  AtomicResult atomics_[kAtomicCache] = {};
  uint8_t atomics_next_ = 0;
  bool atomics_used_ = false;
  AtomicIntent atomic_intent_ = {};
};

}  // namespace wharf::rc
