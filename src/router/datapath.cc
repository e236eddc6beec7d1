// The data path: executes send-queue work of active QPs, host-locally, with IBTA semantics.
// Everything read from a ring is copied out first and validated against the owning
// session's objects; every failure becomes a completion with the status hardware reports.
// Runs only on the router thread (`_st`).
#include <infiniband/verbs.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "common/clock.h"
#include "emulator/rnic_emulator.h"
#include "proto/datagram.h"
#include "proto/device.h"
#include "proto/multicast.h"
#include "proto/qp_rules.h"
#include "rc/timers.h"
#include "router/direct_lines.h"
#include "router/executor.h"
#include "router/host_objects.h"
#include "router/local_completions.h"
#include "router/memory_window.h"
#include "router/mr_access.h"
#include "router/peer_rules.h"
#include "router/remote.h"
#include "router/scheduler.h"
#include "router/session.h"
#include "router/wqe.h"

namespace wharf::router {
namespace {

constexpr int kBudgetPerQp = 32;

CopyHint copy_hint(uint64_t message_len) {
  return message_len >= kStreamingMessageBytes ? CopyHint::kStreaming : CopyHint::kCached;
}

}  // namespace

// Writes one CQE and raises a completion event if the CQ is armed for it.
void post_cqe_st(Cq* cq, const shm::Cqe& cqe, bool solicited) {
  if (cq->overrun) return;
  if (cq->ring.push(cqe) != shm::RingStatus::kOk) {
    // C11-...: a CQ overrun is an asynchronous CQ error; the CQ stops accepting entries.
    cq->overrun = true;
    spdlog::warn("CQ {} of pid {} overrun", cq->handle, cq->owner->pid());
    cq->owner->post_async_event(IBV_EVENT_CQ_ERR, cq->handle);
    return;
  }
  shm::wake_napping_poller(cq->notify);
  if (cq->channel != nullptr)
    cq->owner->raise_cq_event_st(cq, solicited, cqe.status == IBV_WC_SUCCESS);
}

void post_cqe_unless_published_st(Cq* cq, uint64_t from, const shm::Cqe& cqe, bool solicited) {
  bool known = false;
  if (cq->ring.published_since(from, cqe, &known)) return;
  if (!known) {
    spdlog::warn(
        "QP {:#x}: whether the previous process completed work request {:#x} is unknown (its "
        "CQ wrapped since); not completed again",
        cqe.qp_num, cqe.wr_id);
    return;
  }
  post_cqe_st(cq, cqe, solicited);
}

shm::Cqe make_cqe(uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t qpn) {
  shm::Cqe c{};
  c.wr_id = wr_id;
  c.status = status;
  c.opcode = opcode;
  c.qp_num = qpn;
  return c;
}

uint64_t Executor::copy_part() const { return ctx_.scheduler.copy_part(now_); }

bool Executor::process_qp_st(Qp* qp) {
  ibv_qp_state state = qp->state();
  if (state == IBV_QPS_ERR) return flush_st(qp);
  if (state != IBV_QPS_RTS) return false;
  if (RemotePath* remote = ctx_.remote) {
    if (int host = remote->peer_host(qp); host >= 0)
      return remote->process_requester_st(this, qp, host, now_);
  }
  if (qp->work().wait_until_ns != 0) {
    if (now_ < qp->work().wait_until_ns) return false;
    qp->work_under_way->wait_until_ns = 0;
  }
  bool did = false;
  shm::RingConsumerView sq = qp->sq();
  for (int budget = kBudgetPerQp; budget > 0 && now_ >= qp->work().paced_until_ns; --budget) {
    shm::RingStatus st;
    const uint8_t* slot = sq.peek(&st);
    if (slot == nullptr) {
      if (st == shm::RingStatus::kCorrupt) qp_fatal_st(qp, "send ring index out of range");
      break;
    }
    SendWork w;
    ibv_wc_status status = IBV_WC_SUCCESS;
    uint32_t byte_len = 0;
    const bool starts = qp->work().copied_bytes == 0;
    if (!qp->copy_send(slot, &w)) {
      status = IBV_WC_LOC_QP_OP_ERR;
    } else if (starts && !ctx_.scheduler.admit(qp, rate_charge(w), now_)) {
      break;  // over its rate: the WQE stays queued until paced_until_ns
    } else {
      if (starts) charge_start_st(qp, w);
      requester_ = qp;
      const Step step = execute_st(qp, w, &status, &byte_len);
      requester_ = nullptr;
      if (step != Step::kDone) {
        // The head WQE stays queued: for its next part, or until wait_until_ns; a message cut
        // off (its receiver went away or ran dry) starts over when it is retried.
        if (step == Step::kWait) ctx_.scheduler.work(qp).copied_bytes = 0;
        return true;
      }
    }
    const uint64_t bytes = payload_bytes(w);
    if (qp->work().copied_bytes == 0 && bytes <= Scheduler::kCopyPartShared)
      ctx_.scheduler.saw_short_work(now_);
    if (QpWork* work = qp->work_under_way) {
      work->copied_bytes = 0;
      work->rnr_attempts = work->retry_attempts = 0;
    }
    // Once the failed WQE leaves the ring the library would see an idle send queue: it must
    // not execute anything directly before the QP is in ERR.
    if (status != IBV_WC_SUCCESS) ctx_.direct.disable(qp);
    const bool signaled = (w.hdr.flags & shm::kWqeSignaled) || qp->sq_sig_all;
    const bool post = signaled || status != IBV_WC_SUCCESS;
    shm::Cqe c{};
    if (post) {
      c = make_cqe(w.hdr.wr_id, status, proto::send_wc_opcode(w.hdr.opcode), qp->qpn);
      c.byte_len = byte_len;
      record_send_under_way(qp, c);  // router/local_completions.h
    }
    sq.pop();
    did = true;
    if (proto::is_atomic(w.hdr.opcode)) qp->local_completions()->atomic.clear();
    // A WQE that did not copy out whole is garbage: only its status counts.
    count_send_completion(qp, w.hdr.opcode, status, status == IBV_WC_SUCCESS ? bytes : 0);
    if (post) {
      post_cqe_st(qp->send_cq, c, false);
      send_made(qp);
    }
    if (Qp* receiver = std::exchange(delivered_to_, nullptr)) forget_receive(receiver, qp);
    send_pending_fin_st();
    if (status != IBV_WC_SUCCESS) {
      to_error_st(qp);
      return true;
    }
  }
  return did;
}

void Executor::charge_start_st(const Qp* qp, const SendWork& w) {
  if (ctx_.emulator == nullptr) return;
  ctx_.emulator->touch_qp_st(qp->qpn);
  if (!(w.hdr.flags & shm::kWqeInline)) charge_memory_st(w.sge, w.hdr.num_sge, 0, UINT64_MAX);
}

void Executor::charge_memory_st(const shm::Sge* sges, uint32_t n, uint64_t from, uint64_t len) {
  if (ctx_.emulator == nullptr) return;
  uint64_t start = 0;  // of sges[i] within the list
  for (uint32_t i = 0; i < n && len != 0; start += sges[i].length, ++i) {
    const uint64_t end = start + sges[i].length;
    if (end <= from) continue;
    const uint64_t skip = from > start ? from - start : 0;
    const uint64_t take = std::min<uint64_t>(sges[i].length - skip, len);
    ctx_.emulator->touch_memory_st(sges[i].lkey, sges[i].addr + skip, take);
    from += take;
    len -= take;
  }
}

void Executor::charge_remote_st(const Qp* dst, uint32_t rkey, uint64_t va, uint64_t len) {
  if (ctx_.emulator == nullptr) return;
  ctx_.emulator->steer_to_qp_st(dst->qpn);
  ctx_.emulator->touch_memory_st(rkey, va, len);
}

// Resolves the WQE's local buffers. need_write: the router will write them (READ/atomic).
bool Executor::gather_local_st(Qp* qp, const SendWork& w, bool need_write, SegmentList* out) {
  if (w.hdr.flags & shm::kWqeInline) {
    if (need_write) return false;
    return out->push(Segment{const_cast<uint8_t*>(w.inline_data), 0, 0, w.hdr.inline_len});
  }
  return resolve_sges_st(w.sge, w.hdr.num_sge, qp->owner, qp->pd, need_write, out);
}

// Appends the memory of each SGE, checking that its lkey names an MR of `owner` in `pd`
// that contains it (and allows local writes when need_write: C10-... 10.6.3.2).
bool Executor::resolve_sges_st(const shm::Sge* sges, uint32_t n, const Session* owner, const Pd* pd,
                               bool need_write, SegmentList* out) {
  for (uint32_t i = 0; i < n; ++i) {
    const shm::Sge& s = sges[i];
    if (s.length == 0) continue;
    Mr* mr = ctx_.objects.mr_by_key(s.lkey);
    // A window's key is an rkey only (IBTA 10.6.7): never a local key.
    if (mr == nullptr || mr->parent != nullptr || mr->owner != owner || mr->pd != pd ||
        !mr_contains(*mr, s.addr, s.length))
      return false;
    if (need_write && !(mr->access & IBV_ACCESS_LOCAL_WRITE)) return false;
    if (!append_mr_range(out, *mr, s.addr, s.length)) return false;
  }
  return true;
}

Executor::Step Executor::execute_st(Qp* qp, const SendWork& w, ibv_wc_status* status,
                                    uint32_t* byte_len) {
  const uint8_t op = w.hdr.opcode;
  if (proto::is_window_op(op)) {
    *status = execute_window_op(ctx_.objects, qp, w.hdr);
    return Step::kDone;
  }
  const bool writes_local = op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
                            op == IBV_WR_ATOMIC_FETCH_AND_ADD;
  SegmentList local;
  if (!gather_local_st(qp, w, writes_local, &local)) {
    *status = IBV_WC_LOC_PROT_ERR;
    return Step::kDone;
  }
  *byte_len = static_cast<uint32_t>(local.total);
  if (local.total > device::kMaxMsgSize) {
    *status = IBV_WC_LOC_LEN_ERR;
    return Step::kDone;
  }
  if (qp->type == IBV_QPT_UD) {
    execute_ud_st(qp, w, local, status);
    return Step::kDone;
  }
  if (qp->type == IBV_QPT_RAW_PACKET) {
    // A frame has an Ethernet header, and no more bytes than a jumbo frame.
    if (local.total < device::kMinRawFrame || local.total > device::kMaxRawFrame) {
      *status = IBV_WC_LOC_LEN_ERR;
      return Step::kDone;
    }
    deliver_frame_st(qp->owner->container()->network_id, qp, local);
    if (RemotePath* remote = ctx_.remote) remote->flood_frame_st(qp, local);
    return Step::kDone;
  }
  return execute_connected_st(qp, w, local, status);
}

// RC: the peer did not answer (missing, wrong address, not ready): retry after the local
// ACK timeout, retry_cnt times (for ever with timeout 0), then RETRY_EXC_ERR. UC: the
// message is silently lost.
Executor::Step Executor::no_peer_st(Qp* qp, ibv_wc_status* status) {
  if (qp->type != IBV_QPT_RC) return Step::kDone;
  if (rc::out_of_retries(qp->attr.timeout, qp->work().retry_attempts, qp->attr.retry_cnt)) {
    *status = IBV_WC_RETRY_EXC_ERR;
    return Step::kDone;
  }
  QpWork& work = ctx_.scheduler.work(qp);
  work.retry_attempts++;
  work.wait_until_ns = now_ + rc::ack_timeout_ns(qp->attr.timeout);
  return Step::kWait;
}

bool Executor::find_responder_st(Qp* qp, uint32_t srqn, Responder* out, bool* bad_srqn) {
  *bad_srqn = false;
  Qp* dst = ctx_.objects.qp_by_qpn(qp->attr.dest_qp_num);
  if (dst == nullptr || !answers(*qp, *dst, ctx_.link_layer)) return false;
  if (qp->type != IBV_QPT_XRC_SEND) {
    *out = responder_of(dst);
    return true;
  }
  Srq* srq = ctx_.objects.srq_by_srqn(srqn);
  if (srq == nullptr || srq->xrc != dst->xrc()) {
    *bad_srqn = true;
    return false;
  }
  *out = srq_responder(dst, srq);
  return true;
}

// C9-...: an RNR NAK from dst; rnr_retry 7 retries forever.
Executor::Step Executor::receiver_not_ready_st(Qp* qp, const Qp* dst, ibv_wc_status* status) {
  if (qp->attr.rnr_retry != rc::kRnrRetryInfinite &&
      qp->work().rnr_attempts >= qp->attr.rnr_retry) {
    *status = IBV_WC_RNR_RETRY_EXC_ERR;
    return Step::kDone;
  }
  QpWork& work = ctx_.scheduler.work(qp);
  work.rnr_attempts++;
  work.wait_until_ns = now_ + rc::rnr_timer_ns(dst->attr.min_rnr_timer);
  return Step::kWait;
}

Executor::Step Executor::execute_connected_st(Qp* qp, const SendWork& w, const SegmentList& local,
                                              ibv_wc_status* status) {
  const uint8_t op = w.hdr.opcode;
  const bool rc = qp->type != IBV_QPT_UC;  // RC or XRC: reliable
  Responder rsp;
  bool bad_srqn = false;
  if (!find_responder_st(qp, w.hdr.remote_srqn, &rsp, &bad_srqn)) {
    // A target that does not know the SRQ answers with an invalid-request NAK.
    if (!bad_srqn) return no_peer_st(qp, status);
    *status = IBV_WC_REM_INV_REQ_ERR;
    return Step::kDone;
  }
  Qp* dst = rsp.qp;
  const bool needs_recv = proto::consumes_receive(op);
  // Its message arrived whole before a previous router process died: the send completes
  // without it going again (router/local_completions.h).
  if (needs_recv && qp->work().copied_bytes == 0 && delivered_before(dst, qp)) return Step::kDone;
  // A plain SEND to a tag-matching SRQ is matched against its tagged buffers first.
  if (op == IBV_WR_SEND && rsp.srq != nullptr && rsp.srq->tm != nullptr)
    return execute_tm_send_st(qp, w, local, rsp, status);

  const bool send = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_SEND_WITH_INV;
  RecvSource rsrc;
  RecvWork rw;
  if (needs_recv && !take_recv_st(rsp, &rsrc, &rw)) {
    if (!rsrc.ring.has_value()) return no_peer_st(qp, status);  // peer's queue is corrupt
    if (!rc) return Step::kDone;                                // UC: dropped
    return receiver_not_ready_st(qp, dst, status);
  }

  // Responder-side failure: the responder QP enters ERR, the requester sees `st`.
  auto responder_error = [&](ibv_wc_status st) {
    if (needs_recv) consume_recv_st(&rsrc);
    if (rc) {
      *status = st;
      to_error_st(dst);
    }
    return Step::kDone;
  };

  const uint64_t len = local.total;
  if (send) {
    const uint64_t from = std::min<uint64_t>(qp->work().copied_bytes, len);
    if (from == 0) charge_remote_st(dst, 0, 0, 0);
    // The window a SEND_WITH_INV names must be the responder's to invalidate (IBTA 10.6.7.2.3):
    // else an invalid request, and nothing is placed.
    if (from == 0 && op == IBV_WR_SEND_WITH_INV &&
        !invalidate_remotely(ctx_.objects, dst, w.hdr.rkey)) {
      complete_recv_st(rsp, rw, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, 0, origin_of(w, qp), 0);
      return responder_error(IBV_WC_REM_INV_REQ_ERR);
    }
    const uint32_t flags = op == IBV_WR_SEND_WITH_IMM   ? IBV_WC_WITH_IMM
                           : op == IBV_WR_SEND_WITH_INV ? IBV_WC_WITH_INV
                                                        : 0;
    // A long SEND goes a part a pass, like a WRITE. Its receive stays at the head of the QP's
    // own receive queue (only this QP sends into it) until the last part; one from an SRQ,
    // which other QPs take from too, is held by the receiving QP meanwhile.
    const uint64_t part = std::min(len - from, copy_part());
    if (part < len - from) hold_recv_st(rsp, &rsrc, rw);
    if (!land_send_st(local, {from, part}, rsp, &rsrc, rw, IBV_WC_RECV, flags, origin_of(w, qp), rc,
                      status)) {
      ctx_.scheduler.work(qp).copied_bytes = static_cast<uint32_t>(from + part);  // < kMaxMsgSize
      return Step::kPartial;
    }
    return Step::kDone;
  }

  // RDMA and atomics: check the responder QP's access rights and the rkey (C9-... 9.7.4.1).
  const uint32_t need = proto::remote_access_needed(op);
  const bool atomic_write = op == IBV_WR_ATOMIC_WRITE;
  const bool atomic = proto::is_atomic(op);
  const uint64_t rlen = atomic ? 8 : len;
  if ((atomic || atomic_write) && len != 8) {
    *status = IBV_WC_LOC_LEN_ERR;
    return Step::kDone;
  }
  if ((atomic || atomic_write) && (w.hdr.remote_addr & 7) != 0)
    return responder_error(IBV_WC_REM_INV_REQ_ERR);
  Mr* rmr = nullptr;
  if (rlen != 0) {  // a zero-length RDMA access checks no key
    rmr = ctx_.objects.mr_by_key(w.hdr.rkey);
    if (!(dst->attr.qp_access_flags & need) ||
        !remote_access_allowed(rmr, rsp.owner, rsp.pd, dst->qpn, need, w.hdr.remote_addr, rlen))
      return responder_error(IBV_WC_REM_ACCESS_ERR);
  } else if (!(dst->attr.qp_access_flags & need)) {
    return responder_error(IBV_WC_REM_ACCESS_ERR);
  }
  if (qp->work().copied_bytes == 0) charge_remote_st(dst, w.hdr.rkey, w.hdr.remote_addr, rlen);

  if (atomic_write) {
    uint64_t value = 0;
    SegmentList mine;
    mine.push(Segment{reinterpret_cast<uint8_t*>(&value), 0, 0, 8});
    if (copy_segments(local, mine, 8) != 0) {
      *status = IBV_WC_LOC_PROT_ERR;
      return Step::kDone;
    }
    if (atomic_store_on_mr(*rmr, w.hdr.remote_addr, value) != 0)
      return responder_error(IBV_WC_REM_ACCESS_ERR);
    return Step::kDone;
  }
  SegmentList remote;
  if (rmr != nullptr) append_mr_range(&remote, *rmr, w.hdr.remote_addr, rlen);
  if (atomic) {
    uint64_t orig = 0;
    const AtomicChange change{op == IBV_WR_ATOMIC_FETCH_AND_ADD, w.hdr.compare_add, w.hdr.swap};
    // Noted in the requester's region by its place in the send ring, which it leaves once
    // completed: a process continuing it after a crash does not change the target twice.
    if (atomic_on_mr(*rmr, w.hdr.remote_addr, change, &qp->local_completions()->atomic,
                     qp->sq_cursor.tail, &orig) != 0)
      return responder_error(IBV_WC_REM_ACCESS_ERR);
    SegmentList result;
    result.push(Segment{reinterpret_cast<uint8_t*>(&orig), 0, 0, 8});
    if (copy_segments(result, local, 8) != 0) *status = IBV_WC_LOC_PROT_ERR;
    return Step::kDone;
  }
  // An RDMA WRITE or READ: at most copy_part() bytes a pass, from where the last pass
  // stopped (the WQE was checked again in full). A library that rewrote its WQE meanwhile
  // gets a message made of both, within what each allowed.
  const uint64_t from = std::min<uint64_t>(qp->work().copied_bytes, len);
  const uint64_t part = std::min(len - from, copy_part());
  const CopyHint hint = copy_hint(len);
  if (op == IBV_WR_RDMA_READ) {
    if (copy_spans(remote.seg, remote.count, from, local.seg, local.count, from, part, hint) != 0) {
      *status = IBV_WC_LOC_PROT_ERR;
      return Step::kDone;
    }
  } else if (part != 0) {
    // The requester's own memory failing (an on-demand MR's unmapped page) is a local error.
    const int err =
        copy_spans(local.seg, local.count, from, remote.seg, remote.count, from, part, hint);
    if (err == kSourceFault) {
      *status = IBV_WC_LOC_PROT_ERR;
      return Step::kDone;
    }
    if (err != 0) return responder_error(IBV_WC_REM_ACCESS_ERR);
  }
  if (from + part < len) {
    ctx_.scheduler.work(qp).copied_bytes = static_cast<uint32_t>(from + part);  // < kMaxMsgSize
    return Step::kPartial;
  }
  if (op == IBV_WR_RDMA_READ) return Step::kDone;
  if (op == IBV_WR_RDMA_WRITE_WITH_IMM) {
    const Origin origin = origin_of(w, qp);
    complete_delivery_st(rsp, &rsrc,
                         recv_cqe(dst, rw, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
                                  static_cast<uint32_t>(len), origin, IBV_WC_WITH_IMM),
                         origin.solicited);
  }
  return Step::kDone;
}

ibv_wc_status Executor::place_send_st(const SegmentList& payload, MessagePart part,
                                      const shm::Sge* sges, uint32_t n, const Session* owner,
                                      const Pd* pd, ibv_wc_status* requester_status) {
  SegmentList target;
  if (!resolve_sges_st(sges, n, owner, pd, true, &target)) {
    *requester_status = IBV_WC_REM_OP_ERR;
    return IBV_WC_LOC_PROT_ERR;
  }
  if (target.total < payload.total) {
    *requester_status = IBV_WC_REM_INV_REQ_ERR;
    return IBV_WC_LOC_LEN_ERR;
  }
  const uint64_t len = std::min(part.len, payload.total - std::min(part.from, payload.total));
  if (const int err = copy_spans(payload.seg, payload.count, part.from, target.seg, target.count,
                                 part.from, len, copy_hint(payload.total));
      err != 0) {
    // The requester's own memory failing: nothing reached the responder.
    *requester_status = err == kSourceFault ? IBV_WC_LOC_PROT_ERR : IBV_WC_REM_OP_ERR;
    return err == kSourceFault ? IBV_WC_GENERAL_ERR : IBV_WC_LOC_PROT_ERR;
  }
  charge_memory_st(sges, n, part.from, len);
  return IBV_WC_SUCCESS;
}

bool Executor::land_send_st(const SegmentList& payload, MessagePart part, const Responder& rsp,
                            RecvSource* rsrc, const RecvWork& rw, ibv_wc_opcode wc_op,
                            uint32_t flags, const Origin& from, bool reliable,
                            ibv_wc_status* status) {
  ibv_wc_status requester_status = IBV_WC_SUCCESS;
  const ibv_wc_status recv_status =
      place_send_st(payload, part, rw.sge, rw.hdr.num_sge, rsp.owner, rsrc->pd, &requester_status);
  if (recv_status == IBV_WC_GENERAL_ERR) {
    *status = requester_status;
    return true;
  }
  if (recv_status != IBV_WC_SUCCESS) {
    consume_recv_st(rsrc);
    complete_recv_st(rsp, rw, recv_status, wc_op, 0, from, 0);
    if (reliable) {
      *status = requester_status;
      to_error_st(rsp.qp);
    }
    return true;
  }
  if (part.len < payload.total - std::min(part.from, payload.total)) return false;
  complete_delivery_st(rsp, rsrc,
                       recv_cqe(rsp.qp, rw, IBV_WC_SUCCESS, wc_op,
                                static_cast<uint32_t>(payload.total), from, flags),
                       from.solicited);
  return true;
}

void Executor::complete_delivery_st(const Responder& rsp, RecvSource* rsrc, const shm::Cqe& c,
                                    bool solicited) {
  // Only a message of the send being completed, into its receiver's own CQ (not an XRC
  // SRQ's), is recorded.
  const bool record =
      requester_ != nullptr && c.src_qp == requester_->qpn && rsp.cq == rsp.qp->recv_cq;
  if (record) {
    record_receive_under_way(rsp.qp, requester_, rsrc->srq_record(), c, solicited);
  }
  consume_recv_st(rsrc);
  post_recv_completion_st(rsp, c, solicited);
  if (record) {
    receive_made(rsp.qp);
    delivered_to_ = rsp.qp;
  }
}

// UD: datagrams that find no QP, a wrong Q_Key, no receive buffer or too small a buffer
// are dropped silently; the sender's completion is successful either way (C9-...).
namespace {

// The GRH a datagram of `len` bytes from qp carries when its address vector is global.
void sender_grh(const Qp* qp, const proto::AhAttr& ah, uint64_t len, uint8_t out[kGrhSize]) {
  const uint32_t ver_tc_flow =
      (6u << 28) | (uint32_t{ah.traffic_class} << 20) | (ah.flow_label & 0xfffff);
  build_grh(out, ver_tc_flow, static_cast<uint16_t>(len), ah.hop_limit, qp->owner->container()->gid,
            ah.dgid);
}

}  // namespace

void Executor::execute_ud_st(Qp* qp, const SendWork& w, const SegmentList& local,
                             ibv_wc_status* status) {
  Ah* ah = qp->owner->find_ah(w.hdr.ah_handle);
  if (ah == nullptr) {
    *status = IBV_WC_LOC_QP_OP_ERR;
    return;
  }
  if (local.total > device::kUdMaxPayload) {
    *status = IBV_WC_LOC_LEN_ERR;
    return;
  }
  const uint32_t qkey =
      (w.hdr.remote_qkey & device::kQkeyViolation) ? qp->qkey() : w.hdr.remote_qkey;
  const bool to_group = ah->attr.is_global ? proto::is_multicast_gid(ah->attr.dgid)
                                           : ctx_.link_layer == IBV_LINK_LAYER_INFINIBAND &&
                                                 proto::is_multicast_lid(ah->attr.dlid);
  if (to_group) {
    // A group is addressed at QPN 0xffffff only (IBTA 10.5.2.4); the members on this host
    // get it here, those on others through every host's router.
    if (w.hdr.remote_qpn != proto::kMulticastQpn) return;
    uint8_t grh[kGrhSize];
    if (ah->attr.is_global) sender_grh(qp, ah->attr, local.total, grh);
    // Its copies are not recorded (router/local_completions.h): the single record of a send
    // names one receiver.
    Qp* const sender = std::exchange(requester_, nullptr);
    deliver_multicast_st(qp->owner->container()->network_id,
                         ah->attr.is_global ? &ah->attr.dgid : nullptr, ah->attr.dlid, qkey, local,
                         ah->attr.is_global ? grh : nullptr, origin_of(w, qp));
    requester_ = sender;
    if (RemotePath* remote = ctx_.remote) remote->flood_datagram_st(qp, w, local, ah->attr, qkey);
    return;
  }
  if (RemotePath* remote = ctx_.remote) {
    if (int host = remote->host_for(ah->attr, qp->owner->container()); host >= 0) {
      remote->send_datagram_st(qp, w, local, ah->attr, qkey, host);
      return;
    }
  }
  Qp* dst = ctx_.objects.qp_by_qpn(w.hdr.remote_qpn);
  if (dst == nullptr || dst->type != IBV_QPT_UD || !can_receive(dst->state()) ||
      !reaches(qp->owner->container(), ah->attr, dst->owner->container(), ctx_.link_layer) ||
      qkey != dst->qkey())
    return;
  // Its datagram arrived before a previous router process died (router/local_completions.h).
  if (delivered_before(dst, qp)) return;
  uint8_t grh[kGrhSize];
  if (ah->attr.is_global) sender_grh(qp, ah->attr, local.total, grh);
  deliver_ud_st(dst, local, ah->attr.is_global ? grh : nullptr, origin_of(w, qp));
}

void build_grh(uint8_t out[kGrhSize], uint32_t ver_tc_flow, uint16_t payload_len, uint8_t hop_limit,
               const proto::Gid& sgid, const proto::Gid& dgid) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(ver_tc_flow >> (24 - 8 * i));
  out[4] = static_cast<uint8_t>(payload_len >> 8);
  out[5] = static_cast<uint8_t>(payload_len);
  out[6] = 0x1b;  // next header: IBA BTH
  out[7] = hop_limit;
  std::memcpy(out + 8, sgid.data(), 16);
  std::memcpy(out + 24, dgid.data(), 16);
}

