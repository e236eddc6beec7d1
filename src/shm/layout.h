// Byte layouts of the shared-memory objects exchanged between the verbs library and the
// router (docs/shm-rings.md is the byte-level reference). Both sides compute offsets with
// the same functions; the router never reads a size or offset back from shared memory.
// Enum values (opcodes, statuses) are rdma-core 44's, from <infiniband/verbs.h>.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/atomic_intent.h"
#include "common/bits.h"
#include "shm/ring.h"

namespace wharf::shm {

// ---- Send work queue entry: 64-byte header, then SGEs or inline bytes. ----
enum WqeFlags : uint8_t {
  kWqeSignaled = 1u << 0,
  kWqeSolicited = 1u << 1,
  kWqeInline = 1u << 2,
  kWqeFence = 1u << 3,
};

struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};
static_assert(sizeof(Sge) == 16);

// Memory-window work requests carry no SGEs and use the fields this way:
//  - BIND_MW: rkey = the window's new key, remote_addr = start of the window, compare_add =
//    its length, swap = its access flags, ah_handle = the window's handle, remote_qpn = the
//    lkey of the registration it lies in;
//  - LOCAL_INV and SEND_WITH_INV: rkey = the key to invalidate.
struct SendWqe {
  uint64_t wr_id;
  uint8_t opcode;   // enum ibv_wr_opcode
  uint8_t flags;    // WqeFlags
  uint8_t num_sge;  // SGEs following the header (0 when kWqeInline)
  uint8_t reserved0;
  uint32_t imm_data;  // as the application gave it (network order)
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t inline_len;  // bytes of inline data following the header
  uint64_t compare_add;
  uint64_t swap;
  uint32_t ah_handle;  // UD: handle of the address handle
  uint32_t remote_qpn;
  uint32_t remote_qkey;
  uint32_t remote_srqn;  // XRC: the SRQ at the target the message is for
};
static_assert(sizeof(SendWqe) == 64);

struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t reserved;
};
static_assert(sizeof(RecvWqe) == 16);

// ---- Completion queue entry: one per cache line. ----
struct Cqe {
  uint64_t wr_id;
  uint8_t status;  // enum ibv_wc_status
  uint8_t opcode;  // enum ibv_wc_opcode
  uint16_t vendor_err;
  uint32_t byte_len;
  // Network order, as in ibv_wc; for a tag-matching receive (IBV_WC_TM_RECV with
  // IBV_WC_TM_MATCH) the sender's app_ctx (ibv_wc_tm_info.priv), host order.
  uint32_t imm_data;
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t wc_flags;  // enum ibv_wc_flags
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
  // Set by the consumer on an entry it drops unread: its QP was moved to RESET, which removes
  // the QP's completions from its CQs (as mlx5 does). Producers write 0.
  uint8_t discarded;
  uint8_t reserved0;
  // When the producer wrote the entry: CLOCK_MONOTONIC_RAW in nanoseconds, the device's
  // free-running clock (ibv_query_rt_values_ex, hca_core_clock 1 GHz). Set by CqProducer.
  uint64_t completion_ns;
  // The matched tag of a tag-matching receive (ibv_wc_tm_info.tag); 0 otherwise.
  uint64_t tm_tag;
  uint32_t reserved1;
  // Publication stamp: index + 1 of the ring position this entry was written for, stored
  // last with release (shm/cq_ring.h). Lets several producers share one CQ.
  uint32_t seq;
};
static_assert(sizeof(Cqe) == 64);

constexpr uint32_t kMaxSendSge = 30;
constexpr uint32_t kMaxRecvSge = 30;
constexpr uint32_t kMaxInline = 512;
constexpr uint32_t kMaxQueueDepth = 1u << 15;
constexpr uint32_t kMaxCqDepth = 1u << 20;

// Slot size of a send WQE able to hold max_sge SGEs or max_inline bytes.
constexpr uint32_t send_slot_size(uint32_t max_sge, uint32_t max_inline) {
  uint64_t body = max_sge * sizeof(Sge);
  if (max_inline > body) body = max_inline;
  return static_cast<uint32_t>(align_up(sizeof(SendWqe) + body, kCacheLine));
}
constexpr uint32_t recv_slot_size(uint32_t max_sge) {
  return static_cast<uint32_t>(align_up(sizeof(RecvWqe) + max_sge * sizeof(Sge), 16));
}

