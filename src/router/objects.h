// Verbs objects as the router keeps them. Every object belongs to exactly one Session (one
// library connection = one ibv_context); handles are per session, so a container can never
// name another container's objects. Keys (lkey == rkey) and QPNs are host-wide and are
// always checked against the owner before use.
#pragma once

#include <infiniband/verbs.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/policy.h"
#include "common/unique_fd.h"
#include "proto/messages.h"
#include "router/cq_moderation.h"
#include "router/qp_work.h"
#include "router/shm_region.h"
#include "router/srq_records.h"
#include "router/tag_list.h"
#include "router/token_bucket.h"
#include "router/wqe.h"
#include "shm/cq_ring.h"
#include "shm/layout.h"
#include "shm/ring.h"

namespace wharf::router {

class Session;
struct Mw;
struct RemoteQpState;  // router/remote.h

// What QPs moved (shm::QpCounters), summed: a container keeps its destroyed QPs' share.
struct Traffic {
  uint64_t tx_msgs = 0, tx_bytes = 0, rx_msgs = 0, rx_bytes = 0, errors = 0, express_msgs = 0;
  // Kept by the router, not the QPs' shared counters: how long work waited for the rate
  // limits (a container's: Container::throttled_ns).
  uint64_t throttled_ns = 0;
  std::array<uint64_t, shm::kCountedOpcodes> tx_by_opcode{};
  std::array<uint64_t, shm::kCountedStatuses> errors_by_status{};
  void add(const shm::QpCounters& c) {
    express_msgs += c.express_msgs.load(std::memory_order_relaxed);
    tx_msgs += c.tx_msgs.load(std::memory_order_relaxed);
    tx_bytes += c.tx_bytes.load(std::memory_order_relaxed);
    rx_msgs += c.rx_msgs.load(std::memory_order_relaxed);
    rx_bytes += c.rx_bytes.load(std::memory_order_relaxed);
    errors += c.errors.load(std::memory_order_relaxed);
    for (size_t i = 0; i < tx_by_opcode.size(); ++i)
      tx_by_opcode[i] += c.tx_by_opcode[i].load(std::memory_order_relaxed);
    for (size_t i = 0; i < errors_by_status.size(); ++i)
      errors_by_status[i] += c.errors_by_status[i].load(std::memory_order_relaxed);
  }
  void add(const Traffic& t) {
    express_msgs += t.express_msgs;
    tx_msgs += t.tx_msgs;
    tx_bytes += t.tx_bytes;
    rx_msgs += t.rx_msgs;
    rx_bytes += t.rx_bytes;
    errors += t.errors;
    throttled_ns += t.throttled_ns;
    for (size_t i = 0; i < tx_by_opcode.size(); ++i) tx_by_opcode[i] += t.tx_by_opcode[i];
    for (size_t i = 0; i < errors_by_status.size(); ++i)
      errors_by_status[i] += t.errors_by_status[i];
  }
};

// A container: a network namespace registered by wharf-run (or an anonymous one for
// processes started outside wharf-run). Its LID and GID address all its QPs.
struct Container {
  std::string tenant;       // empty: registered without an orchestrator, or anonymous
  std::string network;      // its virtual network in the tenant (router/peer_rules.h)
  uint32_t network_id = 0;  // this router's number for tenant/network (router/network_numbers.h)
  std::string name;
  uint64_t netns_ino = 0;
  uint32_t vip = 0;  // host order
  uint16_t lid = 0;
  proto::Gid gid{};
  int sessions = 0;  // open library connections from this container
  bool registered = false;
  // A registration held for a runtime's sandbox (wharf-cni) rather than for a session's
  // life: the sandbox's ID, and its network namespace kept open so that no other namespace
  // can take the inode while the registration stands. Empty / invalid otherwise.
  std::string sandbox;
  UniqueFd held_netns;
  ContainerPolicy policy;  // from the orchestrator (router/policy.cc)
  TokenBucket rate;        // policy.rate_bps over all its QPs
  Traffic retired;         // what its destroyed QPs moved (`wharfctl statistic`)
  // The time its QPs' work was held back by a rate limit (its own or its QPs'), summed over
  // its QPs (router/scheduler.cc): wharf_container_ratelimit_throttled_seconds_total.
  uint64_t throttled_ns = 0;
  // Its record of retired and throttled_ns for the next router process
  // (router/kept_accounting.h; ~0: none), and the throttled_ns written there last.
  uint32_t kept_slot = ~uint32_t{0};
  uint64_t kept_throttled_ns = 0;
  // The names of the record the previous process kept for its namespace, if that was a
  // registered container's: a registration under other names is another container in a
  // namespace the first one's inode was given to again.
  struct Names {
    std::string tenant, network, name;
    bool operator==(const Names&) const = default;
  };
  std::optional<Names> kept_as;
};

struct Pd {
  uint32_t handle = 0;
  int users = 0;  // MRs, QPs, SRQs, AHs using it
};

// An XRC domain (ibv_open_xrcd): the set of XRC target QPs and XRC SRQs that may serve one
// another. A domain named by a file is shared by the sessions of one container that open the
// same file (router/xrc_domain.h); a container never reaches another's domain.
struct XrcDomain {
  const Container* container = nullptr;
  bool named = false;  // by file dev/ino; else the opening session's alone
  uint64_t dev = 0, ino = 0;
  int opens = 0;  // sessions' handles to it
  int users = 0;  // target QPs and XRC SRQs in it
};

// A session's handle to a domain.
struct Xrcd {
  uint32_t handle = 0;
  XrcDomain* domain = nullptr;
};

struct Mr {
  uint32_t handle = 0;
  uint32_t key = 0;
  Session* owner = nullptr;
  Pd* pd = nullptr;
  uint64_t addr = 0;  // application virtual address of the first byte
  uint64_t length = 0;
  uint64_t iova = 0;    // address the keys are used with
  uint32_t access = 0;  // enum ibv_access_flags
  // [mapped_start, mapped_start + mapped_len) is reachable at `mapping` without a syscall.
  uint64_t mapped_start = 0;
  uint64_t mapped_len = 0;
  uint8_t* mapping = nullptr;
  size_t mapping_size = 0;  // of the mmap, for munmap
  pid_t pid = 0;            // for process_vm_readv/writev on the unmapped parts
  UniqueFd memfd;           // backs the mapped part (at memfd_offset); handed to direct peers
  uint64_t memfd_offset = 0;
  // An implicit on-demand MR: the whole address space, nothing pinned (counts no MR bytes).
  bool implicit = false;
  // A memory window's binding (router/memory_window.h) is an Mr of its own: part of its
  // parent registration, with the window's access. It borrows the parent's mapping
  // (mapping_size 0: not its to unmap). A type 2 window is reached only through the QP that
  // bound it (bound_qpn; 0: any QP of its PD).
  Mr* parent = nullptr;
  Mw* window = nullptr;  // the window a binding is of
  uint32_t bound_qpn = 0;
  int windows = 0;  // bindings of windows on this registration: it cannot go while any remain
  uint64_t charged_bytes() const { return implicit || parent != nullptr ? 0 : length; }
  ~Mr();
};

// A memory window (ibv_alloc_mw). Its key's upper 24 bits stay reserved for it while it
// lives (HostObjects maps an unbound window's key to nothing).
struct Mw {
  uint32_t handle = 0;
  Session* owner = nullptr;
  Pd* pd = nullptr;
  uint32_t type = IBV_MW_TYPE_1;
  uint32_t key = 0;
  std::unique_ptr<Mr> binding;  // null while unbound
};

struct CompChannel {
  uint32_t handle = 0;
  UniqueFd sock;  // router's end; one CqEventMsg per event
  int users = 0;
};

struct Cq {
  uint32_t handle = 0;
  Session* owner = nullptr;
  CompChannel* channel = nullptr;
  ShmRegion shm;
  shm::CqLayout layout{};
  shm::CqProducer ring;
  shm::CqNotify* notify = nullptr;
  int users = 0;         // QPs using it
  bool overrun = false;  // an overrun was reported; no more CQEs are written
  // Event moderation (ibv_modify_cq). A moderated CQ is written by the router only: the QPs
  // that would write it on the direct path keep their lines Off.
  CqModeration moderation;

