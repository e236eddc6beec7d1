#include "router/router.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/clock.h"
#include "common/ipv4.h"
#include "proto/datagram.h"
#include "proto/messages.h"
#include "proto/vip_gid.h"
#include "router/remote.h"
#include "shm/posted_marks.h"

namespace wharf::router {
namespace {

// epoll user data: sessions by fd (< 2^32); other fds get distinct tag bits above that.
constexpr uint64_t kTagListen = 1ull << 40;
constexpr uint64_t kTagSignal = 1ull << 41;
constexpr uint64_t kTagWake = 1ull << 42;
constexpr uint64_t kTagDoorbell = 1ull << 43;  // | fd
constexpr uint64_t kTagLinks = 1ull << 44;
constexpr uint64_t kTagCmChannel = 1ull << 45;  // | fd
constexpr uint64_t kTagExpress = 1ull << 46;
constexpr uint64_t kFdMask = 0xffffffffull;

// Link-local GID for processes outside any registered container: fe80::<guid>:<lid>.
proto::Gid gid_link_local(uint64_t guid, uint16_t lid) {
  proto::Gid g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  for (int i = 0; i < 6; ++i) g[8 + i] = static_cast<uint8_t>(guid >> (8 * (5 - i)));
  g[14] = static_cast<uint8_t>(lid >> 8);
  g[15] = static_cast<uint8_t>(lid);
  return g;
}

uint64_t netns_of_pid(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/ns/net", static_cast<int>(pid));
  struct stat st;
  return stat(path, &st) == 0 ? st.st_ino : 0;
}

}  // namespace

Router::Router(RouterConfig cfg)
    : cfg_(std::move(cfg)),
      direct_(objects_, cfg_.direct_path, cfg_.link_layer),
      multicast_(cfg_.link_layer),
      emulator_(cfg_.emulate.enabled() ? std::make_unique<emulator::RnicEmulator>(cfg_.emulate)
                                       : nullptr),
      paths_{objects_, scheduler_,      direct_, multicast_,
             flows_,   cfg_.link_layer, nullptr, emulator_.get()} {
  if (cfg_.node_guid == 0)
    cfg_.node_guid = (std::hash<std::string>{}(cfg_.socket_path) & 0x0000ffffffffffffull) |
                     0x0200000000000000ull;
}

Router::~Router() {
  // Sessions destroy their QPs next: none is looked at any more.
  scheduler_.clear();
  // Their rdma_cm ids stay for the next process, as their QPs do in their libraries, and so
  // does what their containers moved (the QPs' share in the QPs' regions).
  cm_.detach_st();
  keep_grown_throttling_st();
  kept_accounting_.close();
  // One at a time, each out of the table before it ends: a session's end looks at the others
  // (a registration it held going away is told to every session's page: retire_mr_st).
  while (!sessions_.empty()) sessions_.erase(sessions_.begin());
  remote_.reset();
  if (listen_.valid()) unlink(cfg_.socket_path.c_str());
}

// The listening socket a router that re-executed itself for an upgrade left open for this
// one (WHARF_LISTEN_FD; main.cc): connections made meanwhile wait in its backlog, so no
// library finds the socket refused. False (the variable ignored) when it names no listening
// socket bound where listen_on_socket binds this router's.
bool Router::adopt_inherited_listener() {
  const char* inherited = getenv(kInheritedListenEnv);
  if (inherited == nullptr) return false;
  char* end = nullptr;
  const long fd = strtol(inherited, &end, 10);
  unsetenv(kInheritedListenEnv);  // not for this router's children
  int listening = 0;
  socklen_t len = sizeof(listening);
  sockaddr_un addr{};
  socklen_t alen = sizeof(addr);
  if (end == inherited || *end != '\0' || fd < 0 || fd > INT32_MAX ||
      getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 ||
      listening == 0 ||
      getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &alen) != 0 ||
      addr.sun_family != AF_UNIX || staging_path() != addr.sun_path) {
    spdlog::warn("{}={} is not a socket listening at {}: listening afresh", kInheritedListenEnv,
                 inherited, cfg_.socket_path);
    return false;
  }
  listen_.reset(static_cast<int>(fd));
  const int flags = fcntl(listen_.get(), F_GETFD);
  fcntl(listen_.get(), F_SETFD, flags | FD_CLOEXEC);
  fcntl(listen_.get(), F_SETFL, fcntl(listen_.get(), F_GETFL) | O_NONBLOCK);
  spdlog::info("upgraded: serving the socket the previous router listened on");
  return true;
}

