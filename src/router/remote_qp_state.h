// What the host-to-host engine (router/remote.h) keeps per QP, in its own header so that the
// file that keeps it across router restarts (router/kept_remote_states.h) can hold it too.
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>

#include "rc/requester.h"
#include "rc/responder.h"
#include "router/objects.h"

namespace wharf::router {

// What the host-to-host engine keeps per QP: owned by RemotePath, found through Qp::remote.
// The transport's state machines are rc/'s; this adds what executing requests here needs.
struct RemoteQpState {
  // A request in the requester's window. Its work request stays in the QP's send ring until
  // it completes (its slot is released then, as a NIC frees a WQE, so the application can
  // have at most the ring's entries outstanding): sending it again, placing a READ's data
  // and completing it copy the WQE out of the ring again (RemotePath::reread_st). A WQE the
  // application rewrote meanwhile (another opcode or length) cannot be sent or placed.
  struct Work {
    uint32_t ring_index = 0;  // its position in the send ring
    uint32_t byte_len = 0;    // what its SGEs or inline data held when it was issued
    uint8_t opcode = 0;       // enum ibv_wr_opcode
    bool signaled = false;
  };
  RemoteQpState(uint32_t sq_psn, uint32_t rq_psn) : requester(sq_psn), responder(rq_psn) {}
  explicit RemoteQpState(const ParkedRemoteQp& p)
      : requester(p.next_psn),
        responder(p.epsn, p.msn),
        requester_host(p.requester_host),
        peer_incarnation(p.peer_incarnation) {}
  // A completion this engine was making (RemotePath::record_completion_st), recorded before
  // the ring's consumer index moved past its work request and before its CQ entry was pushed:
  // a process that dies between the two leaves a WQE taken and an entry that may or may not be
  // in the CQ, and the next process finishes it (RemotePath::restore_st) instead of taking
  // or completing the work twice. The last one of each direction is kept.
  struct CompletionUnderWay {
    shm::Cqe cqe{};            // the entry, if `post`
    uint32_t ring_index = 0;   // the work request's position in its ring
    uint32_t cq_position = 0;  // the CQ's producer index before the entry was pushed
    uint32_t message_psn = 0;  // a receive: the first and last PSN of its message, and the
    uint32_t end_psn = 0;      // message number before it ended
    uint32_t msn = 0;
    bool post = false;  // whether it has a CQ entry (an unsignaled SEND has none)
    bool solicited = false;
    // A receive from the QP's SRQ: the SRQ's record of it (router/srq_records.h), which the
    // SRQ keeps until the receive is let go of; SrqRecords::kNone for one from the QP's own
    // receive queue, whose `ring_index` says where it was.
    uint32_t srq_record = SrqRecords::kNone;
  };
  // Where the process that continues this state finds the QP's queues: its rings' consumer
  // indices (`rq` is 0 for a QP without a receive queue of its own) and, for a QP on an SRQ,
  // the SRQ's records of the receives the restores of the SRQ and the QP took back: the one
  // this QP holds and the SRQ's next (SrqRecords::kNone: none).
  struct RingTails {
    uint32_t sq = 0;
    uint32_t rq = 0;
    uint32_t srq_held = SrqRecords::kNone;
    uint32_t srq_claimed = SrqRecords::kNone;
  };
  // The completions a new process must finish: their WQEs were taken, and each entry is
  // posted unless its CQ holds it already.
  struct Unfinished {
    std::optional<CompletionUnderWay> send, receive;
  };
  // What a new process continues from: the PSNs, and what it must finish first.
  struct Continuation {
    ParkedRemoteQp at;
    Unfinished unfinished;
  };
  // Where this state continues in a new router process after this one died at any instant,
  // given the rings as that process finds them: the requester from its oldest request whose
  // WQE is still in the send ring (which the new process issues again from there under the
  // same PSNs), the responder from the start of the message it was in (a SEND or WRITE
  // executed again is placed again whole) unless it had taken its receive already, then
  // after it. For a quiescent state, parked().
  Continuation continuation(RingTails tails) const;
  // What continues this state once it is given back: the inverse of the constructor above
  // (only for a quiescent requester and responder).
  ParkedRemoteQp parked() const {
    return ParkedRemoteQp{requester.next_psn(),
                          responder.epsn(),
                          responder.msn(),
                          peer_incarnation,
                          static_cast<int16_t>(requester_host),
                          true};
  }

  rc::Requester<Work> requester;
  rc::Responder responder;
  // Packets of the window the link had no room for yet: from PSN unsent_psn to the end of the
  // window (RemotePath::transmit_st, send_unsent_st).
  bool unsent = false;
  uint32_t unsent_psn = 0;
  // UC: the message the link had no room for all of, from PSN `psn` on; it completes once it
  // all went (UC keeps no window); `pending` says whether it holds a message.
  struct UcTail {
    rc::Request<Work> request;
    uint32_t psn = 0;
    bool pending = false;
  };
  UcTail uc_tail;
  int requester_host = -1;
  // The incarnation of the peer's router this QP last heard from (0: none yet).
  uint32_t peer_incarnation = 0;
  bool acking = false;  // in RemotePath's acking_ list
  CompletionUnderWay sending, receiving;
  // Its PSNs at RemotePath's last parking sweep (next PSN << 32 | expected PSN; all ones: not
  // swept yet): unchanged at the next one, the QP was quiet for a whole sweep period.
  uint64_t swept_psns = ~uint64_t{0};
};
// Plain bytes, no pointers (rc/'s state and the fields above): RemotePath keeps it in place in
// a file that outlives the process (router/kept_remote_states.h).
static_assert(std::is_trivially_copyable_v<RemoteQpState>);

}  // namespace wharf::router
