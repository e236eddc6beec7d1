// The responder side of tag matching: what a SEND does when it reaches an RC QP on a
// tag-matching SRQ (rdma-core's Documentation/tag_matching.md; the matching list itself is
// router/tag_list.h). Every completion goes to the SRQ's CQ.
//
// The message's first bytes decide:
//  - a TMH with IBV_TMH_EAGER whose tag a posted, unheld buffer takes: the payload after the
//    TMH lands in that buffer (IBV_WC_TM_RECV, MATCH | DATA_VALID, the tag and app_ctx);
//  - IBV_TMH_RNDV taken by a buffer: the router reads the data the RVH names from the
//    requester's memory into it, as the RDMA READ of hardware would (a MATCH completion,
//    then a DATA_VALID one), and sends the requester a FIN: the request's TMH and RVH with
//    opcode IBV_TMH_FIN, into its next receive, after the requester's SEND has completed.
//    A buffer smaller than the data gets the request itself and IBV_WC_TM_RNDV_INCOMPLETE;
//  - EAGER or RNDV that no buffer takes: the whole message goes to the SRQ's next receive as
//    unexpected (IBV_WC_TM_RECV without flags), and the list counts it;
//  - IBV_TMH_NO_TAG: the whole message to the SRQ's next receive (IBV_WC_TM_NO_TAG);
//  - anything else (shorter than a TMH, a FIN, an unknown opcode): an ordinary receive of
//    the SRQ (IBV_WC_RECV).
// Nothing is taken until the message can land: no SRQ receive, or for a rendezvous no
// receive at the requester for its FIN, is an RNR NAK, and the next attempt decides anew.
#include <infiniband/tm_types.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "router/executor.h"
#include "router/host_objects.h"
#include "router/session.h"
#include "router/tag_list.h"