int Router::listen_on_socket() {
  // The socket is bound under a temporary name and renamed into place once it listens: a
  // client that sees the path can always connect (no refused connection between bind and
  // listen).
  const std::string staging = staging_path();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (staging.size() >= sizeof(addr.sun_path)) {
    spdlog::error("socket path too long: {}", cfg_.socket_path);
    return ENAMETOOLONG;
  }
  std::strcpy(addr.sun_path, staging.c_str());
  listen_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listen_.valid()) return errno;
  unlink(staging.c_str());
  if (bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_.get(), 128) != 0 ||
      // Applications connect as their user: root, or a member of the socket's group.
      (cfg_.socket_gid >= 0 &&
       chown(staging.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(cfg_.socket_gid)) != 0) ||
      chmod(staging.c_str(), 0660) != 0 || rename(staging.c_str(), cfg_.socket_path.c_str()) != 0) {
    int err = errno;
    spdlog::error("cannot listen on {}: {}", cfg_.socket_path, strerror(err));
    unlink(staging.c_str());
    listen_.reset();
    return err;
  }
  return 0;
}

int Router::start() {
  if (int err = kept_accounting_.open(cfg_.kept_accounting_path); err != 0)
    spdlog::warn("{}: {}; containers' accounting will not outlive this process",
                 cfg_.kept_accounting_path, strerror(err));
  if (!cfg_.resume_key_path.empty()) {
    if (int err = resume_key_.load_or_create(cfg_.resume_key_path); err != 0)
      spdlog::warn("resume key {}: {}; applications' objects end with this process",
                   cfg_.resume_key_path, strerror(err));
  }
  if (!adopt_inherited_listener()) {
    if (int err = listen_on_socket(); err != 0) return err;
  }
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) return errno;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTagListen;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listen_.get(), &ev);
  wake_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_.valid()) return errno;
  ev.data.u64 = kTagWake;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  if (int err = start_remote(); err != 0) return err;
  spdlog::info("wharfd listening on {} (link layer {}, node GUID {:016x})", cfg_.socket_path,
               cfg_.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
               cfg_.node_guid);
  return 0;
}

// Joins the cluster of cfg_.cluster_file as cfg_.host_name (nothing when not configured).
int Router::start_remote() {
  if (cfg_.cluster_file.empty()) return 0;
  std::ifstream in(cfg_.cluster_file);
  std::stringstream text;
  text << in.rdbuf();
  auto dir = std::make_unique<links::StaticCluster>();
  std::string err = in ? dir->load(text.str(), cfg_.host_name) : "cannot read it";
  if (!err.empty()) {
    spdlog::error("cluster file {}: {}", cfg_.cluster_file, err);
    return EINVAL;
  }
  const links::ClusterHost& me = dir->hosts()[static_cast<size_t>(dir->self())];
  if (cfg_.lid_base != me.lid_first || cfg_.lid_base + cfg_.lid_count - 1 != me.lid_last) {
    cfg_.lid_base = me.lid_first;  // the cluster file decides this router's LIDs
    cfg_.lid_count = static_cast<uint16_t>(me.lid_last - me.lid_first + 1);
  }
  remote_ = std::make_unique<RemotePath>(paths_, cfg_, counters_, cm_, networks_, std::move(dir));
  paths_.remote = remote_.get();
  networks_.on_new([this](const std::string& tenant, const std::string& network, uint32_t id) {
    remote_->announce_network_st(tenant, network, id);
  });
  if (int e = remote_->start(); e != 0) {
    spdlog::error("host-to-host listen on port {}: {}", me.port, strerror(e));
    return e;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTagLinks;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, remote_->epoll_fd(), &ev);
  if (const int fd = remote_->express().epoll_fd(); fd >= 0) {
    ev.data.u64 = kTagExpress;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
  }
  spdlog::info("host {} of the cluster: LIDs {}-{}, host-to-host port {}", me.name, me.lid_first,
               me.lid_last, me.port);
  return 0;
}