void Executor::deliver_ud_st(Qp* dst, const SegmentList& payload, const uint8_t* grh,
                             const Origin& from) {
  deliver_datagram_st(responder_of(dst), payload, /*grh_room=*/true, grh, from);
}

void Executor::deliver_datagram_st(const Responder& dst, const SegmentList& payload, bool grh_room,
                                   const uint8_t* grh, const Origin& from) {
  RecvSource rsrc;
  RecvWork rw;
  if (!take_recv_st(dst, &rsrc, &rw)) return;
  // Receive buffer: room for a GRH (UD datagrams), then the payload.
  SegmentList target;
  if (!resolve_sges_st(rw.sge, rw.hdr.num_sge, dst.owner, rsrc.pd, true, &target)) {
    consume_recv_st(&rsrc);
    complete_recv_st(dst, rw, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, from, 0);
    to_error_st(dst.qp);
    return;
  }
  const uint64_t room = grh_room ? kGrhSize : 0;
  if (target.total < room + payload.total) return;
  SegmentList source;
  if (grh != nullptr) {
    source.push(Segment{const_cast<uint8_t*>(grh), 0, 0, kGrhSize});
  } else if (room != 0) {
    // No GRH on the wire: the first 40 bytes of the buffer are left as they were.
    target = slice(target, room, target.total - room);
  }
  for (uint32_t i = 0; i < payload.count; ++i) source.push(payload.seg[i]);
  if (copy_segments(source, target, source.total) != 0) {
    consume_recv_st(&rsrc);
    complete_recv_st(dst, rw, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, from, 0);
    to_error_st(dst.qp);
    return;
  }
  const uint32_t flags = (from.has_imm ? IBV_WC_WITH_IMM : 0) | (grh != nullptr ? IBV_WC_GRH : 0);
  complete_delivery_st(dst, &rsrc,
                       recv_cqe(dst.qp, rw, IBV_WC_SUCCESS, IBV_WC_RECV,
                                static_cast<uint32_t>(room + payload.total), from, flags),
                       from.solicited);
}

