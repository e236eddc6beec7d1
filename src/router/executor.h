// The executor of send work and its building blocks, shared by the local data path
// (datapath.cc) and the host-to-host engine (remote.cc). Router thread only (`_st`).
//
// It works with the parts of the router a PathContext names, never with the Router itself:
// the objects it finds by number, the scheduler, the direct lines, the multicast groups and
// flow rules, and the host-to-host engine.
#pragma once

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "proto/messages.h"
#include "router/mr_access.h"
#include "router/objects.h"
#include "router/tag_list.h"
#include "router/wqe.h"
#include "shm/layout.h"

namespace wharf::emulator {
class RnicEmulator;
}

namespace wharf::router {

class DirectLines;
class FlowRules;
class HostObjects;
class MulticastGroups;
class RemotePath;
class Scheduler;
class Session;

// What the data paths work with. The Router owns every part and outlives the context.
struct PathContext {
  HostObjects& objects;
  Scheduler& scheduler;
  DirectLines& direct;
  const MulticastGroups& multicast;
  const FlowRules& flows;
  uint8_t link_layer = 0;        // RouterConfig::link_layer
  RemotePath* remote = nullptr;  // the host-to-host engine; nullptr without a cluster
  // The RNIC emulator (wharfd --emulate); nullptr when nothing is emulated.
  emulator::RnicEmulator* emulator = nullptr;
};

// What serves a request arriving at QP `qp`: whose memory it may reach (owner, pd), where its
// receives come from (srq, else qp's own receive queue) and where they complete (cq). For RC,
// UC and UD all are qp's own; an XRC target has none of its own and is served by the XRC SRQ
// each request names, in the target's domain, whose PD protects the memory (IBTA annex A14);
// an RSS QP likewise by the WQ its hash picks. A QP on a tag-matching SRQ receives from it
// and completes on the SRQ's CQ, as the TM-SRQ's "dedicated CQ" reports all its receives.
struct Responder {
  Qp* qp = nullptr;
  Session* owner = nullptr;
  Pd* pd = nullptr;
  Srq* srq = nullptr;
  Cq* cq = nullptr;
};
inline Responder responder_of(Qp* qp) {
  const bool tm = qp->srq != nullptr && qp->srq->tm != nullptr;
  return {qp, qp->owner, qp->pd, qp->srq, tm ? qp->srq->cq : qp->recv_cq};
}
// qp served by a queue that completes on its own CQ: an XRC SRQ, or a WQ of an RSS QP.
inline Responder srq_responder(Qp* qp, Srq* srq) { return {qp, srq->owner, srq->pd, srq, srq->cq}; }

// A receive WQE taken (peeked) from a QP's RQ or its SRQ, or the one the QP holds for a
// message under way (`held`: already off the SRQ).
struct RecvSource {
  std::optional<shm::RingConsumerView> ring;
  Srq* srq = nullptr;
  Pd* pd = nullptr;
  uint32_t max_sge = 0;
  uint32_t slot_size = 0;
  HeldRecv* held = nullptr;
  // The SRQ's record of the receive (router/srq_records.h): the one a QP holds, or the SRQ's
  // claimed next; SrqRecords::kNone for one from a QP's own ring, or one no record keeps.
  uint32_t srq_record() const {
    return held != nullptr  ? held->record
           : srq != nullptr ? srq->claimed_record
                            : SrqRecords::kNone;
  }
};

// The sender of a received message, as its receive completion reports it.
struct Origin {
  uint32_t qpn = 0;
  uint16_t slid = 0;
  uint8_t sl = 0;
  bool solicited = false;
  bool has_imm = false;
  // Immediate data, network order as the sender's application gave it; for a SEND_WITH_INV
  // the key it invalidated (host order, as ibv_wc.invalidated_rkey).
  uint32_t imm = 0;
};

constexpr uint32_t kGrhSize = 40;
// The 40-byte GRH a UD receive buffer starts with (IBA 8.3; the fields a sender's address
// vector gives): version 6, traffic class, flow label, payload length, next header BTH.
void build_grh(uint8_t out[kGrhSize], uint32_t ver_tc_flow, uint16_t payload_len, uint8_t hop_limit,
               const proto::Gid& sgid, const proto::Gid& dgid);

// A QP no longer holds its receive (completed, flushed, or dropped with the QP's reset or
// destruction): its record is released. False when the receive's SRQ is gone meanwhile (an
// XRC SRQ destroyed under a target), which took the record with it.
bool let_go_of_held_recv(HeldRecv* held, const HostObjects& objects);

// Writes one CQE and raises a completion event if the CQ is armed for it.
void post_cqe_st(Cq* cq, const shm::Cqe& cqe, bool solicited);
// Finishes a completion a previous process recorded (at CQ position `from`) and may have made
// before it died: posts cqe unless cq holds it since (shm::CqProducer::published_since); when
// the CQ wrapped since and it cannot tell, warns and does not post it again.
void post_cqe_unless_published_st(Cq* cq, uint64_t from, const shm::Cqe& cqe, bool solicited);
shm::Cqe make_cqe(uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t qpn);
// The entry a receive rw of dst completes with (Executor::complete_recv_st and
// post_recv_completion_st post it).
shm::Cqe recv_cqe(const Qp* dst, const RecvWork& rw, ibv_wc_status status, ibv_wc_opcode op,
                  uint32_t byte_len, const Origin& from, uint32_t flags);

// Executes WQEs of one QP. Friend-free: uses only public object state.
class Executor {
 public:
  Executor(const PathContext& ctx, uint64_t now) : ctx_(ctx), now_(now) {}