  // Makes `region`, laid out as `l` and already holding whatever entries it should, the CQ's
  // memory: the ring and the notify word point into it from now on.
  void use_region(ShmRegion region, const shm::CqLayout& l) {
    shm = std::move(region);
    layout = l;
    ring = shm::CqProducer(reinterpret_cast<shm::RingHeader*>(shm.data() + l.ring_off),
                           reinterpret_cast<shm::Cqe*>(shm.data() + l.slots_off), l.entries);
    notify = reinterpret_cast<shm::CqNotify*>(shm.data() + l.notify_off);
  }
};

struct Srq {
  uint32_t handle = 0;
  uint32_t srqn = 0;
  Session* owner = nullptr;
  Pd* pd = nullptr;
  // An XRC SRQ: its domain, and the CQ its receives complete on (they arrive through the
  // domain's target QPs, which have no CQ).
  XrcDomain* xrc = nullptr;
  Cq* cq = nullptr;
  ShmRegion shm;
  shm::SrqLayout layout{};
  shm::RingCursor ring_cursor;  // the router's position in its ring (ring())
  // The receive the router claimed from the ring (RingConsumer::claim: the express lines of
  // the SRQ's QPs take receives from it too) and has not used yet: the next message for any
  // of its QPs takes it before the ring's, which keeps the SRQ's order.
  RecvWork claimed{};
  bool has_claimed = false;
  // The receives claimed and held, as kept in the region for a restart (claimed_record:
  // claimed's); `orphans`: the held ones a previous process left, as (QPN, record), until
  // their QPs are restored (Session::on_create_qp).
  SrqRecords records;
  uint32_t claimed_record = SrqRecords::kNone;
  std::vector<std::pair<uint32_t, uint32_t>> orphans;
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t limit = 0;  // armed limit; 0 = disarmed
  int users = 0;
  bool corrupt = false;
  // A receive work queue (ibv_create_wq): receives only through RSS QPs' indirection tables,
  // completing on `cq`, while RDY.
  bool wq = false;
  uint32_t wq_state = IBV_WQS_RESET;
  // A tag-matching SRQ (IBV_SRQT_TM): its matching list; its receives and operations
  // complete on `cq` (router/tag_matching.cc).
  std::unique_ptr<TagList> tm;