// ---- Per-connection page: the router's sleep flag and the session's posted marks. ----
// One posted mark per QP a session may have (device::kMaxQp); shm/posted_marks.h.
constexpr uint32_t kPostedMarks = 1u << 16;
constexpr uint32_t kPostedMarkWords = kPostedMarks / 64;
// Each bit of `posted_summary` stands for this many words of `posted`.
constexpr uint32_t kPostedWordsPerSummaryBit = kPostedMarkWords / 64;
struct ContextPage {
  // 1 while the router is (about to be) asleep; a producer that sees 1 after publishing
  // work swaps it to 0 and writes the doorbell eventfd.
  alignas(kCacheLine) std::atomic<uint32_t> router_sleeping;
  // Bumped by the router whenever a memory registration on this host goes away; the direct
  // path drops every key it cached under an older value (and checks it while busy).
  alignas(kCacheLine) std::atomic<uint32_t> mr_epoch;
  // Set by the library, taken (swapped to 0) by the router: bit m of `posted` says that QP
  // m (its posted mark, CreateQpRep) has new work for the router; bit g of the summary that
  // words g * kPostedWordsPerSummaryBit and on may have bits set. The summary shares its
  // cache line with the first 7 words: a post to one of a session's first 448 QPs moves
  // one line between the library and the router, not two.
  alignas(kCacheLine) std::atomic<uint64_t> posted_summary;
  std::atomic<uint64_t> posted[kPostedMarkWords];
};
constexpr size_t kContextPageSize = align_up(sizeof(ContextPage), kPageSize);

// ---- Completion queue: ring header, notify line, slots. ----
enum CqArm : uint32_t { kCqDisarmed = 0, kCqArmedAny = 1, kCqArmedSolicited = 2 };
struct CqNotify {
  alignas(kCacheLine) std::atomic<uint32_t> arm;  // CqArm, set by the library, swapped by router
  // 1 while a thread polling this CQ sleeps on it (a futex), set by the library; a producer
  // that publishes a CQE swaps it to 0 and wakes the sleepers (docs/shm-rings.md).
  std::atomic<uint32_t> napping;
  // Written by the router: until this time (CLOCK_MONOTONIC ns) it is moving a long message
  // between hosts for a QP completing here, so a poller that finds the CQ empty twice in a row
  // naps rather than spin for the core the router needs (shm/cq_ring.h, bulk_nap_ns).
  std::atomic<uint64_t> bulk_until_ns;
};
struct CqLayout {
  uint32_t entries;
  size_t ring_off;
  size_t notify_off;
  size_t slots_off;
  size_t total;
};
constexpr CqLayout cq_layout(uint32_t entries) {
  CqLayout l{};
  l.entries = entries;
  l.ring_off = 0;
  l.notify_off = sizeof(RingHeader);
  l.slots_off = l.notify_off + sizeof(CqNotify);
  l.total = align_up(l.slots_off + static_cast<size_t>(entries) * sizeof(Cqe), kPageSize);
  return l;
}

// ---- Direct intra-host path: may the QP's library execute its sends itself? ----
// The router moves `state` between Off and On (and bumps `generation` while Off, before
// every enable); the library moves it On -> Busy around each directly executed work
// request and back. The router waits for Busy to end before it touches the peer's queues.
enum DirectState : uint32_t { kDirectOff = 0, kDirectOn = 1, kDirectBusy = 2 };
struct QpDirect {
  alignas(kCacheLine) std::atomic<uint32_t> state;
  std::atomic<uint32_t> generation;
  // Written by the router: 1 while the QP is in ERR, when the router flushes every receive
  // posted, so posting one must wake it; otherwise receives need no doorbell.
  std::atomic<uint32_t> in_error;
  // 1 while the direct-path sender of this QP's peer waits for a receive to be posted here (a
  // futex word; shm/receive_wait.h).
  std::atomic<uint32_t> receive_wanted;
  // Express lines (router/express.h): 1 when the router holds a connection for this QP's
  // library to take (TakeExpress); the library stores 0 when it asks.
  std::atomic<uint32_t> express_offer;
  // 1 while the router lets the library send on the QP's express line (an RC QP without a
  // rate limit, of its own or its container's); kept current as limits change.
  std::atomic<uint32_t> express_may_send;
  // Written by the router for a QP whose peer is on another host: how many send work requests
  // it has retired (completed, with or without a completion entry, or flushed) since the QP
  // was last reset. Equal to the send ring's producer index when the router holds nothing of
  // the QP's: only then may its library send on the express line (order).
  std::atomic<uint32_t> sq_retired;
  // 1 while the router waits for the library to hand a Busy line back: it sleeps on `state`
  // (a futex word), and the library wakes it (shm/direct_line.h).
  std::atomic<uint32_t> router_waits;
  // Written by the router while it answers the peer's READs of this QP's memory with long
  // messages: when that bulk window ends (CLOCK_MONOTONIC ns, shm::extend_bulk_window). The
  // library keeps the QP's SENDs off its express line until then (abi/verbs/express.cc).
  std::atomic<uint64_t> peer_reads_until_ns;
};

