// The library's half of express lines (issue #18 item 5; router/express.h for the routers'
// half, proto/express_wire.h for the frames, docs/ARCHITECTURE.md "Express lines").
//
// An RC QP connected to a QP on another host may hold the TCP connection the two routers set up for
// the pair. Once the peer library says Ready, ibv_post_send puts a SEND or SEND_WITH_IMM on the
// line, and the library writes it as a Message frame once the router holds nothing of the QP's (its
// send ring empty and every work request posted there retired), so the peer executes and the sender
// completes everything in order. The payload is written from the application's registered memory,
// which is the line's until the send completes; what the socket does not take at once is written by
// whoever services the line next. SENDs posted back to back (a burst) wait for each other and are
// written together, up to 16 frames or 256 KiB per system call, by the next poll of the QP's CQs,
// an ibv_req_notify_cq, or whoever services the line next (try_send). The receiving library places
// a Message straight into the memory of its QP's next receive as the bytes arrive, and completes it
// there, when it services the line: when the application polls a CQ of the QP that is empty, waits
// for a completion event on its channel (or asks for one after its own poll() of the channel's fd,
// which watches the lines: line_set.h), or posts a send that must wait; and the sleeping helper
// thread services every line nobody serviced for express_idle_ns (tunables.h), so work never waits
// on an application that stopped calling verbs. The acknowledgement the peer's next frame carries
// completes the send.
//
// A QP on a shared receive queue takes its receives the way the router does, claiming each
// from the SRQ's ring before placing anything in it (srq_receives.h): the router places the
// SRQ's other messages meanwhile, and other lines take from it too.
//
// Whatever the receiver cannot simply do (no receive posted, a receive too short, a key it
// does not know, a tag-matching SRQ or one with a limit armed, a QP in error, a full CQ) it
// refuses, discarding the payload; the
// sender then hands the refused work request and every later one to its router, which
// applies the full semantics (RNR waits, error completions), and uses the line again once
// the router has retired them. A work request that may not go on the line while express work
// is outstanding is staged in the send ring, where the router sees it once that work is
// acknowledged: ibv_post_send never waits.
//
// Locks: everything the line writes (the sender's state, the frames owed) is under the QP's
// sq_lock; the receiver's state under rx_busy_, which is only ever tried (a thread that finds
// it taken leaves the line to its holder). No control request, mapping or mutex is taken
// under sq_lock, and the socket calls never block.
#pragma once

#include <infiniband/verbs.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "abi/verbs/direct_path.h"
#include "abi/verbs/srq_receives.h"
#include "common/spinlock.h"
#include "common/unique_fd.h"
#include "proto/express_wire.h"
#include "shm/layout.h"

namespace wharf::abi {

struct Qp;
struct Cq;
struct Context;
struct Srq;

class ExpressLine {
 public:
  enum class Send { kSent, kToRing, kStage, kNeedKey };

  // Takes the connection the router offers for qp (a control request: no lock held). True
  // if this call installed it (false: none offered, or another thread's call did).
  bool take(Qp* qp);
  bool usable() const { return fd_.valid() && !broken_.load(std::memory_order_relaxed); }
  int fd() const { return fd_.get(); }
  // The line has bytes to write that the socket did not take: a waiter polls for POLLOUT too.
  bool wants_write() const { return wants_write_.load(std::memory_order_relaxed); }
  // Whether polls of the QP's CQs (and waits on their channel) read the line: it may bring a
  // Message for the QP (takes_messages) or the acknowledgement of one the QP sent. A line of
  // a QP on a tag-matching SRQ that has nothing out brings at most the peer's Ready, which
  // the helper thread reads: polls leave it alone (and may nap).
  bool polled() const { return polled_.load(std::memory_order_relaxed); }
  // The line has something to write without anything to read first: the rest of a frame,
  // Messages that waited for the router, or the acknowledgement of what it executed.
  // (Messages waiting for the router or for the rest of their burst count as unwritten.)
  bool owes() const {
    return wants_write() || unwritten_.load(std::memory_order_relaxed) ||
           executed_.load(std::memory_order_relaxed) != ack_sent_.load(std::memory_order_relaxed);
  }
  // Whether a poll of its CQs (or a wait on their channel) services the line: it may bring
  // something (polled) or owes a write. The rest is the helper thread's.
  bool for_polls() const { return polled() || owes(); }

