// The responder's sequencing: see responder.h.
#include "rc/responder.h"

#include <algorithm>
#include <iterator>

#include "proto/host_wire.h"

namespace wharf::rc {

namespace host = proto::host;

Responder::Arrival Responder::arrive(uint32_t psn, uint8_t op, bool reliable) {
  if (!reliable && (psn != epsn_ || dropping_)) {
    // UC resynchronises on the first packet of a message; a message missing its start, or
    // one a packet went missing from, is dropped whole.
    if (psn != epsn_) abort_message();
    epsn_ = psn;
    dropping_ = !host::starts_message(op);
    if (dropping_) {
      epsn_ = psn_add(psn, 1);
      return Arrival::kIgnore;
    }
  }
  if (psn == epsn_) {
    nak_sent_ = false;
    return Arrival::kNext;
  }
  if (psn_lt(psn, epsn_)) return Arrival::kDuplicate;
  if (nak_sent_) return Arrival::kIgnore;
  nak_sent_ = true;  // once: the requester goes back to epsn
  return Arrival::kGap;
}

bool Responder::fits_sequence(uint8_t op) const {
  if (op == host::kCompareSwap || op == host::kFetchAdd || op == host::kReadRequest ||
      op == host::kAtomicWrite || host::starts_message(op))
    return !in_message();
  if (host::is_send(op)) return in_send_;
  if (host::is_write(op)) return in_write_;
  return false;
}

void Responder::begin_message(uint8_t op, uint32_t psn) {
  offset = 0;
  message_psn_ = psn;
  in_send_ = host::is_send(op);
  in_write_ = !in_send_;
}

void Responder::remember_atomic(uint32_t psn, uint64_t orig) {
  atomics_used_ = true;
  AtomicResult& slot = atomics_[atomics_next_];
  atomics_next_ = (atomics_next_ + 1) % kAtomicCache;
  slot.psn = psn;
  slot.orig = orig;
  slot.valid = true;
}

void Responder::keep_atomics_of(const Responder& other) {
  std::copy(std::begin(other.atomics_), std::end(other.atomics_), std::begin(atomics_));
  atomics_next_ = static_cast<uint8_t>(other.atomics_next_ % kAtomicCache);
  atomics_used_ = other.atomics_used_;
  atomic_intent_ = other.atomic_intent_;
}

bool Responder::recall_atomic(uint32_t psn, uint64_t* orig) const {
  for (const AtomicResult& a : atomics_) {
    if (a.valid && a.psn == psn) {
      *orig = a.orig;
      return true;
    }
  }
  return false;
}

bool Responder::owe(const Response& r) {
  if (r.kind == Response::kAck && r.syndrome == host::aeth_ack()) {
    held_ack_ = r;
    ack_held_ = true;
    return false;
  }
  release_ack();
  owed.push_back(r);
  return true;
}

bool Responder::release_ack() {
  if (!ack_held_) return false;
  ack_held_ = false;
  if (!owed.empty() && owed.back().kind == Response::kAck &&
      owed.back().syndrome == held_ack_.syndrome) {
    owed.back() = held_ack_;  // not sent yet: the later ACK says all it said
    return true;
  }
  owed.push_back(held_ack_);
  return true;
}

}  // namespace wharf::rc