void Router::run(bool handle_signals) {
  if (handle_signals) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGUSR1);  // logs the counters
    sigaddset(&set, SIGUSR2);  // an upgrade (upgrade_requested)
    sigprocmask(SIG_BLOCK, &set, nullptr);
    signal_.reset(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTagSignal;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, signal_.get(), &ev);
  }
  // Control input is looked for every kControlPeriodNs while the data path is busy, and on
  // every pass for kControlHotNs after a request: a library's requests come in runs (an
  // rdma_cm connection is some twenty of them), each waiting for the previous reply.
  constexpr uint64_t kControlPeriodNs = 50000;
  constexpr uint64_t kControlHotNs = 1000000;
  uint64_t last_work = now_ns();
  uint64_t last_control = 0;
  ratio_since_ns_ = now_ns();
  while (!stopping_) {
    loop_turns_.store(loop_turns_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    const uint64_t pass_start = now_ns();
    bool busy = poll_datapath_st();
    uint64_t now = now_ns();
    if (busy) busy_ns_ += now - pass_start;
    if (now - ratio_since_ns_ >= 1'000'000'000) {
      busy_ratio_ = static_cast<double>(busy_ns_ - ratio_busy_at_start_) /
                    static_cast<double>(now - ratio_since_ns_);
      ratio_since_ns_ = now;
      ratio_busy_at_start_ = busy_ns_;
      keep_accounting_periodically_st(now);
    }
    if (busy || now - last_request_ns_ < kControlHotNs) last_work = now;
    if (now - last_control >= kControlPeriodNs || now - last_request_ns_ < kControlHotNs) {
      poll_control(0);
      last_control = now_ns();
    }
    // On every turn, not only with control input: a wait that ended at a CM deadline
    // returns at once, and a check gated by the control period could then be put off for
    // as long as the loop kept turning faster than that period (spinning meanwhile).
    if (const uint64_t due = cm_.next_deadline(); due != 0) {
      if (const uint64_t t = now_ns(); t >= due) cm_.expire_st(t);
    }
    cm_.keep_changed_st();  // the turn's changes to rdma_cm ids, for the next process
    if (stopping_) break;
    if (busy) continue;
    if (now - last_work >= cfg_.spin_ns) {
      const WakePlan plan = next_wake_st(now);
      if (!plan.pacing_soon) {
        if (sleep_until_work(plan.timeout_ms)) last_work = now_ns();
        last_control = now_ns();
        continue;
      }
    }
    // Idle but still spinning: let applications that share our core run.
    sched_yield();
  }
  spdlog::info("wharfd stopping");
}

// Announces sleep to every session, re-checks for work (a producer may have published just
// before seeing the announcement), then blocks in epoll until a doorbell, a control
// message or timeout_ms (next_wake_st's, -1: none). Returns true if woken by work.
bool Router::sleep_until_work(int timeout_ms) {
  if (stopping_) return false;
  for (Session* s : paged_sessions_) s->page()->router_sleeping.store(1, std::memory_order_relaxed);
  // Pairs with the producer's fence between publishing its ring index and posted mark and
  // reading router_sleeping: either it sees 1 and rings, or we see its mark below.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Host-link input needs no re-check: the wait below watches the links' epoll fd.
  bool busy = poll_datapath_st(false);
  // A stop consumed by an earlier poll_control() would never wake this wait.
  if (!busy && !stopping_) poll_control(timeout_ms);
  for (Session* s : paged_sessions_) s->page()->router_sleeping.store(0, std::memory_order_relaxed);
  return busy;
}

