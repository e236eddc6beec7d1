// The library's half of express lines (issue #18 item 5; router/express.h for the routers'
// half, proto/express_wire.h for the frames, docs/ARCHITECTURE.md "Express lines").
//
// An RC QP connected to a QP on another host may hold the TCP connection the two routers set
// up for the pair. Once the peer library says Ready, ibv_post_send sends a SEND or
// SEND_WITH_IMM of up to kMaxMessage bytes itself, as a Message frame, whenever the router
// holds nothing of the QP's (its send ring empty and every work request posted there
// retired), so completions stay in order. The receiving library executes a Message into its
// QP's own receive queue and completion queue when it services the line: when the
// application polls a CQ of the QP that is empty, waits for a completion event on its
// channel, or posts a send that must wait; and the sleeping helper thread services every line
// nobody serviced for kIdleServiceNs, so work never waits on an application that stopped
// calling verbs. The acknowledgement the peer's next frame carries completes the send.
//
// Whatever the receiver cannot simply do (no receive posted, a receive too short, a key it
// does not know, an SRQ, a QP in error, a full CQ) it refuses; the sender then hands the
// refused work request and every later one to its router, which applies the full semantics
// (RNR waits, error completions), and uses the line again once the router has retired them.
// A work request that may not go on the line while express work is outstanding waits in
// ibv_post_send, servicing the line, for that work's acknowledgement.
//
// Locks: the sender's state is under the QP's sq_lock; the receiver's under rx_busy_, which
// is only ever tried (a thread that finds it taken leaves the line to its holder); frames are
// written whole under tx_lock_. No control request, mapping or mutex is taken under sq_lock;
// the socket calls are nonblocking.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "abi/verbs/direct_path.h"
#include "common/spinlock.h"
#include "common/unique_fd.h"
#include "proto/express_wire.h"
#include "shm/layout.h"

namespace wharf::abi {

struct Qp;
struct Cq;
struct Context;

class ExpressLine {
 public:
  enum class Send { kSent, kToRing, kWait, kNeedKey };

  // Takes the connection the router offers for qp (a control request: no lock held).
  void take(Qp* qp);
  bool usable() const { return fd_.valid() && !broken_.load(std::memory_order_relaxed); }
  int fd() const { return fd_.get(); }

  // With qp's sq_lock held: sends wr on the line (kSent), or says it goes to the send ring
  // (kToRing), or must wait for outstanding express work (kWait: service the line without
  // the lock, then try again), or needs the registration *key looked up first (kNeedKey:
  // learn_key without the lock, then try again).
  Send try_send(Qp* qp, const ibv_send_wr* wr, uint32_t* key);
  // Without qp's sq_lock: looks `key` up in the context and caches it for try_send.
  void learn_key(Qp* qp, uint32_t key);
  // Reads and handles what the peer sent: executes Messages, completes acknowledged sends,
  // hands refused ones to the router, acknowledges what it executed when nothing else will
  // soon. Never blocks; takes qp's sq_lock for the sender's state. `idle`: the caller is
  // about to sleep (acknowledge now). True if anything was handled.
  bool service(Qp* qp, bool idle = false);
  // Sends the acknowledgement of what was executed, if a frame still owes it (the caller is
  // about to sleep).
  void acknowledge();
  // The QP leaves RTS: what was executed is acknowledged, nothing more goes on the line, and
  // the router takes what is outstanding. Takes qp's sq_lock.
  void stop(Qp* qp);
  // The state change stop() preceded is done (or failed): the line may be used again while
  // the QP is in RTS.
  void resume(Qp* qp);
  // The QP was reset: closes the line (a new one is offered at the next RTS). The QP must be
  // off every list (forget_express); waits out a poller still servicing it.
  void close();
  // Nanoseconds (CLOCK_MONOTONIC) of the last service, for the helper thread.
  uint64_t last_service_ns() const { return last_service_ns_.load(std::memory_order_relaxed); }

 private:
  // A sent Message, kept until acknowledged: what handing it to the router takes.
  struct Sent {
    ibv_send_wr wr;
    ibv_sge sge[shm::kMaxSendSge];
    uint8_t inline_data[shm::kMaxInline];  // an inline send's bytes
    uint32_t len;
  };
  bool write_frame(proto::express::Frame f, const uint8_t* payload, uint32_t len);
  // Handles the frames in rx_[rx_begin_, rx_end_); false if the line broke.
  bool handle_frames(Qp* qp, bool* executed);
  void handle_message(Qp* qp, const proto::express::Frame& f, const uint8_t* payload);
  void handle_ack(Qp* qp, uint32_t ack);
  void handle_refuse(Qp* qp, uint32_t seq);
  // Under sq_lock: the router takes over everything outstanding (a refusal or a broken
  // line), in order.
  void hand_to_router(Qp* qp);
  uint32_t outstanding() const { return next_seq_ - acked_seq_ - 1; }
  // The receive SGE's memory, if it is a registration of pd we may write.
  uint8_t* receive_memory(Qp* qp, uint32_t pd, uint32_t lkey, uint64_t addr, uint32_t len);

  UniqueFd fd_;
  UniqueFd recv_channel_;  // router's end of the receive CQ's completion channel
  UniqueFd send_channel_;  // router's end of the send CQ's completion channel
  uint32_t peer_qpn_ = 0;
  std::atomic<bool> peer_ready_{false};
  bool stopped_ = false;  // under sq_lock: the QP is leaving RTS
  std::atomic<bool> broken_{false};
  std::atomic<uint64_t> last_service_ns_{0};
  // Acknowledgements: the last peer Message executed here, and the last value a frame took
  // to the peer.
  std::atomic<uint32_t> executed_{0};
  std::atomic<uint32_t> ack_sent_{0};
  SpinLock tx_lock_;

  // Sender: under the QP's sq_lock.
  uint32_t next_seq_ = 1;
  uint32_t acked_seq_ = 0;
  uint64_t outstanding_bytes_ = 0;
  uint8_t epoch_ = 0;
  std::vector<Sent> sent_;  // by seq modulo its size (max_send_wr)
  std::unique_ptr<uint8_t[]> tx_;
  KeyCache send_keys_;
  uint32_t send_keys_epoch_ = 0;
  ReachableKey learned_;  // learn_key's result, installed by the next try_send
  uint32_t learned_epoch_ = 0;

  // Receiver: under rx_busy_.
  std::atomic<bool> rx_busy_{false};
  std::unique_ptr<uint8_t[]> rx_;
  size_t rx_begin_ = 0, rx_end_ = 0;
  int refusing_epoch_ = -1;
  KeyCache recv_keys_;
  uint32_t recv_keys_epoch_ = 0;
};

// Takes the express line the router offers qp, if it offers one, lists qp with its CQs and
// starts the helper thread.
void take_express_if_offered(Qp* qp);
// Acknowledges what qp's line executed, and takes qp off its CQs' lists and the helper's
// (before it is freed).
void forget_express(Qp* qp);
// Acknowledges what every line of ctx executed and takes them off the helper thread's list
// (the context is being freed).
void forget_express_lines(Context* ctx);
// Services the express lines of the QPs listed with cq. True if any handled anything.
bool service_express(Cq* cq, bool idle = false);
// While set (per thread), the first completion event that servicing raises for a CQ of
// `channel` is kept for this thread (caught_express_event, which also stops catching) instead
// of being sent through the channel: the thread waits on that channel itself.
void catch_express_events(ibv_comp_channel* channel);
Cq* caught_express_event();
// Acknowledges what the express lines of the QPs listed with cq executed.
void acknowledge_express(Cq* cq);

}  // namespace wharf::abi
