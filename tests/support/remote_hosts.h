// Two routers' data paths in one process, for tests of the host-to-host engine
// (router/remote.h) on its own (router_remote_path_test, router_remote_lossy_test): each
// RemoteHost is a PathContext of its own with a RemotePath, joined to the other by real host
// links on loopback (no Router loop, no library, no express lines). Each host has one
// container with an RC QP that a test connects by hand to the other host's; work requests are
// written into the rings as a library writes them, each host runs passes as the router's loop
// does, and completions are read from the CQ as a library reads them.
//
// Single-threaded: a host is only ever touched by the test's thread.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "proto/vip_gid.h"
#include "router/cm_manager.h"
#include "router/direct_lines.h"
#include "router/executor.h"
#include "router/flow_rules.h"
#include "router/host_objects.h"
#include "router/multicast_groups.h"
#include "router/network_numbers.h"
#include "router/remote.h"
#include "router/router.h"
#include "router/scheduler.h"
#include "router/session.h"
#include "shm/cq_ring.h"
#include "support/router_rings.h"
#include "support/two_hosts.h"

namespace wharf::test_support {

constexpr uint8_t kIb = IBV_LINK_LAYER_INFINIBAND;
constexpr uint32_t kDepth = 8;         // entries of each QP's send and receive rings
constexpr size_t kMemory = 4096;       // each host's registered test buffer, unless told
constexpr int kHostA = 0, kHostB = 1;  // their indexes in the cluster

// What a host's rdma_cm needs of its router, reduced to counting the MADs it sends: these
// tests connect their QPs by hand.
class CmStub final : public router::CmEnvironment {
 public:
  int sent = 0;
  const router::Container* container_with_vip(uint32_t, const std::string&,
                                              const std::string&) const override {
    return nullptr;
  }
  int cm_host_for(const proto::AhAttr&, const router::Container*) const override { return -1; }
  bool send_cm_st(int, const proto::CmMad&) override {
    ++sent;
    return true;
  }
  void watch_cm_channel_st(router::CmChannel*) override {}
  bool cm_host_known(int host) const override { return host == router::kThisHost; }
};

// A signaled work request `opcode` aimed at `raddr`/`rkey` (0 for a SEND).
inline shm::SendWqe work(ibv_wr_opcode opcode, uint64_t wr_id, uint64_t raddr = 0,
                         uint32_t rkey = 0) {
  shm::SendWqe h{};
  h.wr_id = wr_id;
  h.opcode = opcode;
  h.flags = shm::kWqeSignaled;
  h.remote_addr = raddr;
  h.rkey = rkey;
  return h;
}

// Expects c to be the completion of work request wr_id with status and opcode.
inline void expect_cqe(const shm::Cqe& c, uint64_t wr_id, ibv_wc_status status,
                       ibv_wc_opcode opcode) {
  EXPECT_EQ(c.wr_id, wr_id);
  EXPECT_EQ(c.status, status);
  EXPECT_EQ(c.opcode, opcode);
}

// Calls step() until done() holds; false if it did not within `limit` (a guard against
// hanging, not a limit on speed).
template <class Step, class Done>
bool run_until(Step step, Done done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    step();
  }
  return true;
}

// One router of the cluster: its data path and host-to-host engine, built as Router builds
// them, with one container (tenant acme, network blue), one session, a PD, a CQ, an RC QP and
// an MR over `memory` bytes of its own, built as the router's control path builds them.
class RemoteHost {
 public:
  // pingmesh_interval_ns, pingmesh_networks: RouterConfig's (0, the default here: no probes).
  RemoteHost(const std::string& cluster, const char* name, uint16_t lid, uint32_t vip,
             size_t memory = kMemory, uint64_t pingmesh_interval_ns = 0,
             std::vector<std::pair<std::string, std::string>> pingmesh_networks = {})
      : direct_(objects_, /*enabled=*/false, kIb), multicast_(kIb) {
    cfg_.socket_path = "/nonexistent/wharf-remote-path-test.sock";  // never started
    cfg_.node_guid = 0x0200000000000000ull | lid;
    cfg_.express = false;
    cfg_.pingmesh_interval_ns = pingmesh_interval_ns;
    cfg_.pingmesh_networks = std::move(pingmesh_networks);
    auto dir = std::make_unique<links::StaticCluster>();
    EXPECT_EQ(dir->load(cluster, name), "");
    remote_ = std::make_unique<router::RemotePath>(paths_, cfg_, counters_, cm_, networks_,
                                                   std::move(dir));
    paths_.remote = remote_.get();
    networks_.on_new([this](const std::string& tenant, const std::string& network, uint32_t id) {
      remote_->announce_network_st(tenant, network, id);
    });
    EXPECT_EQ(remote_->start(), 0);
    router_ = std::make_unique<router::Router>(cfg_);  // only as the session's router
    container_.tenant = "acme";
    container_.network = "blue";
    container_.name = name;
    container_.lid = lid;
    container_.vip = vip;
    container_.gid = proto::gid_for_vip(vip);
    session_ =
        std::make_unique<router::Session>(router_.get(), UniqueFd(), getpid(), 0, &container_);
    make_cq();
    make_qp();
    memory_.assign(memory, 0);
    mr_.owner = session_.get();
    mr_.pd = &pd_;
    mr_.addr = mr_.iova = mr_.mapped_start = reinterpret_cast<uint64_t>(memory_.data());
    mr_.length = mr_.mapped_len = memory_.size();
    mr_.mapping = memory_.data();
    mr_.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                 IBV_ACCESS_REMOTE_ATOMIC;
    mr_.key = objects_.add_key(&mr_);
  }
  ~RemoteHost() {
    scheduler_.clear();
    remote_->forget_st(&qp_);
    objects_.remove_qp(qp_.qpn);
    if (qp_.srq != nullptr) objects_.remove_srq(srq_.srqn);
    objects_.remove_key(mr_.key);
  }
  RemoteHost(const RemoteHost&) = delete;
  RemoteHost& operator=(const RemoteHost&) = delete;