// The next receive of srq, claimed (shm::BasicRingConsumer::claim) before anything is placed
// in it: the express lines of the SRQ's QPs take receives from the same ring, and a receive
// is used by whoever moved the consumer index past it. Kept in srq->claimed until consumed,
// so a caller that peeks and then does not use it (a WRITE with immediate in parts) finds
// the same receive next time. False when there is none (*st says why).
bool Executor::claim_srq_recv_st(Srq* srq, shm::RingConsumerView* ring, shm::RingStatus* st) {
  if (srq->has_claimed) return true;
  ring->resync();  // the lines may have taken receives since
  // Each failed claim means another consumer took one: at most a ring's worth of tries.
  for (uint32_t tries = 0; tries <= srq->layout.entries; ++tries) {
    const uint8_t* slot = ring->peek(st);
    if (slot == nullptr) return false;
    RecvWork rw;
    copy_recv_wqe(slot, srq->layout.slot, srq->max_sge, &rw);
    if (ring->claim()) {
      srq->claimed = rw;
      srq->has_claimed = true;
      srq->claimed_record = srq->records.keep_claimed(rw);
      return true;
    }
  }
  *st = shm::RingStatus::kEmpty;
  return false;
}

// The next receive WQE of dst (its SRQ or its QP's RQ), copied out; from an RQ it is only
// peeked (this QP's messages alone take from it), from an SRQ claimed. False when there is
// none; src->ring is then empty if the queue is corrupt (the owner was told).
bool Executor::take_recv_st(const Responder& dst, RecvSource* src, RecvWork* rw) {
  Srq* srq = dst.srq;
  src->held = nullptr;
  if (srq != nullptr) {
    src->ring.emplace(srq->ring());
    src->srq = srq;
    src->pd = srq->pd;
    src->max_sge = srq->max_sge;
    src->slot_size = srq->layout.slot;
    HeldRecv* held = dst.qp->held_recv();
    if (held != nullptr && held->held && held->srq == srq && held->srqn == srq->srqn) {
      *rw = held->rw;
      src->held = held;
      return true;
    }
    if (srq->corrupt) {
      src->ring.reset();
      return false;
    }
  } else {
    src->ring.emplace(dst.qp->rq());
    src->ring->resync();  // the direct path may have taken receive WQEs since we last did
    src->srq = nullptr;
    src->pd = dst.qp->pd;
    src->max_sge = dst.qp->max_recv_sge();
    src->slot_size = dst.qp->rq_slot;
  }
  shm::RingStatus st;
  if (srq != nullptr) {
    if (claim_srq_recv_st(srq, &*src->ring, &st)) {
      *rw = srq->claimed;
      return true;
    }
  } else if (const uint8_t* slot = src->ring->peek(&st); slot != nullptr) {
    copy_recv_wqe(slot, src->slot_size, src->max_sge, rw);
    return true;
  }
  if (st == shm::RingStatus::kCorrupt) {
    if (srq != nullptr) {
      srq->corrupt = true;
      srq->owner->post_async_event(IBV_EVENT_SRQ_ERR, srq->handle);
    } else {
      qp_fatal_st(dst.qp, "receive ring index out of range");
    }
    src->ring.reset();
  }
  return false;
}