  shm::RingConsumerView ring() {
    return {reinterpret_cast<shm::RingHeader*>(shm.data() + layout.ring_off),
            shm.data() + layout.slots_off, layout.entries, layout.slot, ring_cursor};
  }
  // Arms (limit != 0) or disarms the SRQ limit, and tells the express lines (SrqState).
  void set_limit(uint32_t l) {
    limit = l;
    reinterpret_cast<shm::SrqState*>(shm.data() + layout.state_off)
        ->limit_armed.store(l != 0 ? 1 : 0, std::memory_order_release);
  }
  // Whether the region says a limit is armed (set_limit writes it): what a restored SRQ
  // takes over from the process before.
  bool region_limit_armed() {
    return reinterpret_cast<const shm::SrqState*>(shm.data() + layout.state_off)
               ->limit_armed.load(std::memory_order_acquire) != 0;
  }
};

// A receive a QP took off a shared receive queue for a message placed in parts
// (QpExtras::held_recv).
struct HeldRecv {
  RecvWork rw;
  // The SRQ it came from, valid while the router's SRQ by `srqn` is still this one (an XRC
  // SRQ may be destroyed under a target QP).
  Srq* srq = nullptr;
  uint32_t srqn = 0;
  bool held = false;
  uint32_t record = SrqRecords::kNone;  // in srq->records
};

struct Ah {
  uint32_t handle = 0;
  Pd* pd = nullptr;
  proto::AhAttr attr;
};

// What the host-to-host engine keeps of a QP whose engine state (RemoteQpState) it gave
// back once the QP went quiet (RemotePath parks it): the state continues from this alone.
struct ParkedRemoteQp {
  uint32_t next_psn = 0;  // the requester's
  uint32_t epsn = 0;      // the responder's expected PSN and message number
  uint32_t msn = 0;
  uint32_t peer_incarnation = 0;
  int16_t requester_host = -1;
  bool parked = false;
};

// An RSS QP's table (a RAW_PACKET QP made with no CQs and given a table by SetQpRss): the
// frames its flow rules take go to one of `wqs`, by the Toeplitz hash of the fields named.
struct QpRss {
  std::vector<Srq*> wqs;  // a power of two of them; each counted in its users
  uint64_t hash_fields = 0;
  std::array<uint8_t, proto::kRssKeyLen> hash_key{};
};

// What few QPs have, kept apart so that the others do not pay for it (issue #18: router
// memory per idle QP). Made at a QP's first use of any of it (Qp::extras()) and kept while
// the QP lives.
struct QpExtras {
  // An XRC QP's domain (IBV_QPT_XRC_RECV, IBV_QPT_XRC_SEND), counted in its users.
  XrcDomain* xrc = nullptr;
  // A receive taken off a shared receive queue for a message that is placed in parts (a long
  // SEND through the router, or one of several packets from another host): it leaves the SRQ
  // at the first part, so no other sender takes it meanwhile, and stays here until the
  // message ends, fails, or the QP flushes it (router/datapath.cc). Made at the first such
  // message and kept.
  std::unique_ptr<HeldRecv> held_recv;
  // Its own rate limit: the tighter of its container's qp_rate and the application's
  // app_rate_kbps (router/policy.cc); null while neither limits it. app_burst_bytes: the
  // max_burst_sz of ibv_modify_qp_rate_limit, 0 for the default depth.
  std::unique_ptr<TokenBucket> rate;
  uint32_t app_burst_bytes = 0;
  // Express line (router/express.h): the connection offered to the library, kept until the
  // QP is reset or destroyed.
  UniqueFd express_fd;
  std::unique_ptr<QpRss> rss;
  // The alternate path (IBV_QP_ALT_PATH): kept and reported as set, never taken (a QP pair
  // has one path through Wharf).
  proto::AhAttr alt_ah_attr;
  uint16_t alt_pkey_index = 0;
  uint8_t alt_port_num = 0;
  uint8_t alt_timeout = 0;
  // Attributes of ibv_modify_qp that most QPs leave at 0 (Qp::set_extra makes no extras for
  // a 0): a UD QP's Q_Key, the application's own rate limit (kbit/s, IBV_QP_RATE_LIMIT), and
  // the three the router only reports back.
  uint32_t qkey = 0;
  uint32_t app_rate_kbps = 0;
  uint16_t pkey_index = 0;
  uint8_t path_mig_state = 0;
  uint8_t en_sqd_async_notify = 0;
};

// pd, send_cq and recv_cq are set for every type but these: an XRC target QP
// (IBV_QPT_XRC_RECV) has only its domain xrc() (and queues of its own it never uses); an XRC
// initiator (IBV_QPT_XRC_SEND) has no recv_cq and no receive queue.
struct Qp {
  // Fields are ordered to leave no padding: the router keeps one of these per QP (issue #18).
  uint32_t handle = 0;
  uint32_t qpn = 0;
  Session* owner = nullptr;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;
  // The shared region's geometry; its offsets follow from it (layout()).
  uint16_t sq_entries = 0, sq_slot = 0;
  uint16_t rq_entries = 0, rq_slot = 0;  // 0 entries: no receive queue of its own
  // Direct path: the router's own view of the shared line's generation (direct()); direct_on
  // and direct_revoked (whether the library lost the right to it by staying Busy too long)
  // are with the flags below.
  uint32_t direct_generation = 0;
  // The attributes its work reads (attr.qp_state is the state); the others are in extras.
  proto::QpCoreAttr attr;
  // The router's positions in the two rings (sq(), rq()).
  shm::RingCursor sq_cursor;
  shm::RingCursor rq_cursor;
  // What the host-to-host engine kept when it parked the QP (remote, below).
  ParkedRemoteQp parked_remote;
  // RemotePath::peer_host's answer for the current AV, valid while peer_host_epoch equals
  // RemotePath's placement epoch (0: never; a new AV resets it).
  mutable int16_t peer_host_cached = -1;
  mutable uint16_t peer_host_epoch = 0;

