// wharfd's core: one thread runs an event loop that serves control requests from verbs
// libraries (unix SOCK_SEQPACKET), executes work requests from their shared-memory rings,
// and sleeps when idle (woken by a doorbell eventfd only if it announced its sleep).
//
// Threading: everything here runs on the single router thread; nothing is locked.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/unique_fd.h"
#include "router/cm_manager.h"
#include "router/direct_lines.h"
#include "router/executor.h"
#include "router/flow_rules.h"
#include "router/host_objects.h"
#include "router/kept_accounting.h"
#include "router/multicast_groups.h"
#include "router/network_numbers.h"
#include "router/objects.h"
#include "router/resume_key.h"
#include "router/router_config.h"
#include "router/scheduler.h"
#include "router/session.h"
#include "router/xrc_domain.h"

namespace wharf::router {

class RemotePath;

// A CmEnvironment to its connection manager (router/cm_manager.h).
class Router final : private CmEnvironment {
 public:
  explicit Router(RouterConfig cfg);
  ~Router() override;

  // Binds the socket. Returns 0 or an errno (logged).
  int start();
  // Runs until stop() or SIGTERM/SIGINT (when handle_signals was set; SIGUSR1 then logs the
  // counters).
  void run(bool handle_signals);
  // Asks run() to return. Thread-safe and async-signal-safe.
  void stop();

  // ---- Upgrades in place (wharfd --upgrade, issue #23) ----
  // run() returned for SIGUSR2: the caller executes the router's binary again, handing the
  // new process listen_fd() under kInheritedListenEnv (which start() then adopts); nothing is
  // torn down first, so each library resumes its session as after a crash. If that fails,
  // continue_serving() and run() again.
  bool upgrade_requested() const { return upgrade_requested_; }
  int listen_fd() const { return listen_.get(); }
  void continue_serving() {
    upgrade_requested_ = false;
    stopping_ = false;
  }
  static constexpr const char* kInheritedListenEnv = "WHARF_LISTEN_FD";
  // Runs fn on the router thread between two control polls, soon. Thread-safe: how other
  // threads (the orchestrator's watch) change what the router holds.
  void post(std::function<void()> fn);
  // Runs fn on the router thread (post) and waits at most `wait` for what it returns; nullopt
  // when that did not come in time (a router busy that long, or stopping). Thread-safe; never
  // from the router thread.
  template <class T>
  std::optional<T> ask(std::function<T()> fn, std::chrono::milliseconds wait) {
    auto promise = std::make_shared<std::promise<T>>();
    std::future<T> result = promise->get_future();
    post([fn = std::move(fn), promise] { promise->set_value(fn()); });
    if (result.wait_for(wait) != std::future_status::ready) return std::nullopt;
    return result.get();
  }

  const RouterConfig& config() const { return cfg_; }
  RouterCounters& counters() { return counters_; }
  const RouterCounters& counters() const { return counters_; }