// The work-request opcodes QpCounters counts by (enum ibv_wr_opcode below this: all that
// rdma-core defines, IBV_WR_ATOMIC_WRITE = 15 the last) and the completion statuses (enum
// ibv_wc_status below this: all, IBV_WC_TM_RNDV_INCOMPLETE = 23 the last).
inline constexpr size_t kCountedOpcodes = 16;
inline constexpr size_t kCountedStatuses = 24;

// What a QP has moved, for `wharfctl statistic` and /metrics (docs/shm-rings.md, "QP
// counters"): added to (relaxed) by whoever executes the work, the router or a direct-path
// library, so it lives beside the QP's rings; the router only ever reports it. Messages and
// payload bytes that completed successfully: sends, WRITEs, READs and atomics on the sending
// side (tx, and by opcode), messages that consumed a receive on the receiving side (rx);
// completions with an error other than a flush (errors, and by status).
struct QpCounters {
  alignas(kCacheLine) std::atomic<uint64_t> tx_msgs;
  std::atomic<uint64_t> tx_bytes;
  std::atomic<uint64_t> rx_msgs;
  std::atomic<uint64_t> rx_bytes;
  std::atomic<uint64_t> errors;
  // Of tx_msgs: the sends its library moved over the QP's express line (router/express.h).
  std::atomic<uint64_t> express_msgs;
  // Of tx_msgs, by the work request's opcode; of errors, by status.
  alignas(kCacheLine) std::atomic<uint64_t> tx_by_opcode[kCountedOpcodes];
  std::atomic<uint64_t> errors_by_status[kCountedStatuses];

