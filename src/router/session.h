// One library connection (one ibv_context of one process). Owns every verbs object the
// connection created; destroying the session (socket closed, process killed) frees them all.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>

#include "common/unique_fd.h"
#include "proto/cm_messages.h"
#include "proto/messages.h"
#include "router/cm_objects.h"
#include "router/objects.h"
#include "router/resume_key.h"
#include "router/session_qps.h"
#include "router/shm_region.h"
#include "shm/layout.h"

namespace wharf::router {

class Router;

// Descriptors attached to a reply; they stay owned by the objects they belong to.
struct ReplyFds {
  int fds[proto::kMaxFds];
  int count = 0;
  void add(int fd) { fds[count++] = fd; }
};

template <class T>
class HandleTable {
 public:
  explicit HandleTable(uint32_t first = 1) : next_(first) {}
  T* add(std::unique_ptr<T> obj) {
    uint32_t h = next_++;
    obj->handle = h;
    T* raw = obj.get();
    map_.emplace(h, std::move(obj));
    return raw;
  }
  // Takes obj under handle h, which a resumed session had (RestoreNextReq); nullptr (obj
  // dropped) when h is 0 or taken. Later adds go on above it.
  T* add_at(uint32_t h, std::unique_ptr<T> obj) {
    if (h == 0 || map_.count(h) != 0) return nullptr;
    obj->handle = h;
    T* raw = obj.get();
    map_.emplace(h, std::move(obj));
    if (h >= next_) next_ = h + 1;
    return raw;
  }
  T* find(uint32_t h) const {
    auto it = map_.find(h);
    return it == map_.end() ? nullptr : it->second.get();
  }
  std::unique_ptr<T> take(uint32_t h) {
    auto it = map_.find(h);
    if (it == map_.end()) return nullptr;
    auto obj = std::move(it->second);
    map_.erase(it);
    return obj;
  }
  // Puts obj in place of handle h's object and returns that one (nullptr if h names none).
  std::unique_ptr<T> replace(uint32_t h, std::unique_ptr<T> obj) {
    auto it = map_.find(h);
    if (it == map_.end()) return nullptr;
    obj->handle = h;
    std::swap(it->second, obj);
    return obj;
  }
  size_t size() const { return map_.size(); }
  auto begin() { return map_.begin(); }
  auto end() { return map_.end(); }
  auto begin() const { return map_.cbegin(); }
  auto end() const { return map_.cend(); }
  void clear() { map_.clear(); }

 private:
  std::unordered_map<uint32_t, std::unique_ptr<T>> map_;
  uint32_t next_;
};

// A session's handle to another's XRC target QP (ibv_open_qp): the target is found by number
// at each use, and must still be a target of `domain` (which the handle keeps alive).
struct OpenedQp {
  uint32_t handle = 0;
  uint32_t qpn = 0;
  XrcDomain* domain = nullptr;
};

class Session {
 public:
  Session(Router* router, UniqueFd sock, pid_t pid, uid_t uid, Container* container);
  // Raises cq's completion event (Router::raise_cq_event_st: the router holds the events of
  // moderated CQs).
  void raise_cq_event_st(Cq* cq, bool solicited, bool success);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int fd() const { return sock_.get(); }
  int doorbell_fd() const { return doorbell_.get(); }
  pid_t pid() const { return pid_; }
  Container* container() const { return container_; }
  shm::ContextPage* page() const { return reinterpret_cast<shm::ContextPage*>(page_.data()); }
  // The QP a posted mark of this session's page names, or null.
  Qp* posted_qp(uint32_t mark) const { return qps_.by_mark(mark); }

  // Serves one request datagram and sends the reply. Returns false when the peer broke the
  // protocol badly enough that the session must be closed (bad magic/version).
  bool handle_request(const uint8_t* buf, size_t len, UniqueFd* fds, int nfds);

  // Queues an ibv_async_event for the library (dropped if its socket is full).
  void post_async_event(ibv_event_type type, uint32_t handle);

  // Container-registration sessions (wharf-run) own the container they registered.
  const std::string& registered_name() const { return registered_name_; }

  Ah* find_ah(uint32_t handle) const { return ahs_.find(handle); }
  // Takes an address handle on one of this session's PDs (ah->pd): under the handle a resumed
  // session had (`at`, RestoreNextReq), or the next one. Null (ah dropped) when `at` is 0 or
  // taken. The caller keeps to the device's limit (device::kMaxAh).
  Ah* adopt_ah(std::unique_ptr<Ah> ah, std::optional<uint32_t> at = std::nullopt);
  Mw* find_mw(uint32_t handle) const { return mws_.find(handle); }

  // ibv_modify_qp on one of this session's QPs: validates the transition and the values,
  // applies them. Returns 0 or an errno.
  int modify_qp(Qp* qp, uint32_t attr_mask, const proto::QpAttr& attr);

