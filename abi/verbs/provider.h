// Internal objects of our libibverbs: each embeds the public rdma-core struct as its first
// member (as rdma-core providers do) and converts back with to_*() helpers.
//
// Threading: control verbs are serialized per context by RouterClient; post/poll take a
// per-queue spinlock, as rdma-core providers do, so several threads may share a queue.
#pragma once

#include <infiniband/verbs.h>
#include <sys/un.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "abi/verbs/direct_path.h"
#include "abi/verbs/express.h"
#include "abi/verbs/line_set.h"
#include "abi/verbs/mapping.h"
#include "common/spinlock.h"
#include "common/unique_fd.h"
#include "proto/messages.h"
#include "proto/router_client.h"
#include "proto/session_watch.h"
#include "shm/cq_ring.h"
#include "shm/layout.h"
#include "shm/posted_marks.h"
#include "shm/ring.h"

namespace wharf::abi {

struct Context {
  verbs_context vctx;  // ibv_context is its last member: must stay first here
  proto::RouterClient client;
  proto::HelloRep hello;
  Mapping page_map;
  shm::ContextPage* page = nullptr;
  UniqueFd doorbell;
  // Kept to resume the session with a new router process (abi/verbs/session_resume.h): the
  // page's memfd and the router's end of the async-event socket (kept open, a router's
  // death is no end of file to a waiter).
  UniqueFd page_fd;
  UniqueFd async_router_end;
  // The router socket it was opened on (WHARF_ROUTER then): a process may open contexts on
  // several routers, and change its environment since. No allocation (ibv_open_device must
  // fail with ENOMEM, not throw); a path longer than a socket address holds is refused.
  std::array<char, sizeof(sockaddr_un::sun_path)> router_socket{};
  proto::SessionWatch watch;
  // Set as the context closes: a resume under way gives up at its next try (so a close while
  // no router is back waits a try, not WHARF_RESUME_S).
  std::atomic<bool> closing{false};
  pid_t owner_pid = 0;
  // ibv_import_device: a context imported from another of this process (by its cmd_fd)
  // shares that one's router session and objects; every verb on it goes to `imported_from`,
  // which lives until its importers are closed too (abi/verbs/import_verbs.cc).
  Context* imported_from = nullptr;
  int importers = 0;           // guarded by the import registry's lock
  bool close_pending = false;  // closed by the application while importers remain

  // Every object of this context still alive, by handle: async and completion events name
  // objects by handle, and ibv_close_device frees what the application left behind.
  std::mutex objects_mu;  // guards the maps below
  std::unordered_map<uint32_t, ibv_qp*> qps;
  std::unordered_map<uint32_t, ibv_cq*> cqs;
  std::unordered_map<uint32_t, ibv_srq*> srqs;
  std::unordered_map<uint32_t, ibv_pd*> pds;
  std::unordered_map<uint32_t, ibv_xrcd*> xrcds;
  std::unordered_map<uint32_t, ibv_mr*> mrs;
  std::unordered_map<uint32_t, ibv_mw*> mws;
  std::unordered_map<uint32_t, ibv_ah*> ahs;
  std::unordered_map<uint32_t, ibv_comp_channel*> channels;
  // Objects of the library alone, under ids of its own: device memory, parent and thread
  // domains.
  std::unordered_map<uint32_t, ibv_dm*> dms;
  std::unordered_map<uint32_t, ibv_pd*> parent_domains;
  std::unordered_map<uint32_t, ibv_td*> tds;
  uint32_t next_local_id = 1;  // guarded by objects_mu