  // ---- The parts the data paths work with (router/executor.h, PathContext) ----
  HostObjects& objects() { return objects_; }
  const HostObjects& objects() const { return objects_; }
  Scheduler& scheduler() { return scheduler_; }
  DirectLines& direct() { return direct_; }
  MulticastGroups& multicast() { return multicast_; }
  FlowRules& flows() { return flows_; }
  const PathContext& paths() const { return paths_; }

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
  // A registration for a runtime's sandbox that lasts until release_held_container names the
  // sandbox again, whatever the session that asked: as register_container, keeping `netns`
  // (the namespace of inode netns_ino); EEXIST also when the sandbox holds one already.
  int hold_container(const std::string& sandbox, const std::string& tenant,
                     const std::string& network, const std::string& name, UniqueFd netns,
                     uint64_t netns_ino, uint32_t vip, uint16_t want_lid, uint16_t* lid);
  // ENOENT when the sandbox holds none.
  int release_held_container(const std::string& sandbox);
  // The container the sandbox holds, or nullptr.
  const Container* held_container(const std::string& sandbox) const;
  void release_container(Container* c);
  // Tells the RNIC emulator (match=sequential) how many match rules this router holds: one
  // per registered container and one per flow-steering rule. Called after either changes.
  void match_rules_changed_st();
  Container* container_by_lid(uint16_t lid);
  // The registered container of virtual network tenant/network that holds vIP `vip` (host
  // order), or nullptr.
  const Container* container_with_vip(uint32_t vip, const std::string& tenant,
                                      const std::string& network) const override;
  // This router's number for virtual network tenant/network (router/network_numbers.h).
  uint32_t network_id_st(const std::string& tenant, const std::string& network) {
    return networks_.number(tenant, network);
  }
  // The orchestrator placed the container of virtual network tenant/network with vIP `vip`
  // on `host` ("": it was deleted): RDMA to its address from this network goes to that
  // host's router (RemotePath::host_for). Nothing without a cluster.
  void set_placement_st(const std::string& tenant, const std::string& network, uint32_t vip,
                        const std::string& host);

  // ---- rdma_cm (router/cm_manager.h) ----
  CmManager& cm() { return cm_; }
  // Has the loop write ch's held-back events once its socket has room (EPOLLOUT), and stop.
  void watch_cm_channel_st(CmChannel* ch) override;
  void unwatch_cm_channel_st(CmChannel* ch);

  XrcDomains& xrc_domains() { return xrc_domains_; }

  // Every QP, CQ, MR and PD with its owner, as JSON (router/resources.cc).
  std::string describe_resources_st() const;
  // What the host reports to the orchestrator (control/host_reports.h): Pingmesh's rows as
  // `wharfctl pingmesh show -j` prints them and each live container's usage and quotas.
  std::string describe_report_st() const;
  // What a container here moved (its live QPs and the ones it destroyed) and what it holds,
  // by quota kind (QuotaKind; MR bytes as charged): `wharfctl statistic show` and /metrics.
  struct ContainerUsage {
    std::string tenant, network, name;
    const Container* live = nullptr;  // nullptr: it has gone
    Traffic traffic;
    std::array<uint64_t, kQuotaKinds> held{};
  };
  // The containers here; with `departed`, also those gone within the last kDepartedNs, so
  // that what a short-lived container moved reaches /metrics: a gone container's traffic is
  // added to a live one's of the same tenant, network and name (its counters go on from
  // there), else it is listed on its own, holding nothing.
  std::vector<ContainerUsage> container_usage_st(bool departed) const;
  // Writes what c holds of its counters (Container::retired, throttled_ns) for the next
  // router process (router/kept_accounting.h): after a QP of its retires.
  void keep_accounting_st(Container* c);
  // What each live QP moved, with its container (--metrics-per-qp).
  struct QpUsage {
    const Container* container;
    uint32_t qpn;
    const char* type;  // as `rdma res show qp` names it: "RC", "UD", ...
    Traffic traffic;
  };
  std::vector<QpUsage> qp_usage_st() const;
  static constexpr uint64_t kDepartedNs = 300'000'000'000;  // 5 min: several scrapes
  static constexpr size_t kDepartedKept = 1024;             // the newest, at most

  // ---- Policies (router/policy.cc) ----
  // The orchestrator's policy for container tenant/name: applied now if it is registered
  // here, else when it registers. A default policy lifts every limit.
  void set_policy_st(const std::string& tenant, const std::string& name, const ContainerPolicy& p);
  // 0, or EDQUOT if c holding `amount` more of `kind` (having given up `released` of it)
  // would exceed its quota.
  int check_quota_st(const Container* c, QuotaKind kind, uint64_t amount,
                     uint64_t released = 0) const;
  // (Re)computes qp's own limit from its container's policy and its application's rate_limit
  // and app_burst_bytes: after either changes, and for a new QP. A bucket that was limited
  // keeps its debt (TokenBucket::retune).
  void configure_qp_rate_st(Qp* qp, uint64_t now);
  // Gives container c policy p (set_policy_st does so for the registered containers it
  // names). Public for tests.
  void apply_policy_st(Container* c, const ContainerPolicy& p);

