// wharfd's core: one thread runs an event loop that serves control requests from verbs
// libraries (unix SOCK_SEQPACKET), executes work requests from their shared-memory rings,
// and sleeps when idle (woken by a doorbell eventfd only if it announced its sleep).
//
// Threading: everything here runs on the single router thread; nothing is locked.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/unique_fd.h"
#include "router/cm_manager.h"
#include "router/objects.h"
#include "router/qps_by_number.h"
#include "router/session.h"
#include "router/xrc_domain.h"

namespace wharf::router {

struct RouterConfig {
  std::string socket_path;
  uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  uint64_t spin_ns = 200000;  // keep polling this long after the last work before sleeping
  uint64_t node_guid = 0;     // 0: derived from the socket path
  // RC QPs connected on this host execute their sends in the library (router/direct_path.cc).
  bool direct_path = true;
  // RC QPs connected to QPs on other hosts move their small SENDs over express lines between
  // the two libraries (router/express.h).
  bool express = false;
  // At most this many express lines at once (each a TCP connection, and in the library a
  // descriptor and buffers): QPs beyond it go through the routers, which share a few
  // connections per host pair however many QPs there are (SRC's state bound).
  uint32_t express_lines = 256;
  // LIDs this router hands out: [lid_base, lid_base + lid_count), within the unicast range
  // 1..0xbfff. Routers of one cluster get disjoint ranges (wharf-lab: 1024 per host).
  uint16_t lid_base = 1;
  uint16_t lid_count = 0xbfff;
  // Host-to-host: the cluster file (links/cluster.h) and this host's name in it; empty:
  // this router serves only its own host.
  std::string cluster_file;
  std::string host_name;
  // The watchdog: an RC QP whose peer has refused its work (RNR NAKs, rnr_retry = 7, i.e.
  // forever) this long without any progress is moved to ERR, so it stops holding the shared
  // host link (its probes) and the router's timers. 0: never.
  uint64_t watchdog_ns = 60'000'000'000;
  // rdma_cm: how long a handshake waits for the peer's next step (the REP after a REQ, the
  // RTU after a REP, a SIDR REP) or another host's router for an address, before failing
  // with -ETIMEDOUT, as the IB CM does when its retries run out (about a minute).
  uint64_t cm_timeout_ns = 60'000'000'000;
};

// What the router counts; logged on SIGUSR1 (wharfd) and read by tests.
struct RouterCounters {
  uint64_t watchdog_isolations = 0;  // QPs the watchdog moved to ERR
  uint64_t peer_qps_failed = 0;      // QPs failed because their peer router died or restarted
  uint64_t rnr_naks_received = 0;    // from other hosts
};

class RemotePath;

class Router {
 public:
  explicit Router(RouterConfig cfg);
  ~Router();

  // Binds the socket. Returns 0 or an errno (logged).
  int start();
  // Runs until stop() or SIGTERM/SIGINT (when handle_signals was set; SIGUSR1 then logs the
  // counters).
  void run(bool handle_signals);
  // Asks run() to return. Thread-safe and async-signal-safe.
  void stop();
  // Runs fn on the router thread between two control polls, soon. Thread-safe: how other
  // threads (the orchestrator's watch) change what the router holds.
  void post(std::function<void()> fn);

  const RouterConfig& config() const { return cfg_; }
  RouterCounters& counters() { return counters_; }
  // A short message between local QPs ran at `now`: long copies go in smaller parts a while.
  void saw_short_work(uint64_t now) { short_work_ns_ = now; }
  uint64_t short_work_ns() const { return short_work_ns_; }