  // Tracks obj under `handle`. False when memory ran out: the caller then undoes what it
  // made (out_of_memory) and fails with ENOMEM, as rdma-core does.
  template <class T>
  [[nodiscard]] bool track(std::unordered_map<uint32_t, T*>& map, uint32_t handle,
                           T* obj) noexcept {
    try {
      std::lock_guard<std::mutex> g(objects_mu);
      map[handle] = obj;
      return true;
    } catch (...) {
      return false;
    }
  }
  // For a verb that fails after the router made its object `handle`: frees that object with
  // `destroy` (its Destroy*/Dealloc* op). An error is ignored: the router frees what is left
  // when the connection closes.
  void release_in_router(proto::Op destroy, uint32_t handle) noexcept {
    proto::Empty none;
    client.call(destroy, proto::Handle{handle}, nullptr, 0, &none);
  }
  // The same for a verb that ran out of memory: also sets errno to ENOMEM and returns null.
  std::nullptr_t out_of_memory(proto::Op destroy, uint32_t handle) noexcept {
    release_in_router(destroy, handle);
    errno = ENOMEM;
    return nullptr;
  }
  template <class T>
  void untrack(std::unordered_map<uint32_t, T*>& map, uint32_t handle) {
    std::lock_guard<std::mutex> g(objects_mu);
    map.erase(handle);
  }
  // Tracks obj under a new id of the library's own (device memory, thread and parent
  // domains). Returns the id, or 0 when memory ran out.
  template <class T>
  [[nodiscard]] uint32_t track_local(std::unordered_map<uint32_t, T*>& map, T* obj) noexcept {
    try {
      std::lock_guard<std::mutex> g(objects_mu);
      const uint32_t id = next_local_id++;
      map[id] = obj;
      return id;
    } catch (...) {
      return 0;
    }
  }
  // Stops tracking obj if it is what `handle` is tracked as (an original, not an import).
  template <class T>
  void untrack_if(std::unordered_map<uint32_t, T*>& map, uint32_t handle, const T* obj) {
    std::lock_guard<std::mutex> g(objects_mu);
    auto it = map.find(handle);
    if (it != map.end() && it->second == obj) map.erase(it);
  }
  // Frees the library side of every object still tracked (at ibv_close_device).
  void free_objects();

