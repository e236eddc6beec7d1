// Tests for the host-to-host engine (router/remote.h) on its own: two routers' data paths in
// one process, each a PathContext of its own with a RemotePath, joined by real host links on
// loopback (no Router loop, no library, no express lines). Each host has one container with
// an RC QP connected by hand to the other host's; work requests are written into the rings as
// a library writes them, each host runs passes as the router's loop does, and completions
// are read from the CQs as a library reads them.
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
#include "support/free_ports.h"
#include "support/router_rings.h"

namespace wharf::router {
namespace {

constexpr uint8_t kIb = IBV_LINK_LAYER_INFINIBAND;
constexpr uint32_t kDepth = 8;
constexpr size_t kMemory = 4096;       // each host's registered test buffer
constexpr int kHostA = 0, kHostB = 1;  // their indexes in the cluster

// Hosts a and b on loopback at two free ports: a serves LIDs 1-1024 and 198.18.1.0/24, b
// LIDs 1025-2048 and 198.18.2.0/24.
std::string two_host_cluster() {
  const int port = test_support::free_ports(2);
  EXPECT_NE(port, 0) << "no free pair of ports";
  return "a 127.0.0.1 198.18.1.0/24 1-1024 " + std::to_string(port) +
         "\nb 127.0.0.1 198.18.2.0/24 1025-2048 " + std::to_string(port + 1) + "\n";
}

// What a host's rdma_cm needs of its router, reduced to counting the MADs it sends: these
// tests connect their QPs by hand.
class CmStub final : public CmEnvironment {
 public:
  int sent = 0;
  const Container* container_with_vip(uint32_t, const std::string&,
                                      const std::string&) const override {
    return nullptr;
  }
  int cm_host_for(const proto::AhAttr&, const Container*) const override { return -1; }
  bool send_cm_st(int, const proto::CmMad&) override {
    ++sent;
    return true;
  }
  void watch_cm_channel_st(CmChannel*) override {}
};

// A signaled work request `opcode` aimed at `raddr`/`rkey` (0 for a SEND).
shm::SendWqe work(ibv_wr_opcode opcode, uint64_t wr_id, uint64_t raddr = 0, uint32_t rkey = 0) {
  shm::SendWqe h{};
  h.wr_id = wr_id;
  h.opcode = opcode;
  h.flags = shm::kWqeSignaled;
  h.remote_addr = raddr;
  h.rkey = rkey;
  return h;
}

// Expects c to be the completion of work request wr_id with status and opcode.
void expect_cqe(const shm::Cqe& c, uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode) {
  EXPECT_EQ(c.wr_id, wr_id);
  EXPECT_EQ(c.status, status);
  EXPECT_EQ(c.opcode, opcode);
}

// One router of the cluster: its data path and host-to-host engine, built as Router builds
// them, with one container (tenant acme, network blue), one session, a PD, a CQ, an RC QP and
// an MR over kMemory bytes of its own, built as the router's control path builds them.
class Host {
 public:
  Host(const std::string& cluster, const char* name, uint16_t lid, uint32_t vip)
      : objects_(lid), direct_(objects_, /*enabled=*/false, kIb), multicast_(kIb) {
    cfg_.socket_path = "/nonexistent/wharf-remote-path-test.sock";  // never started
    cfg_.node_guid = 0x0200000000000000ull | lid;
    cfg_.express = false;
    auto dir = std::make_unique<links::StaticCluster>();
    EXPECT_EQ(dir->load(cluster, name), "");
    remote_ = std::make_unique<RemotePath>(paths_, cfg_, counters_, cm_, networks_, std::move(dir));
    paths_.remote = remote_.get();
    networks_.on_new([this](const std::string& tenant, const std::string& network, uint32_t id) {
      remote_->announce_network_st(tenant, network, id);
    });
    EXPECT_EQ(remote_->start(), 0);
    router_ = std::make_unique<Router>(cfg_);  // only as the session's router
    container_.tenant = "acme";
    container_.network = "blue";
    container_.name = name;
    container_.lid = lid;
    container_.vip = vip;
    container_.gid = proto::gid_for_vip(vip);
    session_ = std::make_unique<Session>(router_.get(), UniqueFd(), getpid(), 0, &container_);
    make_cq();
    make_qp();
    memory_.assign(kMemory, 0);
    mr_.owner = session_.get();
    mr_.pd = &pd_;
    mr_.addr = mr_.iova = mr_.mapped_start = reinterpret_cast<uint64_t>(memory_.data());
    mr_.length = mr_.mapped_len = memory_.size();
    mr_.mapping = memory_.data();
    mr_.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                 IBV_ACCESS_REMOTE_ATOMIC;
    mr_.key = objects_.add_key(&mr_);
  }
  ~Host() {
    scheduler_.clear();
    remote_->forget_st(&qp_);
    objects_.remove_qp(qp_.qpn);
    objects_.remove_key(mr_.key);
  }