void Executor::hold_recv_st(const Responder& dst, RecvSource* src, const RecvWork& rw) {
  if (src->srq == nullptr || src->held != nullptr) return;
  std::unique_ptr<HeldRecv>& held = dst.qp->extras().held_recv;
  if (held == nullptr) {
    held = std::make_unique<HeldRecv>();
  } else {
    flush_held_recv_st(dst.qp);  // an XRC target's, from another SRQ, for a message abandoned
  }
  Srq* srq = src->srq;
  held->record = std::exchange(srq->claimed_record, SrqRecords::kNone);
  srq->records.hold(held->record, dst.qp->qpn);
  consume_recv_st(src);
  held->rw = rw;
  held->srq = srq;
  held->srqn = srq->srqn;
  held->held = true;
  src->held = held.get();
}

void Executor::consume_recv_st(RecvSource* src) {
  if (src->held != nullptr) {
    let_go_of_held_recv(src->held, ctx_.objects);
    src->held = nullptr;
    return;
  }
  Srq* srq = src->srq;
  if (srq == nullptr) {
    src->ring->pop();
    return;
  }
  srq->has_claimed = false;  // the consumer index is past it already
  srq->records.release(std::exchange(srq->claimed_record, SrqRecords::kNone));
  src->ring->resync();
  if (srq->limit != 0 && src->ring->available() < srq->limit) {
    srq->set_limit(0);  // one-shot: re-armed by ibv_modify_srq(IBV_SRQ_LIMIT)
    srq->owner->post_async_event(IBV_EVENT_SRQ_LIMIT_REACHED, srq->handle);
  }
}

