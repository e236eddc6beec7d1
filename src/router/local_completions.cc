#include "router/local_completions.h"

#include <atomic>
#include <utility>

#include "router/executor.h"

namespace wharf::router {

namespace {

using shm::LocalCompletion;

std::atomic_ref<uint32_t> state_of(LocalCompletion& rec) {
  return std::atomic_ref<uint32_t>(rec.state);
}

void record(LocalCompletion* rec, uint32_t ring_index, const Cq* cq, const shm::Cqe& c,
            bool solicited) {
  rec->ring_index = ring_index;
  rec->post = cq != nullptr ? 1 : 0;
  rec->cq_position = rec->post != 0 ? cq->ring.position() : 0;
  rec->solicited = solicited ? 1 : 0;
  rec->cqe = c;
  state_of(*rec).store(shm::kLocalCompletionUnderWay, std::memory_order_release);
}

// Pushes the recorded entry to cq unless cq holds it already.
void finish_entry_st(Cq* cq, const LocalCompletion& rec, uint32_t qpn) {
  if (rec.post == 0 || cq == nullptr || rec.cqe.qp_num != qpn) return;
  post_cqe_unless_published_st(cq, rec.cq_position, rec.cqe, rec.solicited != 0);
}

uint32_t head_of_send_ring(const Qp* sender) { return sender->sq_cursor.tail; }

// A receive taken from qp's SRQ for a message, kept in the SRQ's `record`: if the records
// still keep it, the previous process died before it let go of it, and this one took it back
// as the SRQ's next (Session::adopt_srq_records) or as qp's held receive
// (Session::take_orphaned_recv). The message had it: it is let go of now.
void let_go_of_srq_receive(Qp* qp, uint32_t record, const HostObjects& objects) {
  if (record == SrqRecords::kNone) return;
  Srq* srq = qp->srq;
  if (srq->has_claimed && srq->claimed_record == record) {
    srq->has_claimed = false;
    srq->records.release(std::exchange(srq->claimed_record, SrqRecords::kNone));
    return;
  }
  if (HeldRecv* held = qp->held_recv(); held != nullptr && held->held && held->record == record)
    let_go_of_held_recv(held, objects);
}

}  // namespace

void record_receive_under_way(Qp* dst, const Qp* sender, uint32_t srq_record, const shm::Cqe& c,
                              bool solicited) {
  LocalCompletion* rec = &dst->local_completions()->receiving;
  rec->srq_record = srq_record;
  rec->sender_qpn = sender->qpn;
  rec->sender_index = head_of_send_ring(sender);
  record(rec, dst->rq_cursor.tail, dst->recv_cq, c, solicited);
}

void receive_made(Qp* dst) {
  state_of(dst->local_completions()->receiving)
      .store(shm::kLocalCompletionDone, std::memory_order_release);
}

bool delivered_before(Qp* dst, const Qp* sender) {
  LocalCompletion& rec = dst->local_completions()->receiving;
  if (state_of(rec).load(std::memory_order_acquire) != shm::kLocalCompletionDone ||
      rec.sender_qpn != sender->qpn || rec.sender_index != head_of_send_ring(sender))
    return false;
  state_of(rec).store(shm::kLocalCompletionNone, std::memory_order_release);
  return true;
}

void forget_receive(Qp* dst, const Qp* sender) {
  LocalCompletion& rec = dst->local_completions()->receiving;
  if (rec.sender_qpn == sender->qpn)
    state_of(rec).store(shm::kLocalCompletionNone, std::memory_order_release);
}

void record_send_under_way(Qp* qp, const shm::Cqe& c) {
  record(&qp->local_completions()->sending, head_of_send_ring(qp), qp->send_cq, c, false);
}

void send_made(Qp* qp) {
  state_of(qp->local_completions()->sending)
      .store(shm::kLocalCompletionNone, std::memory_order_release);
}

void finish_local_completions_st(Qp* qp, const HostObjects& objects) {
  shm::QpLocalCompletions* lc = qp->local_completions();
  LocalCompletion& r = lc->receiving;
  if (state_of(r).load(std::memory_order_acquire) == shm::kLocalCompletionUnderWay) {
    // Its receive leaves the ring if it is still at the head (the consumer index had not
    // moved), or the SRQ's records if they still keep it; its entry goes to the CQ unless it
    // is there.
    if (qp->srq != nullptr) {
      let_go_of_srq_receive(qp, r.srq_record, objects);
    } else if (qp->rq_entries != 0) {
      shm::RingConsumerView rq = qp->rq();
      rq.resync();
      if (rq.tail() == r.ring_index && rq.available() != 0 && rq.available() <= rq.capacity())
        rq.pop();
    }
    finish_entry_st(qp->recv_cq, r, qp->qpn);
    state_of(r).store(shm::kLocalCompletionDone, std::memory_order_release);
  }
  LocalCompletion& s = lc->sending;
  if (state_of(s).load(std::memory_order_acquire) == shm::kLocalCompletionUnderWay) {
    // Gone from the ring: only its entry may be missing. Still there: it is executed again,
    // and its receiver's record says whether its message arrived already.
    shm::RingConsumerView sq = qp->sq();
    sq.resync();
    if (sq.tail() == s.ring_index + 1) finish_entry_st(qp->send_cq, s, qp->qpn);
    state_of(s).store(shm::kLocalCompletionNone, std::memory_order_release);
  }
}

void forget_local_completions(Qp* qp) { *qp->local_completions() = shm::QpLocalCompletions{}; }

}  // namespace wharf::router