  bool process_qp_st(Qp* qp);

  // The RNIC emulator's charges (wharfd --emulate; nothing without it): a work request that
  // starts needs its QP's context and translates its local SGEs (not inline data);
  // charge_memory_st translates bytes [from, from + len) of an SGE list as placed or read, and
  // charge_remote_st a responder's QP and the target of an RDMA or atomic access.
  void charge_start_st(const Qp* qp, const SendWork& w);
  void charge_memory_st(const shm::Sge* sges, uint32_t n, uint64_t from, uint64_t len);
  void charge_remote_st(const Qp* dst, uint32_t rkey, uint64_t va, uint64_t len);
  // How much of a long message between local QPs one pass copies (router/datapath.cc).
  uint64_t copy_part() const;

  // Building blocks the host-to-host engine shares.
  bool gather_local_st(Qp* qp, const SendWork& w, bool need_write, SegmentList* out);
  bool resolve_sges_st(const shm::Sge* sges, uint32_t n, const Session* owner, const Pd* pd,
                       bool need_write, SegmentList* out);
  bool take_recv_st(const Responder& dst, RecvSource* src, RecvWork* rw);
  bool take_recv_st(Qp* dst, RecvSource* src, RecvWork* rw) {
    return take_recv_st(responder_of(dst), src, rw);
  }
  // The next receive of dst: the one it holds for a message under way, else the head of its
  // RQ (left there until consume_recv_st), or one claimed from its SRQ for the router (kept
  // in Srq::claimed until consume_recv_st: the SRQ's express lines claim receives too).
  // hold_recv_st: a message that will arrive in parts takes the receive just claimed from an
  // SRQ for itself at once, so that no other sender gets it before the message ends; dst keeps
  // it (QpExtras::held_recv). A QP's own RQ has no other sender: its receive stays at the head.
  // consume_recv_st: the message is done with the receive (pops it, or lets go of the held).
  void hold_recv_st(const Responder& dst, RecvSource* src, const RecvWork& rw);
  void consume_recv_st(RecvSource* src);
  void to_error_st(Qp* qp);
  // Delivers a UD datagram to dst (receiving, Q_Key checked by the caller): `grh` is its
  // 40-byte GRH, or nullptr when the sender addressed it without one. Drops it silently when
  // dst has no receive posted or too small a one (C9-...).
  void deliver_ud_st(Qp* dst, const SegmentList& payload, const uint8_t* grh, const Origin& from);
  void complete_recv_st(const Responder& dst, const RecvWork& rw, ibv_wc_status status,
                        ibv_wc_opcode op, uint32_t byte_len, const Origin& from, uint32_t flags);
  void complete_recv_st(Qp* dst, const RecvWork& rw, ibv_wc_status status, ibv_wc_opcode op,
                        uint32_t byte_len, const Origin& from, uint32_t flags) {
    complete_recv_st(responder_of(dst), rw, status, op, byte_len, from, flags);
  }
  // Posts c, built by recv_cqe, for a receive of dst and counts it: complete_recv_st for a
  // caller that needs the entry itself too (the host-to-host engine records it first).
  void post_recv_completion_st(const Responder& dst, const shm::Cqe& c, bool solicited);
  // Delivers a datagram sent to a multicast group to every QP of this router attached to it
  // in virtual network `network_id`: the group is `dgid` when the sender's address vector had
  // a GRH (`grh` then its 40 bytes), else LID `dlid`; each member checks `qkey` as for any
  // UD datagram and gets one copy (router/multicast.cc).
  void deliver_multicast_st(uint32_t network_id, const proto::Gid* dgid, uint16_t dlid,
                            uint32_t qkey, const SegmentList& payload, const uint8_t* grh,
                            const Origin& from);

  // Delivers a frame sent in virtual network `network_id` (by RAW_PACKET QP src of this
  // router, or from another host: nullptr) to every other RAW_PACKET QP of that network with
  // a rule that takes it, one copy each; a QP with no receive posted misses it, as a frame on
  // a wire would be missed (router/flow_steering.cc).
  void deliver_frame_st(uint32_t network_id, const Qp* src, const SegmentList& frame);

 private:
  bool claim_srq_recv_st(Srq* srq, shm::RingConsumerView* ring, shm::RingStatus* st);
  // kDone: the WQE is finished (its status says how); kWait: it stays at the head until
  // qp->wait_until_ns; kPartial: it stays at the head and goes on in the next pass.
  enum class Step { kDone, kWait, kPartial };

