// Express lines, the library's half: see express.h.
#include "abi/verbs/express.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "abi/verbs/line_set.h"
#include "abi/verbs/provider.h"
#include "abi/verbs/tunables.h"
#include "common/clock.h"
#include "proto/datagram.h"
#include "shm/cq_ring.h"

namespace wharf::abi {
namespace {

using proto::express::Frame;
using proto::express::kFrameSize;
using proto::express::kMaxMessage;
using proto::express::Next;

// Received bytes are read this many at a time: a frame's header and payload, and the frames
// behind it, in one call.
constexpr size_t kRxBuffer = 32 * 1024;
// A receiver acknowledges at once after this many Messages it has not acknowledged (a
// stream that never pauses would otherwise fill the sender's window first).
constexpr uint32_t kAckEvery = 16;
// A SEND posted within kBurstNs of the line's previous one waits for the rest of its burst,
// up to kBurstBytes (ExpressLine::try_send), the most one batch of frames carries.
constexpr uint64_t kBurstNs = 3'000;
constexpr uint64_t kBurstBytes = 256 * 1024;
// The most lines of one CQ whose bursts one poll writes (write_express_bursts).
constexpr int kBurstLinesPerPoll = 16;
thread_local ibv_comp_channel* catching = nullptr;
thread_local Cq* caught = nullptr;

void raise_event(Cq* cq, int channel, bool solicited) {
  if (!shm::raise_cq_event(cq->notify, channel >= 0, solicited)) return;
  if (catching != nullptr && cq->cq.channel == catching && caught == nullptr)
    caught = cq;  // this thread waits on that channel: it takes the event itself
  else
    proto::send_cq_event(channel, cq->handle);
}

// Tells the polls of qp's CQs that its line holds a burst to write (write_express_bursts).
void mark_burst(Qp* qp) {
  to_cq(qp->qp.send_cq)->line_bursts.store(true, std::memory_order_release);
  to_cq(qp->qp.recv_cq)->line_bursts.store(true, std::memory_order_release);
}

// The helper thread and the lines it watches. The thread holds `mu` while it services, so
// forget() returns only once the thread no longer touches the QP.
struct Helper {
  std::mutex mu;
  std::vector<Qp*> qps;  // guarded by mu
  bool started = false;  // guarded by mu