  // After a registration went away: tells every library to drop its cached keys and waits
  // (bounded) until no work request that might still use one is executing
  // (DirectLines::wait_out_retired_keys).
  void retire_mr_st();

  RemotePath* remote() const { return remote_.get(); }

  // ---- Resumed sessions (router/resume_key.h) ----
  const ResumeKey& resume_key() const { return resume_key_; }
  // A resumed session's container c keeps the LID `lid` it had: 0 when it has it (or lid is
  // 0), or when c is a container no session has said Hello in yet, not registered, and the
  // LID is this router's and free (it then takes it); else EADDRINUSE.
  int keep_lid_st(Container* c, uint16_t lid);
  // Whether `lid` is free for the container of namespace netns_ino: unused, its own, or held
  // by a container no session said Hello in yet and not registered, which is then given
  // another.
  bool free_lid_st(uint16_t lid, uint64_t netns_ino);

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
  // Turns of the router's loop so far (any thread may read it). For tests: a router with
  // nothing to do turns only when woken.
  uint64_t loop_turns() const { return loop_turns_.load(std::memory_order_relaxed); }
  // The time the loop's data-path passes did work, since start; and the share of the last
  // full second (or longer sleep) they did (router thread; wharf_router_busy_*).
  uint64_t busy_ns() const { return busy_ns_; }
  double busy_ratio() const { return busy_ratio_; }

 private:
  // Announces sleep, re-polls, then blocks for control input, a doorbell or timeout_ms (the
  // next deadline, next_wake_st's; -1: none); never blocks once a stop was requested. Returns
  // true if it found work. Public for tests.
 public:
  bool sleep_until_work(int timeout_ms);
  // The loop's next wake-up. Public for tests.
  struct WakePlan {
    // How long sleep_until_work may block, in ms (-1: until input): until the first retry,
    // pacing, rdma_cm or moderation deadline.
    int timeout_ms = -1;
    // A paced QP may send again within a couple of milliseconds: the loop then spins
    // (yielding) instead of sleeping, so a rate limit is kept to the microsecond.
    bool pacing_soon = false;
  };
  WakePlan next_wake_st(uint64_t now) const;
  // Serves ready control input (new sessions, requests, signals, stop); waits up to
  // timeout_ms (-1: forever) for some. True if a library connected or sent a request.
  // Public for tests.
  bool poll_control(int timeout_ms);
  // Session s said Hello: from now on the data path watches its context page's posted marks.
  void watch_context_page_st(Session* s) { paged_sessions_.push_back(s); }
  // How many context pages the data path watches (router thread; tests).
  size_t watched_context_pages_st() const { return paged_sessions_.size(); }
  // Whether qp needs another pass although its library marks nothing: its head WQE waits
  // (RNR, a missing peer, pacing), a long copy is under way, or its send ring holds work.
  // Public for tests that run passes of their own.
  static bool has_own_work_st(Qp* qp, uint64_t now);

 private:
  // What session s holds of `kind`: how quotas and usage count (one rule for both).
  static uint64_t held_st(const Session& s, QuotaKind kind);
  void accept_sessions();
  // start()'s two ways to the listening socket: the one an upgraded router left open, or a
  // new one bound at the socket path (0 or an errno).
  bool adopt_inherited_listener();
  int listen_on_socket();
  // Where listen_on_socket binds (then renames the socket to socket_path).
  std::string staging_path() const { return cfg_.socket_path + ".new"; }
  // Activates again every QP its library marked posted since the last call.
  void take_posted_st();
  void close_session(int fd);
  void handle_session_input(Session* s);
  uint16_t allocate_lid();  // 0 when the range is exhausted
  void run_posted();
  int start_remote();
  // CmEnvironment: MADs to other hosts go on the host-to-host engine's links.
  int cm_host_for(const proto::AhAttr& ah, const Container* from) const override;
  bool send_cm_st(int host, const proto::CmMad& m) override;
  bool cm_host_known(int host) const override;