  // ---- Registries shared by sessions (router thread only) ----
  // The container of a network namespace, made (anonymous) on first use with LID `lid` (0:
  // one the router picks); nullptr when no LID is free for a new one.
  Container* container_for_netns(uint64_t netns_ino, uint16_t lid = 0);
  // tenant, network: the container's at the orchestrator, "" without one. want_lid: the LID
  // the orchestrator gave it, 0: the router picks one; *lid is the LID it has. Errors:
  // EEXIST when the tenant has a container of that name here, or the network a container
  // with that vIP (two networks may each have a container with one address, as at the
  // orchestrator); ERANGE when want_lid is outside this router's range; EADDRINUSE when
  // another container has it; EBUSY when the namespace's applications already have another.
  int register_container(const std::string& tenant, const std::string& network,
                         const std::string& name, uint64_t netns_ino, uint32_t vip,
                         uint16_t want_lid, uint16_t* lid);
  void unregister_container(const std::string& tenant, const std::string& name);
  void release_container(Container* c);
  Container* container_by_lid(uint16_t lid);
  // The registered container of virtual network tenant/network that holds vIP `vip` (host
  // order), or nullptr.
  const Container* container_with_vip(uint32_t vip, const std::string& tenant,
                                      const std::string& network) const;
  // This router's number for virtual network tenant/network (never 0), made on first use and
  // then announced to the other hosts' routers, which put it in their packets to this host
  // (router/remote.h, "Isolation between hosts").
  uint32_t network_id_st(const std::string& tenant, const std::string& network);
  // The orchestrator placed the container of virtual network tenant/network with vIP `vip`
  // on `host` ("": it was deleted): RDMA to its address from this network goes to that
  // host's router (RemotePath::host_for). Nothing without a cluster.
  void set_placement_st(const std::string& tenant, const std::string& network, uint32_t vip,
                        const std::string& host);
  // Calls f(tenant, network, id) for every network numbered so far.
  template <class F>
  void for_each_network(F&& f) const {
    for (const auto& [key, id] : network_ids_) f(key.first, key.second, id);
  }

  // ---- UD multicast groups (router/multicast.cc) ----
  // A QP's membership of group mgid/mlid. Groups are scoped by the member's virtual network.
  struct McastMember {
    proto::Gid mgid{};
    uint16_t mlid = 0;
    Qp* qp = nullptr;
  };
  // ibv_attach_mcast: 0 (also when already attached), EINVAL (not a UD QP, not a multicast
  // GID, or on InfiniBand not a multicast LID), ENOMEM (the QP's or the router's limit).
  int attach_mcast_st(Qp* qp, const proto::Gid& mgid, uint16_t mlid);
  // ibv_detach_mcast: 0, or EINVAL when qp is not attached to it.
  int detach_mcast_st(Qp* qp, const proto::Gid& mgid, uint16_t mlid);
  void forget_mcast_st(Qp* qp);  // a QP's memberships go with it
  const std::vector<McastMember>& mcast_members() const { return mcast_; }

  // ---- Flow steering of RAW_PACKET QPs (router/flow_steering.cc) ----
  // A rule of ibv_create_flow: frames sent by RAW_PACKET QPs of the owner's virtual network
  // that match it (or all of them, for a sniffer) go to qp.
  struct FlowRule {
    uint32_t handle = 0;  // router-wide
    Qp* qp = nullptr;
    bool sniffer = false;
    proto::FlowMatch match;
  };
  // ibv_create_flow: 0 and *handle, EINVAL (not a RAW_PACKET QP, an unknown type or an
  // inconsistent match), ENOMEM (the QP's or the router's limit).
  int create_flow_st(Qp* qp, uint32_t type, const proto::FlowMatch& match, uint32_t* handle);
  // ibv_destroy_flow of a rule on a QP of `owner`: 0 or EINVAL.
  int destroy_flow_st(const Session* owner, uint32_t handle);
  bool has_flows(const Qp* qp) const;
  void forget_flows_st(Qp* qp);  // a QP's rules go with it
  const std::vector<FlowRule>& flows() const { return flows_; }

  // ---- rdma_cm (router/cm_manager.h) ----
  CmManager& cm() { return cm_; }
  // Has the loop write ch's held-back events once its socket has room (EPOLLOUT), and stop.
  void watch_cm_channel_st(CmChannel* ch);
  void unwatch_cm_channel_st(CmChannel* ch);

  // Gives qp a number no other QP of this host has (qp->qpn; router/qps_by_number.h says
  // which); false when the host has QpsByNumber::kMaxQps QPs.
  bool allocate_qpn(Qp* qp);
  void release_qpn(uint32_t qpn);
  Qp* qp_by_qpn(uint32_t qpn) const { return qps_.find(qpn); }
  // Calls f(qp) for every QP of this router; f must not create or destroy QPs.
  template <class F>
  void for_each_qp(F&& f) const {
    qps_.for_each(f);
  }
  // A new key naming mr (nullptr: reserved for a memory window, naming nothing yet).
  uint32_t allocate_key(Mr* mr);
  void release_key(uint32_t key);
  // Key `key` names `mr` from now on (a re-registration keeps its keys).
  void rebind_key(uint32_t key, Mr* mr) { keys_[key] = mr; }
  // Whether `key` is taken: a registration's, a window's binding, or reserved for a window.
  bool key_in_use(uint32_t key) const { return keys_.count(key) != 0; }
  Mr* mr_by_key(uint32_t key) const {
    auto it = keys_.find(key);
    return it == keys_.end() ? nullptr : it->second;
  }
  // A number for srq, by which XRC initiators name it (ibv_get_srq_num).
  uint32_t allocate_srqn(Srq* srq);
  void release_srqn(uint32_t srqn) { srqs_.erase(srqn); }
  Srq* srq_by_srqn(uint32_t srqn) const {
    auto it = srqs_.find(srqn);
    return it == srqs_.end() ? nullptr : it->second;
  }
  XrcDomains& xrc_domains() { return xrc_domains_; }