  // The QP moves to RTS connected to peer's QP (which must have its sq_psn already), with
  // the ACK timeout 14 (67 ms) and 7 retries of each kind; a test may change them after.
  void connect_to(const RemoteHost& peer) {
    qp_.attr.qp_state = IBV_QPS_RTS;
    qp_.attr.dest_qp_num = peer.qp_.qpn;
    qp_.attr.rq_psn = peer.qp_.attr.sq_psn;
    qp_.attr.ah_attr.dlid = peer.container_.lid;
    qp_.attr.qp_access_flags =
        IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    qp_.attr.retry_cnt = 7;
    qp_.attr.rnr_retry = 7;
    qp_.attr.min_rnr_timer = 1;  // 0.01 ms
    qp_.attr.timeout = 14;
    qp_.attr.max_rd_atomic = qp_.attr.max_dest_rd_atomic = 4;
    scheduler_.activate(&qp_);
  }
  // Numbers the container's network, which announces the number to the other host, then
  // sends that host an address query (about any address: only its answer counts) on the same
  // link, behind the announcement.
  void join_network(int other_host) {
    container_.network_id = networks_.number(container_.tenant, container_.network);
    proto::CmMad query;
    query.type = proto::kCmAddrQuery;
    query.sender_comm = 1;
    query.dst = router::CmAddress::ipv4(container_.vip, 0).to_wire();
    EXPECT_TRUE(remote_->send_cm_st(other_host, query));
  }
  // Whether this host's rdma_cm answered the other host's query: it heard the announcement.
  bool heard_other() const { return cm_env_.sent > 0; }

  // One pass as the router's loop makes it: the links, the busy QPs, then what was queued
  // for the other host. The CQ is then read into completions().
  void pass() {
    remote_->poll_st(/*router_busy=*/true, /*express_input=*/false);
    const uint64_t now = now_ns();
    router::Executor ex(paths_, now);
    scheduler_.pass([&](router::Qp* qp) { return ex.process_qp_st(qp); },
                    [&](router::Qp* qp) { return router::Router::has_own_work_st(qp, now); });
    remote_->flush_st();
    for (shm::Cqe c; cq_reader_.pop(&c);) completions_.push_back(c);
  }

  // The QP takes its receives from an SRQ (post_srq_recv) rather than a queue of its own.
  // Before connect_to: the QP is made again.
  void use_srq() {
    ASSERT_TRUE(make_srq(&srq_, session_.get(), &pd_, kDepth, objects_));
    ASSERT_TRUE(put_qp_on_srq(&qp_, &srq_, objects_));
  }
  // A receive of one SGE on the SRQ: `len` bytes at `offset` of this host's memory.
  void post_srq_recv(uint64_t wr_id, uint32_t offset, uint32_t len) {
    ASSERT_TRUE(push_srq_recv(&srq_, wr_id, shm::Sge{address(offset), len, mr_.key}));
  }
  // A receive of one SGE: `len` bytes at `offset` of this host's memory.
  void post_recv(uint64_t wr_id, uint32_t offset, uint32_t len) {
    const shm::RecvWqe h{wr_id, 1, 0};
    const shm::Sge sge{address(offset), len, mr_.key};
    push(false, &h, sizeof(h), &sge, sizeof(sge));
  }
  // A signaled inline SEND of `text`.
  void send_inline(uint64_t wr_id, const char* text) {
    shm::SendWqe h = work(IBV_WR_SEND, wr_id);
    h.flags |= shm::kWqeInline;
    h.inline_len = static_cast<uint32_t>(strlen(text));
    push(true, &h, sizeof(h), text, h.inline_len);
  }
  // Work request h with one SGE: `len` bytes at `offset` of this host's memory.
  void post_send(shm::SendWqe h, uint32_t offset, uint32_t len) {
    h.num_sge = 1;
    const shm::Sge sge{address(offset), len, mr_.key};
    push(true, &h, sizeof(h), &sge, sizeof(sge));
  }