  // With qp's sq_lock held: puts wr on the line (kSent), or says it goes to the send ring
  // (kToRing), or must follow the line's outstanding work there (kStage: stage it), or needs
  // the registration *key looked up first (kNeedKey: learn_key without the lock, then try
  // again).
  Send try_send(Qp* qp, const ibv_send_wr* wr, uint32_t* key);
  // With qp's sq_lock held: writes wr into the send ring behind what is visible there without
  // publishing it; the line publishes the staged work requests once everything it carried
  // before them is acknowledged (or handed to the router). ENOMEM if the ring has no room,
  // or write_send_wqe's error.
  int stage(Qp* qp, const ibv_send_wr* wr);
  // Without qp's sq_lock: looks `key` up in the context and caches it for try_send.
  void learn_key(Qp* qp, uint32_t key);
  // Reads and handles what the peer sent: places and completes Messages, completes
  // acknowledged sends, hands refused ones to the router; writes what the socket did not take
  // before; acknowledges what it executed when nothing else will soon. Never blocks; takes
  // qp's sq_lock for the sender's state. `idle`: the caller is about to sleep (acknowledge
  // now). True if anything was handled.
  bool service(Qp* qp, bool idle = false);
  // Sends the acknowledgement of what was executed, if a frame still owes it, and the
  // Messages the router's work held back if it is done (the caller is about to sleep).
  // Takes qp's sq_lock.
  void acknowledge(Qp* qp);
  // The QP leaves RTS for `next`: what was executed is acknowledged and nothing more goes on
  // the line. Into SQD the line finishes what it holds (the peer may already have executed
  // what is in the socket, and SQD drains the send queue), and work posted meanwhile waits in
  // the send ring until it is acknowledged; into any other state the router takes what is
  // outstanding (to flush it). Takes qp's sq_lock.
  void stop(Qp* qp, ibv_qp_state next);
  // The state change stop() preceded is done (or failed): the line may be used again while
  // the QP is in RTS.
  void resume(Qp* qp);
  // The QP was reset: closes the line (a new one is offered at the next RTS). The QP must be
  // off every list (forget_express); waits out a poller still servicing it.
  void close(Qp* qp);
  // Writes the Messages a burst left unwritten (try_send). Takes qp's sq_lock.
  void write_burst(Qp* qp);
  bool burst_unwritten() const { return burst_.load(std::memory_order_relaxed); }
  // Nanoseconds (CLOCK_MONOTONIC) of the last service, for the helper thread.
  uint64_t last_service_ns() const { return last_service_ns_.load(std::memory_order_relaxed); }

 private:
  // A Message put on the line, kept until acknowledged: its payload in this process, and what
  // handing it to the router takes.
  // Its arrays, sized by the QP's caps, are in sent_arena_.
  struct Sent {
    ibv_send_wr wr;
    ibv_sge* sge;
    iovec* payload;
    uint8_t* inline_data;  // an inline send's bytes
    int npayload;
    uint32_t len;
  };
  // The most frames one system call writes (a burst of Messages, try_send).
  static constexpr int kBatchFrames = 16;
  // Scattered bytes being written or read, front first: a receive's memory, or a batch of
  // frames (a header and its payload each; a Message with many SGEs ends a batch early).
  static constexpr int kSpanIov = 2 * kBatchFrames;
  static_assert(kSpanIov >= 1 + shm::kMaxSendSge, "a Message with every SGE fits a span");
  static_assert(kSpanIov >= shm::kMaxRecvSge, "a receive with every SGE fits a span");
  struct Span {
    iovec iov[kSpanIov];
    int first = 0, count = 0;
    uint64_t left = 0;
    void advance(uint64_t n);
    // Copies src[0, n) to the front and advances past it.
    void fill(const uint8_t* src, size_t n);
  };
  // The frames being written, one batch. Their headers and inline bytes are their own
  // copies: a frame the socket took part of is finished even after its Message went to the
  // router (the peer refused it and discards its payload).
  struct Writing {
    uint8_t head[kBatchFrames][proto::express::kFrameSize];
    uint8_t inline_data[2 * shm::kMaxInline];
    size_t inline_used = 0;
    int frames = 0;
    Span bytes;
    // Of each frame: its kind, the acknowledgement it carries, and where it ends (bytes into
    // the batch, and the iov after its last), so that what is not begun can be taken back
    // (cut_batch).
    uint8_t kind[kBatchFrames];
    uint32_t ack[kBatchFrames];
    uint64_t end[kBatchFrames];
    int end_iov[kBatchFrames];
    uint32_t ack_before = 0;  // ack_sent_ when the batch was made
  };
  // The Message whose payload is arriving: placed into its receive, or discarded (refused).
  struct Placing {
    proto::express::Frame f;
    bool discard = false;
    // The receive: from the QP's RQ (taken when the payload is all there), or claimed from
    // its SRQ before anything was placed (srq_receives.h); `srq` says which.
    ReceiveCopy recv;
    Srq* srq = nullptr;
    Span into;  // the receive's memory, exactly f.length bytes (discard: left only)
  };

