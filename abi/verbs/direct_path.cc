// The direct intra-host path: see direct_path.h and docs/ARCHITECTURE.md.
//
// Handshake with the router, per work request: claim the QP's direct line (On -> Busy),
// check that the peer description and the cached keys are still current (line generation,
// MR epoch), execute, publish the completions, hand the line back (Busy -> On), and only
// then make the completion-event syscalls. The router changes nothing the fast path relies
// on without first turning the line Off or bumping the epoch and then waiting out Busy.
// Control requests (describing the peer, fetching a key) are never made while Busy.
#include "abi/verbs/direct_path.h"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "abi/verbs/provider.h"
#include "common/clock.h"
#include "common/stream_copy.h"
#include "proto/datagram.h"
#include "proto/device.h"
#include "proto/qp_rules.h"
#include "shm/direct_line.h"
#include "shm/receive_wait.h"

namespace wharf::abi {
namespace {

// A work request may need the descriptions of a few keys (the rkey, the peer's receive
// SGEs) and a fresh peer description; past that many rounds it goes to the router.
constexpr int kAttempts = 6;

// How long a send waits for the peer to post a receive before the router takes it over
// (and applies RNR NAK timing): the time a message would spend on a wire, and enough for a
// receiver on another core to repost its buffers. For the first kReceiveSpinNs it spins (a
// receiver running on another core posts within that); then it sleeps until the receiver
// posts (shm/receive_wait.h), leaving the CPU to it if they share one.
constexpr uint64_t kReceiveWaitNs = 50'000;
constexpr uint64_t kReceiveSpinNs = 4'000;

// Bytes copied between two looks at whether the router wants the line back (a new
// generation) or retired a registration (a new MR epoch): the router, which waits out Busy
// before it changes anything the fast path relies on, waits for at most one such copy
// (tens of microseconds), however long the message.
constexpr uint64_t kBytesBetweenLooks = 256 * 1024;

// Copies `len` bytes from the spans src to the spans dst (both hold at least offset + len
// bytes), starting `offset` bytes into both; with stream_copy when `streaming` (a part of a
// long message).
void scatter_copy(const SpanView* src, int nsrc, const SpanView* dst, int ndst, uint64_t len,
                  uint64_t offset = 0, bool streaming = false) {
  int si = 0, di = 0;
  uint64_t so = offset, dof = offset;
  while (si < nsrc && so >= src[si].len) so -= src[si++].len;
  while (di < ndst && dof >= dst[di].len) dof -= dst[di++].len;
  while (len != 0 && si < nsrc && di < ndst) {
    uint64_t n = std::min({len, src[si].len - so, dst[di].len - dof});
    if (streaming)
      stream_copy(dst[di].p + dof, src[si].p + so, n);
    else
      std::memcpy(dst[di].p + dof, src[si].p + so, n);
    len -= n;
    so += n;
    dof += n;
    if (so == src[si].len) ++si, so = 0;
    if (dof == dst[di].len) ++di, dof = 0;
  }
}

// Work the fast path never does (so it needs no description either). Memory windows are the
// router's: binds, invalidations and sends that invalidate. So are atomic writes: 8 bytes
// stored at once, which a memcpy does not promise.
bool routers_alone(uint32_t op) {
  return proto::is_window_op(op) || op == IBV_WR_SEND_WITH_INV || op == IBV_WR_ATOMIC_WRITE;
}

}  // namespace

ReachableKey* KeyCache::find(uint32_t key) {
  for (ReachableKey& e : entries_)
    if (e.used && e.key == key) return &e;
  return nullptr;
}

ReachableKey* KeyCache::replace(Mapping* old) {
  ReachableKey& e = entries_[next_];
  next_ = (next_ + 1) % kSize;
  e.map.swap(*old);  // *old is empty: the slot is unmapped when the caller drops *old
  e.used = true;
  e.key = e.access = e.pd = 0;
  e.iova = e.len = 0;
  e.base = nullptr;
  return &e;
}

void KeyCache::clear() {
  for (ReachableKey& e : entries_) e.used = false;
}

void DirectSetUp::clear(Kind k, uint32_t what) {
  kind = k;
  key = what;
  err = 0;
  mr_epoch = 0;
  peer = proto::DirectPeerRep{};
  peer_qp_map.reset();
  peer_cq_map.reset();
  peer_channel.reset();
  send_channel.reset();
  found.map.reset();
  found.used = false;
  found.key = found.access = found.pd = 0;
  found.iova = found.len = 0;
  found.base = nullptr;
  retired.reset();
}

// Own registrations are looked up in the context (the router checks the same facts).
void find_own_key(Context* ctx, uint32_t key, ReachableKey* k) {
  std::lock_guard<std::mutex> g(ctx->objects_mu);
  for (auto& [handle, m] : ctx->mrs) {
    if (m->lkey != key) continue;
    k->access = to_mr(m)->access;
    k->pd = to_pd(m->pd)->handle;
    k->iova = to_mr(m)->iova;
    // On-demand memory may be unmapped (an implicit MR names the whole address space): only
    // the router reaches it, with process_vm_*, which reports a fault instead.
    k->len = (to_mr(m)->access & IBV_ACCESS_ON_DEMAND) != 0 ? 0 : m->length;
    k->base = static_cast<uint8_t*>(m->addr);
    return;
  }
  // No such key: len stays 0, cached as unreachable.
}

bool execute_directly(Qp* qp, const ibv_send_wr* wr, std::optional<DirectSetUp>* set_up) {
  uint64_t receive_deadline = 0;
  uint64_t spin_until = 0;
  for (int round = 0; round < kAttempts;) {
    if (qp->direct_line->state.load(std::memory_order_relaxed) != shm::kDirectOn ||
        qp->sq.in_flight() != 0)
      return false;
    DirectSetUp::Kind kind = DirectSetUp::Kind::kNone;
    uint32_t key = 0;
    switch (qp->direct.execute(qp, wr, &kind, &key)) {
      case DirectPath::Outcome::kDone: return true;
      case DirectPath::Outcome::kToRouter: return false;
      case DirectPath::Outcome::kStartOver: ++round; break;
      case DirectPath::Outcome::kSetUp:
        ++round;
        qp->sq_lock.unlock();
        if (set_up->has_value())
          (*set_up)->clear(kind, key);  // unmaps what the last set-up replaced
        else
          set_up->emplace().clear(kind, key);
        DirectPath::fetch(qp, &**set_up);
        qp->sq_lock.lock();
        if (!qp->direct.install(&**set_up)) return false;
        break;
      case DirectPath::Outcome::kNoReceive: {
        // Not a round spent: the receiver gets a while to post, without the lock held.
        const uint64_t now = now_ns();
        if (receive_deadline == 0) {
          receive_deadline = now + kReceiveWaitNs;
          spin_until = now + kReceiveSpinNs;
        } else if (now > receive_deadline) {
          return false;
        }
        if (now < spin_until) {
          qp->sq_lock.unlock();
          __builtin_ia32_pause();
          qp->sq_lock.lock();
          break;
        }
        shm::QpDirect* line = qp->direct.peer_line();
        const bool sleep = qp->direct.begin_receive_wait();
        qp->sq_lock.unlock();
        if (sleep) shm::receive_wait(line, receive_deadline - now);
        qp->sq_lock.lock();
        break;
      }
    }
  }
  return false;
}

bool DirectPath::begin_receive_wait() {
  if (!described_) return false;
  // We are the receive queue's only consumer while On: its consumer index is where we stand.
  const uint32_t consumer = peer_rq_hdr_->consumer.value.load(std::memory_order_acquire);
  return shm::begin_receive_wait(peer_line_, peer_rq_hdr_, consumer);
}

void DirectPath::fetch(Qp* qp, DirectSetUp* need) {
  Context* ctx = to_ctx(qp->qp.context);
  need->mr_epoch = ctx->page->mr_epoch.load(std::memory_order_seq_cst);
  ReachableKey& k = need->found;
  k.key = need->key;
  switch (need->kind) {
    case DirectSetUp::Kind::kNone: break;
    case DirectSetUp::Kind::kDescription: {
      proto::DirectPeerRep& rep = need->peer;
      UniqueFd fds[4];
      need->err = ctx->client.call(proto::Op::kGetDirectPeer, proto::Handle{qp->handle}, nullptr, 0,
                                   &rep, fds, 4);
      if (need->err != 0) return;
      const shm::QpLayout ql = shm::qp_layout(rep.peer_sq_entries, rep.peer_sq_slot,
                                              rep.peer_rq_entries, rep.peer_rq_slot);
      const shm::CqLayout cl = shm::cq_layout(rep.peer_cq_entries);
      // A peer on an SRQ has no receive ring of its own (rq_entries 0, never read here).
      const bool srq = (rep.flags & proto::kPeerUsesSrq) != 0;
      if (!fds[0].valid() || !fds[1].valid() || !is_pow2(rep.peer_cq_entries) ||
          (srq ? rep.peer_rq_entries != 0
               : !is_pow2(rep.peer_rq_entries) ||
                     rep.peer_rq_slot <
                         shm::recv_slot_size(std::min(rep.peer_max_recv_sge, shm::kMaxRecvSge)))) {
        need->err = EPROTO;
        return;
      }
      if ((need->err = need->peer_qp_map.map(fds[0].get(), ql.total)) != 0 ||
          (need->err = need->peer_cq_map.map(fds[1].get(), cl.total)) != 0)
        return;
      int next = 2;
      if (rep.flags & proto::kPeerCqChannel) need->peer_channel = std::move(fds[next++]);
      if (rep.flags & proto::kSendCqChannel) need->send_channel = std::move(fds[next++]);
      return;
    }
    // A key the router refuses, or whose memory it alone can reach, is cached with len == 0:
    // work that names it goes to the router without asking again.
    case DirectSetUp::Kind::kPeerKey: {
      proto::PeerMrRep rep;
      UniqueFd fd;
      if (ctx->client.call(proto::Op::kGetPeerMr, proto::PeerMrReq{qp->handle, need->key}, nullptr,
                           0, &rep, &fd, 1) != 0)
        return;
      k.access = rep.access;
      if (rep.mapped_len == 0 || !fd.valid() ||
          k.map.map(fd.get(), rep.mapped_len, static_cast<off_t>(rep.memfd_offset)) != 0)
        return;
      k.iova = rep.mapped_iova;
      k.len = rep.mapped_len;
      k.base = k.map.data;
      return;
    }
    case DirectSetUp::Kind::kOwnKey: find_own_key(ctx, need->key, &k); return;
  }
}

bool DirectPath::install(DirectSetUp* need) {
  if (need->kind == DirectSetUp::Kind::kDescription) {
    described_ = false;
    peer_keys_.clear();
    if (need->err != 0) return false;
    const proto::DirectPeerRep& rep = need->peer;
    const shm::QpLayout ql = shm::qp_layout(rep.peer_sq_entries, rep.peer_sq_slot,
                                            rep.peer_rq_entries, rep.peer_rq_slot);
    const shm::CqLayout cl = shm::cq_layout(rep.peer_cq_entries);
    peer_qp_map_.swap(need->peer_qp_map);
    peer_cq_map_.swap(need->peer_cq_map);
    std::swap(peer_channel_, need->peer_channel);
    std::swap(send_channel_, need->send_channel);
    peer_rq_hdr_ = reinterpret_cast<shm::RingHeader*>(peer_qp_map_.data + ql.rq_ring_off);
    peer_rq_slots_ = peer_qp_map_.data + ql.rq_slots_off;
    peer_counters_ = reinterpret_cast<shm::QpCounters*>(peer_qp_map_.data + ql.counters_off);
    peer_line_ = reinterpret_cast<shm::QpDirect*>(peer_qp_map_.data + ql.direct_off);
    peer_cq_ =
        shm::CqProducer(reinterpret_cast<shm::RingHeader*>(peer_cq_map_.data + cl.ring_off),
                        reinterpret_cast<shm::Cqe*>(peer_cq_map_.data + cl.slots_off), cl.entries);
    peer_notify_ = reinterpret_cast<shm::CqNotify*>(peer_cq_map_.data + cl.notify_off);
    peer_ = rep;
    described_ = true;
    return true;
  }
  // A key fetched in an epoch the fast path has left may name a retired registration.
  if (need->mr_epoch != keys_epoch_) return true;
  KeyCache& cache = need->kind == DirectSetUp::Kind::kPeerKey ? peer_keys_ : own_keys_;
  ReachableKey* k = cache.replace(&need->retired);
  ReachableKey& f = need->found;
  k->assign_facts(f);
  k->map.swap(f.map);
  return true;
}

DirectPath::Outcome DirectPath::execute(Qp* qp, const ibv_send_wr* wr, DirectSetUp::Kind* need,
                                        uint32_t* key) {
  shm::QpDirect* line = qp->direct_line;
  Context* ctx = to_ctx(qp->qp.context);
  if (line->state.load(std::memory_order_relaxed) != shm::kDirectOn || routers_alone(wr->opcode))
    return Outcome::kToRouter;
  if (!described_ || line->generation.load(std::memory_order_relaxed) != peer_.generation) {
    *need = DirectSetUp::Kind::kDescription;
    return Outcome::kSetUp;
  }
  uint32_t on = shm::kDirectOn;
  if (!line->state.compare_exchange_strong(on, shm::kDirectBusy, std::memory_order_seq_cst))
    return Outcome::kToRouter;
  Step step = Step::kStartOver;  // the line moved to a new generation since the description
  uint32_t missing = 0;
  Events ev;
  if (line->generation.load(std::memory_order_relaxed) == peer_.generation) {
    // Pairs with the router's epoch bump before it waits out Busy lines.
    uint32_t epoch = ctx->page->mr_epoch.load(std::memory_order_seq_cst);
    if (epoch != keys_epoch_) {
      own_keys_.clear();
      peer_keys_.clear();
      keys_epoch_ = epoch;
    }
    step = run(qp, wr, &missing, &ev);
  }
  shm::hand_back_busy_line(line);
  switch (step) {
    case Step::kDone: send_events(qp, ev); return Outcome::kDone;
    case Step::kToRouter: return Outcome::kToRouter;
    case Step::kNeedPeerKey:
    case Step::kNeedOwnKey:
      *need = step == Step::kNeedPeerKey ? DirectSetUp::Kind::kPeerKey : DirectSetUp::Kind::kOwnKey;
      *key = missing;
      return Outcome::kSetUp;
    case Step::kNoReceive: return Outcome::kNoReceive;
    case Step::kStartOver: return Outcome::kStartOver;
  }
  return Outcome::kToRouter;
}

// Runs while Busy: the peer's queues and every cached key are current. Checks everything
// the router would, and leaves the work to the router at the first thing that is not a
// plain success.
DirectPath::Step DirectPath::run(Qp* qp, const ibv_send_wr* wr, uint32_t* missing_key, Events* ev) {
  const uint32_t op = wr->opcode;
  const bool atomic = proto::is_atomic(op);
  const bool writes_local = atomic || op == IBV_WR_RDMA_READ;
  // SEND_WITH_INV is the router's alone (routers_alone), so this is SEND, SEND_WITH_IMM and
  // WRITE_WITH_IMM.
  const bool needs_recv = proto::consumes_receive(op);
  // A shared receive queue may have other consumers (the router, other senders): only the
  // router takes its WQEs.
  if (needs_recv && (peer_.flags & proto::kPeerUsesSrq) != 0) return Step::kToRouter;

  // Our side: inline bytes, or registered memory of our PD.
  SpanView local[shm::kMaxSendSge];
  int nlocal = 0;
  uint64_t len = 0;
  const bool inline_data = (wr->send_flags & IBV_SEND_INLINE) && !writes_local;
  const uint32_t pd = to_pd(qp->qp.pd)->handle;
  for (int i = 0; i < wr->num_sge; ++i) {
    const ibv_sge& s = wr->sg_list[i];
    if (s.length == 0) continue;
    uint8_t* p = reinterpret_cast<uint8_t*>(s.addr);
    if (!inline_data) {
      ReachableKey* k = own_keys_.find(s.lkey);
      if (k == nullptr) {
        *missing_key = s.lkey;
        return Step::kNeedOwnKey;
      }
      if (k->pd != pd || (writes_local && !(k->access & IBV_ACCESS_LOCAL_WRITE)) ||
          (p = k->reach(s.addr, s.length)) == nullptr)
        return Step::kToRouter;
    }
    local[nlocal++] = SpanView{p, s.length};
    len += s.length;
  }
  if (len > device::kMaxMsgSize || (inline_data && len > qp->caps.max_inline_data))
    return Step::kToRouter;

  // The peer's memory named by remote_addr/rkey (RDMA and atomics).
  uint8_t* remote = nullptr;
  if (const uint32_t need = proto::remote_access_needed(op); need != 0) {
    const uint64_t raddr = atomic ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
    const uint32_t rkey = atomic ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
    if (!(peer_.peer_access & need) || (atomic && (len != 8 || (raddr & 7) != 0)))
      return Step::kToRouter;
    if (len != 0) {
      ReachableKey* k = peer_keys_.find(rkey);
      if (k == nullptr) {
        *missing_key = rkey;
        return Step::kNeedPeerKey;
      }
      if (!(k->access & need) || (remote = k->reach(raddr, len)) == nullptr) return Step::kToRouter;
    }
  }

  // The peer's next receive WQE (we are its receive queue's only consumer while On).
  shm::RecvWqe rh{};
  uint32_t rq_pos = 0;
  SpanView target[shm::kMaxRecvSge];
  int ntarget = 0;
  if (needs_recv) {
    const uint32_t prod = peer_rq_hdr_->producer.value.load(std::memory_order_acquire);
    rq_pos = peer_rq_hdr_->consumer.value.load(std::memory_order_acquire);
    if (prod == rq_pos) return Step::kNoReceive;
    if (prod - rq_pos > peer_.peer_rq_entries) return Step::kToRouter;
    const uint8_t* slot =
        peer_rq_slots_ +
        static_cast<size_t>(rq_pos & (peer_.peer_rq_entries - 1)) * peer_.peer_rq_slot;
    std::memcpy(&rh, slot, sizeof(rh));
    if (rh.num_sge > peer_.peer_max_recv_sge) return Step::kToRouter;
    uint64_t room = 0;
    for (uint32_t i = 0; i < rh.num_sge && op != IBV_WR_RDMA_WRITE_WITH_IMM; ++i) {
      shm::Sge s;
      std::memcpy(&s, slot + sizeof(shm::RecvWqe) + i * sizeof(shm::Sge), sizeof(s));
      if (s.length == 0) continue;
      ReachableKey* k = peer_keys_.find(s.lkey);
      if (k == nullptr) {
        *missing_key = s.lkey;
        return Step::kNeedPeerKey;
      }
      uint8_t* p;
      if (!(k->access & IBV_ACCESS_LOCAL_WRITE) || (p = k->reach(s.addr, s.length)) == nullptr)
        return Step::kToRouter;
      target[ntarget++] = SpanView{p, s.length};
      room += s.length;
    }
    if (op != IBV_WR_RDMA_WRITE_WITH_IMM && room < len) return Step::kToRouter;
  }

  const bool signaled = (wr->send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all;
  Cq* send_cq = to_cq(qp->qp.send_cq);
  // A send CQ being resized may still point at its old region: its completion is the router's.
  if ((signaled &&
       (send_cq->resizing.load(std::memory_order_relaxed) || !send_cq->producer.has_room(1))) ||
      (needs_recv && !peer_cq_.has_room(1)))
    return Step::kToRouter;  // the router reports the overrun

  // Execute. Only a long copy can stop (the router wants the line, or retired a key): then
  // nothing was consumed or completed, and the work request starts over.
  switch (op) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
      if (!copy(qp, local, nlocal, target, ntarget, len)) return Step::kStartOver;
      break;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: {
      const SpanView dst{remote, len};
      if (!copy(qp, local, nlocal, &dst, 1, len)) return Step::kStartOver;
      break;
    }
    case IBV_WR_RDMA_READ: {
      const SpanView src{remote, len};
      if (!copy(qp, &src, 1, local, nlocal, len)) return Step::kStartOver;
      break;
    }
    default: {  // atomics: same-host atomicity with the router's (IBV_ATOMIC_HCA)
      auto* word = reinterpret_cast<uint64_t*>(remote);
      uint64_t orig;
      if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        orig = __atomic_fetch_add(word, wr->wr.atomic.compare_add, __ATOMIC_SEQ_CST);
      } else {
        orig = wr->wr.atomic.compare_add;
        __atomic_compare_exchange_n(word, &orig, wr->wr.atomic.swap, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST);
      }
      SpanView src{reinterpret_cast<uint8_t*>(&orig), 8};
      scatter_copy(&src, 1, local, nlocal, 8);
      break;
    }
  }