  // The QP moves to RTS connected to peer's QP (which must have its sq_psn already).
  void connect_to(const Host& peer) {
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
    query.dst = CmAddress::ipv4(container_.vip, 0).to_wire();
    EXPECT_TRUE(remote_->send_cm_st(other_host, query));
  }
  // Whether this host's rdma_cm answered the other host's query: it heard the announcement.
  bool heard_other() const { return cm_env_.sent > 0; }

  // One pass as the router's loop makes it: the links, the busy QPs, then what was queued
  // for the other host. The CQ is then read into completions().
  void pass() {
    remote_->poll_st(/*router_busy=*/true, /*express_input=*/false);
    const uint64_t now = now_ns();
    Executor ex(paths_, now);
    scheduler_.pass([&](Qp* qp) { return ex.process_qp_st(qp); },
                    [&](Qp* qp) { return Router::has_own_work_st(qp, now); });
    remote_->flush_st();
    for (shm::Cqe c; cq_reader_.pop(&c);) completions_.push_back(c);
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

  Qp& qp() { return qp_; }
  uint8_t* memory(uint32_t offset) { return memory_.data() + offset; }
  uint64_t address(uint32_t offset) const {
    return reinterpret_cast<uint64_t>(memory_.data()) + offset;
  }
  uint32_t rkey() const { return mr_.key; }
  const RouterCounters& counters() const { return counters_; }
  // Every CQE the CQ got so far, in order.
  const std::vector<shm::Cqe>& completions() const { return completions_; }

 private:
  void make_cq() {
    cq_.owner = session_.get();
    const shm::CqLayout layout = shm::cq_layout(64);
    ShmRegion region;
    ASSERT_EQ(region.create("wharf-test-cq", layout.total), 0);
    cq_.use_region(std::move(region), layout);
    cq_reader_ = test_support::cq_reader(cq_);
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
    ASSERT_TRUE(test_support::push_wqe(&qp_, send, head, head_len, body, body_len));
    if (send) scheduler_.activate(&qp_);
  }

  RouterConfig cfg_;
  HostObjects objects_;
  Scheduler scheduler_;
  DirectLines direct_;
  MulticastGroups multicast_;
  FlowRules flows_;
  PathContext paths_{objects_, scheduler_, direct_, multicast_, flows_, kIb, nullptr};
  RouterCounters counters_;
  CmStub cm_env_;
  CmManager cm_{cfg_, objects_, cm_env_};
  NetworkNumbers networks_;
  std::unique_ptr<RemotePath> remote_;
  std::unique_ptr<Router> router_;
  Container container_;
  std::unique_ptr<Session> session_;
  Pd pd_;
  Cq cq_;
  shm::CqConsumer cq_reader_;
  Qp qp_;
  std::vector<uint8_t> memory_;
  Mr mr_;
  std::vector<shm::Cqe> completions_;
};

class RemotePathTest : public ::testing::Test {
 protected:
  // The QPs connected to each other, and each host's network number known to the other (a
  // request carries its receiver's number: one sent before that would be dropped).
  RemotePathTest() {
    a_.connect_to(b_);
    b_.connect_to(a_);
    a_.join_network(kHostB);
    b_.join_network(kHostA);
    EXPECT_TRUE(run_until([&] { return a_.heard_other() && b_.heard_other(); }));
  }

