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
#include <optional>

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

  // Takes o's facts; the mapping stays (mappings are swapped or dropped without the QP's lock).
  void assign_facts(const ReachableKey& o) {
    key = o.key;
    access = o.access;
    pd = o.pd;
    iova = o.iova;
    len = o.len;
    base = o.base;
  }

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

// A few keys, replaced round robin. A dropped key keeps its mapping until its slot is reused
// (install() hands the old mapping to be unmapped without the QP's lock).
class KeyCache {
 public:
  static constexpr int kSize = 8;
  ReachableKey* find(uint32_t key);
  // The next slot, cleared and marked used, for the caller to fill; its old mapping is moved
  // to `old`.
  ReachableKey* replace(Mapping* old);
  void clear();

 private:
  ReachableKey entries_[kSize];
  int next_ = 0;
};

// What a work request needs before the fast path can go on. fetch() gets it from the router
// (a control request, mmap) without the QP's lock held; install() puts it in place under the
// lock and leaves here what it replaced, which is unmapped and closed when this goes, again
// without the lock.
struct DirectSetUp {
  enum class Kind { kNone, kDescription, kPeerKey, kOwnKey };
  Kind kind = Kind::kNone;
  uint32_t key = 0;  // kPeerKey, kOwnKey
  // Fetched.
  int err = 0;
  uint32_t mr_epoch = 0;  // the context's MR epoch before the fetch: the keys of that epoch
  proto::DirectPeerRep peer;
  Mapping peer_qp_map;
  Mapping peer_cq_map;
  UniqueFd peer_channel;
  UniqueFd send_channel;
  ReachableKey found;
  Mapping retired;  // a key slot's old mapping

  // Empties this (unmapping and closing what it holds) for a new need.
  void clear(Kind k, uint32_t what);
};

struct Context;
// Fills *k (key, access, pd, iova, len, base) from this context's registration `key`; len
// stays 0 when there is none or its memory may not be mapped (on-demand). Takes the
// context's object mutex: never call it under a spinlock.
void find_own_key(Context* ctx, uint32_t key, ReachableKey* k);

// Executes wr on the fast path if it can (true); false: the caller posts it to the send ring.
// Called with qp's sq_lock held and the send ring seen empty. It drops the lock around the
// control requests a set-up makes and while the peer has a while to post a receive (then
// re-checks the ring). What set-ups replaced stays in *set_up, to be freed (unmapped) after
// the caller unlocks.
bool execute_directly(Qp* qp, const ibv_send_wr* wr, std::optional<DirectSetUp>* set_up);

class DirectPath {
 public:
  enum class Outcome { kDone, kToRouter, kSetUp, kNoReceive, kStartOver };

  // One try at executing wr on the fast path. The caller holds qp's sq_lock and has seen the
  // send ring empty. kSetUp: fetch and install what *need (and *key) names, then try again;
  // kNoReceive: the peer has no receive posted yet; kStartOver: the router took the line or
  // retired keys during the copy, nothing was consumed or completed; kToRouter: post wr to
  // the send ring.
  Outcome execute(Qp* qp, const ibv_send_wr* wr, DirectSetUp::Kind* need, uint32_t* key);
  // Without the QP's lock: asks the router for what `need` names.
  static void fetch(Qp* qp, DirectSetUp* need);
  // With the lock: puts what fetch() got in place. False: the peer cannot be described, the
  // work request goes to the router.
  bool install(DirectSetUp* need);
  // With the lock, after kNoReceive: announces that we wait for the peer's next receive
  // (shm/receive_wait.h); false when one was posted meanwhile. The wait itself is on
  // peer_line(), without the lock.
  bool begin_receive_wait();
  shm::QpDirect* peer_line() const { return peer_line_; }

 private:
  enum class Step { kDone, kToRouter, kNeedPeerKey, kNeedOwnKey, kNoReceive, kStartOver };
  struct Events {
    bool peer = false;  // a receive completion went to the peer's CQ
    bool solicited = false;
    bool own = false;  // a send completion went to our send CQ
  };

  Step run(Qp* qp, const ibv_send_wr* wr, uint32_t* missing_key, Events* ev);
  // Copies len bytes of a message from src to dst while Busy, looking between parts of a long
  // one whether the router wants the line. False: it does, and the copy stopped.
  bool copy(const Qp* qp, const SpanView* src, int nsrc, const SpanView* dst, int ndst,
            uint64_t len) const;
  // The router wants the line back (a new generation) or retired a registration.
  bool line_wanted(const Qp* qp) const;
  void send_events(Qp* qp, const Events& ev);

  bool described_ = false;
  proto::DirectPeerRep peer_;
  Mapping peer_qp_map_;
  Mapping peer_cq_map_;
  shm::RingHeader* peer_rq_hdr_ = nullptr;
  uint8_t* peer_rq_slots_ = nullptr;
  shm::QpCounters* peer_counters_ = nullptr;
  shm::QpDirect* peer_line_ = nullptr;
  shm::CqProducer peer_cq_;
  shm::CqNotify* peer_notify_ = nullptr;
  UniqueFd peer_channel_;  // router's end of the peer CQ's completion channel
  UniqueFd send_channel_;  // router's end of our send CQ's completion channel
  uint32_t keys_epoch_ = 0;
  KeyCache own_keys_;
  KeyCache peer_keys_;
};

}  // namespace wharf::abi
