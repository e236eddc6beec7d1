// Receives an express line takes from a shared receive queue (abi/verbs/express.h).
//
// The router takes receives from the same ring for the messages it places (any QP on the SRQ,
// from this host or another), and the lines of the SRQ's other QPs take them too, each from
// its own thread. Whoever places a message in a receive has claimed it first: it copied the
// WQE out and then moved the ring's consumer index past it with a compare-and-swap (the
// router's half is shm::BasicRingConsumer::claim), so every receive is used exactly once and
// the SRQ's order is kept. The copy is validated between the two steps, outside the SRQ's
// spinlock (a key lookup may ask the router).
#pragma once

#include <cstdint>

#include "shm/layout.h"

namespace wharf::abi {

struct Srq;

// A receive WQE copied out of a ring, its position there, and (an SRQ's) the region it was
// in (Srq::generation).
struct ReceiveCopy {
  shm::RecvWqe hdr{};
  shm::Sge sge[shm::kMaxRecvSge]{};
  uint32_t pos = 0;
  uint32_t generation = 0;

  // Copies the receive WQE in slot, at position pos of its ring (an RQ's or an SRQ's). False
  // when it names more SGEs than max_sge or than a copy holds: the ring is shared memory.
  bool copy_from(const uint8_t* slot, uint32_t max_sge, uint32_t at);
};

// Copies out srq's oldest receive, if a line may take one now: there is one, the SRQ is no
// tag-matching one, it is not being moved to a new region (ibv_modify_srq), and the router
// says no limit is armed (shm::SrqState: it counts the receives taken and raises the event
// as it consumes, so while a limit is armed Messages for the SRQ's QPs go through it).
bool peek_srq_receive(Srq* srq, ReceiveCopy* out);
// Takes the receive peek_srq_receive copied out, unless another consumer took it since, the
// SRQ moved to another region meanwhile, or a line may take none now.
bool claim_srq_receive(Srq* srq, const ReceiveCopy& r);
// A claimed receive the line did not use (the line broke, or the QP failed, while the payload
// arrived) goes back to srq, at its tail. False when it cannot (the SRQ is full or being
// moved): the caller completes it with IBV_WC_WR_FLUSH_ERR instead, so nothing is lost.
bool requeue_srq_receive(Srq* srq, const ReceiveCopy& r);

}  // namespace wharf::abi
