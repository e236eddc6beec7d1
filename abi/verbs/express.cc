// Express lines, the library's half: see express.h.
#include "abi/verbs/express.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "abi/verbs/provider.h"
#include "common/clock.h"
#include "proto/datagram.h"
#include "shm/cq_ring.h"

namespace wharf::abi {
namespace {

using proto::express::Frame;
using proto::express::kFrameSize;
using proto::express::kMaxMessage;

// Received bytes are read this many at a time: a frame's header and payload, and the frames
// behind it, in one call.
constexpr size_t kRxBuffer = 32 * 1024;
// A receiver acknowledges at once after this many Messages it has not acknowledged (a
// stream that never pauses would otherwise fill the sender's window first).
constexpr uint32_t kAckEvery = 16;
// What one line may have outstanding (sent, not yet acknowledged): few enough bytes that the
// kernel's socket buffers always hold them, so a frame never waits for the peer to read and
// two busy peers can never block each other's writes; the count bounds the Refuse frames a
// receiver may owe.
constexpr uint32_t kMaxOutstanding = 64;
constexpr uint64_t kMaxOutstandingBytes = 64 * 1024;
// The helper thread services a line nobody has serviced for this long.
constexpr uint64_t kIdleServiceNs = 1'000'000;

thread_local ibv_comp_channel* catching = nullptr;
thread_local Cq* caught = nullptr;

void raise_event(Cq* cq, int channel, bool solicited) {
  shm::wake_napping_poller(cq->notify);
  if (channel < 0 || !shm::claim_cq_event(cq->notify, solicited, true)) return;
  if (catching != nullptr && cq->cq.channel == catching && caught == nullptr)
    caught = cq;  // this thread waits on that channel: it takes the event itself
  else
    proto::send_cq_event(channel, cq->handle);
}

// The helper thread and the lines it watches. The thread holds `mu` while it services, so
// forget() returns only once the thread no longer touches the QP.
struct Helper {
  std::mutex mu;
  std::vector<Qp*> qps;  // guarded by mu
  bool started = false;  // guarded by mu

  static void* run(void* self) {
    auto* h = static_cast<Helper*>(self);
    for (;;) {
      timespec ts{0, static_cast<long>(kIdleServiceNs)};
      nanosleep(&ts, nullptr);
      std::lock_guard<std::mutex> g(h->mu);
      const uint64_t now = now_ns();
      for (Qp* qp : h->qps)
        if (now - qp->express.last_service_ns() >= kIdleServiceNs) qp->express.service(qp, true);
    }
    return nullptr;
  }