Router::WakePlan Router::next_wake_st(uint64_t now) const {
  // A sleep lasts whole milliseconds, and its wake-up can come much later when applications
  // poll on every core (CI saw a 1 Gbit/s limit give 0.044 Gbit/s, one message per ~12 ms):
  // a rate limit would pay for both, so a pacing time this close is spun for.
  constexpr uint64_t kPacingSpinNs = 2'000'000;
  WakePlan plan;
  auto wake_at = [&](uint64_t t) {
    uint64_t ms = t > now ? (t - now) / 1000000 + 1 : 0;
    if (plan.timeout_ms < 0 || static_cast<int>(ms) < plan.timeout_ms)
      plan.timeout_ms = static_cast<int>(ms);
  };
  for (const Qp* qp : scheduler_.busy()) {
    const QpWork& work = qp->work();
    if (work.wait_until_ns != 0) wake_at(work.wait_until_ns);
    // A pacing time passed is no deadline (waking for it would spin).
    if (work.paced_until_ns > now) {
      wake_at(work.paced_until_ns);
      if (work.paced_until_ns - now <= kPacingSpinNs) plan.pacing_soon = true;
    }
  }
  if (remote_ != nullptr && remote_->next_deadline() != 0) wake_at(remote_->next_deadline());
  if (cm_.next_deadline() != 0) wake_at(cm_.next_deadline());
  if (!held_cqs_.empty()) wake_at(next_cq_event_due());
  return plan;
}

bool Router::poll_control(int timeout_ms) {
  epoll_event events[64];
  int n = epoll_wait(epoll_.get(), events, 64, timeout_ms);
  bool requests = false;
  for (int i = 0; i < n; ++i) {
    uint64_t tag = events[i].data.u64;
    if (tag == kTagListen || tag < kTagListen) requests = true;  // a session or its request
    if (tag == kTagListen) {
      accept_sessions();
    } else if (tag == kTagSignal) {
      signalfd_siginfo si;
      while (read(signal_.get(), &si, sizeof(si)) == sizeof(si)) {
        if (si.ssi_signo == SIGUSR1) {
          spdlog::warn(
              "counters: watchdog_isolations={} peer_qps_failed={} rnr_naks_received={} "
              "stray_packets_dropped={} backlogged_requests_dropped={} refused_peers={} "
              "refused_records={} refused_lines={}",
              counters_.watchdog_isolations, counters_.peer_qps_failed, counters_.rnr_naks_received,
              counters_.stray_packets_dropped, counters_.backlogged_requests_dropped,
              remote_ != nullptr ? remote_->refused_peers() : 0,
              remote_ != nullptr ? remote_->refused_records() : 0,
              remote_ != nullptr ? remote_->express().refused_lines() : 0);
          if (emulator_ != nullptr) {
            const emulator::EmulatorCounters& e = emulator_->counters();
            spdlog::warn(
                "emulator ({}): qp_hits={} qp_misses={} mtt_hits={} mtt_misses={} "
                "match_lookups={} match_rules_tried={} stalled_ns={}",
                emulator::describe(emulator_->config()), e.qp_hits, e.qp_misses, e.mtt_hits,
                e.mtt_misses, e.match_lookups, e.match_rules_tried, e.stalled_ns);
          }
        } else {
          upgrade_requested_ = si.ssi_signo == SIGUSR2;
          stopping_ = true;
        }
      }
    } else if (tag == kTagLinks) {
      // Host links have input: the data path polls them.
    } else if (tag == kTagExpress) {
      express_input_ = true;  // for the next data-path pass
    } else if (tag == kTagWake) {
      uint64_t v;
      while (read(wake_.get(), &v, sizeof(v)) == sizeof(v)) {
      }
      run_posted();
    } else if ((tag & ~kFdMask) == kTagCmChannel) {
      auto it = watched_cm_channels_.find(static_cast<int>(tag & kFdMask));
      if (it != watched_cm_channels_.end() && cm_.flush_st(it->second))
        unwatch_cm_channel_st(it->second);
    } else if ((tag & ~kFdMask) == kTagDoorbell) {
      uint64_t v;
      while (read(static_cast<int>(tag & kFdMask), &v, sizeof(v)) == sizeof(v)) {
      }
    } else {
      auto it = sessions_.find(static_cast<int>(tag));
      if (it == sessions_.end()) continue;
      if (events[i].events & EPOLLIN) {
        handle_session_input(it->second.get());
      } else if (events[i].events & (EPOLLHUP | EPOLLERR)) {
        close_session(static_cast<int>(tag));
      }
    }
  }
  if (requests) last_request_ns_ = now_ns();
  return requests;
}