  // The QP counters, as the router keeps them for the work it executes (shm::QpCounters).
  qp->counters->count_sent(op, len);
  if (needs_recv) {
    peer_counters_->count_received(len);
    peer_rq_hdr_->consumer.value.store(rq_pos + 1, std::memory_order_release);
    shm::Cqe c{};
    c.wr_id = rh.wr_id;
    c.status = IBV_WC_SUCCESS;
    c.opcode = op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
    c.byte_len = static_cast<uint32_t>(len);
    c.qp_num = peer_.peer_qpn;
    c.src_qp = qp->qp.qp_num;
    if (proto::carries_immediate(op)) {
      c.wc_flags = IBV_WC_WITH_IMM;
      c.imm_data = wr->imm_data;
    }
    c.slid = peer_.slid;
    c.sl = peer_.sl;
    // Room was checked above; only a producer racing for the CQ's last slots can take it,
    // and a CQ that full is overrunning anyway.
    (void)peer_cq_.push(c);
    ev->peer = true;
    ev->solicited = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
  }
  if (signaled) {
    shm::Cqe c{};
    c.wr_id = wr->wr_id;
    c.status = IBV_WC_SUCCESS;
    c.opcode = proto::send_wc_opcode(op);
    c.byte_len = static_cast<uint32_t>(len);
    c.qp_num = qp->qp.qp_num;
    (void)send_cq->producer.push(c);
    ev->own = true;
  }
  return Step::kDone;
}