  // Tells the router that the QP of `posted_mark` has new work (shm/posted_marks.h) and wakes
  // the router if it announced that it sleeps. Call after publishing the work.
  void ring_doorbell(uint32_t posted_mark) {
    if (shm::mark_posted_and_check_sleep(page, posted_mark)) {
      uint64_t one = 1;
      ssize_t n = ::write(doorbell.get(), &one, sizeof(one));
      (void)n;  // a full eventfd counter already wakes the router
    }
  }
};

// The Context embedding c itself, and the one whose session serves c (differs when c was
// imported).
inline Context* own_ctx(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
}
inline Context* to_ctx(ibv_context* c) {
  Context* own = own_ctx(c);
  return own->imported_from != nullptr ? own->imported_from : own;
}

struct Pd {
  ibv_pd pd;
  uint32_t handle;  // the router's PD (a parent domain's: that of the PD it wraps)
  // A parent domain (ibv_alloc_parent_domain) wraps `protection` and is a library object only.
  // Its allocators are never called: queues live in memory the router shares, not the
  // application's.
  Pd* protection = nullptr;
  ibv_td* td = nullptr;
  uint32_t local_id = 0;  // its key in Context::parent_domains
};
inline Pd* to_pd(ibv_pd* p) { return reinterpret_cast<Pd*>(p); }

struct Xrcd {
  ibv_xrcd xrcd;
  uint32_t handle;
};
inline Xrcd* to_xrcd(ibv_xrcd* x) { return reinterpret_cast<Xrcd*>(x); }

struct Dm;
struct Mr {
  ibv_mr mr;
  uint32_t handle;
  // What restores it in a resumed session: its request, backing and the key's proof.
  proto::RegMrReq request;
  UniqueFd memfd;
  uint64_t proof = 0;
  uint64_t iova;     // address the keys are used with (mr.addr is where it lives)
  uint32_t access;   // enum ibv_access_flags
  Dm* dm = nullptr;  // the device memory it registers (ibv_reg_dm_mr), else nullptr
};
inline Mr* to_mr(ibv_mr* m) { return reinterpret_cast<Mr*>(m); }

// Device memory (ibv_alloc_dm): a sealed memfd the library maps; the application reaches it
// only with ibv_memcpy_to/from_dm, RDMA through MRs registered on it (abi/verbs/dm_verbs.cc).
struct Dm {
  ibv_dm dm;
  Mapping map;
  UniqueFd memfd;
  uint64_t length = 0;      // as asked; the mapping is whole pages
  std::atomic<int> mrs{0};  // MRs registered on it: it is not freed while they exist
};
inline Dm* to_dm(ibv_dm* d) { return reinterpret_cast<Dm*>(d); }

struct Cq;
struct CompChannel {
  ibv_comp_channel channel;  // its fd is `lines`' epoll instance
  uint32_t handle;
  UniqueFd events;       // the socket the router (and express lines) write events to
  UniqueFd router_end;   // the router's end of it, kept for a resumed session
  LineSet lines;         // over `events` and the express lines of the CQs' QPs (line_set.h)
  SpinLock lock;         // guards cqs; nothing is allocated or freed while it is held
  std::vector<Cq*> cqs;  // the CQs that report to this channel, in the order they were made
};
inline CompChannel* to_channel(ibv_comp_channel* c) { return reinterpret_cast<CompChannel*>(c); }

// What a completion holds beyond ibv_wc, for the extended poll API.
struct CompletionExtra {
  uint64_t completion_ns;  // shm::Cqe::completion_ns
  uint64_t tm_tag;         // shm::Cqe::tm_tag
};

struct Cq {
  // ibv_cq is the prefix of ibv_cq_ex (rdma-core's verbs_cq overlays them the same way): a CQ
  // made by ibv_create_cq_ex is used through both.
  union {
    ibv_cq_ex cq_ex;
    ibv_cq cq;
  };
  ibv_wc ex_wc;              // the completion the extended poll API is at (start_poll / next_poll)
  CompletionExtra ex_extra;  // and its time (the device's free-running clock) and tag
  uint32_t handle;
  Mapping map;
  UniqueFd region;  // map's memfd, kept for a resumed session
  proto::CreateCqReq request;
  shm::CqConsumer ring;
  shm::CqProducer producer;  // for completions of the direct path
  shm::CqNotify* notify;
  SpinLock lock;
  uint32_t empty_polls;  // consecutive empty polls, guarded by lock
  // The router's last bulk window (shm::CqNotify::bulk_until_ns) a poll found past, guarded
  // by lock (poll_completions).
  uint64_t bulk_window_passed;
  // Set by req_notify_cq, cleared when ibv_get_cq_event returns this CQ's event. While set, a
  // disarmed notify line means the router or a direct-path peer has raised the event.
  std::atomic<bool> awaiting_event;
  // While ibv_resize_cq moves the CQ to a new region: polls find nothing and the direct path
  // leaves completions for this CQ to the router (set and cleared under lock).
  std::atomic<bool> resizing;
  // The express lines of the QPs completing here (line_set.h), which an empty poll services
  // (poll_completions: at once while they bring something, else every express_poll_ns): when
  // they were last read, and last brought something (ns, CLOCK_MONOTONIC).
  LineSet lines;
  std::atomic<uint64_t> lines_read_ns;
  std::atomic<uint64_t> lines_busy_ns;
  // A line of a QP completing here holds a burst of Messages to write: the next poll writes
  // it (write_express_bursts).
  std::atomic<bool> line_bursts;
};
constexpr uint32_t kEmptyPollsBeforeYield = 64;
// When the calling thread began to find every CQ it polls empty (CLOCK_MONOTONIC ns); 0 while
// its polls find completions or it posts sends. poll_cq naps once this is old enough.
extern thread_local uint64_t thread_idle_since_ns;
inline Cq* to_cq(ibv_cq* c) { return reinterpret_cast<Cq*>(c); }

struct Srq {
  ibv_srq srq;
  uint32_t handle;
  uint32_t srqn;  // ibv_get_srq_num: how XRC initiators name it
  uint32_t max_sge;
  bool tm;  // a tag-matching SRQ (ibv_post_srq_ops)
  Mapping map;
  // For a resumed session (guarded by the context's objects_mu): map's memfd, and the request
  // that would make the SRQ as it is now (max_wr: its current size; srq_limit: the limit last
  // armed, which the new router keeps armed if the region says it still is).
  UniqueFd region;
  proto::CreateSrqReq request;
  shm::RingProducer ring;
  SpinLock lock;
  // While ibv_modify_srq moves the SRQ to a new region (and after a move whose region could
  // not be mapped): posts fail with ENOMEM. Under lock.
  bool resizing;
  // Moves to a new region so far: a receive an express line copied out of an older one is
  // not claimed (srq_receives.h). Under lock.
  uint32_t generation;
  // The router's word on the SRQ (shm::SrqState: whether a limit is armed), in `map`.
  const shm::SrqState* state;
};
inline Srq* to_srq(ibv_srq* s) { return reinterpret_cast<Srq*>(s); }

// Work requests built through the ibv_wr_* API between ibv_wr_start and ibv_wr_complete,
// posted together by ibv_wr_complete (abi/verbs/qp_ex_verbs.cc). Inline data is copied when
// it is given, as the API lets the application reuse its buffer at once.
struct PendingWr {
  ibv_send_wr wr{};
  std::vector<ibv_sge> sges;
  std::vector<uint8_t> inline_data;
};
struct WrBatch {
  std::vector<PendingWr> wrs;  // capacity kept from batch to batch
  size_t count = 0;            // wrs[0, count) belong to the batch being built
  int error = 0;               // the first error a wr_* call met; wr_complete reports it
};

struct Qp {
  // ibv_qp is the prefix of ibv_qp_ex: a QP made with send_ops_flags is used through both.
  union {
    ibv_qp_ex qp_ex;
    ibv_qp qp;
  };
  uint64_t send_ops = 0;  // IBV_QP_EX_WITH_*: the ops ibv_wr_* may post (0: not extended)
  WrBatch batch;
  uint32_t handle;
  uint32_t posted_mark;  // its bit in the context page's posted marks
  proto::QpCaps caps;
  bool sq_sig_all;
  Mapping map;
  // What restores it in a resumed session: its region, request, the QPN's proof, and the
  // ModifyQp requests since it was last reset (guarded by the context's objects_mu).
  UniqueFd region;
  proto::CreateQpReq request;
  uint64_t proof = 0;
  std::vector<proto::ModifyQpReq> modifications;
  shm::QpLayout layout;
  shm::RingProducer sq;
  shm::RingProducer rq;
  SpinLock sq_lock;
  SpinLock rq_lock;
  shm::QpDirect* direct_line;  // in `map`, written by the router
  shm::QpCounters* counters;   // in `map`: the direct path counts the work it executes
  DirectPath direct;           // guarded by sq_lock
  ExpressLine express;         // its own locking (express.h)
  // Whether its line is on its sets (line_set.h), and which: line_sets is written before
  // line_state becomes kLineWatched and read by the one thread that moves it to kLineLeaving.
  static constexpr int kMaxLineSets = 4;
  enum : uint8_t { kLineUnwatched, kLineWatched, kLineLeaving };
  std::atomic<uint8_t> line_state{kLineUnwatched};
  LineSet* line_sets[kMaxLineSets] = {};
  int n_line_sets = 0;
  // An RSS QP's indirection table, which it keeps in use until it is destroyed.
  ibv_rwq_ind_table* rss_table = nullptr;
  void reset_rings();  // after a transition to RESET (the router zeroed the indices)
};
inline Qp* to_qp(ibv_qp* q) { return reinterpret_cast<Qp*>(q); }

struct Ah {
  ibv_ah ah;
  uint32_t handle;
  proto::CreateAhReq request;  // restores it in a resumed session
};
inline Ah* to_ah(ibv_ah* a) { return reinterpret_cast<Ah*>(a); }

struct Backing;
// Registers [addr, addr+length) with the router, its whole pages in `b` reachable through the
// memfd b names. nullptr with errno set on failure.
Mr* register_mr(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access,
                const Backing& b);

// ibv_dealloc_pd of a parent domain.
int dealloc_parent_domain(ibv_pd* pd);

// Fills every ops slot of a new context (post/poll/notify live in the ops table).
void init_context_ops(Context* ctx);
// Makes ctx's ibv_context usable: device, its ops, and the two descriptors it now owns
// (async events; cmd_fd, the file ibv_import_device recognises the context by).
void init_ibv_context(Context* ctx, ibv_device* device, UniqueFd async_fd, UniqueFd cmd_fd);
// Frees a context (opened, not imported): its objects, descriptors and router session.
void release_context(Context* ctx);

// Data-path entries installed in ibv_context_ops.
int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
// post_send, with BIND_MW work requests binding windows of `bind_type` (ibv_post_send: type 2;
// ibv_bind_mw: type 1).
int post_send_wrs(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad, ibv_mw_type bind_type);
int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
int post_srq_ops(ibv_srq* srq, ibv_ops_wr* wr, ibv_ops_wr** bad);
int poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
// poll_cq that also gives each completion's CompletionExtra when `extra` is not null.
int poll_completions(ibv_cq* cq, int n, ibv_wc* wc, CompletionExtra* extra);
// ibv_create_cq and the core of ibv_create_cq_ex: a CQ of at least cqe entries. nullptr with
// errno set on failure.
Cq* create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
              int comp_vector);