void Router::stop() {
  stopping_ = true;
  if (wake_.valid()) {
    uint64_t one = 1;
    ssize_t n = write(wake_.get(), &one, sizeof(one));
    (void)n;  // a full counter already wakes the loop
  }
}

void Router::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.push_back(std::move(fn));
  }
  uint64_t one = 1;
  ssize_t n = write(wake_.get(), &one, sizeof(one));
  (void)n;  // a full counter already wakes the loop
}

void Router::run_posted() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    work.swap(posted_);
  }
  for (auto& fn : work) fn();
}

void Router::accept_sessions() {
  for (;;) {
    UniqueFd fd(accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) return;
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
    uint64_t ns = netns_of_pid(cred.pid);
    Container* c = container_for_netns(ns);
    if (c == nullptr) continue;  // closes the connection: the library reports ENODEV
    int raw = fd.get();
    auto session = std::make_unique<Session>(this, std::move(fd), cred.pid, cred.uid, c);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(raw);
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, raw, &ev);
    sessions_.emplace(raw, std::move(session));
    spdlog::debug("session fd {} pid {} container {}", raw, cred.pid, c->name);
  }
}

void Router::close_session(int fd) {
  auto it = sessions_.find(fd);
  if (it == sessions_.end()) return;
  Session* s = it->second.get();
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  if (s->doorbell_fd() >= 0) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->doorbell_fd(), nullptr);
  spdlog::debug("session fd {} pid {} closed", fd, s->pid());
  if (auto p = std::find(paged_sessions_.begin(), paged_sessions_.end(), s);
      p != paged_sessions_.end()) {
    *p = paged_sessions_.back();
    paged_sessions_.pop_back();
  }
  sessions_.erase(it);
}

// Serves one request: a library waits for each reply before its next request, so reading on
// until EAGAIN would cost a failed recvmsg per request. Requests still queued keep the socket
// readable (level-triggered), and the next poll serves them.
void Router::handle_session_input(Session* s) {
  uint8_t buf[proto::kMaxMessage];
  UniqueFd fds[proto::kMaxFds];
  int fd = s->fd();
  {
    int nfds = 0;
    ssize_t n =
        proto::recv_datagram(fd, buf, sizeof(buf), fds, proto::kMaxFds, &nfds, MSG_DONTWAIT);
    if (n == -EAGAIN) return;
    if (n == -EMSGSIZE) {
      spdlog::warn("session pid {}: oversized request dropped", s->pid());
      return;
    }
    if (n <= 0) {
      close_session(fd);
      return;
    }
    int doorbell_before = s->doorbell_fd();
    if (!s->handle_request(buf, static_cast<size_t>(n), fds, nfds)) {
      close_session(fd);
      return;
    }
    if (doorbell_before < 0 && s->doorbell_fd() >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = kTagDoorbell | static_cast<uint64_t>(s->doorbell_fd());
      epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, s->doorbell_fd(), &ev);
    }
  }
}

Container* Router::container_for_netns(uint64_t netns_ino, uint16_t lid) {
  auto it = containers_.find(netns_ino);
  if (it != containers_.end()) return it->second.get();
  auto c = std::make_unique<Container>();
  c->netns_ino = netns_ino;
  c->name = "netns-" + std::to_string(netns_ino);
  c->lid = lid != 0 ? lid : allocate_lid();
  if (c->lid == 0) {
    spdlog::warn("all {} LIDs from {} are in use; refusing a new container", cfg_.lid_count,
                 cfg_.lid_base);
    return nullptr;
  }
  c->gid = gid_link_local(cfg_.node_guid, c->lid);
  c->network_id = network_id_st(c->tenant, c->network);
  Container* raw = c.get();
  containers_.emplace(netns_ino, std::move(c));
  resume_accounting_st(raw);
  return raw;
}