  uid_t uid() const { return uid_; }
  // Whether this session may register, hold and release containers: root, and not from a
  // pod's network namespace (one a runtime's CNI plugin had the router hold). A pod's
  // processes reach the router's socket and often run as uid 0, but must not re-register
  // their own namespace as another tenant's container.
  bool may_manage_containers() const { return uid_ == 0 && container_->sandbox.empty(); }
  // Takes an rdma_cm id made for this session (by the library, or by the CmManager for a
  // connection request on one of its listeners); gives it its handle. The caller then hands
  // it to the CmManager (add_st).
  CmId* adopt_cm_id(std::unique_ptr<CmId> id);

  // Restoring an SRQ (issue #23): the receives a previous process had claimed from it (its
  // next) and held for its QPs' messages, from the records in its region; and a restored QP's
  // held one (router/srq_records.h).
  static void adopt_srq_records(Srq* srq);
  static void take_orphaned_recv(Srq* srq, Qp* qp);

 private:
  // The router's link layer is Ethernet (RoCE rules for address vectors).
  bool ethernet() const;
  template <class Req, class Rep>
  int serve(const proto::Header& h, const uint8_t* body, size_t len, UniqueFd* fds, int nfds,
            int (Session::*fn)(const Req&, UniqueFd*, int, Rep*, ReplyFds*));
  void send_reply(const proto::Header& req, int status, const uint8_t* body, size_t len,
                  const ReplyFds& fds);