  ibv_qp_type type : 8 = IBV_QPT_RC;
  // One bit each (the data-path thread alone reads and writes them):
  bool sq_sig_all : 1 = false;
  bool shm_shared : 1 = false;  // handed to another process (a direct-path peer)
  // active: the data path serves its queues (RTS or ERR, with a send CQ). busy: in the
  // router's list of QPs the next pass looks at (router/scheduler.h); woken: activated,
  // or given work by the pass, since the data path last looked at it.
  bool active : 1 = false;
  bool busy : 1 = false;
  bool woken : 1 = false;
  bool last_wqe_reported : 1 = false;
  bool direct_on : 1 = false;
  bool direct_revoked : 1 = false;

  ShmRegion shm;
  // Its work under way, from the scheduler's pool, while it has any (router/qp_work.h;
  // Scheduler::work takes it, leaving the busy list gives it back); work() reads it.
  QpWork* work_under_way = nullptr;
  // Its state in the host-to-host engine while it has any (owned by RemotePath), else
  // parked_remote.
  RemoteQpState* remote = nullptr;

  ibv_qp_state state() const { return static_cast<ibv_qp_state>(attr.qp_state); }
  // Its extras, made now if it has none yet.
  QpExtras& extras() {
    if (extras_ == nullptr) extras_ = std::make_unique<QpExtras>();
    return *extras_;
  }
  // Its extras if it has any; and reads of them that make none.
  const QpExtras* extras_if_any() const { return extras_.get(); }
  XrcDomain* xrc() const { return extras_ != nullptr ? extras_->xrc : nullptr; }
  HeldRecv* held_recv() const { return extras_ != nullptr ? extras_->held_recv.get() : nullptr; }
  TokenBucket* rate() const { return extras_ != nullptr ? extras_->rate.get() : nullptr; }
  bool rate_limited() const { return rate() != nullptr; }
  uint32_t app_burst_bytes() const { return extras_ != nullptr ? extras_->app_burst_bytes : 0; }
  bool has_express_line() const { return extras_ != nullptr && extras_->express_fd.valid(); }
  const QpRss* rss() const { return extras_ != nullptr ? extras_->rss.get() : nullptr; }
  uint32_t qkey() const { return extras_ != nullptr ? extras_->qkey : 0; }
  uint32_t app_rate_kbps() const { return extras_ != nullptr ? extras_->app_rate_kbps : 0; }
  // Sets one of its extras, making them only for a value other than 0.
  template <class T, class V>
  void set_extra(T QpExtras::*field, V value) {
    if (extras_ != nullptr || value != V{}) extras().*field = static_cast<T>(value);
  }
  // Its work under way, or a record of none.
  const QpWork& work() const {
    static constexpr QpWork kNone{};
    return work_under_way != nullptr ? *work_under_way : kNone;
  }
  // Clears one field of its work under way (without a record it is clear already).
  template <class T>
  void clear_work(T QpWork::*field) {
    if (work_under_way != nullptr) work_under_way->*field = T{};
  }
  // Its capabilities as granted (ibv_query_qp): what its slots hold, within Wharf's limits,
  // so the ring geometry is all it keeps of them; none for a QP that posts nothing of its
  // own (an XRC target, an RSS QP: queues it never uses).
  proto::QpCaps caps() const {
    if (posts_nothing()) return {};
    return {sq_entries, rq_entries, max_send_sge(), max_recv_sge(), max_inline_data()};
  }
  bool posts_nothing() const {
    return type == IBV_QPT_XRC_RECV || (type == IBV_QPT_RAW_PACKET && send_cq == nullptr);
  }
  uint32_t max_send_sge() const {
    return std::min<uint32_t>((sq_slot - sizeof(shm::SendWqe)) / sizeof(shm::Sge),
                              shm::kMaxSendSge);
  }
  uint32_t max_inline_data() const {
    return std::min<uint32_t>(sq_slot - sizeof(shm::SendWqe), shm::kMaxInline);
  }
  // A receive slot holds a RecvWqe and exactly the SGEs asked for (shm::recv_slot_size).
  uint32_t max_recv_sge() const {
    return rq_entries == 0
               ? 0
               : static_cast<uint32_t>((rq_slot - sizeof(shm::RecvWqe)) / sizeof(shm::Sge));
  }
  // Copies the send WQE in `slot` of its send ring into *w: copy_send_wqe under this QP's
  // slot size, type and SGE limit (false: malformed).
  bool copy_send(const uint8_t* slot, SendWork* w) const {
    return copy_send_wqe(slot, sq_slot, type, max_send_sge(), w);
  }
  // The parts of the shared region before the slots, whose offsets do not depend on the
  // rings' sizes.
  static constexpr shm::QpLayout kFixedParts = shm::qp_layout(0, 0, 0, 0);
  // In the shared region: the direct-path line, and the counters (the library's direct path
  // adds to them too).
  shm::QpDirect* direct() const {
    return reinterpret_cast<shm::QpDirect*>(shm.data() + kFixedParts.direct_off);
  }
  shm::QpCounters* counters() const {
    return reinterpret_cast<shm::QpCounters*>(shm.data() + kFixedParts.counters_off);
  }
  // The transitions its rdma_cm id's connection steps applied (proto/qp_cm_step_log.h).
  shm::QpCmSteps* cm_steps() const {
    return reinterpret_cast<shm::QpCmSteps*>(shm.data() + kFixedParts.cm_steps_off);
  }
  // Its completions under way on the router's path (router/local_completions.h).
  shm::QpLocalCompletions* local_completions() const {
    return reinterpret_cast<shm::QpLocalCompletions*>(shm.data() + kFixedParts.completions_off);
  }
  shm::QpLayout layout() const { return shm::qp_layout(sq_entries, sq_slot, rq_entries, rq_slot); }
  // The router's side of its send ring and of its receive ring (of capacity 0, which takes
  // nothing, for a QP with no receive queue of its own).
  shm::RingConsumerView sq() {
    const shm::QpLayout l = layout();
    return {ring_header(l.sq_ring_off), shm.data() + l.sq_slots_off, sq_entries, sq_slot,
            sq_cursor};
  }
  shm::RingConsumerView rq() {
    const shm::QpLayout l = layout();
    return {ring_header(l.rq_ring_off), shm.data() + l.rq_slots_off, rq_entries, rq_slot,
            rq_cursor};
  }
  shm::RingHeader* ring_header(size_t off) const {
    return reinterpret_cast<shm::RingHeader*>(shm.data() + off);
  }