Origin Executor::origin_of(const SendWork& w, const Qp* src) const {
  Origin o;
  o.qpn = src->qpn;
  o.slid = ctx_.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : src->owner->container()->lid;
  o.sl = src->type == IBV_QPT_UD ? 0 : src->attr.ah_attr.sl;
  o.solicited = (w.hdr.flags & shm::kWqeSolicited) != 0;
  o.has_imm = proto::carries_immediate(w.hdr.opcode);
  o.imm = w.hdr.opcode == IBV_WR_SEND_WITH_INV ? w.hdr.rkey : w.hdr.imm_data;
  return o;
}

shm::Cqe recv_cqe(const Qp* dst, const RecvWork& rw, ibv_wc_status status, ibv_wc_opcode op,
                  uint32_t byte_len, const Origin& from, uint32_t flags) {
  shm::Cqe c = make_cqe(rw.hdr.wr_id, status, op, dst->qpn);
  c.byte_len = byte_len;
  c.src_qp = from.qpn;
  c.wc_flags = flags;
  c.imm_data = (flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV)) ? from.imm : 0;
  c.slid = from.slid;
  c.sl = from.sl;
  return c;
}

void Executor::complete_recv_st(const Responder& dst, const RecvWork& rw, ibv_wc_status status,
                                ibv_wc_opcode op, uint32_t byte_len, const Origin& from,
                                uint32_t flags) {
  post_recv_completion_st(dst, recv_cqe(dst.qp, rw, status, op, byte_len, from, flags),
                          from.solicited);
}