  static void* run(void* self) {
    auto* h = static_cast<Helper*>(self);
    // It services a line nobody has serviced for express_idle_ns.
    const uint64_t idle = express_idle_ns();
    for (;;) {
      timespec ts{static_cast<time_t>(idle / 1'000'000'000),
                  static_cast<long>(idle % 1'000'000'000)};
      nanosleep(&ts, nullptr);
      std::lock_guard<std::mutex> g(h->mu);
      const uint64_t now = now_ns();
      for (Qp* qp : h->qps)
        if (now - qp->express.last_service_ns() >= idle) qp->express.service(qp, true);
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
  for (Qp* qp : h.qps) qp->express.acknowledge(qp);
}

}  // namespace

void ExpressLine::Span::advance(uint64_t n) {
  left -= n;
  while (count != 0 && (n != 0 || iov[first].iov_len == 0)) {
    iovec& v = iov[first];
    const size_t took = static_cast<size_t>(std::min<uint64_t>(n, v.iov_len));
    v.iov_base = static_cast<uint8_t*>(v.iov_base) + took;
    v.iov_len -= took;
    n -= took;
    if (v.iov_len == 0) {
      ++first;
      --count;
    }
  }
}

void ExpressLine::Span::fill(const uint8_t* src, size_t n) {
  size_t copied = 0;
  for (int i = first; copied != n && i < first + count; ++i) {
    const size_t c = std::min(n - copied, iov[i].iov_len);
    std::memcpy(iov[i].iov_base, src + copied, c);
    copied += c;
  }
  advance(n);  // a discarding span (no iovs) only counts
}

bool ExpressLine::take(Qp* qp) {
  Context* ctx = to_ctx(qp->qp.context);
  proto::ExpressRep rep;
  UniqueFd fds[3];
  if (ctx->client.call(proto::Op::kTakeExpress, proto::Handle{qp->handle}, nullptr, 0, &rep, fds,
                       3) != 0 ||
      !fds[0].valid())
    return false;
  // As many Messages outstanding as the QP may have work requests: a stream stays on the line.
  const uint32_t entries = std::max<uint32_t>(qp->caps.max_send_wr, 1);
  const size_t sges = std::max<uint32_t>(qp->caps.max_send_sge, 1);
  const size_t stride =
      sges * (sizeof(ibv_sge) + sizeof(iovec)) + (qp->caps.max_inline_data + 7) / 8 * 8;
  std::vector<Sent> sent;
  std::unique_ptr<uint8_t[]> arena, rx;
  std::unique_ptr<Writing> writing;
  try {
    sent.resize(entries);
    arena.reset(new uint8_t[entries * stride]);
    rx.reset(new uint8_t[kRxBuffer]);
    writing = std::make_unique<Writing>();
  } catch (...) {
    return false;  // no line: everything goes through the router
  }
  for (uint32_t i = 0; i < entries; ++i) {
    uint8_t* at = arena.get() + i * stride;
    sent[i].sge = reinterpret_cast<ibv_sge*>(at);
    sent[i].payload = reinterpret_cast<iovec*>(at + sges * sizeof(ibv_sge));
    sent[i].inline_data = at + sges * (sizeof(ibv_sge) + sizeof(iovec));
  }
  std::lock_guard<SpinLock> g(qp->sq_lock);
  if (fd_.valid()) return false;  // another thread took it
  sent_.swap(sent);
  sent_arena_.swap(arena);
  rx_.swap(rx);
  writing_.swap(writing);
  fd_ = std::move(fds[0]);
  peer_qpn_ = rep.peer_qpn;
  int next = 1;
  if (rep.flags & proto::kExpressRecvChannel) recv_channel_ = std::move(fds[next++]);
  if (rep.flags & proto::kExpressSendChannel) send_channel_ = std::move(fds[next++]);
  last_service_ns_.store(now_ns(), std::memory_order_relaxed);
  // A QP on a tag-matching SRQ takes no Messages here: its peer never hears Ready.
  update_polled(qp);
  if (takes_messages(qp)) {
    ready_owed_ = true;
    flush(qp);
  }
  return true;
}

bool ExpressLine::takes_messages(const Qp* qp) {
  return qp->layout.rq_entries != 0 || (qp->qp.srq != nullptr && !to_srq(qp->qp.srq)->tm);
}

void ExpressLine::update_polled(const Qp* qp) {
  polled_.store(takes_messages(qp) || outstanding() != 0, std::memory_order_relaxed);
}

bool ExpressLine::router_done(Qp* qp) const {
  return qp->sq.in_flight() == 0 &&
         qp->direct_line->sq_retired.load(std::memory_order_acquire) == qp->sq.head();
}

bool ExpressLine::flush(Qp* qp) {
  // Work the router failed goes before what waits here: the router flushes both, in order.
  if (next_write_seq_ != next_seq_ &&
      qp->direct_line->in_error.load(std::memory_order_acquire) != 0)
    hand_to_router(qp);
  Span& out = writing_->bytes;
  burst_.store(false, std::memory_order_relaxed);
  burst_bytes_ = 0;
  while (!broken_.load(std::memory_order_relaxed)) {
    if (out.left == 0 && !next_frames_owed(qp)) break;
    msghdr m{};
    m.msg_iov = out.iov + out.first;
    m.msg_iovlen = static_cast<size_t>(out.count);
    const ssize_t n = sendmsg(fd_.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;  // the rest when the peer has read
      break_line();
      break;
    }
    out.advance(static_cast<uint64_t>(n));
  }
  wants_write_.store(out.left != 0, std::memory_order_relaxed);
  unwritten_.store(next_write_seq_ != next_seq_, std::memory_order_relaxed);
  if (!broken_.load(std::memory_order_relaxed)) return true;
  hand_to_router(qp);
  return false;
}

bool ExpressLine::next_frames_owed(Qp* qp) {
  Writing& w = *writing_;
  w.bytes = Span{};
  w.frames = 0;
  w.inline_used = 0;
  w.ack_before = ack_sent_.load(std::memory_order_relaxed);
  while (w.frames < kBatchFrames && add_frame_owed(qp)) ++w.frames;
  return w.frames != 0;
}

bool ExpressLine::add_frame_owed(Qp* qp) {
  Writing& w = *writing_;
  Span& out = w.bytes;
  if (out.count == kSpanIov) return false;
  Frame f;
  const int head = out.count++;
  if (ready_owed_) {
    ready_owed_ = false;
    f.kind = proto::express::kReady;
  } else if (refuse_owed_) {
    refuse_owed_ = false;
    f = refusal_;
  } else if (next_write_seq_ != next_seq_ && router_done(qp)) {
    const Sent& e = sent_[next_write_seq_ % sent_.size()];
    const bool inline_data = (e.wr.send_flags & IBV_SEND_INLINE) != 0;
    // A Message whose iovs or inline bytes the batch has no room for starts the next one, as
    // does one that would take it past kBurstBytes: a large one goes alone (batches of 1 MiB
    // Messages cost qperf rc_bw a third of its rate).
    if (out.count + (inline_data ? 1 : e.npayload) > kSpanIov ||
        (inline_data && w.inline_used + e.len > sizeof(w.inline_data)) ||
        (w.frames != 0 && out.left + kFrameSize + e.len > kBurstBytes)) {
      --out.count;
      return false;
    }
    f.kind = proto::express::kMessage;
    f.flags = static_cast<uint8_t>(
        ((e.wr.send_flags & IBV_SEND_SOLICITED) ? proto::express::kSolicited : 0) |
        (e.wr.opcode == IBV_WR_SEND_WITH_IMM ? proto::express::kWithImm : 0));
    f.epoch = epoch_;  // a Message not yet written was put on the line in this epoch
    f.seq = next_write_seq_++;
    f.imm = e.wr.imm_data;
    f.length = e.len;
    if (inline_data) {
      uint8_t* copy = w.inline_data + w.inline_used;
      std::memcpy(copy, e.inline_data, e.len);
      w.inline_used += e.len;
      out.iov[out.count++] = iovec{copy, e.len};
    } else {
      std::copy(e.payload, e.payload + e.npayload, out.iov + out.count);
      out.count += e.npayload;
    }
    out.left += e.len;
  } else if (ack_owed_ && executed_.load(std::memory_order_acquire) !=
                              ack_sent_.load(std::memory_order_relaxed)) {
    f.kind = proto::express::kAck;
  } else {
    ack_owed_ = false;
    --out.count;
    return false;
  }
  f.ack = executed_.load(std::memory_order_acquire);  // every frame carries it
  ack_owed_ = false;
  ack_sent_.store(f.ack, std::memory_order_relaxed);
  proto::express::encode_frame(f, w.head[w.frames]);
  out.iov[head] = iovec{w.head[w.frames], kFrameSize};
  out.left += kFrameSize;
  w.kind[w.frames] = f.kind;
  w.ack[w.frames] = f.ack;
  w.end[w.frames] = out.left;
  w.end_iov[w.frames] = out.count;
  return true;
}

void ExpressLine::cut_batch() {
  Writing& w = *writing_;
  Span& out = w.bytes;
  if (out.left == 0 || w.frames == 0) return;
  const uint64_t written = w.end[w.frames - 1] - out.left;
  // The first frame not finished; it stays if the socket took any of it.
  int keep = 0;
  while (w.end[keep] <= written) ++keep;
  if (written > (keep == 0 ? 0 : w.end[keep - 1])) ++keep;
  for (int i = keep; i < w.frames; ++i) {
    if (w.kind[i] == proto::express::kReady) ready_owed_ = true;
    if (w.kind[i] == proto::express::kRefuse) refuse_owed_ = true;
  }
  ack_sent_.store(keep == 0 ? w.ack_before : w.ack[keep - 1], std::memory_order_relaxed);
  ack_owed_ = true;  // sent only if something is still unacknowledged
  const uint64_t left = keep == 0 ? 0 : w.end[keep - 1] - written;
  if (left == 0) {
    out = Span{};
  } else {
    out.count = w.end_iov[keep - 1] - out.first;
    out.left = left;
  }
  w.frames = keep;
}

void ExpressLine::break_line() {
  broken_.store(true, std::memory_order_relaxed);
  // The peer sees the end and hands what it has outstanding to its router.
  ::shutdown(fd_.get(), SHUT_RDWR);
}

void ExpressLine::stop(Qp* qp, ibv_qp_state next) {
  if (!fd_.valid()) return;
  acknowledge(qp);
  std::lock_guard<SpinLock> g(qp->sq_lock);
  stopped_ = true;
  if (next != IBV_QPS_SQD) hand_to_router(qp);
}

void ExpressLine::resume(Qp* qp) {
  std::lock_guard<SpinLock> g(qp->sq_lock);
  stopped_ = false;
}

void ExpressLine::close(Qp* qp) {
  bool expected = false;
  while (!rx_busy_.compare_exchange_weak(expected, true, std::memory_order_acquire)) {
    expected = false;
    sched_yield();  // a poller that took the QP off a list just before it was removed
  }
  if (placing_.into.left != 0) give_back_receive(qp);
  fd_.reset();
  recv_channel_.reset();
  send_channel_.reset();
  peer_ready_.store(false, std::memory_order_relaxed);
  broken_.store(false, std::memory_order_relaxed);
  wants_write_.store(false, std::memory_order_relaxed);
  unwritten_.store(false, std::memory_order_relaxed);
  polled_.store(false, std::memory_order_relaxed);
  executed_.store(0, std::memory_order_relaxed);
  ack_sent_.store(0, std::memory_order_relaxed);
  stopped_ = false;
  next_seq_ = next_write_seq_ = 1;
  acked_seq_ = 0;
  staged_ = 0;
  routers_until_ns_ = 0;
  one_sided_routed_ = false;
  ready_owed_ = ack_owed_ = refuse_owed_ = false;
  if (writing_ != nullptr) writing_->bytes = Span{};
  last_post_ns_ = 0;
  burst_bytes_ = 0;
  burst_.store(false, std::memory_order_relaxed);
  rx_begin_ = rx_end_ = 0;
  placing_ = Placing{};
  refusing_epoch_ = -1;
  send_keys_.clear();
  recv_keys_.clear();
  rx_busy_.store(false, std::memory_order_release);
}

void ExpressLine::learn_key(Qp* qp, uint32_t key) {
  Context* ctx = to_ctx(qp->qp.context);
  ReachableKey k;
  k.key = key;
  const uint32_t epoch = ctx->page->mr_epoch.load(std::memory_order_seq_cst);
  find_own_key(ctx, key, &k);
  std::lock_guard<SpinLock> g(qp->sq_lock);
  learned_.used = true;
  learned_.assign_facts(k);
  learned_epoch_ = epoch;
}

// The router answers the peer's READs of this QP's memory in long messages now
// (shm::QpDirect::peer_reads_until_ns). The QP's SENDs then belong with those READs (UCX's
// rendezvous: the sender's next RTS while the receiver reads the last message): on the line
// they would keep both sides' pollers reading it and spinning, where the routers moving the
// READs need the cores (docs/PERFORMANCE.md).
namespace {
bool peer_reads_in_bulk(const Qp* qp) {
  const uint64_t until = qp->direct_line->peer_reads_until_ns.load(std::memory_order_relaxed);
  return until != 0 && now_ns() < until;
}
}  // namespace

ExpressLine::Send ExpressLine::try_send(Qp* qp, const ibv_send_wr* wr, uint32_t* key) {
  if (!usable()) {
    // A line another thread found broken: what it holds goes to the ring first.
    if (outstanding() != 0 || staged_ != 0) hand_to_router(qp);
    return Send::kToRing;
  }
  // What the line cannot take follows the line's outstanding work, in order.
  const Send otherwise = outstanding() != 0 ? Send::kStage : Send::kToRing;
  const bool send = wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM;
  // Work for the routers holds the QP's SENDs there for a while (express_hold_ns), and so does
  // the peer's reading of this QP's memory in bulk: the clock is read only by QPs that post
  // such work or were read so.
  if (!send) {
    routers_until_ns_ = now_ns() + express_hold_ns();
    one_sided_routed_ = true;
    one_sided_at_ = qp->sq.head();  // where it goes in the ring, or before
    return otherwise;
  }
  if (express_hold_ns() != 0 && peer_reads_in_bulk(qp)) {
    routers_until_ns_ = now_ns() + express_hold_ns();
    return otherwise;
  }
  if (routers_until_ns_ != 0) {
    if (now_ns() < routers_until_ns_) return otherwise;
    routers_until_ns_ = 0;
  }
  // Nor while the router still carries the QP's one-sided work, however long ago it was
  // posted: the Message could only wait on the line for it (order), the line owing a write and
  // its CQ's pollers kept from napping meanwhile (UCX's ATS behind the READs of the messages
  // after it; docs/PERFORMANCE.md). Behind SENDs the router carries, it waits on the line:
  // that is how a stream of them moves onto a line that came up after they started.
  if (one_sided_routed_) {
    const uint32_t retired = qp->direct_line->sq_retired.load(std::memory_order_acquire);
    if (static_cast<int32_t>(retired - one_sided_at_) <= 0) return otherwise;
    one_sided_routed_ = false;
  }
  const bool eligible = !stopped_ && qp->qp.state == IBV_QPS_RTS &&
                        peer_ready_.load(std::memory_order_acquire) &&
                        qp->direct_line->in_error.load(std::memory_order_relaxed) == 0 &&
                        qp->direct_line->express_may_send.load(std::memory_order_relaxed) != 0;
  if (!eligible || staged_ != 0 || outstanding() >= sent_.size()) return otherwise;
  const bool inline_data = (wr->send_flags & IBV_SEND_INLINE) != 0;
  uint64_t len = 0;
  for (int i = 0; i < wr->num_sge; ++i) len += wr->sg_list[i].length;
  if (len > kMaxMessage || (inline_data && len > qp->caps.max_inline_data)) return otherwise;

  // The payload: inline bytes, copied now; or registered memory of the QP's PD, written from
  // where it is (the application leaves it alone until the send completes).
  Context* ctx = to_ctx(qp->qp.context);
  const uint32_t epoch = ctx->page->mr_epoch.load(std::memory_order_seq_cst);
  if (epoch != send_keys_epoch_) {
    send_keys_.clear();
    send_keys_epoch_ = epoch;
  }
  if (learned_.used) {
    if (learned_epoch_ == epoch) {
      Mapping none;
      send_keys_.replace(&none)->assign_facts(learned_);
    }
    learned_.used = false;
  }
  const uint32_t pd = to_pd(qp->qp.pd)->handle;
  Sent& e = sent_[next_seq_ % sent_.size()];
  e.npayload = 0;
  uint32_t off = 0;
  for (int i = 0; i < wr->num_sge; ++i) {
    const ibv_sge& s = wr->sg_list[i];
    if (s.length == 0) continue;
    uint8_t* p = reinterpret_cast<uint8_t*>(s.addr);
    if (inline_data) {
      std::memcpy(e.inline_data + off, p, s.length);
    } else {
      ReachableKey* k = send_keys_.find(s.lkey);
      if (k == nullptr) {
        *key = s.lkey;
        return Send::kNeedKey;
      }
      if (k->pd != pd || (p = k->reach(s.addr, s.length)) == nullptr) return otherwise;
      e.payload[e.npayload++] = iovec{p, s.length};
    }
    off += s.length;
  }

  // Kept until acknowledged: what handing it to the router later takes.
  e.wr = *wr;
  e.wr.next = nullptr;
  e.len = off;
  if (inline_data) {
    e.sge[0] = ibv_sge{reinterpret_cast<uint64_t>(e.inline_data), off, 0};
    e.wr.num_sge = 1;
  } else {
    std::copy(wr->sg_list, wr->sg_list + wr->num_sge, e.sge);
  }
  e.wr.sg_list = e.sge;
  ++next_seq_;
  update_polled(qp);  // its acknowledgement comes on the line
  // A SEND posted right after another is most likely one of a burst (UCX's fragments of one
  // message): it waits for the rest, and the next poll of the QP's CQs (or a wait on their
  // channel, a post after the burst, the helper thread) writes them in one system call, where
  // a call each cost most of their time. The first of a burst goes at once, as does every
  // SEND of a ping-pong. A burst is written once it has kBurstBytes.
  const uint64_t now = now_ns();
  if (now - last_post_ns_ < kBurstNs && burst_bytes_ + off < kBurstBytes) {
    burst_bytes_ += off;
    unwritten_.store(true, std::memory_order_relaxed);
    if (!burst_.exchange(true, std::memory_order_relaxed)) mark_burst(qp);
    last_post_ns_ = now;
  } else {
    flush(qp);  // posted either way: a broken line hands it to the router
    last_post_ns_ = now_ns();
  }
  return Send::kSent;
}

bool ExpressLine::service(Qp* qp, bool idle) {
  if (!fd_.valid()) return false;
  bool expected = false;
  if (!rx_busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) return false;
  last_service_ns_.store(now_ns(), std::memory_order_relaxed);
  bool did = false, executed = false;
  // Reads until the socket is empty, or a Message was executed: its completion goes to the
  // application, which usually posts the next receive before the next Message is placed.
  while (!broken_.load(std::memory_order_relaxed) && !executed) {
    if (placing_.into.left != 0) {
      if (!place(qp, &did, &executed)) break;
      continue;
    }
    if (rx_begin_ == rx_end_) rx_begin_ = rx_end_ = 0;
    const size_t room = kRxBuffer - rx_end_;
    const ssize_t n = recv(fd_.get(), rx_.get() + rx_end_, room, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      break_line();
      break;
    }
    if (n < 0) break;
    rx_end_ += static_cast<size_t>(n);
    did = true;
    if (!handle_frames(qp, &executed)) break;
    if (static_cast<size_t>(n) < room && placing_.into.left == 0) break;  // no more now
  }
  if (broken_.load(std::memory_order_relaxed)) {
    if (placing_.into.left != 0) {  // its sender hands the Message to its router
      give_back_receive(qp);
      placing_ = Placing{};
    }
    std::lock_guard<SpinLock> g(qp->sq_lock);
    hand_to_router(qp);
  } else {
    // Acknowledge now unless a frame will carry it soon: the application that just got its
    // completion usually answers at once.
    const uint32_t owed =
        executed_.load(std::memory_order_relaxed) - ack_sent_.load(std::memory_order_relaxed);
    const bool ack = owed != 0 && (idle || !executed || owed >= kAckEvery);
    if (ack || wants_write_.load(std::memory_order_relaxed) ||
        unwritten_.load(std::memory_order_relaxed)) {
      std::lock_guard<SpinLock> g(qp->sq_lock);
      ack_owed_ |= ack;
      flush(qp);
    }
  }
  rx_busy_.store(false, std::memory_order_release);
  // Its end of file would keep the sets that watch it readable.
  if (broken_.load(std::memory_order_relaxed)) stop_watching_line(qp);
  return did;
}

void ExpressLine::write_burst(Qp* qp) {
  if (!usable() || !burst_.load(std::memory_order_relaxed)) return;
  std::lock_guard<SpinLock> g(qp->sq_lock);
  if (burst_.load(std::memory_order_relaxed)) flush(qp);
}

void ExpressLine::acknowledge(Qp* qp) {
  if (!usable() ||
      (executed_.load(std::memory_order_acquire) == ack_sent_.load(std::memory_order_relaxed) &&
       !unwritten_.load(std::memory_order_relaxed)))
    return;
  std::lock_guard<SpinLock> g(qp->sq_lock);
  ack_owed_ = true;
  flush(qp);
}

bool ExpressLine::handle_frames(Qp* qp, bool* executed) {
  while (placing_.into.left == 0) {
    Frame f;
    const Next next = proto::express::next_header(rx_.get() + rx_begin_, rx_end_ - rx_begin_, &f);
    if (next == Next::kNeedMore) break;
    if (next == Next::kBad) {
      break_line();  // hostile or corrupt: stop reading
      return false;
    }
    rx_begin_ += kFrameSize;
    handle_ack(qp, f.ack);
    switch (f.kind) {
      case proto::express::kReady: peer_ready_.store(true, std::memory_order_release); break;
      case proto::express::kMessage: {
        if (refusing_epoch_ == f.epoch || !accept(qp, f)) refuse(qp, f);
        // What of the payload the buffer holds; the rest is read straight into place.
        const size_t here = std::min<size_t>(f.length, rx_end_ - rx_begin_);
        placing_.into.fill(rx_.get() + rx_begin_, here);
        rx_begin_ += here;
        if (placing_.into.left == 0) finish_placing(qp, executed);
        break;
      }
      case proto::express::kRefuse: handle_refuse(qp, f.seq); break;
      default: break;  // kAck: its acknowledgement was all
    }
  }
  // Keep a header the buffer cut off, for the rest to follow.
  if (rx_begin_ != 0 && rx_begin_ != rx_end_) {
    std::memmove(rx_.get(), rx_.get() + rx_begin_, rx_end_ - rx_begin_);
    rx_end_ -= rx_begin_;
    rx_begin_ = 0;
  }
  return true;
}

bool ExpressLine::place(Qp* qp, bool* did, bool* executed) {
  // The QP failed while the payload arrives: a receive claimed from its SRQ goes back at once
  // (its router reports the QP's last receive as it fails), and the rest is discarded.
  if (placing_.srq != nullptr && qp->direct_line->in_error.load(std::memory_order_acquire) != 0) {
    const Frame f = placing_.f;
    const uint64_t left = placing_.into.left;
    give_back_receive(qp);
    refuse(qp, f);
    placing_.into.left = left;
  }
  Span& in = placing_.into;
  while (in.left != 0) {
    ssize_t n;
    if (placing_.discard) {
      n = recv(fd_.get(), rx_.get(), static_cast<size_t>(std::min<uint64_t>(in.left, kRxBuffer)),
               MSG_DONTWAIT);
    } else {
      msghdr m{};
      m.msg_iov = in.iov + in.first;
      m.msg_iovlen = static_cast<size_t>(in.count);
      n = recvmsg(fd_.get(), &m, MSG_DONTWAIT);
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return false;
    if (n <= 0) {
      break_line();
      return false;
    }
    *did = true;
    in.advance(static_cast<uint64_t>(n));
  }
  finish_placing(qp, executed);
  return true;
}

void ExpressLine::finish_placing(Qp* qp, bool* executed) {
  if (placing_.discard) return;
  complete(qp);
  *executed = !placing_.discard;  // complete() may yet refuse it
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

bool ExpressLine::peek_rq_receive(Qp* qp, ReceiveCopy* out) {
  auto* hdr = reinterpret_cast<shm::RingHeader*>(qp->map.data + qp->layout.rq_ring_off);
  const uint32_t prod = hdr->producer.value.load(std::memory_order_acquire);
  const uint32_t pos = hdr->consumer.value.load(std::memory_order_acquire);
  if (prod == pos || prod - pos > qp->layout.rq_entries) return false;
  const uint8_t* slot = qp->map.data + qp->layout.rq_slots_off +
                        static_cast<size_t>(pos & (qp->layout.rq_entries - 1)) * qp->layout.rq_slot;
  return out->copy_from(slot, qp->caps.max_recv_sge, pos);
}

bool ExpressLine::aim(Qp* qp, const ReceiveCopy& r, uint32_t pd, uint32_t length, Span* into) {
  *into = Span{};
  uint64_t room = 0;
  for (uint32_t i = 0; i < r.hdr.num_sge && room < length; ++i) {
    const shm::Sge& s = r.sge[i];
    const auto n = static_cast<uint32_t>(std::min<uint64_t>(s.length, length - room));
    if (n == 0) continue;
    uint8_t* dst = receive_memory(qp, pd, s.lkey, s.addr, s.length);
    if (dst == nullptr) return false;
    into->iov[into->count++] = iovec{dst, n};
    room += n;
  }
  into->left = length;
  return room >= length;
}

bool ExpressLine::accept(Qp* qp, const Frame& f) {
  if (!takes_messages(qp) || qp->qp.state == IBV_QPS_ERR ||
      qp->direct_line->in_error.load(std::memory_order_acquire) != 0)
    return false;
  Cq* rcq = to_cq(qp->qp.recv_cq);
  if (rcq->resizing.load(std::memory_order_relaxed) || !rcq->producer.has_room(1)) return false;
  Placing p;
  p.f = f;
  if (qp->qp.srq == nullptr) {
    // Only the peer's Messages take receives while they flow: its router has retired
    // everything it sent before them, and takes nothing while they are outstanding.
    if (!peek_rq_receive(qp, &p.recv) ||
        !aim(qp, p.recv, to_pd(qp->qp.pd)->handle, f.length, &p.into))
      return false;
  } else {
    // The router and the SRQ's other lines take from it too: claimed before it is used. A
    // claim lost to another consumer is tried again with the next receive, a few times.
    Srq* srq = to_srq(qp->qp.srq);
    const uint32_t pd = to_pd(qp->qp.srq->pd)->handle;
    bool claimed = false;
    for (int tries = 0; tries < 4 && !claimed; ++tries) {
      if (!peek_srq_receive(srq, &p.recv) || !aim(qp, p.recv, pd, f.length, &p.into)) return false;
      claimed = claim_srq_receive(srq, p.recv);
    }
    if (!claimed) return false;
    p.srq = srq;
  }
  placing_ = p;
  refusing_epoch_ = -1;
  return true;
}

void ExpressLine::give_back_receive(Qp* qp) {
  if (placing_.srq == nullptr || placing_.discard) return;
  Srq* srq = placing_.srq;
  placing_.srq = nullptr;
  if (requeue_srq_receive(srq, placing_.recv)) return;
  shm::Cqe c{};
  c.wr_id = placing_.recv.hdr.wr_id;
  c.status = IBV_WC_WR_FLUSH_ERR;
  c.opcode = IBV_WC_RECV;
  c.qp_num = qp->qp.qp_num;
  Cq* rcq = to_cq(qp->qp.recv_cq);
  (void)rcq->producer.push(c);  // room checked when it was accepted; since, an overrun
  // An error completion raises an event whatever the CQ was armed for.
  raise_event(rcq, recv_channel_.valid() ? recv_channel_.get() : -1, true);
}

void ExpressLine::refuse(Qp* qp, const Frame& f) {
  // The first refusal of an epoch is enough: its sender hands the refused Message and every
  // later one to its router.
  if (refusing_epoch_ != f.epoch) {
    refusing_epoch_ = f.epoch;
    std::lock_guard<SpinLock> g(qp->sq_lock);
    refusal_ = Frame{};
    refusal_.kind = proto::express::kRefuse;
    refusal_.epoch = f.epoch;
    refusal_.seq = f.seq;
    refuse_owed_ = true;
    flush(qp);
  }
  placing_ = Placing{};
  placing_.f = f;
  placing_.discard = true;
  placing_.into.left = f.length;
}

void ExpressLine::complete(Qp* qp) {
  const Frame f = placing_.f;
  // The QP went to error while the payload arrived: the router flushes (or flushed) the
  // receive of its RQ, one claimed from an SRQ goes back there; the router takes the Message
  // the sender hands it.
  bool failed = qp->direct_line->in_error.load(std::memory_order_acquire) != 0;
  if (placing_.srq == nullptr && !failed) {
    auto* hdr = reinterpret_cast<shm::RingHeader*>(qp->map.data + qp->layout.rq_ring_off);
    uint32_t pos = placing_.recv.pos;
    failed = !hdr->consumer.value.compare_exchange_strong(pos, pos + 1, std::memory_order_acq_rel);
  }
  if (failed) {
    give_back_receive(qp);
    refuse(qp, f);
    placing_.into.left = 0;
    return;
  }
  qp->counters->count_received(f.length);
  shm::Cqe c{};
  c.wr_id = placing_.recv.hdr.wr_id;
  c.status = IBV_WC_SUCCESS;
  c.opcode = IBV_WC_RECV;
  c.byte_len = f.length;
  c.qp_num = qp->qp.qp_num;
  c.src_qp = peer_qpn_;
  if (f.flags & proto::express::kWithImm) {
    c.wc_flags = IBV_WC_WITH_IMM;
    c.imm_data = f.imm;
  }
  Cq* rcq = to_cq(qp->qp.recv_cq);
  (void)rcq->producer.push(c);  // room checked when it was accepted; since, an overrun
  executed_.store(f.seq, std::memory_order_release);
  raise_event(rcq, recv_channel_.valid() ? recv_channel_.get() : -1,
              (f.flags & proto::express::kSolicited) != 0);
}

void ExpressLine::handle_ack(Qp* qp, uint32_t ack) {
  std::lock_guard<SpinLock> g(qp->sq_lock);
  // Only what was written may be acknowledged.
  if (ack - acked_seq_ - 1 >= next_write_seq_ - acked_seq_ - 1) return;
  Cq* scq = to_cq(qp->qp.send_cq);
  bool completed = false;
  while (acked_seq_ != ack) {
    ++acked_seq_;
    const Sent& e = sent_[acked_seq_ % sent_.size()];
    qp->counters->count_sent(e.wr.opcode, e.len);
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
  update_polled(qp);
  if (completed) raise_event(scq, send_channel_.valid() ? send_channel_.get() : -1, false);
  if (publish_staged(qp)) to_ctx(qp->qp.context)->ring_doorbell(qp->posted_mark);
}

void ExpressLine::handle_refuse(Qp* qp, uint32_t seq) {
  // Everything before it was executed (the peer executes in order); it and what follows go
  // to the router. A refusal of a Message no longer outstanding is of the same epoch.
  handle_ack(qp, seq - 1);
  std::lock_guard<SpinLock> g(qp->sq_lock);
  if (acked_seq_ + 1 == seq && outstanding() != 0) hand_to_router(qp);
}

void ExpressLine::hand_to_router(Qp* qp) {
  // The ring has room for the outstanding work before what is staged: the application has
  // at most max_send_wr work requests posted and not completed, and the ring holds as many.
  const uint32_t n = outstanding();
  shm::RingStatus st;
  const size_t slot_size = qp->sq.slot_size();
  bool posted = false;
  if (n != 0 && qp->sq.reserve_ahead(n + staged_ - 1, &st) != nullptr) {
    for (uint32_t i = staged_; i-- != 0;)
      std::memcpy(qp->sq.reserve_ahead(n + i, &st), qp->sq.reserve_ahead(i, &st), slot_size);
    for (uint32_t i = 0; i < n; ++i) {
      const Sent& e = sent_[(acked_seq_ + 1) % sent_.size()];
      (void)write_send_wqe(qp, qp->sq.reserve_ahead(i, &st), &e.wr);  // checked when posted
      ++acked_seq_;
    }
    qp->sq.commit(n);
    posted = true;
  }
  // What the router took is never written (a frame begun is finished: the peer discards it).
  if (posted) cut_batch();
  if (static_cast<int32_t>(next_write_seq_ - (acked_seq_ + 1)) < 0)
    next_write_seq_ = acked_seq_ + 1;
  ++epoch_;
  update_polled(qp);
  if (publish_staged(qp) || posted) to_ctx(qp->qp.context)->ring_doorbell(qp->posted_mark);
}

bool ExpressLine::publish_staged(Qp* qp) {
  if (staged_ == 0 || outstanding() != 0) return false;
  qp->sq.commit(staged_);
  staged_ = 0;
  return true;
}

int ExpressLine::stage(Qp* qp, const ibv_send_wr* wr) {
  shm::RingStatus st;
  uint8_t* slot = qp->sq.reserve_ahead(staged_, &st);
  if (slot == nullptr) return ENOMEM;
  if (const int err = write_send_wqe(qp, slot, wr); err != 0) return err;
  ++staged_;
  return 0;
}
void take_express_if_offered(Qp* qp) {
  if (qp->direct_line->express_offer.load(std::memory_order_acquire) == 0) return;
  if (!qp->express.take(qp)) return;  // none, or another thread's
  watch_line(qp);
  helper().add(qp);
}

void forget_express(Qp* qp) {
  if (qp->express.fd() < 0) return;
  qp->express.acknowledge(qp);  // the peer's sends executed here complete
  helper().forget_if([qp](const Qp* q) { return q == qp; });
  unwatch_line(qp);  // and waits out a poller or waiter still holding it
}

void forget_express_lines(Context* ctx) {
  helper().forget_if([ctx](Qp* q) {
    if (to_ctx(q->qp.context) != ctx) return false;
    q->express.acknowledge(q);
    return true;
  });
}

bool service_express(Cq* cq, bool idle) {
  if (cq->lines.empty()) return false;
  // A reader while it holds a QP of the CQ's: forget_express waits for it.
  LineReader reading(cq->lines);
  // Lines that bring a poll nothing (a QP on an SRQ with nothing out) are the helper
  // thread's: no system call for them.
  Qp* one = nullptr;
  if (cq->lines.pick([](const Qp* q) { return q->express.for_polls(); }, &one, 1) == 0)
    return false;
  // One line: read directly, a system call as the set's would be.
  if (cq->lines.size() == 1) return one->express.service(one, idle);
  bool unused;
  return cq->lines.service(nullptr, nullptr, &unused);
}

void write_express_bursts(Cq* cq) {
  if (!cq->line_bursts.exchange(false, std::memory_order_acquire)) return;
  LineReader reading(cq->lines);
  Qp* qps[kBurstLinesPerPoll];
  const int n = cq->lines.pick([](const Qp* q) { return q->express.burst_unwritten(); }, qps,
                               static_cast<int>(std::size(qps)));
  for (int i = 0; i < n; ++i) qps[i]->express.write_burst(qps[i]);
  // Any more: the next poll.
  if (n == static_cast<int>(std::size(qps))) cq->line_bursts.store(true, std::memory_order_relaxed);
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

}  // namespace wharf::abi