  // Under sq_lock: writes what the line owes the peer, in order (the rest of a frame the
  // socket took part of, Ready, a refusal, the Messages put on the line, an acknowledgement
  // asked for) until the socket takes no more. False if the line broke.
  bool flush(Qp* qp);
  // Under sq_lock: the frames owed, as many as one batch holds, into writing_; false if none.
  bool next_frames_owed(Qp* qp);
  // Under sq_lock: adds the next frame owed to the batch; false if none, or it does not fit.
  bool add_frame_owed(Qp* qp);
  // Under sq_lock: takes the frames of the batch the socket has not begun back out of it
  // (hand_to_router: the router takes their Messages); a Ready, refusal or acknowledgement
  // among them is owed again.
  void cut_batch();
  // Under sq_lock: the router has retired all the QP's work; Messages put on the line behind
  // it are written only then, so the peer executes everything in order.
  bool router_done(Qp* qp) const;
  // Handles the frames in rx_[rx_begin_, rx_end_), starting a placement for a Message whose
  // payload goes past them; false if the line broke.
  bool handle_frames(Qp* qp, bool* executed);
  // Reads the payload being placed (placed or discarded): true once it is all there, false
  // when the socket has no more now or the line broke.
  bool place(Qp* qp, bool* did, bool* executed);
  // Checks a Message may be executed into the next receive and sets placing_ for it.
  bool accept(Qp* qp, const proto::express::Frame& f);
  // Whether Messages for qp may be placed here: it has a receive queue of its own, or a
  // shared one that is no tag-matching SRQ.
  static bool takes_messages(const Qp* qp);
  // The next receive of qp's RQ, copied out (the peer's router takes none while Messages
  // flow, so it stays the next until complete() takes it).
  static bool peek_rq_receive(Qp* qp, ReceiveCopy* out);
  // The memory of receive r for a Message of `length` bytes, into *into; false if r cannot
  // hold it or names memory the QP may not write.
  bool aim(Qp* qp, const ReceiveCopy& r, uint32_t pd, uint32_t length, Span* into);
  // A receive claimed from the SRQ for the Message being placed, which will not complete
  // there: back to the SRQ, or (no room) completed with IBV_WC_WR_FLUSH_ERR.
  void give_back_receive(Qp* qp);
  void refuse(Qp* qp, const proto::express::Frame& f);
  // The placed Message's receive completes.
  void complete(Qp* qp);
  void handle_ack(Qp* qp, uint32_t ack);
  void handle_refuse(Qp* qp, uint32_t seq);
  // Under sq_lock: the router takes over everything outstanding (a refusal or a broken
  // line), in order, and then what is staged.
  void hand_to_router(Qp* qp);
  // Under sq_lock: publishes the staged work requests once nothing is outstanding; true if
  // it did (the caller rings the doorbell).
  bool publish_staged(Qp* qp);
  // The payload being placed is all there: the receive completes unless it was refused.
  void finish_placing(Qp* qp, bool* executed);
  void break_line();
  uint32_t outstanding() const { return next_seq_ - acked_seq_ - 1; }
  // Under sq_lock, after a Message went on the line or out of it: polled() again.
  void update_polled(const Qp* qp);
  // The receive SGE's memory, if it is a registration of pd we may write.
  uint8_t* receive_memory(Qp* qp, uint32_t pd, uint32_t lkey, uint64_t addr, uint32_t len);

