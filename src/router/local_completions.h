// Completions the router makes on its own path between two QPs of this host, made safe
// against the router's death (issue #23). A SEND (or a WRITE with immediate) that takes a
// receive is completed by four stores: the receiver's ring and CQ, then the sender's ring
// and CQ. A process that died between them left the receive taken with no entry (the message,
// sent again, took the next receive), the message delivered with the send still queued (it
// arrived twice: rping -V saw its peer's reply out of turn), or the send gone with no entry.
//
// So each side's completion is recorded in its QP's region first (shm::LocalCompletion):
// the next process finishes a receive left under way when it restores the receiver, and a
// send whose entry may be missing when it restores the sender; and a send executed again
// whose message the receiver's record says arrived whole is completed without being
// delivered again. The receiver's record is dropped once the send is completed.
//
// A record is read back from memory its QP's owner can write: a forged one can make the
// router post an entry to that owner's CQ, pop that owner's receive queue, or skip a message
// sent to that owner's QP — nothing another owner's queues see. A receive from an SRQ that
// the SRQ's records still keep when its QP is restored (router/srq_records.h: the new process
// took it back) was the message's, and is let go of. Not covered: datagrams to a multicast
// group (the record names one receiver), receives of XRC SRQs (their CQ is not the QP's),
// error completions, and a message that another QP of
// the same SRQ receives between the SRQ's restore and this QP's (it may take the receive
// this QP's message had: the two are restored a few requests apart).
#pragma once

#include <cstdint>

#include "router/host_objects.h"
#include "router/objects.h"
#include "shm/layout.h"

namespace wharf::router {

// A receive completion about to be made in dst for a message of `sender` (the send at the
// head of its send ring), whose entry `c` goes to dst's receive CQ: of the receive at the head
// of dst's own receive ring, or of one taken from its SRQ that the SRQ's record `srq_record`
// keeps (SrqRecords::kNone: none). Before the receive is let go of and the entry is pushed.
void record_receive_under_way(Qp* dst, const Qp* sender, uint32_t srq_record, const shm::Cqe& c,
                              bool solicited);
// The receive completion recorded is made whole.
void receive_made(Qp* dst);
// Whether the send at the head of sender's ring is a message a previous process delivered to
// dst whole; the record is then dropped (the send is completed without it).
bool delivered_before(Qp* dst, const Qp* sender);
// The send completed: the receiver's record of its message is not needed any more.
void forget_receive(Qp* dst, const Qp* sender);

// A completion about to be made of the send at the head of qp's send ring, whose entry `c`
// goes to its send CQ. Before the ring's consumer index moves and the entry is pushed.
void record_send_under_way(Qp* qp, const shm::Cqe& c);
// The send completion recorded is made.
void send_made(Qp* qp);

// For a QP restored in a new process (its rings, CQs and SRQ adopted, its held receive given
// back): finishes what the previous process left under way in its records.
void finish_local_completions_st(Qp* qp, const HostObjects& objects);
// A reset QP has nothing under way.
void forget_local_completions(Qp* qp);

}  // namespace wharf::router