  // Runs passes of both hosts until done() holds; false if it did not within 5 s (a guard
  // against hanging, not a limit on speed).
  template <class Done>
  bool run_until(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      a_.pass();
      b_.pass();
    }
    return true;
  }

  // The responder checks the rkey and the range (IBTA 9.7.4.1.4): a's WRITE of 4 bytes to
  // raddr/rkey completes with REM_ACCESS_ERR, both QPs end in ERR, b's memory is untouched.
  void expect_write_refused(uint64_t raddr, uint32_t rkey) {
    std::memcpy(a_.memory(0), "abcd", 4);
    a_.post_send(work(IBV_WR_RDMA_WRITE, 1, raddr, rkey), 0, 4);
    ASSERT_TRUE(run_until([&] { return a_.completions().size() == 1; }));
    EXPECT_EQ(a_.completions()[0].wr_id, 1u);
    EXPECT_EQ(a_.completions()[0].status, IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(a_.qp().state(), IBV_QPS_ERR);
    EXPECT_EQ(b_.qp().state(), IBV_QPS_ERR);
    EXPECT_EQ(std::vector<uint8_t>(b_.memory(0), b_.memory(kMemory)),
              std::vector<uint8_t>(kMemory, 0));
  }

  const std::string cluster_ = two_host_cluster();
  Host a_{cluster_, "a", 5, 0xc6120105};     // 198.18.1.5
  Host b_{cluster_, "b", 1029, 0xc6120205};  // 198.18.2.5
};

TEST_F(RemotePathTest, InlineAndRegisteredSendsArriveInThePeersReceivesInOrder) {
  b_.post_recv(11, 0, 64);
  b_.post_recv(12, 64, 64);
  std::memcpy(a_.memory(256), "registered", 10);
  a_.send_inline(1, "hello");
  a_.post_send(work(IBV_WR_SEND, 2), 256, 10);
  ASSERT_TRUE(
      run_until([&] { return a_.completions().size() == 2 && b_.completions().size() == 2; }));

  const std::vector<shm::Cqe>& got = b_.completions();
  expect_cqe(got[0], 11u, IBV_WC_SUCCESS, IBV_WC_RECV);
  EXPECT_EQ(got[0].byte_len, 5u);
  EXPECT_EQ(got[0].qp_num, b_.qp().qpn);
  EXPECT_EQ(got[0].src_qp, a_.qp().qpn);
  expect_cqe(got[1], 12u, IBV_WC_SUCCESS, IBV_WC_RECV);
  EXPECT_EQ(got[1].byte_len, 10u);
  EXPECT_EQ(std::memcmp(b_.memory(0), "hello", 5), 0);
  EXPECT_EQ(*b_.memory(5), 0);  // nothing past the message
  EXPECT_EQ(std::memcmp(b_.memory(64), "registered", 10), 0);

  const std::vector<shm::Cqe>& sent = a_.completions();
  expect_cqe(sent[0], 1u, IBV_WC_SUCCESS, IBV_WC_SEND);
  expect_cqe(sent[1], 2u, IBV_WC_SUCCESS, IBV_WC_SEND);
}

TEST_F(RemotePathTest, AWriteLandsInThePeersMemoryAndAReadBringsItsBytesBack) {
  std::memcpy(a_.memory(0), "written", 7);
  std::memcpy(b_.memory(1024), "peer bytes", 10);
  a_.post_send(work(IBV_WR_RDMA_WRITE, 1, b_.address(512), b_.rkey()), 0, 7);
  a_.post_send(work(IBV_WR_RDMA_READ, 2, b_.address(1024), b_.rkey()), 2048, 10);
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 2; }));