  UniqueFd fd_;
  UniqueFd recv_channel_;  // router's end of the receive CQ's completion channel
  UniqueFd send_channel_;  // router's end of the send CQ's completion channel
  uint32_t peer_qpn_ = 0;
  std::atomic<bool> peer_ready_{false};
  std::atomic<bool> broken_{false};
  std::atomic<bool> wants_write_{false};
  // Messages wait for the router to retire its work, or for the rest of their burst.
  std::atomic<bool> unwritten_{false};
  std::atomic<bool> polled_{false};  // polled(); changed under sq_lock
  std::atomic<bool> burst_{false};   // Messages of a burst wait to be written (try_send)
  std::atomic<uint64_t> last_service_ns_{0};
  // Acknowledgements: the last peer Message executed here, and the last value a frame took
  // to the peer.
  std::atomic<uint32_t> executed_{0};
  std::atomic<uint32_t> ack_sent_{0};

  // Under the QP's sq_lock: the sender, and what the line owes the peer.
  bool stopped_ = false;  // the QP is leaving RTS
  uint32_t next_seq_ = 1;
  uint32_t acked_seq_ = 0;
  uint32_t next_write_seq_ = 1;    // the first Message put on the line and not yet written
  uint32_t staged_ = 0;            // work requests written into the send ring, not yet visible
  uint64_t routers_until_ns_ = 0;  // SENDs go to the routers until then (express_hold_ns)
  // A one-sided work request went to the router at send-ring index one_sided_at_ or later:
  // SENDs follow it there until the router has retired past that index.
  bool one_sided_routed_ = false;
  uint32_t one_sided_at_ = 0;
  uint8_t epoch_ = 0;
  bool ready_owed_ = false;
  bool ack_owed_ = false;
  bool refuse_owed_ = false;
  proto::express::Frame refusal_;
  std::unique_ptr<Writing> writing_;  // made by take()
  // When the last SEND put on the line was posted (ns): one that follows it within
  // kBurstNs is left for the rest of the burst (try_send).
  uint64_t last_post_ns_ = 0;
  uint64_t burst_bytes_ = 0;  // of the Messages of the burst not yet written
  std::vector<Sent> sent_;    // by seq modulo its size, the QP's max_send_wr
  std::unique_ptr<uint8_t[]> sent_arena_;
  KeyCache send_keys_;
  uint32_t send_keys_epoch_ = 0;
  ReachableKey learned_;  // learn_key's result, installed by the next try_send
  uint32_t learned_epoch_ = 0;

  // Receiver: under rx_busy_.
  std::atomic<bool> rx_busy_{false};
  std::unique_ptr<uint8_t[]> rx_;
  size_t rx_begin_ = 0, rx_end_ = 0;
  Placing placing_;  // placing_.into.left != 0: a payload is arriving
  int refusing_epoch_ = -1;
  KeyCache recv_keys_;
  uint32_t recv_keys_epoch_ = 0;
};

// Takes the express line the router offers qp, if it offers one, adds it to the sets of its
// CQs and their channels (line_set.h) and starts the helper thread.
void take_express_if_offered(Qp* qp);
// Acknowledges what qp's line executed, and takes qp off its sets (line_set.h) and the
// helper's list, waiting out threads that hold it there (before it is reset or freed).
void forget_express(Qp* qp);
// Acknowledges what every line of ctx executed and takes them off the helper thread's list
// (the context is being freed).
void forget_express_lines(Context* ctx);
// Writes the bursts the lines of cq's QPs hold (ExpressLine::try_send), if any, up to
// kBurstLinesPerPoll lines (the rest the next call). Polls call it only when a relaxed load of
// cq->line_bursts finds it set (cq_verbs.cc), so that a poll with none pays no call.
void write_express_bursts(Cq* cq);
// Services the express lines of the QPs listed with cq. True if any handled anything.
bool service_express(Cq* cq, bool idle = false);
// While set (per thread), the first completion event that servicing raises for a CQ of
// `channel` is kept for this thread (caught_express_event, which also stops catching) instead
// of being sent through the channel: the thread waits on that channel itself.
void catch_express_events(ibv_comp_channel* channel);
Cq* caught_express_event();

}  // namespace wharf::abi
