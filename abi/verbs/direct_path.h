// The library's half of the direct intra-host path (docs/ARCHITECTURE.md, "The direct path").
//
// While the router keeps an RC QP's direct line On, ibv_post_send executes the QP's work
// requests right here, in the caller's thread: it copies into the connected peer QP's
// registered memory (mapped from the peer's memfds), takes the peer's receive WQEs and
// publishes both sides' completions. The fast path covers only work that succeeds; anything
// else (an error of any kind, an empty receive queue, memory the router reaches only with
// process_vm_*) goes to the router through the send ring, which executes it with full
// semantics. Work requests complete in order because the fast path is taken only while the
// router has drained the send ring.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "abi/verbs/mapping.h"
#include "common/unique_fd.h"
#include "proto/messages.h"
#include "shm/cq_ring.h"
#include "shm/layout.h"
#include "shm/ring.h"

namespace wharf::abi {

struct Qp;

// A registration as the fast path reaches it: key-space range [iova, iova + len) lives at
// `base` in this process. len == 0: the key is known but nothing of it is reachable here.
struct ReachableKey {
  bool used = false;
  uint32_t key = 0;
  uint32_t access = 0;  // enum ibv_access_flags
  uint32_t pd = 0;      // own keys: handle of the registration's PD
  uint64_t iova = 0;
  uint64_t len = 0;
  uint8_t* base = nullptr;
  Mapping map;  // peer keys: the memfd-backed part of the peer's registration

  // Address of [va, va + n), or nullptr if it is not all reachable.
  uint8_t* reach(uint64_t va, uint64_t n) const {
    if (len == 0 || va < iova || n > len || va - iova > len - n) return nullptr;
    return base + (va - iova);
  }
};

// Bytes of a message in this process's memory.
struct SpanView {
  uint8_t* p;
  uint64_t len;
};

// A few keys, replaced round robin. Cleared whenever the router's MR epoch moves.
class KeyCache {
 public:
  ReachableKey* find(uint32_t key);
  ReachableKey* replace();  // a cleared entry, marked used, for the caller to fill
  void clear();

 private:
  static constexpr int kSize = 8;
  ReachableKey entries_[kSize];
  int next_ = 0;
};

class DirectPath {
 public:
  enum class Outcome { kDone, kToRouter };

  // Executes wr on the fast path, or tells the caller to post it to the send ring. The
  // caller holds qp's sq_lock and has seen the send ring empty.
  Outcome execute(Qp* qp, const ibv_send_wr* wr);

 private:
  enum class Step { kDone, kToRouter, kNeedPeerKey, kDescribe, kNoReceive, kStartOver };
  struct Events {
    bool peer = false;  // a receive completion went to the peer's CQ
    bool solicited = false;
    bool own = false;  // a send completion went to our send CQ
  };

  int describe(Qp* qp);  // fetches the peer's description (GetDirectPeer)
  void fetch_peer_key(Qp* qp, uint32_t key);
  ReachableKey* own_key(Qp* qp, uint32_t lkey);
  Step run(Qp* qp, const ibv_send_wr* wr, uint32_t* missing_key, Events* ev);
  // Copies len bytes of a message from src to dst while Busy, looking between parts of a long
  // one whether the router wants the line. False: it does, and the copy stopped.
  bool copy(const Qp* qp, const SpanView* src, int nsrc, const SpanView* dst, int ndst,
            uint64_t len) const;
  // The router wants the line back (a new generation) or retired a registration.
  bool line_wanted(const Qp* qp) const;
  void send_events(Qp* qp, const Events& ev);
  bool wait_for_receive() const;

  bool described_ = false;
  proto::DirectPeerRep peer_;
  Mapping peer_qp_map_;
  Mapping peer_cq_map_;
  shm::RingHeader* peer_rq_hdr_ = nullptr;
  uint8_t* peer_rq_slots_ = nullptr;
  shm::QpCounters* peer_counters_ = nullptr;
  shm::CqProducer peer_cq_;
  shm::CqNotify* peer_notify_ = nullptr;
  UniqueFd peer_channel_;  // router's end of the peer CQ's completion channel
  UniqueFd send_channel_;  // router's end of our send CQ's completion channel
  uint32_t keys_epoch_ = 0;
  KeyCache own_keys_;
  KeyCache peer_keys_;
};

}  // namespace wharf::abi