  void add(Qp* qp) {
    std::lock_guard<std::mutex> g(mu);
    try {
      qps.push_back(qp);
    } catch (...) {
      return;  // unwatched: the application's own verbs still service the line
    }
    if (started) return;
    // Signals stay with the application's threads.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t t;
    started = pthread_create(&t, nullptr, &Helper::run, this) == 0;
    if (started) pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  template <class Pred>
  void forget_if(Pred gone) {
    std::lock_guard<std::mutex> g(mu);
    qps.erase(std::remove_if(qps.begin(), qps.end(), gone), qps.end());
  }
};

Helper& helper() {
  // Never destroyed: the thread may outlive static destructors. A fork while the thread holds
  // its mutex would leave the child's copy locked for good (and the child's ibv_close_device
  // waiting on it): the mutex is taken around fork, and the child, which has no helper thread
  // and may not use its parent's QPs, starts with an empty list.
  static Helper* h = [] {
    auto* made = new Helper;
    pthread_atfork([] { helper().mu.lock(); }, [] { helper().mu.unlock(); },
                   [] {
                     Helper& c = helper();
                     c.qps.clear();
                     c.started = false;
                     c.mu.unlock();
                   });
    return made;
  }();
  return *h;
}

// A process that exits without destroying its QPs still acknowledges what it executed: its
// peers' sends completed here (the kernel delivers what the sockets hold after the exit).
__attribute__((destructor)) void acknowledge_at_exit() {
  Helper& h = helper();
  std::lock_guard<std::mutex> g(h.mu);
  for (Qp* qp : h.qps) qp->express.acknowledge();
}

}  // namespace

void ExpressLine::take(Qp* qp) {
  Context* ctx = to_ctx(qp->qp.context);
  proto::ExpressRep rep;
  UniqueFd fds[3];
  if (ctx->client.call(proto::Op::kTakeExpress, proto::Handle{qp->handle}, nullptr, 0, &rep, fds,
                       3) != 0 ||
      !fds[0].valid())
    return;
  std::vector<Sent> sent;
  std::unique_ptr<uint8_t[]> rx, tx;
  try {
    sent.resize(std::clamp<uint32_t>(qp->caps.max_send_wr, 1, kMaxOutstanding));
    rx.reset(new uint8_t[kRxBuffer]);
    tx.reset(new uint8_t[kMaxMessage]);
  } catch (...) {
    return;  // no line: everything goes through the router
  }
  std::lock_guard<SpinLock> g(qp->sq_lock);
  if (fd_.valid()) return;
  sent_.swap(sent);
  rx_.swap(rx);
  tx_.swap(tx);
  fd_ = std::move(fds[0]);
  peer_qpn_ = rep.peer_qpn;
  int next = 1;
  if (rep.flags & proto::kExpressRecvChannel) recv_channel_ = std::move(fds[next++]);
  if (rep.flags & proto::kExpressSendChannel) send_channel_ = std::move(fds[next++]);
  last_service_ns_.store(now_ns(), std::memory_order_relaxed);
  // A QP on a shared receive queue takes no Messages here: its peer never hears Ready.
  if (qp->layout.rq_entries != 0) {
    Frame ready;
    ready.kind = proto::express::kReady;
    write_frame(ready, nullptr, 0);
  }
}

bool ExpressLine::write_frame(Frame f, const uint8_t* payload, uint32_t len) {
  std::lock_guard<SpinLock> g(tx_lock_);
  f.ack = executed_.load(std::memory_order_acquire);
  uint8_t head[kFrameSize];
  proto::express::encode_frame(f, head);
  iovec iov[2] = {{head, kFrameSize}, {const_cast<uint8_t*>(payload), len}};
  msghdr m{};
  m.msg_iov = iov;
  m.msg_iovlen = len != 0 ? 2 : 1;
  // A frame is never left half written: a full socket (the peer reads slower than we send)
  // is waited out here, with the peer's library or helper thread reading.
  for (size_t left = kFrameSize + len; left != 0;) {
    const ssize_t n = sendmsg(fd_.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        sched_yield();
        continue;
      }
      broken_.store(true, std::memory_order_relaxed);
      return false;
    }
    left -= static_cast<size_t>(n);
    for (size_t skip = static_cast<size_t>(n); skip != 0;) {
      const size_t take = std::min(skip, m.msg_iov[0].iov_len);
      m.msg_iov[0].iov_base = static_cast<uint8_t*>(m.msg_iov[0].iov_base) + take;
      m.msg_iov[0].iov_len -= take;
      skip -= take;
      if (m.msg_iov[0].iov_len == 0) {
        ++m.msg_iov;
        --m.msg_iovlen;
      }
    }
  }
  ack_sent_.store(f.ack, std::memory_order_relaxed);
  return true;
}

void ExpressLine::stop(Qp* qp) {
  if (!fd_.valid()) return;
  acknowledge();
  std::lock_guard<SpinLock> g(qp->sq_lock);
  stopped_ = true;
  hand_to_router(qp);
}

void ExpressLine::resume(Qp* qp) {
  std::lock_guard<SpinLock> g(qp->sq_lock);
  stopped_ = false;
}

void ExpressLine::close() {
  bool expected = false;
  while (!rx_busy_.compare_exchange_weak(expected, true, std::memory_order_acquire)) {
    expected = false;
    sched_yield();  // a poller that took the QP off a list just before it was removed
  }
  fd_.reset();
  recv_channel_.reset();
  send_channel_.reset();
  peer_ready_.store(false, std::memory_order_relaxed);
  broken_.store(false, std::memory_order_relaxed);
  executed_.store(0, std::memory_order_relaxed);
  ack_sent_.store(0, std::memory_order_relaxed);
  stopped_ = false;
  next_seq_ = 1;
  acked_seq_ = 0;
  outstanding_bytes_ = 0;
  rx_begin_ = rx_end_ = 0;
  refusing_epoch_ = -1;
  send_keys_.clear();
  recv_keys_.clear();
  rx_busy_.store(false, std::memory_order_release);
}

void ExpressLine::learn_key(Qp* qp, uint32_t key) {
  Context* ctx = to_ctx(qp->qp.context);
  ReachableKey k;
  k.used = true;
  k.key = key;
  const uint32_t epoch = ctx->page->mr_epoch.load(std::memory_order_seq_cst);
  find_own_key(ctx, key, &k);
  std::lock_guard<SpinLock> g(qp->sq_lock);
  learned_.used = true;
  learned_.key = k.key;
  learned_.access = k.access;
  learned_.pd = k.pd;
  learned_.iova = k.iova;
  learned_.len = k.len;
  learned_.base = k.base;
  learned_epoch_ = epoch;
}

ExpressLine::Send ExpressLine::try_send(Qp* qp, const ibv_send_wr* wr, uint32_t* key) {
  if (!usable()) return Send::kToRing;
  const bool eligible =
      !stopped_ && qp->qp.state == IBV_QPS_RTS && peer_ready_.load(std::memory_order_acquire) &&
      qp->direct_line->in_error.load(std::memory_order_relaxed) == 0 &&
      (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM) &&
      qp->direct_line->express_may_send.load(std::memory_order_relaxed) != 0 &&
      qp->sq.in_flight() == 0 &&
      qp->direct_line->sq_retired.load(std::memory_order_acquire) == qp->sq.head();
  const Send otherwise = outstanding() != 0 ? Send::kWait : Send::kToRing;  // order
  if (!eligible || outstanding() >= sent_.size()) return otherwise;
  const bool inline_data = (wr->send_flags & IBV_SEND_INLINE) != 0;
  uint64_t len = 0;
  for (int i = 0; i < wr->num_sge; ++i) len += wr->sg_list[i].length;
  if (len > kMaxMessage || (inline_data && len > qp->caps.max_inline_data) ||
      outstanding_bytes_ + len > kMaxOutstandingBytes)
    return otherwise;

  // The payload: inline bytes, or registered memory of the QP's PD.
  Context* ctx = to_ctx(qp->qp.context);
  const uint32_t epoch = ctx->page->mr_epoch.load(std::memory_order_seq_cst);
  if (epoch != send_keys_epoch_) {
    send_keys_.clear();
    send_keys_epoch_ = epoch;
  }
  if (learned_.used) {
    if (learned_epoch_ == epoch) {
      Mapping none;
      ReachableKey* k = send_keys_.replace(&none);
      k->key = learned_.key;
      k->access = learned_.access;
      k->pd = learned_.pd;
      k->iova = learned_.iova;
      k->len = learned_.len;
      k->base = learned_.base;
    }
    learned_.used = false;
  }
  const uint32_t pd = to_pd(qp->qp.pd)->handle;
  uint8_t* out = tx_.get();
  uint32_t off = 0;
  for (int i = 0; i < wr->num_sge; ++i) {
    const ibv_sge& s = wr->sg_list[i];
    if (s.length == 0) continue;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(s.addr);
    if (!inline_data) {
      ReachableKey* k = send_keys_.find(s.lkey);
      if (k == nullptr) {
        *key = s.lkey;
        return Send::kNeedKey;
      }
      if (k->pd != pd || (p = k->reach(s.addr, s.length)) == nullptr) return otherwise;
    }
    std::memcpy(out + off, p, s.length);
    off += s.length;
  }

  // Kept until acknowledged: what handing it to the router later takes.
  Sent& e = sent_[next_seq_ % sent_.size()];
  e.wr = *wr;
  e.wr.next = nullptr;
  e.len = off;
  if (inline_data) {
    std::memcpy(e.inline_data, out, off);
    e.sge[0] = ibv_sge{reinterpret_cast<uint64_t>(e.inline_data), off, 0};
    e.wr.num_sge = 1;
  } else {
    std::copy(wr->sg_list, wr->sg_list + wr->num_sge, e.sge);
  }
  e.wr.sg_list = e.sge;
  Frame f;
  f.kind = proto::express::kMessage;
  f.flags = static_cast<uint8_t>(
      ((wr->send_flags & IBV_SEND_SOLICITED) ? proto::express::kSolicited : 0) |
      (wr->opcode == IBV_WR_SEND_WITH_IMM ? proto::express::kWithImm : 0));
  f.epoch = epoch_;
  f.seq = next_seq_++;
  f.imm = wr->imm_data;
  f.length = off;
  outstanding_bytes_ += off;
  if (!write_frame(f, out, off)) hand_to_router(qp);  // posted either way
  return Send::kSent;
}

bool ExpressLine::service(Qp* qp, bool idle) {
  if (!fd_.valid()) return false;
  bool expected = false;
  if (!rx_busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) return false;
  last_service_ns_.store(now_ns(), std::memory_order_relaxed);
  bool did = false, executed = false;
  while (!broken_.load(std::memory_order_relaxed)) {
    if (rx_begin_ == rx_end_) rx_begin_ = rx_end_ = 0;
    const ssize_t n = recv(fd_.get(), rx_.get() + rx_end_, kRxBuffer - rx_end_, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      broken_.store(true, std::memory_order_relaxed);
      break;
    }
    if (n < 0) break;
    rx_end_ += static_cast<size_t>(n);
    did = true;
    if (!handle_frames(qp, &executed)) break;
    if (rx_end_ < kRxBuffer) break;  // the socket had no more than that
  }
  if (broken_.load(std::memory_order_relaxed)) {
    std::lock_guard<SpinLock> g(qp->sq_lock);
    hand_to_router(qp);
  } else {
    // Acknowledge now unless a frame will carry it soon: the application that just got its
    // completion usually answers at once.
    const uint32_t owed =
        executed_.load(std::memory_order_relaxed) - ack_sent_.load(std::memory_order_relaxed);
    if (owed != 0 && (idle || !executed || owed >= kAckEvery)) acknowledge();
  }
  rx_busy_.store(false, std::memory_order_release);
  return did;
}

void ExpressLine::acknowledge() {
  if (!usable() ||
      executed_.load(std::memory_order_acquire) == ack_sent_.load(std::memory_order_relaxed))
    return;
  Frame a;
  a.kind = proto::express::kAck;
  write_frame(a, nullptr, 0);
}

bool ExpressLine::handle_frames(Qp* qp, bool* executed) {
  for (;;) {
    Frame f;
    size_t used = 0;
    const proto::express::Next next =
        proto::express::next_frame(rx_.get() + rx_begin_, rx_end_ - rx_begin_, &f, &used);
    if (next == proto::express::Next::kNeedMore) break;
    if (next == proto::express::Next::kBad) {
      broken_.store(true, std::memory_order_relaxed);  // hostile or corrupt: stop reading
      return false;
    }
    const uint8_t* payload = rx_.get() + rx_begin_ + kFrameSize;
    rx_begin_ += used;
    handle_ack(qp, f.ack);
    switch (f.kind) {
      case proto::express::kReady: peer_ready_.store(true, std::memory_order_release); break;
      case proto::express::kMessage:
        handle_message(qp, f, payload);
        *executed = true;
        break;
      case proto::express::kRefuse: handle_refuse(qp, f.seq); break;
      default: break;  // kAck: its acknowledgement was all
    }
  }
  // Keep a frame the buffer cut off at its start, for the rest to follow.
  if (rx_begin_ != 0 && rx_begin_ != rx_end_) {
    std::memmove(rx_.get(), rx_.get() + rx_begin_, rx_end_ - rx_begin_);
    rx_end_ -= rx_begin_;
    rx_begin_ = 0;
  }
  return true;
}

uint8_t* ExpressLine::receive_memory(Qp* qp, uint32_t pd, uint32_t lkey, uint64_t addr,
                                     uint32_t len) {
  Context* ctx = to_ctx(qp->qp.context);
  const uint32_t epoch = ctx->page->mr_epoch.load(std::memory_order_seq_cst);
  if (epoch != recv_keys_epoch_) {
    recv_keys_.clear();
    recv_keys_epoch_ = epoch;
  }
  ReachableKey* k = recv_keys_.find(lkey);
  if (k == nullptr) {
    Mapping none;
    k = recv_keys_.replace(&none);
    k->key = lkey;
    find_own_key(ctx, lkey, k);  // no spinlock held: rx_busy_ is only tried
  }
  if (k->pd != pd || !(k->access & IBV_ACCESS_LOCAL_WRITE)) return nullptr;
  return k->reach(addr, len);
}

// Executes one Message into this QP's own receive queue, or refuses it (and the rest of its
// epoch, which the sender hands to its router too).
void ExpressLine::handle_message(Qp* qp, const Frame& f, const uint8_t* payload) {
  auto refuse = [&] {
    refusing_epoch_ = f.epoch;
    Frame r;
    r.kind = proto::express::kRefuse;
    r.epoch = f.epoch;
    r.seq = f.seq;
    write_frame(r, nullptr, 0);
  };
  if (refusing_epoch_ == f.epoch) return refuse();
  refusing_epoch_ = -1;
  if (qp->layout.rq_entries == 0 || qp->qp.state == IBV_QPS_ERR ||
      qp->direct_line->in_error.load(std::memory_order_acquire) != 0)
    return refuse();
  // Only the peer's Messages take receives while they flow: its router has retired
  // everything it sent before them, and takes nothing while they are outstanding.
  auto* hdr = reinterpret_cast<shm::RingHeader*>(qp->map.data + qp->layout.rq_ring_off);
  const uint32_t prod = hdr->producer.value.load(std::memory_order_acquire);
  const uint32_t pos = hdr->consumer.value.load(std::memory_order_acquire);
  if (prod == pos || prod - pos > qp->layout.rq_entries) return refuse();
  const uint8_t* slot = qp->map.data + qp->layout.rq_slots_off +
                        static_cast<size_t>(pos & (qp->layout.rq_entries - 1)) * qp->layout.rq_slot;
  shm::RecvWqe rh;
  std::memcpy(&rh, slot, sizeof(rh));
  if (rh.num_sge > qp->caps.max_recv_sge) return refuse();
  const uint32_t pd = to_pd(qp->qp.pd)->handle;
  uint8_t* dst[shm::kMaxRecvSge];
  uint32_t dlen[shm::kMaxRecvSge];
  uint64_t room = 0;
  for (uint32_t i = 0; i < rh.num_sge; ++i) {
    shm::Sge s;
    std::memcpy(&s, slot + sizeof(shm::RecvWqe) + i * sizeof(shm::Sge), sizeof(s));
    dlen[i] = s.length;
    dst[i] = nullptr;
    if (s.length == 0) continue;
    if ((dst[i] = receive_memory(qp, pd, s.lkey, s.addr, s.length)) == nullptr) return refuse();
    room += s.length;
  }
  Cq* rcq = to_cq(qp->qp.recv_cq);
  if (room < f.length || rcq->resizing.load(std::memory_order_relaxed) ||
      !rcq->producer.has_room(1))
    return refuse();
  for (uint32_t i = 0, off = 0; i < rh.num_sge && off < f.length; ++i) {
    const uint32_t n = std::min(dlen[i], f.length - off);
    if (n != 0) std::memcpy(dst[i], payload + off, n);
    off += n;
  }
  hdr->consumer.value.store(pos + 1, std::memory_order_release);
  qp->counters->rx_msgs.fetch_add(1, std::memory_order_relaxed);
  qp->counters->rx_bytes.fetch_add(f.length, std::memory_order_relaxed);
  shm::Cqe c{};
  c.wr_id = rh.wr_id;
  c.status = IBV_WC_SUCCESS;
  c.opcode = IBV_WC_RECV;
  c.byte_len = f.length;
  c.qp_num = qp->qp.qp_num;
  c.src_qp = peer_qpn_;
  if (f.flags & proto::express::kWithImm) {
    c.wc_flags = IBV_WC_WITH_IMM;
    c.imm_data = f.imm;
  }
  (void)rcq->producer.push(c);  // room checked above
  executed_.store(f.seq, std::memory_order_release);
  raise_event(rcq, recv_channel_.valid() ? recv_channel_.get() : -1,
              (f.flags & proto::express::kSolicited) != 0);
}

void ExpressLine::handle_ack(Qp* qp, uint32_t ack) {
  std::lock_guard<SpinLock> g(qp->sq_lock);
  if (ack - acked_seq_ - 1 >= outstanding()) return;  // nothing new, or not one of ours
  Cq* scq = to_cq(qp->qp.send_cq);
  bool completed = false;
  while (acked_seq_ != ack) {
    ++acked_seq_;
    const Sent& e = sent_[acked_seq_ % sent_.size()];
    outstanding_bytes_ -= e.len;
    qp->counters->tx_msgs.fetch_add(1, std::memory_order_relaxed);
    qp->counters->tx_bytes.fetch_add(e.len, std::memory_order_relaxed);
    qp->counters->express_msgs.fetch_add(1, std::memory_order_relaxed);
    if (!(e.wr.send_flags & IBV_SEND_SIGNALED) && !qp->sq_sig_all) continue;
    shm::Cqe c{};
    c.wr_id = e.wr.wr_id;
    c.status = IBV_WC_SUCCESS;
    c.opcode = IBV_WC_SEND;
    c.byte_len = e.len;
    c.qp_num = qp->qp.qp_num;
    (void)scq->producer.push(c);  // a full CQ is the application's overrun
    completed = true;
  }
  if (completed) raise_event(scq, send_channel_.valid() ? send_channel_.get() : -1, false);
}

void ExpressLine::handle_refuse(Qp* qp, uint32_t seq) {
  // Everything before it was executed (the peer executes in order); it and what follows go
  // to the router. A refusal of a Message no longer outstanding is of the same epoch.
  handle_ack(qp, seq - 1);
  std::lock_guard<SpinLock> g(qp->sq_lock);
  if (acked_seq_ + 1 == seq && outstanding() != 0) hand_to_router(qp);
}

void ExpressLine::hand_to_router(Qp* qp) {
  bool posted = false;
  while (outstanding() != 0) {
    const Sent& e = sent_[(acked_seq_ + 1) % sent_.size()];
    shm::RingStatus st;
    uint8_t* slot = qp->sq.reserve(&st);
    // The ring has room: the application may have at most max_send_wr outstanding, and the
    // router held nothing when these went on the line.
    if (slot == nullptr || write_send_wqe(qp, slot, &e.wr) != 0) break;
    qp->sq.commit();
    ++acked_seq_;
    outstanding_bytes_ -= e.len;
    posted = true;
  }
  ++epoch_;
  if (posted) to_ctx(qp->qp.context)->ring_doorbell();
}

void take_express_if_offered(Qp* qp) {
  if (qp->direct_line->express_offer.load(std::memory_order_acquire) == 0) return;
  qp->express.take(qp);
  if (!qp->express.usable()) return;
  for (ibv_cq* c : {qp->qp.send_cq, qp->qp.recv_cq}) {
    for (auto& slot : to_cq(c)->express_qps) {
      Qp* none = nullptr;
      if (slot.load(std::memory_order_relaxed) == qp ||
          slot.compare_exchange_strong(none, qp, std::memory_order_release))
        break;
    }
  }
  helper().add(qp);
}

void forget_express(Qp* qp) {
  if (qp->express.fd() < 0) return;
  qp->express.acknowledge();  // the peer's sends executed here complete
  helper().forget_if([qp](const Qp* q) { return q == qp; });
  for (ibv_cq* c : {qp->qp.send_cq, qp->qp.recv_cq}) {
    if (c == nullptr) continue;
    for (auto& slot : to_cq(c)->express_qps) {
      Qp* me = qp;
      slot.compare_exchange_strong(me, nullptr, std::memory_order_release);
    }
  }
}

void forget_express_lines(Context* ctx) {
  helper().forget_if([ctx](Qp* q) {
    if (to_ctx(q->qp.context) != ctx) return false;
    q->express.acknowledge();
    return true;
  });
}

bool service_express(Cq* cq, bool idle) {
  bool did = false;
  for (auto& slot : cq->express_qps)
    if (Qp* qp = slot.load(std::memory_order_acquire); qp != nullptr)
      did |= qp->express.service(qp, idle);
  return did;
}

void catch_express_events(ibv_comp_channel* channel) {
  catching = channel;
  caught = nullptr;
}

Cq* caught_express_event() {
  catching = nullptr;
  Cq* c = caught;
  caught = nullptr;
  return c;
}

void acknowledge_express(Cq* cq) {
  for (auto& slot : cq->express_qps)
    if (Qp* qp = slot.load(std::memory_order_acquire); qp != nullptr) qp->express.acknowledge();
}

}  // namespace wharf::abi