ibv_cq_ex* create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr);
// ibv_create_qp and the core of ibv_create_qp_ex: a QP of `context` in pd, or for an XRC
// target (init->qp_type IBV_QPT_XRC_RECV) in xrcd; `rss`: a RAW_PACKET QP with no CQs and no
// queues, to be given an indirection table. nullptr with errno set on failure.
Qp* create_qp(ibv_context* context, ibv_pd* pd, ibv_xrcd* xrcd, ibv_qp_init_attr* init,
              bool rss = false);
ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* attr);
// ibv_create_qp_ex with an indirection table and a hash (abi/verbs/wq_verbs.cc).
ibv_qp* create_rss_qp(ibv_context* context, ibv_qp_init_attr_ex* attr);
// A destroyed RSS QP no longer holds its indirection table.
void release_rss_table(ibv_rwq_ind_table* table);
// An SRQ of pd: basic, an XRC SRQ of domain xrcd completing on cq, a tag-matching SRQ of
// sizes tm completing on cq, or the queue of a WQ (type proto::kSrqTypeWq, completing on cq).
// nullptr with errno set on failure.
ibv_srq* create_srq_object(ibv_pd* pd, ibv_srq_attr* attr, void* srq_context, uint32_t type,
                           ibv_xrcd* xrcd, ibv_cq* cq, const ibv_tm_cap* tm);
int req_notify_cq(ibv_cq* cq, int solicited_only);
int modify_cq(ibv_cq* cq, ibv_modify_cq_attr* attr);
// Drops the completions of QP qp_num still in cq (a QP moved to RESET leaves none behind, as
// on mlx5: rdma-core's tests reuse such a QP and its CQ).
void discard_completions(ibv_cq* cq, uint32_t qp_num);

// Extended entry installed in verbs_context (ibv_modify_qp_rate_limit is inline in verbs.h).
int modify_qp_rate_limit(ibv_qp* qp, ibv_qp_rate_limit_attr* attr);

// Fills one send slot of qp from wr. Returns 0 or the errno post_send reports for this WR.
int write_send_wqe(Qp* qp, uint8_t* slot, const ibv_send_wr* wr);
// Writes one receive WQE into a producer ring; shared by QP and SRQ receive posting.
int write_recv_wqe(shm::RingProducer* ring, uint32_t max_sge, const ibv_recv_wr* wr);

}  // namespace wharf::abi