  // A send-side work request (opcode: enum ibv_wr_opcode) that completed successfully.
  void count_sent(uint32_t opcode, uint64_t bytes) {
    tx_msgs.fetch_add(1, std::memory_order_relaxed);
    tx_bytes.fetch_add(bytes, std::memory_order_relaxed);
    if (opcode < kCountedOpcodes) tx_by_opcode[opcode].fetch_add(1, std::memory_order_relaxed);
  }
  // A message of `bytes` that consumed one of the QP's receives.
  void count_received(uint64_t bytes) {
    rx_msgs.fetch_add(1, std::memory_order_relaxed);
    rx_bytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  // A completion with an error `status` (enum ibv_wc_status) other than a flush.
  void count_error(uint32_t status) {
    errors.fetch_add(1, std::memory_order_relaxed);
    if (status < kCountedStatuses) errors_by_status[status].fetch_add(1, std::memory_order_relaxed);
  }
};

// The transitions the router applied to a QP for its rdma_cm id (a connection step's
// proto::CmQpSteps), kept in the QP's region because its library's ibv_modify_qp calls do not
// include them: a resumed session replays them among those calls, in the order the router
// applied them (issue #23; abi/verbs/session_resume.cc). Written by the router; read and
// emptied by the library before it restores the QP, with no router process serving the QP.
inline constexpr uint32_t kQpCmStepRecords = 8;  // a connection takes four at most
inline constexpr uint32_t kQpCmStepBytes = 120;  // a proto::QpStep, copied as it is
struct QpCmStepRecord {
  // How many of the owner's own modifications (`QpCmSteps::modifications`) preceded it.
  uint32_t after_modifications;
  uint8_t step[kQpCmStepBytes];
};
struct QpCmSteps {
  // The owner's successful ModifyQp requests since the QP was created or last reset, counted
  // by the router (its library keeps each of them, and forgets them all at a reset).
  alignas(kCacheLine) uint32_t modifications;
  uint32_t count;  // records[0, count) in use
  uint32_t lost;   // 1: more steps than records (the QP cannot be restored)
  uint32_t reserved;
  QpCmStepRecord records[kQpCmStepRecords];
};

// A completion the router is making on its own path between two QPs of this host (issue #23;
// router/local_completions.h), recorded in the QP's region before the first of the stores
// that make it (the ring's consumer index moving past the work request, the CQ entry), so
// that a router process started after a crash finishes it rather than losing it or making it
// twice. Written by the router; read back by the next one as input the owner could forge.
enum LocalCompletionState : uint32_t {
  kLocalCompletionNone = 0,
  kLocalCompletionUnderWay = 1,  // the stores may have been made in part
  kLocalCompletionDone = 2,      // a receive: made whole; its sender's send not yet completed
};
struct LocalCompletion {
  uint32_t state;        // LocalCompletionState, stored last (release, std::atomic_ref)
  uint32_t ring_index;   // the work request's position in the QP's own ring (not an SRQ's)
  uint32_t cq_position;  // the CQ's producer index before the entry
  uint32_t post;         // 1: the completion has a CQ entry (`cqe`)
  uint32_t solicited;
  uint32_t sender_qpn;    // a receive: the QP whose send it took, and that send's position
  uint32_t sender_index;  // in its send ring
  uint32_t srq_record;    // a receive from an SRQ: the SrqHeldRecord keeping it (~0u: none)
  Cqe cqe;
};
struct QpLocalCompletions {
  alignas(kCacheLine) LocalCompletion receiving;  // of a message this QP received
  alignas(kCacheLine) LocalCompletion sending;    // of a work request of its send ring
  // Of an atomic of its send ring on this host, by its ring index (common/atomic_intent.h).
  AtomicIntent atomic;
};
static_assert(sizeof(QpLocalCompletions) == 4 * kCacheLine, "the slots did not move");

// ---- Queue pair: send ring, receive ring, direct-path line, counters, the rdma_cm
// transitions, the local completions, then the slots. ----
struct QpLayout {
  uint32_t sq_entries, sq_slot;
  uint32_t rq_entries, rq_slot;  // rq_entries == 0 when the QP uses an SRQ
  size_t sq_ring_off, rq_ring_off, direct_off, counters_off, cm_steps_off, completions_off,
      sq_slots_off, rq_slots_off, total;
};
constexpr QpLayout qp_layout(uint32_t sq_entries, uint32_t sq_slot, uint32_t rq_entries,
                             uint32_t rq_slot) {
  QpLayout l{};
  l.sq_entries = sq_entries;
  l.sq_slot = sq_slot;
  l.rq_entries = rq_entries;
  l.rq_slot = rq_slot;
  l.sq_ring_off = 0;
  l.rq_ring_off = sizeof(RingHeader);
  l.direct_off = 2 * sizeof(RingHeader);
  l.counters_off = l.direct_off + sizeof(QpDirect);
  l.cm_steps_off = l.counters_off + sizeof(QpCounters);
  l.completions_off = l.cm_steps_off + sizeof(QpCmSteps);
  l.sq_slots_off = l.completions_off + sizeof(QpLocalCompletions);
  l.rq_slots_off = l.sq_slots_off + static_cast<size_t>(sq_entries) * sq_slot;
  l.total = align_up(l.rq_slots_off + static_cast<size_t>(rq_entries) * rq_slot, kPageSize);
  return l;
}

// ---- Shared receive queue: ring header, then slots. ----
// What the router tells the consumers of an SRQ besides its ring (docs/shm-rings.md).
struct alignas(kCacheLine) SrqState {
  // 1 while an SRQ limit is armed (ibv_modify_srq with IBV_SRQ_LIMIT): the router counts the
  // receives taken and raises the event, so express lines take none meanwhile.
  std::atomic<uint32_t> limit_armed;
};
static_assert(sizeof(SrqState) == kCacheLine);

// A receive the router took off an SRQ's ring and has not completed yet, kept in the SRQ's
// region (which the library keeps) so that a router process started after a crash finds it
// (issue #23; router/srq_records.h). The receive WQE as it was in the ring (`slot` bytes)
// follows the header. Written by the router only; read back by it as hostile input.
struct SrqHeldRecord {
  // kSrqRecordFree; kSrqRecordClaimed: the SRQ's next receive, taken for whichever of its QPs
  // has a message next; kSrqRecordHeld: taken by QP `qpn` for a message arriving in parts.
  std::atomic<uint32_t> state;
  uint32_t qpn;
};
static_assert(sizeof(SrqHeldRecord) == 8);
constexpr uint32_t kSrqRecordFree = 0;
constexpr uint32_t kSrqRecordClaimed = 1;
constexpr uint32_t kSrqRecordHeld = 2;
// Records per SRQ: receives held at once beyond this are not kept across a restart.
constexpr uint32_t kSrqHeldRecords = 256;

struct SrqLayout {
  uint32_t entries, slot;
  uint32_t record_size;  // an SrqHeldRecord and a slot, rounded up to 8 bytes
  size_t ring_off, state_off, slots_off, records_off, total;
};
constexpr SrqLayout srq_layout(uint32_t entries, uint32_t slot) {
  SrqLayout l{};
  l.entries = entries;
  l.slot = slot;
  l.record_size = static_cast<uint32_t>(align_up(sizeof(SrqHeldRecord) + slot, 8));
  l.ring_off = 0;
  l.state_off = sizeof(RingHeader);
  l.slots_off = l.state_off + sizeof(SrqState);
  l.records_off = align_up(l.slots_off + static_cast<size_t>(entries) * slot, kCacheLine);
  l.total = align_up(l.records_off + size_t{kSrqHeldRecords} * l.record_size, kPageSize);
  return l;
}

}  // namespace wharf::shm