namespace wharf::router {

void Executor::complete_tagged_st(const Responder& dst, uint64_t wr_id, ibv_wc_status status,
                                  uint32_t byte_len, uint32_t flags, uint64_t tag,
                                  uint32_t app_ctx) {
  count_receive_completion(dst.qp, status, byte_len);
  shm::Cqe c = make_cqe(wr_id, status, IBV_WC_TM_RECV, dst.qp->qpn);
  c.byte_len = byte_len;
  c.wc_flags = flags;
  c.tm_tag = tag;
  c.imm_data = app_ctx;
  post_cqe_st(dst.cq, c, false);
}

Executor::Step Executor::execute_tm_send_st(Qp* qp, const SendWork& w, const SegmentList& local,
                                            const Responder& rsp, ibv_wc_status* status) {
  TagList& tags = *rsp.srq->tm;
  uint8_t headers[kTmhSize + kRvhSize] = {};
  const uint64_t header_len = std::min<uint64_t>(local.total, sizeof(headers));
  SegmentList header_copy;
  header_copy.push(Segment{headers, 0, 0, header_len});
  if (copy_segments(local, header_copy, header_len) != 0) {
    *status = IBV_WC_LOC_PROT_ERR;  // the requester's own memory
    return Step::kDone;
  }
  ibv_wc_opcode wc_op = IBV_WC_RECV;
  bool tagged = false;
  if (local.total >= kTmhSize) {
    const TmHeader tmh = parse_tmh(headers);
    tagged = tmh.opcode == IBV_TMH_EAGER || tmh.opcode == IBV_TMH_RNDV;
    if (tmh.opcode == IBV_TMH_NO_TAG) wc_op = IBV_WC_TM_NO_TAG;
    if (tagged) wc_op = IBV_WC_TM_RECV;
    // A rendezvous request too short for its RVH is software's to make sense of.
    const bool rndv_whole = tmh.opcode == IBV_TMH_RNDV && local.total >= kTmhSize + kRvhSize;
    const std::optional<uint32_t> slot =
        tagged && (tmh.opcode == IBV_TMH_EAGER || rndv_whole) ? tags.match(tmh.tag) : std::nullopt;
    if (slot && rndv_whole) return execute_rndv_st(qp, local, rsp, *slot, headers, status);
    if (slot) {
      const TaggedBuffer& b = tags.at(*slot);
      const SegmentList payload = slice(local, kTmhSize, local.total - kTmhSize);
      ibv_wc_status requester_status = IBV_WC_SUCCESS;
      const ibv_wc_status recv_status =
          place_send_st(payload, {}, b.sges.data(), static_cast<uint32_t>(b.sges.size()),
                        rsp.srq->owner, rsp.srq->pd, &requester_status);
      if (recv_status == IBV_WC_GENERAL_ERR) {  // the requester's own memory: nothing taken
        *status = requester_status;
        return Step::kDone;
      }
      const uint64_t wr_id = tags.take(*slot).recv_wr_id;
      if (recv_status != IBV_WC_SUCCESS) {
        complete_tagged_st(rsp, wr_id, recv_status, 0, 0, 0, 0);
        *status = requester_status;
        to_error_st(rsp.qp);
        return Step::kDone;
      }
      complete_tagged_st(rsp, wr_id, IBV_WC_SUCCESS, static_cast<uint32_t>(payload.total),
                         IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, tmh.tag, tmh.app_ctx);
      return Step::kDone;
    }
  }

  // To the SRQ's ordinary receives.
  RecvSource rsrc;
  RecvWork rw;
  if (!take_recv_st(rsp, &rsrc, &rw)) {
    if (!rsrc.ring.has_value()) return no_peer_st(qp, status);  // the SRQ is corrupt
    return receiver_not_ready_st(qp, rsp.qp, status);
  }
  land_send_st(local, {}, rsp, &rsrc, rw, wc_op, 0, origin_of(w, qp), /*reliable=*/true, status);
  if (tagged && *status == IBV_WC_SUCCESS) tags.note_unexpected();
  return Step::kDone;
}

Executor::Step Executor::execute_rndv_st(Qp* qp, const SegmentList& local, const Responder& rsp,
                                         uint32_t slot, const uint8_t* headers,
                                         ibv_wc_status* status) {
  TagList& tags = *rsp.srq->tm;
  const TmHeader tmh = parse_tmh(headers);
  const RndvHeader rvh = parse_rvh(headers + kTmhSize);
  {
    // The FIN needs a receive at the requester: until it has one, nothing happens (RNR).
    RecvSource fin_src;
    RecvWork fin_rw;
    if (!take_recv_st(responder_of(qp), &fin_src, &fin_rw))
      return receiver_not_ready_st(qp, qp, status);
  }
  SegmentList target;
  const TaggedBuffer& b = tags.at(slot);
  const bool resolved = resolve_sges_st(b.sges.data(), static_cast<uint32_t>(b.sges.size()),
                                        rsp.srq->owner, rsp.srq->pd, true, &target);
  const uint64_t wr_id = tags.take(slot).recv_wr_id;
  auto fail = [&](ibv_wc_status recv_status) {
    complete_tagged_st(rsp, wr_id, recv_status, 0, 0, 0, 0);
    to_error_st(rsp.qp);
    return Step::kDone;
  };
  if (!resolved) return fail(IBV_WC_LOC_PROT_ERR);
  if (target.total < rvh.len) {
    // Software takes over: the request itself lands in the buffer.
    const uint64_t n = std::min(local.total, target.total);
    if (copy_segments(local, target, n) != 0) return fail(IBV_WC_LOC_PROT_ERR);
    complete_tagged_st(rsp, wr_id, IBV_WC_TM_RNDV_INCOMPLETE, static_cast<uint32_t>(n),
                       IBV_WC_TM_MATCH, tmh.tag, tmh.app_ctx);
    return Step::kDone;
  }
  complete_tagged_st(rsp, wr_id, IBV_WC_SUCCESS, 0, IBV_WC_TM_MATCH, tmh.tag, tmh.app_ctx);
  // The READ: the requester's QP and memory must allow it, as for any RDMA READ request.
  Mr* mr = rvh.len != 0 ? ctx_.objects.mr_by_key(rvh.rkey) : nullptr;
  if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ) ||
      (rvh.len != 0 && !remote_access_allowed(mr, qp->owner, qp->pd, qp->qpn,
                                              IBV_ACCESS_REMOTE_READ, rvh.va, rvh.len)))
    return fail(IBV_WC_REM_ACCESS_ERR);
  SegmentList source;
  if (mr != nullptr) append_mr_range(&source, *mr, rvh.va, rvh.len);
  if (const int err = copy_segments(source, target, rvh.len); err != 0)
    return fail(err == kSourceFault ? IBV_WC_REM_ACCESS_ERR : IBV_WC_LOC_PROT_ERR);
  complete_tagged_st(rsp, wr_id, IBV_WC_SUCCESS, rvh.len, IBV_WC_TM_DATA_VALID, 0, 0);
  fin_.to = qp;
  fin_.from = rsp.qp;
  std::memcpy(fin_.message, headers, sizeof(fin_.message));
  fin_.message[0] = IBV_TMH_FIN;
  return Step::kDone;
}

void Executor::send_pending_fin_st() {
  if (fin_.to == nullptr) return;
  Qp* to = fin_.to;
  Qp* from = fin_.from;
  fin_.to = fin_.from = nullptr;
  // The receive execute_rndv_st saw is still there: the requester's queue has no other
  // consumer (the TM QP's sends, its peer's only source, go through the router; an SRQ's
  // receive it claimed waits in Srq::claimed).
  const Responder rsp = responder_of(to);
  RecvSource src;
  RecvWork rw;
  if (!take_recv_st(rsp, &src, &rw)) {
    spdlog::warn("QP {:#x}: the receive for a rendezvous FIN is gone", from->qpn);
    to_error_st(from);
    return;
  }
  SegmentList fin;
  fin.push(Segment{fin_.message, 0, 0, sizeof(fin_.message)});
  ibv_wc_status status = IBV_WC_SUCCESS;
  land_send_st(fin, {}, rsp, &src, rw, IBV_WC_RECV, 0, Origin{from->qpn}, /*reliable=*/true,
               &status);
  if (status != IBV_WC_SUCCESS) to_error_st(from);
}

}  // namespace wharf::router