void Router::resume_accounting_st(Container* c) {
  KeptAccounting::Account kept;
  if (!kept_accounting_.claim(c->netns_ino, &kept, &c->kept_slot)) return;
  c->retired = kept.traffic;
  c->retired.throttled_ns = 0;  // Container::throttled_ns holds it
  c->throttled_ns = c->kept_throttled_ns = kept.traffic.throttled_ns;
  if (kept.name != c->name || !kept.tenant.empty() || !kept.network.empty())
    c->kept_as = Container::Names{kept.tenant, kept.network, kept.name};
}

void Router::keep_accounting_st(Container* c) {
  KeptAccounting::Account a{c->tenant, c->network, c->name, c->retired};
  a.traffic.throttled_ns = c->throttled_ns;
  c->kept_slot = kept_accounting_.keep(c->kept_slot, c->netns_ino, a);
  c->kept_throttled_ns = c->throttled_ns;
}

void Router::keep_grown_throttling_st() {
  for (auto& [ino, c] : containers_)
    if (c->throttled_ns != c->kept_throttled_ns) keep_accounting_st(c.get());
}

void Router::keep_accounting_periodically_st(uint64_t now) {
  if (!kept_accounting_.persistent()) return;
  keep_grown_throttling_st();
  for (const KeptAccounting::Account& gone : kept_accounting_.drop_stale(now))
    add_departed(gone.tenant, gone.network, gone.name, gone.traffic);
}

int Router::keep_lid_st(Container* c, uint16_t lid) {
  if (lid == 0 || c->lid == lid) return 0;
  if (c->registered || c->sessions != 0 || lid < cfg_.lid_base ||
      lid - cfg_.lid_base >= cfg_.lid_count || !free_lid_st(lid, c->netns_ino))
    return EADDRINUSE;
  c->lid = lid;
  c->gid = gid_link_local(cfg_.node_guid, lid);
  return 0;
}

bool Router::free_lid_st(uint16_t lid, uint64_t netns_ino) {
  Container* holder = container_by_lid(lid);
  if (holder == nullptr || holder->netns_ino == netns_ino) return true;
  // A container a connection was just accepted for, whose LID nobody has been told yet (no
  // Hello): after a restart the sessions that resume (and wharf-run) claim their old LIDs,
  // and one may be what a session accepted before them was given.
  if (holder->registered || holder->sessions != 0) return false;
  const uint16_t other = allocate_lid();
  if (other == 0) return false;
  holder->lid = other;
  holder->gid = gid_link_local(cfg_.node_guid, other);
  return true;
}

int Router::register_container(const std::string& tenant, const std::string& network,
                               const std::string& name, uint64_t netns_ino, uint32_t vip,
                               uint16_t want_lid, uint16_t* lid) {
  for (auto& [ino, c] : containers_) {
    if (!c->registered || c->tenant != tenant) continue;
    if (c->name == name || (c->network == network && c->vip == vip)) return EEXIST;
  }
  if (want_lid != 0) {
    if (want_lid < cfg_.lid_base || want_lid - cfg_.lid_base >= cfg_.lid_count) {
      spdlog::warn("container {}/{}: LID {} is not one of this router's, {}-{}", tenant, name,
                   want_lid, cfg_.lid_base, cfg_.lid_base + cfg_.lid_count - 1);
      return ERANGE;
    }
    if (!free_lid_st(want_lid, netns_ino)) {
      spdlog::warn("container {}/{}: LID {} is {}'s", tenant, name, want_lid,
                   container_by_lid(want_lid)->name);
      return EADDRINUSE;
    }
    auto it = containers_.find(netns_ino);
    if (it != containers_.end() && it->second->lid != want_lid) return EBUSY;
  }
  Container* c = container_for_netns(netns_ino, want_lid);
  if (c == nullptr) return ENOSPC;
  if (c->registered) return EEXIST;
  c->tenant = tenant;
  c->network = network;
  c->network_id = network_id_st(tenant, network);
  c->name = name;
  c->vip = vip;
  c->gid = proto::gid_for_vip(vip);
  c->registered = true;
  if (c->kept_as && *c->kept_as != Container::Names{tenant, network, name}) {
    // Another container's record: what it moved is listed as departed, not this one's.
    Traffic moved = c->retired;
    moved.throttled_ns = c->throttled_ns;
    add_departed(c->kept_as->tenant, c->kept_as->network, c->kept_as->name, moved);
    c->retired = Traffic{};
    c->throttled_ns = 0;
  }
  c->kept_as.reset();
  keep_accounting_st(c);  // under its names
  match_rules_changed_st();
  *lid = c->lid;
  if (auto it = policies_.find(tenant + "/" + name); it != policies_.end())
    apply_policy_st(c, it->second);
  spdlog::info("container {}{}{} registered: vIP {} LID {}", tenant, tenant.empty() ? "" : "/",
               name, format_ipv4(vip), c->lid);
  return 0;
}