  // Every QP, CQ, MR and PD with its owner, as JSON (router/resources.cc).
  std::string describe_resources_st() const;

  // ---- Policies (router/policy.cc) ----
  // The orchestrator's policy for container tenant/name: applied now if it is registered
  // here, else when it registers. A default policy lifts every limit.
  void set_policy_st(const std::string& tenant, const std::string& name, const ContainerPolicy& p);
  // 0, or EDQUOT if c holding `amount` more of `kind` (having given up `released` of it)
  // would exceed its quota.
  int check_quota_st(const Container* c, QuotaKind kind, uint64_t amount,
                     uint64_t released = 0) const;
  // Whether qp's next message of `bytes` may go now under its and its container's rate
  // limits; charges them if so, else sets its work's paced_until_ns.
  bool admit_st(Qp* qp, uint64_t bytes, uint64_t now);
  // (Re)computes qp's own limit from its container's policy and its application's rate_limit
  // and app_burst_bytes: after either changes, and for a new QP. A bucket that was limited
  // keeps its debt (TokenBucket::retune).
  void configure_qp_rate_st(Qp* qp, uint64_t now);
  // Gives container c policy p (set_policy_st does so for the registered containers it
  // names). Public for tests.
  void apply_policy_st(Container* c, const ContainerPolicy& p);

  // The data path serves qp's queues (it is in RTS or ERR) and looks at them in the next
  // pass; again for a QP already served: the router gave it work. After that pass it looks
  // at qp while qp has work of its own (busy_) and whenever its library marks it posted.
  void activate(Qp* qp);
  void deactivate(Qp* qp);
  // qp's work under way (router/qp_work.h), taken from the pool now if it has none: only
  // for a QP in busy_, which keeps it until it leaves busy_.
  QpWork& work_st(Qp* qp) {
    if (qp->work_under_way == nullptr) qp->work_under_way = work_pool_.get();
    return *qp->work_under_way;
  }
  // How many QPs hold a record of work under way. For tests.
  size_t qps_with_work() const { return work_pool_.in_use(); }

  // ---- Direct intra-host path (router/direct_path.cc) ----
  // Re-decides, after any change to qp, whether qp and the QP it is connected to may execute
  // their sends themselves; a QP whose line stays On gets a new generation (its library
  // re-reads the peer's description).
  void refresh_direct_st(Qp* qp);
  // Turns qp's line Off, first waiting (bounded) for a work request its library executes.
  void disable_direct_st(Qp* qp, bool wait_for_library = true);
  // The QP qp executes into while its line is On, else nullptr.
  Qp* direct_peer_st(const Qp* qp) const;
  // After a registration went away: tells every library to drop its cached keys and waits
  // (bounded) until no work request that might still use one is executing.
  void retire_mr_st();

  RemotePath* remote() const { return remote_.get(); }

  // ---- Completion events (router/cq_events.cc) ----
  // The QPs whose completions go to cq: its own send completions, or (for the QPs whose
  // receive CQ it is) the peer each is connected to on this host, which may write them on
  // the direct path.
  std::vector<Qp*> cq_writers_st(const Cq* cq) const;
  // Raises cq's completion event for an entry it is armed for, now or, when the CQ is
  // moderated (ibv_modify_cq), once its count or period is reached.
  void raise_cq_event_st(Cq* cq, bool solicited, bool success);
  // Raises the moderated events whose period has run out by `now`.
  void raise_due_cq_events_st(uint64_t now);
  // When the next held event falls due (UINT64_MAX: none).
  uint64_t next_cq_event_due() const;
  // cq is going away: forget its held event.
  void drop_held_cq_st(Cq* cq);
  // Raises cq's held event now (if it is still armed) and starts its count again.
  void raise_held_cq_event_st(Cq* cq);