  // A datagram into dst's next receive: after 40 bytes of room for a GRH (UD; `grh` is written
  // there unless null), or at the buffer's start (a RAW_PACKET frame, grh_room false).
  void deliver_datagram_st(const Responder& dst, const SegmentList& payload, bool grh_room,
                           const uint8_t* grh, const Origin& from);

  bool flush_st(Qp* qp);
  // The receive qp holds, if any, completes with WR_FLUSH_ERR. True if there was one.
  bool flush_held_recv_st(Qp* qp);
  Step execute_st(Qp* qp, const SendWork& w, ibv_wc_status* status, uint32_t* byte_len);
  Step execute_connected_st(Qp* qp, const SendWork& w, const SegmentList& local,
                            ibv_wc_status* status);
  void execute_ud_st(Qp* qp, const SendWork& w, const SegmentList& local, ibv_wc_status* status);
  Step no_peer_st(Qp* qp, ibv_wc_status* status);
  Step receiver_not_ready_st(Qp* qp, const Qp* dst, ibv_wc_status* status);
  // The bytes [from, from + len) of a message, which one call places (len may run past the
  // message's end: then to the end).
  struct MessagePart {
    uint64_t from = 0;
    uint64_t len = UINT64_MAX;
  };
  // Copies `part` of a SEND's payload to the same offset in the buffers sges[0, n) (of
  // `owner`, protected by `pd`), which must hold the whole payload: IBV_WC_SUCCESS when it
  // landed; else the status the receive completes with, and *requester_status what the
  // requester sees (REM_OP for protection, REM_INV_REQ for length); or IBV_WC_GENERAL_ERR
  // with *requester_status LOC_PROT_ERR when the requester's own memory failed, which leaves
  // the responder untouched.
  ibv_wc_status place_send_st(const SegmentList& payload, MessagePart part, const shm::Sge* sges,
                              uint32_t n, const Session* owner, const Pd* pd,
                              ibv_wc_status* requester_status);
  // Places `part` of a message into the receive `rw` taken (peeked) from *rsrc; after the last
  // part it completes the receive with wc_op and flags. When the responder fails (protection,
  // length), the receive completes in error and, if reliable, rsp.qp enters ERR and *status
  // becomes the requester's error; a fault reading `payload` (the requester's memory) is
  // *status LOC_PROT_ERR, taking nothing. False: a part was placed and more are to come.
  bool land_send_st(const SegmentList& payload, MessagePart part, const Responder& rsp,
                    RecvSource* rsrc, const RecvWork& rw, ibv_wc_opcode wc_op, uint32_t flags,
                    const Origin& from, bool reliable, ibv_wc_status* status);
  // A message that arrived whole takes its receive from *rsrc and completes it with c.
  // Recorded first (router/local_completions.h) when it is a message of the send this
  // executor is completing, so that a router process started after a crash neither loses the
  // receive nor delivers the message again.
  void complete_delivery_st(const Responder& rsp, RecvSource* rsrc, const shm::Cqe& c,
                            bool solicited);
  // A SEND from RC QP qp to rsp, whose SRQ is a tag-matching one (router/tag_matching.cc).
  Step execute_tm_send_st(Qp* qp, const SendWork& w, const SegmentList& local, const Responder& rsp,
                          ibv_wc_status* status);
  // The rendezvous part of it: the tagged buffer in `slot` matched; the data is read from the
  // requester's memory and the requester gets a FIN.
  Step execute_rndv_st(Qp* qp, const SegmentList& local, const Responder& rsp, uint32_t slot,
                       const uint8_t* headers, ibv_wc_status* status);
  void complete_tagged_st(const Responder& dst, uint64_t wr_id, ibv_wc_status status,
                          uint32_t byte_len, uint32_t flags, uint64_t tag, uint32_t app_ctx);
  // The responder qp's connected peer is (for an XRC initiator: the target it is connected to,
  // served by the XRC SRQ `srqn` names). False when there is none that answers; *bad_srqn
  // then says whether the peer answered but the SRQ number is not one of its domain's.
  bool find_responder_st(Qp* qp, uint32_t srqn, Responder* out, bool* bad_srqn);
  void qp_fatal_st(Qp* qp, const char* why);
  Origin origin_of(const SendWork& w, const Qp* src) const;

  // A rendezvous FIN execute_rndv_st decided on: sent into `to`'s next receive once the
  // requester's SEND has completed, as hardware sends it after the READ that follows the ACK.
  void send_pending_fin_st();
  struct PendingFin {
    Qp* to = nullptr;
    Qp* from = nullptr;
    uint8_t message[kTmhSize + kRvhSize] = {};
  };

  const PathContext& ctx_;
  uint64_t now_;
  PendingFin fin_;
  // While process_qp_st executes a work request of a QP's send ring: that QP; and the QP a
  // message of it was delivered to (complete_delivery_st), whose record of it is dropped once
  // the send is completed.
  Qp* requester_ = nullptr;
  Qp* delivered_to_ = nullptr;
};

}  // namespace wharf::router