void Router::unregister_container(const std::string& tenant, const std::string& name) {
  for (auto it = containers_.begin(); it != containers_.end(); ++it) {
    Container* c = it->second.get();
    if (!c->registered || c->tenant != tenant || c->name != name) continue;
    spdlog::info("container {} unregistered", name);
    c->registered = false;
    if (c->sessions == 0) forget_container(it);
    match_rules_changed_st();
    return;
  }
}

int Router::hold_container(const std::string& sandbox, const std::string& tenant,
                           const std::string& network, const std::string& name, UniqueFd netns,
                           uint64_t netns_ino, uint32_t vip, uint16_t want_lid, uint16_t* lid) {
  if (held_container(sandbox) != nullptr) return EEXIST;
  if (int err = register_container(tenant, network, name, netns_ino, vip, want_lid, lid); err != 0)
    return err;
  Container* c = containers_.at(netns_ino).get();
  c->sandbox = sandbox;
  c->held_netns = std::move(netns);
  return 0;
}

int Router::release_held_container(const std::string& sandbox) {
  const Container* held = held_container(sandbox);
  if (held == nullptr) return ENOENT;
  auto it = containers_.find(held->netns_ino);
  Container* c = it->second.get();
  spdlog::info("container {}/{} of sandbox {} released", c->tenant, c->name, sandbox);
  c->registered = false;
  c->sandbox.clear();
  c->held_netns.reset();
  if (c->sessions == 0) forget_container(it);
  match_rules_changed_st();
  return 0;
}

const Container* Router::held_container(const std::string& sandbox) const {
  if (sandbox.empty()) return nullptr;
  for (const auto& [ino, c] : containers_)
    if (c->registered && c->sandbox == sandbox) return c.get();
  return nullptr;
}

// Drops one Hello'd session's reference; frees the container when nobody uses it any more
// (anonymous ones, or registered ones whose launcher has gone).
void Router::release_container(Container* c) {
  if (c->sessions > 0) c->sessions--;
  if (c->sessions == 0 && !c->registered) forget_container(containers_.find(c->netns_ino));
}

void Router::match_rules_changed_st() {
  if (emulator_ == nullptr) return;
  size_t rules = flows_.rules().size();
  for (const auto& [ino, c] : containers_) rules += c->registered ? 1 : 0;
  emulator_->set_match_rules_st(static_cast<uint32_t>(rules));
}

void Router::forget_container(decltype(containers_)::iterator it) {
  const Container& c = *it->second;  // no sessions: its QPs are all retired
  Traffic moved = c.retired;
  moved.throttled_ns = c.throttled_ns;
  add_departed(c.tenant, c.network, c.name, moved);
  kept_accounting_.release(c.kept_slot);
  containers_.erase(it);
}

void Router::add_departed(const std::string& tenant, const std::string& network,
                          const std::string& name, const Traffic& moved) {
  departed_.push_back({tenant, network, name, moved, now_ns()});
  while (departed_.size() > kDepartedKept ||
         departed_.front().gone_ns + kDepartedNs < departed_.back().gone_ns) {
    departed_.pop_front();
  }
}