  // ---- Data path (router thread) ----
  // Executes pending work on the active QPs that have any (marked posted, activated, or
  // busy with their own), and (with_links) moves what the host links have. Returns true if
  // anything was done.
  bool poll_datapath_st(bool with_links = true);
  // How many active QPs the next pass looks at (busy_). For tests.
  size_t busy_qps() const { return busy_.size(); }
  // Turns of the router's loop so far (any thread may read it). For tests: a router with
  // nothing to do turns only when woken.
  uint64_t loop_turns() const { return loop_turns_.load(std::memory_order_relaxed); }

 private:
  // Announces sleep, re-polls, then blocks for control input, a doorbell or the next retry
  // deadline; never blocks once a stop was requested. Returns true if it found work.
  // Public for tests.
 public:
  bool sleep_until_work();
  // How long sleep_until_work may block, in ms (-1: until input): until the first retry,
  // pacing, rdma_cm or moderation deadline. Public for tests.
  int sleep_timeout_ms(uint64_t now) const;
  // Serves ready control input (new sessions, requests, signals, stop); waits up to
  // timeout_ms (-1: forever) for some. True if a library connected or sent a request.
  // Public for tests.
  bool poll_control(int timeout_ms);

 private:
  void accept_sessions();
  // Activates again every QP its library marked posted since the last call.
  void take_posted_st();
  // Whether qp needs another pass although its library marks nothing: its head WQE waits
  // (RNR, a missing peer, pacing), a long copy is under way, or its send ring holds work.
  static bool has_own_work_st(Qp* qp, uint64_t now);
  // Marks qp out of busy_ (the caller takes it out) and gives back its work under way.
  void drop_busy_st(Qp* qp);
  void close_session(int fd);
  void handle_session_input(Session* s);
  uint16_t allocate_lid();  // 0 when the range is exhausted
  void run_posted();
  int start_remote();
  bool direct_eligible_st(const Qp* qp) const;
  void set_direct_st(Qp* qp, bool on);
  // Waits while qp's library is Busy; false if it stayed Busy past the bound.
  bool wait_direct_idle_st(Qp* qp);

  RouterConfig cfg_;
  RouterCounters counters_;
  UniqueFd listen_;
  UniqueFd epoll_;
  UniqueFd signal_;
  UniqueFd wake_;  // eventfd written by stop()
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> loop_turns_{0};  // written by the router thread alone
  std::mutex posted_mu_;                 // guards posted_ (control path only)
  std::vector<std::function<void()>> posted_;
  std::map<std::string, ContainerPolicy> policies_;  // by "tenant/name", from the orchestrator
  std::map<std::pair<std::string, std::string>, uint32_t> network_ids_;  // (tenant, network)

  QpWorkPool work_pool_;  // before sessions_: their QPs hold its records
  std::unordered_map<int, std::unique_ptr<Session>> sessions_;
  std::unordered_map<uint64_t, std::unique_ptr<Container>> containers_;  // by netns inode
  QpsByNumber qps_;
  std::unordered_map<uint32_t, Mr*> keys_;   // by lkey/rkey
  std::unordered_map<uint32_t, Srq*> srqs_;  // by SRQ number
  XrcDomains xrc_domains_;
  // The active QPs the next pass looks at: marked posted by their library, activated, or
  // with work of their own (has_own_work_st); an idle QP costs a pass nothing.
  std::vector<Qp*> busy_;
  std::vector<McastMember> mcast_;
  std::vector<FlowRule> flows_;
  uint32_t next_flow_handle_ = 1;
  uint64_t last_request_ns_ = 0;  // when poll_control last served a library
  uint64_t short_work_ns_ = 0;    // saw_short_work
  bool last_pass_busy_ = false;   // the last full data-path pass did work (RemotePath::poll_st)
  bool express_input_ = false;    // the express broker's fd was readable (poll_control)
  uint64_t pass_ = 0;             // data-path passes so far: where the next one starts in busy_
  std::vector<Qp*> direct_;       // QPs whose direct line is On
  std::vector<Cq*> held_cqs_;     // moderated CQs holding back an event
  std::unique_ptr<RemotePath> remote_;
  CmManager cm_{this};
  std::unordered_map<int, CmChannel*> watched_cm_channels_;  // by fd
  uint32_t mr_epoch_ = 0;
  uint32_t next_lid_step_ = 0;  // where the search for a free LID starts, down from the top
  uint32_t next_key_index_ = 1;
  uint32_t next_srqn_ = 1;
  uint64_t rng_state_;
};

}  // namespace wharf::router