  int on_hello(const proto::HelloReq&, UniqueFd*, int, proto::HelloRep*, ReplyFds*);
  // A resumed session's next object (proto::RestoreNextReq): the create request that
  // follows takes it (take_restore) and checks it as a new object of that kind.
  struct PendingRestore {
    uint32_t handle = 0;
    uint32_t number = 0;
    uint64_t proof = 0;
    UniqueFd fd;
    bool set = false;
  };
  int on_restore_next(const proto::RestoreNextReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  // Moves the pending restore to *out; false when there is none (a new object).
  bool take_restore(PendingRestore* out);
  // Whether `proof` is the router's for this container's `number` (resume_key.h), and that
  // proof.
  bool proves(ProofKind kind, uint32_t number, uint64_t proof) const;
  uint64_t proof_of(ProofKind kind, uint32_t number) const;
  int on_alloc_pd(const proto::Empty&, UniqueFd*, int, proto::Handle*, ReplyFds*);
  int on_dealloc_pd(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_reg_mr(const proto::RegMrReq&, UniqueFd*, int, proto::RegMrRep*, ReplyFds*);
  int on_dereg_mr(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_rereg_mr(const proto::ReregMrReq&, UniqueFd*, int, proto::RegMrRep*, ReplyFds*);
  // A registration as req describes it (checked; its memfd mapped), not yet in any table.
  // `replacing`: the MR it is to replace (its bytes and count leave the quota).
  int make_mr(const proto::RegMrReq& req, UniqueFd* fds, int nfds, const Mr* replacing,
              std::unique_ptr<Mr>* out);
  int on_alloc_mw(const proto::AllocMwReq&, UniqueFd*, int, proto::AllocMwRep*, ReplyFds*);
  int on_dealloc_mw(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  void dealloc_mw(std::unique_ptr<Mw> mw);
  int on_open_xrcd(const proto::OpenXrcdReq&, UniqueFd*, int, proto::Handle*, ReplyFds*);
  int on_close_xrcd(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  // The domain of this session's XRC domain handle h, or nullptr.
  XrcDomain* find_xrc_domain(uint32_t h) const;
  int on_open_qp(const proto::OpenQpReq&, UniqueFd*, int, proto::Handle*, ReplyFds*);
  // The QP handle h names: one of this session's, or a target it opened (still there).
  Qp* find_qp(uint32_t h) const;
  void close_opened_qp(std::unique_ptr<OpenedQp> q);
  int on_attach_mcast(const proto::McastReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_detach_mcast(const proto::McastReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_create_flow(const proto::CreateFlowReq&, UniqueFd*, int, proto::Handle*, ReplyFds*);
  int on_destroy_flow(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_modify_wq(const proto::ModifyWqReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_set_qp_rss(const proto::SetQpRssReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_modify_cq(const proto::ModifyCqReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_post_srq_ops(const proto::PostSrqOpsReq&, UniqueFd*, int, proto::PostSrqOpsRep*,
                      ReplyFds*);
  int on_cm_join_multicast(const proto::CmBindReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_create_channel(const proto::Empty&, UniqueFd*, int, proto::Handle*, ReplyFds*);
  int on_destroy_channel(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_create_cq(const proto::CreateCqReq&, UniqueFd*, int, proto::CreateCqRep*, ReplyFds*);
  int on_destroy_cq(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_resize_cq(const proto::ResizeCqReq&, UniqueFd*, int, proto::CreateCqRep*, ReplyFds*);
  int on_create_qp(const proto::CreateQpReq&, UniqueFd*, int, proto::CreateQpRep*, ReplyFds*);
  int on_modify_qp(const proto::ModifyQpReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_modify_qp_rate_limit(const proto::ModifyQpRateLimitReq&, UniqueFd*, int, proto::Empty*,
                              ReplyFds*);
  int on_query_qp(const proto::Handle&, UniqueFd*, int, proto::QueryQpRep*, ReplyFds*);
  int on_destroy_qp(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_create_srq(const proto::CreateSrqReq&, UniqueFd*, int, proto::CreateSrqRep*, ReplyFds*);
  int on_modify_srq(const proto::ModifySrqReq&, UniqueFd*, int, proto::CreateSrqRep*, ReplyFds*);
  // Moves the SRQ to a region of `entries` slots, with its waiting receives.
  int move_srq_st(Srq* srq, uint32_t entries);
  static void attach_srq_region(Srq* srq);
  static void describe_srq(const Srq& srq, proto::CreateSrqRep* rep);
  int on_query_srq(const proto::Handle&, UniqueFd*, int, proto::QuerySrqRep*, ReplyFds*);
  int on_destroy_srq(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_create_ah(const proto::CreateAhReq&, UniqueFd*, int, proto::Handle*, ReplyFds*);
  int on_destroy_ah(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_get_direct_peer(const proto::Handle&, UniqueFd*, int, proto::DirectPeerRep*, ReplyFds*);
  int on_take_express(const proto::Handle&, UniqueFd*, int, proto::ExpressRep*, ReplyFds*);
  int on_get_peer_mr(const proto::PeerMrReq&, UniqueFd*, int, proto::PeerMrRep*, ReplyFds*);
  int on_register_container(const proto::RegisterContainerReq&, UniqueFd*, int,
                            proto::RegisterContainerRep*, ReplyFds*);
  int on_router_info(const proto::Empty&, UniqueFd*, int, proto::RouterInfoRep*, ReplyFds*);
  int on_dump_resources(const proto::Empty&, UniqueFd*, int, proto::DumpResourcesRep*, ReplyFds*);
  int on_unregister_container(const proto::UnregisterContainerReq&, UniqueFd*, int, proto::Empty*,
                              ReplyFds*);
  int on_hold_container(const proto::HoldContainerReq&, UniqueFd*, int,
                        proto::RegisterContainerRep*, ReplyFds*);
  int on_release_container(const proto::SandboxRef&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_held_container(const proto::SandboxRef&, UniqueFd*, int, proto::HeldContainerRep*,
                        ReplyFds*);

  int on_cm_open(const proto::CmOpenReq&, UniqueFd*, int, proto::CmOpenRep*, ReplyFds*);
  int on_cm_create_channel(const proto::Empty&, UniqueFd*, int, proto::Handle*, ReplyFds*);
  int on_cm_destroy_channel(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_create_id(const proto::CmCreateIdReq&, UniqueFd*, int, proto::Handle*, ReplyFds*);
  int on_cm_destroy_id(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_migrate_id(const proto::CmMigrateIdReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  std::unique_ptr<CmChannel> cm_channel_of(UniqueFd* fds, int nfds);
  int on_cm_restore_channel(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_resume(const proto::Empty&, UniqueFd*, int, proto::CmResumeRep*, ReplyFds*);
  int on_cm_bind(const proto::CmBindReq&, UniqueFd*, int, proto::CmAddrRep*, ReplyFds*);
  int on_cm_resolve_addr(const proto::CmResolveAddrReq&, UniqueFd*, int, proto::CmAddrRep*,
                         ReplyFds*);
  int on_cm_resolve_route(const proto::Handle&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_listen(const proto::CmListenReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_connect(const proto::CmConnectReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_accept(const proto::CmConnectReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_reject(const proto::CmRejectReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_establish(const proto::CmStepReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_disconnect(const proto::CmStepReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  int on_cm_set_option(const proto::CmSetOptionReq&, UniqueFd*, int, proto::Empty*, ReplyFds*);
  // Applies a connection step's QP transitions (proto::CmQpSteps) to the caller's QP.
  int apply_qp_steps(const proto::CmQpSteps& steps);
  // Session end: every id leaves (peers told), then every channel closes.
  void destroy_cm_state();

  void destroy_qp(std::unique_ptr<Qp> qp);
  void destroy_srq(std::unique_ptr<Srq> srq);

  Router* router_;
  UniqueFd sock_;
  pid_t pid_;
  uid_t uid_;
  Container* container_;
  bool hello_done_ = false;
  bool resumed_ = false;  // said Hello with resume: may restore objects
  PendingRestore restore_;
  bool cm_open_ = false;  // said CmOpen: counted in its container like a Hello
  ShmRegion page_;
  UniqueFd doorbell_;
  UniqueFd async_sock_;
  UniqueFd dump_;  // the last kDumpResources answer
  std::string registered_tenant_;
  std::string registered_name_;

  HandleTable<Pd> pds_;
  HandleTable<Xrcd> xrcds_;
  HandleTable<Mr> mrs_;
  HandleTable<Mw> mws_;
  HandleTable<CompChannel> channels_;
  HandleTable<Cq> cqs_;
  HandleTable<Srq> srqs_;
  HandleTable<Ah> ahs_;
  SessionQps qps_;
  HandleTable<OpenedQp> opened_qps_{proto::kOpenedQpBit | 1};
  ShmRegionPool spare_qp_regions_;  // of this session's destroyed QPs
  HandleTable<CmChannel> cm_channels_;
  HandleTable<CmId> cm_ids_;

  friend class Router;
};

}  // namespace wharf::router