  router::Qp& qp() { return qp_; }
  uint8_t* memory(uint32_t offset) { return memory_.data() + offset; }
  uint64_t address(uint32_t offset) const {
    return reinterpret_cast<uint64_t>(memory_.data()) + offset;
  }
  uint32_t rkey() const { return mr_.key; }
  const router::RouterCounters& counters() const { return counters_; }
  const router::RemotePath& remote() const { return *remote_; }
  // What the links to host `peer` in traffic class 0 counted (links::HostLinks::LinkStats).
  links::HostLinks::LinkStats link_stats(int peer) const {
    links::HostLinks::LinkStats out;
    remote_->links().for_each_link(
        [&](int host, int dscp, const links::HostLinks::LinkStats& s, bool) {
          if (host == peer && dscp == 0) out = s;
        });
    return out;
  }
  // Every CQE the CQ got so far, in order.
  const std::vector<shm::Cqe>& completions() const { return completions_; }
  // The end of the CQ's bulk window (shm::CqNotify::bulk_until_ns; 0: never opened).
  uint64_t bulk_until_ns() const { return cq_.notify->bulk_until_ns.load(); }

 private:
  void make_cq() {
    cq_.owner = session_.get();
    const shm::CqLayout layout = shm::cq_layout(64);
    router::ShmRegion region;
    ASSERT_EQ(region.create("wharf-test-cq", layout.total), 0);
    cq_.use_region(std::move(region), layout);
    cq_reader_ = cq_reader(cq_);
  }
  void make_qp() {
    qp_.owner = session_.get();
    qp_.pd = &pd_;
    qp_.send_cq = qp_.recv_cq = &cq_;
    qp_.sq_entries = kDepth;
    qp_.sq_slot = shm::send_slot_size(1, 64);
    qp_.rq_entries = kDepth;
    qp_.rq_slot = shm::recv_slot_size(1);
    // A first PSN of its own: the two directions' PSNs do not agree by chance.
    qp_.attr.sq_psn = container_.lid;
    ASSERT_EQ(qp_.shm.create("wharf-test-qp", qp_.layout().total), 0);
    ASSERT_TRUE(objects_.add_qp(&qp_));
  }
  // What a library's ibv_post_send (send true) or ibv_post_recv writes into the QP's ring; a
  // send also marks the QP posted.
  void push(bool send, const void* head, size_t head_len, const void* body, size_t body_len) {
    ASSERT_TRUE(push_wqe(&qp_, send, head, head_len, body, body_len));
    if (send) scheduler_.activate(&qp_);
  }

  router::RouterConfig cfg_;
  router::HostObjects objects_;
  router::Scheduler scheduler_;
  router::DirectLines direct_;
  router::MulticastGroups multicast_;
  router::FlowRules flows_;
  router::PathContext paths_{objects_, scheduler_, direct_, multicast_, flows_, kIb, nullptr};
  router::RouterCounters counters_;
  CmStub cm_env_;
  router::CmManager cm_{cfg_, objects_, cm_env_};
  router::NetworkNumbers networks_;
  std::unique_ptr<router::RemotePath> remote_;
  std::unique_ptr<router::Router> router_;
  router::Container container_;
  std::unique_ptr<router::Session> session_;
  router::Pd pd_;
  router::Cq cq_;
  shm::CqConsumer cq_reader_;
  router::Srq srq_;  // the QP's after use_srq()
  router::Qp qp_;
  std::vector<uint8_t> memory_;
  router::Mr mr_;
  std::vector<shm::Cqe> completions_;
};

// Connects a's QP and b's to each other, and numbers each host's network so that the other
// hears it (a request carries its receiver's number: one sent before that would be dropped).
// step() runs one pass of everything between the hosts. False if they did not hear each
// other in time.
template <class Step>
bool connect_hosts(RemoteHost& a, RemoteHost& b, Step step) {
  a.connect_to(b);
  b.connect_to(a);
  a.join_network(kHostB);
  b.join_network(kHostA);
  return run_until(step, [&] { return a.heard_other() && b.heard_other(); });
}

}  // namespace wharf::test_support