  const std::vector<shm::Cqe>& got = a_.completions();
  expect_cqe(got[0], 1u, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
  expect_cqe(got[1], 2u, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
  EXPECT_EQ(got[1].byte_len, 10u);
  EXPECT_EQ(std::memcmp(b_.memory(512), "written", 7), 0);
  EXPECT_EQ(*b_.memory(511), 0);  // exactly at the offset given
  EXPECT_EQ(*b_.memory(519), 0);
  EXPECT_EQ(std::memcmp(a_.memory(2048), "peer bytes", 10), 0);
  EXPECT_TRUE(b_.completions().empty());  // one-sided: the peer's application hears nothing
}

TEST_F(RemotePathTest, AWriteWithAKeyThePeerDoesNotHaveIsARemoteAccessError) {
  expect_write_refused(b_.address(512), b_.rkey() ^ 0x100);
}

TEST_F(RemotePathTest, AWritePastTheEndOfThePeersRegistrationIsARemoteAccessError) {
  expect_write_refused(b_.address(kMemory - 2), b_.rkey());
}

// 9.7.5.2.8: rnr_retry 0 allows no retry at all: the first RNR NAK fails the SEND.
TEST_F(RemotePathTest, ASendWithoutAReceiveAndNoRnrRetriesFailsWithRnrRetryExceeded) {
  a_.qp().attr.rnr_retry = 0;
  a_.send_inline(1, "nobody listens");
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 1; }));

  EXPECT_EQ(a_.completions()[0].wr_id, 1u);
  EXPECT_EQ(a_.completions()[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(a_.qp().state(), IBV_QPS_ERR);
  EXPECT_EQ(a_.counters().rnr_naks_received, 1u);
  EXPECT_TRUE(b_.completions().empty());
  EXPECT_EQ(b_.qp().state(), IBV_QPS_RTS);  // refusing is no error of the responder's
}

// rnr_retry 7 retries for ever: the SEND waits out refusals and lands once a receive is posted.
TEST_F(RemotePathTest, ASendRefusedForWantOfAReceiveLandsOnceOneIsPosted) {
  a_.send_inline(1, "late");
  ASSERT_TRUE(run_until([&] { return a_.counters().rnr_naks_received >= 2; }));
  EXPECT_TRUE(a_.completions().empty());
  EXPECT_TRUE(b_.completions().empty());

  b_.post_recv(9, 0, 64);
  ASSERT_TRUE(
      run_until([&] { return a_.completions().size() == 1 && b_.completions().size() == 1; }));
  EXPECT_EQ(b_.completions()[0].wr_id, 9u);
  EXPECT_EQ(b_.completions()[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(b_.completions()[0].byte_len, 4u);
  EXPECT_EQ(std::memcmp(b_.memory(0), "late", 4), 0);
  EXPECT_EQ(a_.completions()[0].wr_id, 1u);
  EXPECT_EQ(a_.completions()[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(a_.qp().state(), IBV_QPS_RTS);
}

// Atomics act on the peer's 8 bytes and bring back what they held before.
TEST_F(RemotePathTest, FetchAndAddAndCompareAndSwapReturnThePeersOldValue) {
  const uint64_t start = 5;
  std::memcpy(b_.memory(1536), &start, 8);
  shm::SendWqe add = work(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, b_.address(1536), b_.rkey());
  add.compare_add = 3;
  shm::SendWqe swap = work(IBV_WR_ATOMIC_CMP_AND_SWP, 2, b_.address(1536), b_.rkey());
  swap.compare_add = 8;
  swap.swap = 42;
  shm::SendWqe missed = work(IBV_WR_ATOMIC_CMP_AND_SWP, 3, b_.address(1536), b_.rkey());
  missed.compare_add = 8;  // 42 by now: no swap
  missed.swap = 99;
  a_.post_send(add, 0, 8);
  a_.post_send(swap, 8, 8);
  a_.post_send(missed, 16, 8);
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 3; }));

  const std::vector<shm::Cqe>& got = a_.completions();
  const ibv_wc_opcode opcodes[] = {IBV_WC_FETCH_ADD, IBV_WC_COMP_SWAP, IBV_WC_COMP_SWAP};
  const uint64_t before[] = {5, 8, 42};
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].wr_id, i + 1);
    EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[i].opcode, opcodes[i]);
    EXPECT_EQ(got[i].byte_len, 8u);
    uint64_t returned = 0;
    std::memcpy(&returned, a_.memory(8 * i), 8);
    EXPECT_EQ(returned, before[i]) << "atomic " << i + 1;
  }
  uint64_t now_held = 0;
  std::memcpy(&now_held, b_.memory(1536), 8);
  EXPECT_EQ(now_held, 42u);
}

}  // namespace
}  // namespace wharf::router