bool DirectPath::copy(const Qp* qp, const SpanView* src, int nsrc, const SpanView* dst, int ndst,
                      uint64_t len) const {
  for (uint64_t done = 0; done < len;) {
    const uint64_t n = std::min(len - done, kBytesBetweenLooks);
    scatter_copy(src, nsrc, dst, ndst, n, done, len >= kStreamingMessageBytes);
    done += n;
    if (done < len && line_wanted(qp)) return false;
  }
  return true;
}

bool DirectPath::line_wanted(const Qp* qp) const {
  return qp->direct_line->generation.load(std::memory_order_seq_cst) != peer_.generation ||
         to_ctx(qp->qp.context)->page->mr_epoch.load(std::memory_order_seq_cst) != keys_epoch_;
}

void DirectPath::send_events(Qp* qp, const Events& ev) {
  if (ev.peer && shm::raise_cq_event(peer_notify_, peer_channel_.valid(), ev.solicited))
    proto::send_cq_event(peer_channel_.get(), peer_.peer_cq);
  Cq* send_cq = to_cq(qp->qp.send_cq);
  if (ev.own && shm::raise_cq_event(send_cq->notify, send_channel_.valid(), false))
    proto::send_cq_event(send_channel_.get(), send_cq->handle);
}

}  // namespace wharf::abi