  RouterConfig cfg_;
  RouterCounters counters_;
  ResumeKey resume_key_;
  UniqueFd listen_;
  UniqueFd epoll_;
  UniqueFd signal_;
  UniqueFd wake_;  // eventfd written by stop()
  std::atomic<bool> stopping_{false};
  bool upgrade_requested_ = false;
  std::atomic<uint64_t> loop_turns_{0};  // written by the router thread alone
  uint64_t busy_ns_ = 0;
  double busy_ratio_ = 0;
  uint64_t ratio_since_ns_ = 0;       // the start of the second busy_ratio_ is being taken over
  uint64_t ratio_busy_at_start_ = 0;  // busy_ns_ then
  std::mutex posted_mu_;              // guards posted_ (control path only)
  std::vector<std::function<void()>> posted_;
  std::map<std::string, ContainerPolicy> policies_;  // by "tenant/name", from the orchestrator
  NetworkNumbers networks_;

  // The tables below find what sessions own; they are declared first, so they outlive the
  // sessions, whose QPs leave them as they go.
  HostObjects objects_;
  Scheduler scheduler_;
  DirectLines direct_;
  MulticastGroups multicast_;
  FlowRules flows_;
  std::unique_ptr<emulator::RnicEmulator> emulator_;  // with --emulate only
  PathContext paths_;
  std::unordered_map<int, std::unique_ptr<Session>> sessions_;
  // The sessions with a context page (Hello'd), which every data-path pass looks at: a
  // contiguous list, not every connection (wharf-scala found 1,000 registration sessions,
  // which never post, taking 40% of the router thread when each pass walked them all).
  std::vector<Session*> paged_sessions_;
  std::unordered_map<uint64_t, std::unique_ptr<Container>> containers_;  // by netns inode
  // Containers gone, oldest first: what they moved and when they went (container_usage_st).
  struct Departed {
    std::string tenant, network, name;
    Traffic traffic;
    uint64_t gone_ns = 0;
  };
  std::deque<Departed> departed_;
  // Takes container `it` out of containers_, keeping what it moved in departed_.
  void forget_container(decltype(containers_)::iterator it);
  // Lists what a container moved among the departed ones.
  void add_departed(const std::string& tenant, const std::string& network, const std::string& name,
                    const Traffic& moved);
  // Containers' accounting for the next process (router/kept_accounting.h).
  KeptAccounting kept_accounting_;
  // Gives new container c what the previous process kept for its namespace.
  void resume_accounting_st(Container* c);
  // Once a second: writes the records of containers whose throttled time grew, and lists
  // records no container claimed in time as departed.
  void keep_accounting_periodically_st(uint64_t now);
  // Writes the records of containers whose rate-limit waiting grew since theirs was written.
  void keep_grown_throttling_st();
  XrcDomains xrc_domains_;
  uint64_t last_request_ns_ = 0;  // when poll_control last served a library
  bool last_pass_busy_ = false;   // the last full data-path pass did work (RemotePath::poll_st)
  bool express_input_ = false;    // the express broker's fd was readable (poll_control)
  std::vector<Cq*> held_cqs_;     // moderated CQs holding back an event
  std::unique_ptr<RemotePath> remote_;
  CmManager cm_{cfg_, objects_, *this};
  std::unordered_map<int, CmChannel*> watched_cm_channels_;  // by fd
  uint32_t next_lid_step_ = 0;  // where the search for a free LID starts, down from the top
};

}  // namespace wharf::router