 private:
  std::unique_ptr<QpExtras> extras_;  // extras()
};

static_assert(shm::kMaxQueueDepth <= UINT16_MAX &&
                  shm::send_slot_size(shm::kMaxSendSge, shm::kMaxInline) <= UINT16_MAX &&
                  shm::recv_slot_size(shm::kMaxRecvSge) <= UINT16_MAX,
              "Qp's 16-bit ring geometry holds every queue the router makes");
// 200 B, 208 with malloc's header: with the session's slot and the QPN set's, an idle QP
// costs the router at most 256 B (issue #18, item 7; bench/qp_memory.sh measures it).
static_assert(sizeof(Qp) <= 200, "the per-QP record grew: move what idle QPs do not need out");

// Counts one completion of qp's work in its counters (shm::QpCounters): of a work request it
// issued (a send, WRITE, READ or atomic; opcode: enum ibv_wr_opcode), or of a message that
// consumed one of its receives. Flushes are not counted.
inline void count_send_completion(Qp* qp, uint32_t opcode, ibv_wc_status status, uint64_t bytes) {
  if (status == IBV_WC_SUCCESS)
    qp->counters()->count_sent(opcode, bytes);
  else if (status != IBV_WC_WR_FLUSH_ERR)
    qp->counters()->count_error(status);
}
inline void count_receive_completion(Qp* qp, ibv_wc_status status, uint64_t bytes) {
  if (status == IBV_WC_SUCCESS)
    qp->counters()->count_received(bytes);
  else if (status != IBV_WC_WR_FLUSH_ERR)
    qp->counters()->count_error(status);
}

}  // namespace wharf::router