void Executor::post_recv_completion_st(const Responder& dst, const shm::Cqe& c, bool solicited) {
  count_receive_completion(dst.qp, static_cast<ibv_wc_status>(c.status), c.byte_len);
  post_cqe_st(dst.cq, c, solicited);
}

// Moves a QP to ERR (C10-...: outstanding work is then completed with WR_FLUSH_ERR).
void Executor::to_error_st(Qp* qp) {
  if (qp->state() == IBV_QPS_ERR) return;
  qp->attr.qp_state = IBV_QPS_ERR;
  qp->clear_work(&QpWork::wait_until_ns);
  ctx_.direct.refresh(qp);  // before anything flushes its queues
  ctx_.scheduler.activate(qp);
}

void Executor::qp_fatal_st(Qp* qp, const char* why) {
  spdlog::warn("QP {:#x} of pid {}: {}; moved to error", qp->qpn, qp->owner->pid(), why);
  qp->owner->post_async_event(IBV_EVENT_QP_FATAL, qp->handle);
  to_error_st(qp);
}

bool Executor::flush_st(Qp* qp) {
  bool did = ctx_.remote != nullptr && ctx_.remote->flush_st(qp);
  // A copy under way ends with its WQE's flush.
  qp->clear_work(&QpWork::copied_bytes);
  shm::RingStatus st;
  shm::RingConsumerView sq = qp->sq();
  for (int budget = kBudgetPerQp; budget > 0; --budget) {
    const uint8_t* slot = sq.peek(&st);
    if (slot == nullptr) break;
    shm::SendWqe h;
    std::memcpy(&h, slot, sizeof(h));
    sq.pop();
    post_cqe_st(qp->send_cq,
                make_cqe(h.wr_id, IBV_WC_WR_FLUSH_ERR, proto::send_wc_opcode(h.opcode), qp->qpn),
                false);
    did = true;
  }
  did = flush_held_recv_st(qp) || did;
  if (qp->rq_entries != 0) {
    shm::RingConsumerView rq = qp->rq();
    rq.resync();
    for (int budget = kBudgetPerQp; budget > 0; --budget) {
      const uint8_t* slot = rq.peek(&st);
      if (slot == nullptr) break;
      shm::RecvWqe h;
      std::memcpy(&h, slot, sizeof(h));
      rq.pop();
      post_cqe_st(qp->recv_cq, make_cqe(h.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qpn), false);
      did = true;
    }
  } else if (qp->srq != nullptr && !qp->last_wqe_reported) {
    qp->last_wqe_reported = true;
    qp->owner->post_async_event(IBV_EVENT_QP_LAST_WQE_REACHED, qp->handle);
  }
  return did;
}

bool let_go_of_held_recv(HeldRecv* held, const HostObjects& objects) {
  if (!held->held) return false;
  held->held = false;
  const uint32_t record = std::exchange(held->record, SrqRecords::kNone);
  if (objects.srq_by_srqn(held->srqn) != held->srq) return false;
  held->srq->records.release(record);
  return true;
}

bool Executor::flush_held_recv_st(Qp* qp) {
  HeldRecv* held = qp->held_recv();
  if (held == nullptr || !let_go_of_held_recv(held, ctx_.objects)) return false;
  Cq* cq = held->srq->xrc != nullptr ? held->srq->cq : qp->recv_cq;
  post_cqe_st(cq, make_cqe(held->rw.hdr.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qpn), false);
  return true;
}

}  // namespace wharf::router