// LIDs are reused once their container is gone; the search starts below the last one handed
// out so that a LID is not reused at once. It goes from the top of the range down because
// the orchestrator gives its containers the lowest free LIDs of the range (control/
// registry.h): a container the router numbers itself (no orchestrator, or the host's own
// namespace) rarely takes a LID the orchestrator has given a container not yet started.
uint16_t Router::allocate_lid() {
  for (uint32_t i = 0; i < cfg_.lid_count; ++i) {
    const uint32_t step = (next_lid_step_ + i) % cfg_.lid_count;
    const auto lid = static_cast<uint16_t>(cfg_.lid_base + cfg_.lid_count - 1 - step);
    if (container_by_lid(lid) != nullptr) continue;
    next_lid_step_ = (step + 1) % cfg_.lid_count;
    return lid;
  }
  return 0;
}

void Router::set_placement_st(const std::string& tenant, const std::string& network, uint32_t vip,
                              const std::string& host) {
  if (remote_ != nullptr) remote_->set_placement_st(network_id_st(tenant, network), vip, host);
}

const Container* Router::container_with_vip(uint32_t vip, const std::string& tenant,
                                            const std::string& network) const {
  for (const auto& [ino, c] : containers_)
    if (c->registered && c->vip == vip && c->tenant == tenant && c->network == network)
      return c.get();
  return nullptr;
}

int Router::cm_host_for(const proto::AhAttr& ah, const Container* from) const {
  return remote_ != nullptr ? remote_->host_for(ah, from) : -1;
}

bool Router::send_cm_st(int host, const proto::CmMad& m) {
  return remote_ != nullptr && remote_->send_cm_st(host, m);
}

bool Router::cm_host_known(int host) const {
  if (host == kThisHost) return true;
  return remote_ != nullptr && host >= 0 &&
         static_cast<size_t>(host) < remote_->directory().hosts().size() &&
         host != remote_->directory().self();
}

void Router::watch_cm_channel_st(CmChannel* ch) {
  if (ch->watched) return;
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.u64 = kTagCmChannel | static_cast<uint64_t>(ch->sock.get());
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, ch->sock.get(), &ev) != 0) return;
  ch->watched = true;
  watched_cm_channels_[ch->sock.get()] = ch;
}

void Router::unwatch_cm_channel_st(CmChannel* ch) {
  if (!ch->watched) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, ch->sock.get(), nullptr);
  watched_cm_channels_.erase(ch->sock.get());
  ch->watched = false;
}

Container* Router::container_by_lid(uint16_t lid) {
  for (auto& [ino, c] : containers_)
    if (c->lid == lid) return c.get();
  return nullptr;
}

bool Router::poll_datapath_st(bool with_links) {
  if (!held_cqs_.empty()) raise_due_cq_events_st(now_ns());
  bool did = false;
  if (with_links && remote_ != nullptr) {
    did = remote_->poll_st(last_pass_busy_, express_input_);
    express_input_ = false;
  }
  take_posted_st();
  if (!scheduler_.empty()) {
    const uint64_t now = now_ns();
    Executor ex(paths_, now);
    // Executing may activate QPs (peers entering ERR) but never deactivates any.
    did |= scheduler_.pass([&](Qp* qp) { return ex.process_qp_st(qp); },
                           [&](Qp* qp) { return has_own_work_st(qp, now); });
  }
  // What the pass queued for other hosts goes out now, one write per host link.
  if (remote_ != nullptr) did |= remote_->flush_st();
  if (with_links) last_pass_busy_ = did;
  return did;
}

bool Router::has_own_work_st(Qp* qp, uint64_t now) {
  // A ring whose indices are corrupt has nothing this QP can do (it is failed when looked at).
  shm::RingConsumerView sq = qp->sq();
  const uint32_t queued = sq.available();
  return (queued != 0 && queued <= sq.capacity()) || !qp->work().idle(now);
}

void Router::take_posted_st() {
  for (const Session* session : paged_sessions_) {
    shm::take_posted(session->page(), [&](uint32_t mark) {
      // Any bit may be set: only a mark naming an active QP of this session counts.
      if (Qp* qp = session->posted_qp(mark); qp != nullptr && qp->active) scheduler_.activate(qp);
    });
  }
}

}  // namespace wharf::router
