// Tests for the local executor (router/executor.h) on its own: it works through a
// PathContext, so these give it one of its own (no Router, no socket, no library) and drive
// it with the time they choose. QPs, CQs and MRs are built as the router's control path
// builds them; work requests are written into the rings as a library writes them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "emulator/rnic_emulator.h"
#include "proto/multicast.h"
#include "rc/timers.h"
#include "router/direct_lines.h"
#include "router/executor.h"
#include "router/flow_rules.h"
#include "router/host_objects.h"
#include "router/local_completions.h"
#include "router/multicast_groups.h"
#include "router/router.h"
#include "router/scheduler.h"
#include "router/session.h"
#include "shm/cq_ring.h"
#include "support/router_rings.h"

namespace wharf::router {
namespace {

constexpr uint8_t kIb = IBV_LINK_LAYER_INFINIBAND;
constexpr uint32_t kDepth = 8;
constexpr uint64_t kStart = 1'000'000'000;  // the tests' clock, ns

class ExecutorTest : public ::testing::Test {
 protected:
  ExecutorTest()
      : direct_(objects_, /*enabled=*/false, kIb), multicast_(kIb), ctx_{objects_, scheduler_,
                                                                         direct_,  multicast_,
                                                                         flows_,   kIb,
                                                                         nullptr} {
    RouterConfig cfg;
    cfg.socket_path = "/nonexistent/wharf-executor-test.sock";  // never started
    router_ = std::make_unique<Router>(cfg);                    // only as the sessions' router
    container_.lid = 7;
    session_ = std::make_unique<Session>(router_.get(), UniqueFd(), getpid(), 0, &container_);
    make_cq(&cq_);
    make_qp(&a_);
    make_qp(&b_);
    connect(&a_, &b_);
    connect(&b_, &a_);
    buffer_.assign(4096, 0);
    mr_.owner = session_.get();
    mr_.pd = &pd_;
    mr_.addr = mr_.iova = mr_.mapped_start = reinterpret_cast<uint64_t>(buffer_.data());
    mr_.length = mr_.mapped_len = buffer_.size();
    mr_.mapping = buffer_.data();
    mr_.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    mr_.key = objects_.add_key(&mr_);
  }
  ~ExecutorTest() override {
    scheduler_.clear();
    objects_.remove_qp(a_.qpn);
    objects_.remove_qp(b_.qpn);
    objects_.remove_key(mr_.key);
  }

  void make_cq(Cq* cq) {
    cq->owner = session_.get();
    const shm::CqLayout layout = shm::cq_layout(64);
    ShmRegion region;
    ASSERT_EQ(region.create("wharf-test-cq", layout.total), 0);
    cq->use_region(std::move(region), layout);
    cq_reader_ = test_support::cq_reader(*cq);
  }
  void make_qp(Qp* qp) {
    qp->owner = session_.get();
    qp->pd = &pd_;
    qp->send_cq = qp->recv_cq = &cq_;
    qp->sq_entries = kDepth;
    qp->sq_slot = shm::send_slot_size(1, 64);
    qp->rq_entries = kDepth;
    qp->rq_slot = shm::recv_slot_size(1);
    ASSERT_EQ(qp->shm.create("wharf-test-qp", qp->layout().total), 0);
    ASSERT_TRUE(objects_.add_qp(qp));
  }
  void connect(Qp* qp, const Qp* peer) {
    qp->attr.qp_state = IBV_QPS_RTS;
    qp->attr.dest_qp_num = peer->qpn;
    qp->attr.ah_attr.dlid = container_.lid;
    qp->attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    qp->attr.retry_cnt = 7;
    qp->attr.rnr_retry = 2;
    qp->attr.min_rnr_timer = 1;  // 0.01 ms
    qp->attr.timeout = 14;
    scheduler_.activate(qp);
  }
  // What a library's ibv_post_send (send true) or ibv_post_recv writes into qp's ring.
  static void push(Qp* qp, bool send, const void* head, size_t head_len, const void* body,
                   size_t body_len) {
    ASSERT_TRUE(test_support::push_wqe(qp, send, head, head_len, body, body_len));
  }
  // A receive of one SGE: `len` bytes at `offset` in buffer_.
  void post_recv(Qp* qp, uint64_t wr_id, uint32_t offset, uint32_t len) {
    shm::RecvWqe h{wr_id, 1, 0};
    shm::Sge sge{reinterpret_cast<uint64_t>(buffer_.data()) + offset, len, mr_.key};
    push(qp, false, &h, sizeof(h), &sge, sizeof(sge));
  }
  // A signaled inline SEND of `text`.
  void send_inline(Qp* qp, uint64_t wr_id, const char* text) {
    shm::SendWqe h{};
    h.wr_id = wr_id;
    h.opcode = IBV_WR_SEND;
    h.flags = shm::kWqeSignaled | shm::kWqeInline;
    h.inline_len = static_cast<uint32_t>(strlen(text));
    push(qp, true, &h, sizeof(h), text, h.inline_len);
  }
  // A signaled RDMA WRITE of buffer_'s first `len` bytes to raddr/rkey.
  void write(Qp* qp, uint64_t wr_id, uint32_t len, uint64_t raddr, uint32_t rkey) {
    shm::SendWqe h{};
    h.wr_id = wr_id;
    h.opcode = IBV_WR_RDMA_WRITE;
    h.flags = shm::kWqeSignaled;
    h.num_sge = 1;
    h.remote_addr = raddr;
    h.rkey = rkey;
    shm::Sge sge{reinterpret_cast<uint64_t>(buffer_.data()), len, mr_.key};
    push(qp, true, &h, sizeof(h), &sge, sizeof(sge));
  }
  // One look of the executor at qp, at time `now`.
  bool look(Qp* qp, uint64_t now) {
    Executor ex(ctx_, now);
    return ex.process_qp_st(qp);
  }
  std::vector<shm::Cqe> completions() {
    std::vector<shm::Cqe> out;
    shm::Cqe c;
    while (cq_reader_.pop(&c)) out.push_back(c);
    return out;
  }

  HostObjects objects_;
  Scheduler scheduler_;
  DirectLines direct_;
  MulticastGroups multicast_;
  FlowRules flows_;
  PathContext ctx_;
  std::unique_ptr<Router> router_;
  Container container_;
  std::unique_ptr<Session> session_;
  Pd pd_;
  Cq cq_;
  shm::CqConsumer cq_reader_;
  Qp a_, b_;
  std::vector<uint8_t> buffer_;
  Mr mr_;
};

TEST_F(ExecutorTest, ASendLandsInThePeersReceiveAndBothComplete) {
  post_recv(&b_, 9, 100, 64);
  send_inline(&a_, 1, "hello");
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(std::memcmp(buffer_.data() + 100, "hello", 5), 0);
  const std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 9u);  // the receive first, as the responder's comes first
  EXPECT_EQ(got[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(got[0].byte_len, 5u);
  EXPECT_EQ(got[0].qp_num, b_.qpn);
  EXPECT_EQ(got[0].src_qp, a_.qpn);
  EXPECT_EQ(got[1].wr_id, 1u);
  EXPECT_EQ(got[1].opcode, IBV_WC_SEND);
  EXPECT_EQ(got[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(a_.work().copied_bytes, 0u);
}

// C9-...: no receive posted is an RNR NAK; the requester waits the responder's
// min_rnr_timer, keeps the WQE at the head, and tries again; rnr_retry tries, then
// RNR_RETRY_EXC_ERR. The time is the test's own.
TEST_F(ExecutorTest, WithoutAReceiveTheSendWaitsTheRnrTimerThenRetriesAndGivesUp) {
  send_inline(&a_, 1, "x");
  const uint64_t wait = rc::rnr_timer_ns(b_.attr.min_rnr_timer);
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(a_.work().wait_until_ns, kStart + wait);
  EXPECT_EQ(a_.work().rnr_attempts, 1);
  EXPECT_FALSE(look(&a_, kStart + wait - 1));  // still waiting: nothing happens
  EXPECT_TRUE(completions().empty());
  EXPECT_TRUE(look(&a_, kStart + wait));  // second try, still no receive
  EXPECT_EQ(a_.work().rnr_attempts, 2);
  EXPECT_TRUE(look(&a_, kStart + 3 * wait));  // rnr_retry 2 spent
  const std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(a_.state(), IBV_QPS_ERR);
}

// Nobody answers at the peer's QPN: retry_cnt tries after the local ACK timeout, then
// RETRY_EXC_ERR; with timeout 0 (infinite, IBTA 9.7.6.1.3) the tries never end.
TEST_F(ExecutorTest, ASendToNobodyFailsAfterItsRetriesUnlessItsAckTimeoutIsInfinite) {
  a_.attr.dest_qp_num = 0xabcdef;  // no such QP
  a_.attr.retry_cnt = 1;
  send_inline(&a_, 1, "x");
  uint64_t now = kStart;
  EXPECT_TRUE(look(&a_, now));
  EXPECT_TRUE(completions().empty());
  EXPECT_TRUE(look(&a_, a_.work().wait_until_ns));  // the one retry finds nobody either
  std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_RETRY_EXC_ERR);

  b_.attr.dest_qp_num = 0xabcdef;
  b_.attr.timeout = 0;
  b_.attr.retry_cnt = 1;
  send_inline(&b_, 2, "y");
  now = kStart;
  for (int i = 0; i < 300; ++i) {
    EXPECT_TRUE(look(&b_, now));
    EXPECT_EQ(b_.work().wait_until_ns, now + rc::ack_timeout_ns(0));
    now = b_.work().wait_until_ns;
  }
  EXPECT_TRUE(completions().empty());
  EXPECT_EQ(b_.state(), IBV_QPS_RTS);
}

TEST_F(ExecutorTest, AReceivePostedDuringTheRnrWaitTakesTheRetriedSend) {
  send_inline(&a_, 1, "late");
  const uint64_t wait = rc::rnr_timer_ns(b_.attr.min_rnr_timer);
  EXPECT_TRUE(look(&a_, kStart));
  post_recv(&b_, 9, 0, 64);
  EXPECT_TRUE(look(&a_, kStart + wait));
  const std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 9u);
  EXPECT_EQ(got[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(buffer_.data(), "late", 4), 0);
  EXPECT_EQ(a_.work().rnr_attempts, 0);  // a success starts the count again
}

TEST_F(ExecutorTest, AWriteWithAKeyThePeerDoesNotHaveIsARemoteAccessError) {
  std::memcpy(buffer_.data(), "abcd", 4);
  write(&a_, 1, 4, reinterpret_cast<uint64_t>(buffer_.data()) + 2048, mr_.key);
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(std::memcmp(buffer_.data() + 2048, "abcd", 4), 0);
  write(&a_, 2, 4, reinterpret_cast<uint64_t>(buffer_.data()) + 3000, mr_.key ^ 0x100);
  EXPECT_TRUE(look(&a_, kStart));
  const std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(got[1].wr_id, 2u);
  EXPECT_EQ(got[1].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(a_.state(), IBV_QPS_ERR);
  EXPECT_EQ(buffer_[3000], 0);  // nothing written
}

// wharfd --emulate (issue #21): what the executor charges the RNIC emulator. The stalls are
// recorded, not waited out.
void no_stall(uint64_t, void*) {}
emulator::EmulationConfig both_caches() {
  emulator::EmulationConfig cfg;
  cfg.qp_cache = 16;
  cfg.mtt_cache = 16;
  return cfg;
}

TEST_F(ExecutorTest, TheEmulatorChargesAWriteItsTwoQpsAndTheBytesAtBothEnds) {
  emulator::RnicEmulator emu(both_caches(), no_stall, nullptr);
  ctx_.emulator = &emu;
  write(&a_, 1, 4, reinterpret_cast<uint64_t>(buffer_.data()) + 2048, mr_.key);
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(emu.counters().qp_misses, 2u);  // the requester's context, then the responder's
  EXPECT_EQ(emu.counters().qp_hits, 0u);
  // One page of the source, one of the target (the same page, or two).
  EXPECT_EQ(emu.counters().mtt_misses + emu.counters().mtt_hits, 2u);
  write(&a_, 2, 4, reinterpret_cast<uint64_t>(buffer_.data()) + 2048, mr_.key);
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(emu.counters().qp_hits, 2u);  // both contexts cached now
  EXPECT_EQ(emu.counters().mtt_misses + emu.counters().mtt_hits, 4u);
  EXPECT_EQ(completions().size(), 2u);
}

TEST_F(ExecutorTest, TheEmulatorChargesAnInlineSendOnlyTheBytesItPlaces) {
  emulator::RnicEmulator emu(both_caches(), no_stall, nullptr);
  ctx_.emulator = &emu;
  post_recv(&b_, 9, 100, 64);
  send_inline(&a_, 1, "hello");
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(emu.counters().qp_misses, 2u);
  EXPECT_EQ(emu.counters().mtt_misses + emu.counters().mtt_hits, 1u);  // the receive's 5 bytes
}

TEST_F(ExecutorTest, SequentialMatchingChargesTheResponderSideOnly) {
  // A WRITE and a SEND are each steered to their responder once: a lookup over every rule.
  // The requester's work starting is not a lookup.
  emulator::EmulationConfig cfg;
  cfg.match_sequential = 1;
  cfg.match_ns = 30;
  uint64_t stalled = 0;
  emulator::RnicEmulator emu(
      cfg, [](uint64_t ns, void* arg) { *static_cast<uint64_t*>(arg) += ns; }, &stalled);
  emu.set_match_rules_st(12);
  ctx_.emulator = &emu;
  write(&a_, 1, 4, reinterpret_cast<uint64_t>(buffer_.data()) + 2048, mr_.key);
  EXPECT_TRUE(look(&a_, kStart));
  post_recv(&b_, 9, 100, 64);
  send_inline(&a_, 2, "hello");
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(completions().size(), 3u);  // the WRITE's, the SEND's and its receive's
  EXPECT_EQ(emu.counters().match_lookups, 2u);
  EXPECT_EQ(emu.counters().match_rules_tried, 24u);
  EXPECT_EQ(stalled, 24u * 30);
}

TEST_F(ExecutorTest, ALongWriteIsChargedOnceNotPerPart) {
  // 256 KiB go a part (at most 64 KiB) a look; the QPs' contexts and the 64 + 64 pages are
  // charged as the work request starts, not again for each part.
  alignas(4096) static uint8_t big[512 * 1024];
  Mr mr;
  mr.owner = session_.get();
  mr.pd = &pd_;
  mr.addr = mr.iova = mr.mapped_start = reinterpret_cast<uint64_t>(big);
  mr.length = mr.mapped_len = sizeof(big);
  mr.mapping = big;
  mr.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  mr.key = objects_.add_key(&mr);
  emulator::EmulationConfig cfg = both_caches();
  cfg.mtt_cache = 1024;
  emulator::RnicEmulator emu(cfg, no_stall, nullptr);
  ctx_.emulator = &emu;
  shm::SendWqe h{};
  h.wr_id = 1;
  h.opcode = IBV_WR_RDMA_WRITE;
  h.flags = shm::kWqeSignaled;
  h.num_sge = 1;
  h.remote_addr = reinterpret_cast<uint64_t>(big) + 256 * 1024;
  h.rkey = mr.key;
  shm::Sge sge{reinterpret_cast<uint64_t>(big), 256 * 1024, mr.key};
  push(&a_, true, &h, sizeof(h), &sge, sizeof(sge));
  int looks = 0;
  while (completions().empty() && looks < 100) {
    look(&a_, kStart);
    ++looks;
  }
  EXPECT_GT(looks, 1);  // it did go in parts
  EXPECT_EQ(emu.counters().qp_misses + emu.counters().qp_hits, 2u);
  EXPECT_EQ(emu.counters().mtt_misses, 128u);
  EXPECT_EQ(emu.counters().mtt_hits, 0u);
  objects_.remove_key(mr.key);
}

// ---- A router process dying between the stores that complete a send (issue #23) ----
// Each test runs a SEND from a_ to b_ whole, then puts back what the dead process would have
// left at one instant (the rings' consumer indices, the records' states: what the executor
// wrote before and after, router/local_completions.h), and has a new process take the QPs
// back as Session::on_create_qp restores them.
class ExecutorRestartTest : public ExecutorTest {
 protected:
  void SetUp() override {
    post_recv(&b_, 9, 100, 64);
    post_recv(&b_, 10, 200, 64);
    send_inline(&a_, 1, "hello");
    ASSERT_TRUE(look(&a_, kStart));
    ASSERT_EQ(completions().size(), 2u);
    // What the executor recorded on its way.
    const shm::LocalCompletion& r = b_.local_completions()->receiving;
    EXPECT_EQ(r.sender_qpn, a_.qpn);
    EXPECT_EQ(r.sender_index, 0u);
    EXPECT_EQ(r.ring_index, 0u);
    EXPECT_EQ(r.cq_position, 0u);
    EXPECT_EQ(r.cqe.wr_id, 9u);
    EXPECT_EQ(r.state, shm::kLocalCompletionNone) << "dropped once the send completed";
    const shm::LocalCompletion& s = a_.local_completions()->sending;
    EXPECT_EQ(s.ring_index, 0u);
    EXPECT_EQ(s.cq_position, 1u);
    EXPECT_EQ(s.cqe.wr_id, 1u);
    EXPECT_EQ(s.state, shm::kLocalCompletionNone);
  }
  static shm::RingHeader* ring(Qp* qp, bool send) {
    const shm::QpLayout l = qp->layout();
    return reinterpret_cast<shm::RingHeader*>(qp->shm.data() +
                                              (send ? l.sq_ring_off : l.rq_ring_off));
  }
  // The new process: cursors from the rings, then what was left under way finished.
  void take_back(Qp* qp) {
    qp->sq_cursor = qp->rq_cursor = shm::RingCursor{};
    qp->sq().resync();
    qp->rq().resync();
    finish_local_completions_st(qp, objects_);
  }
  // Every QP taken back (b_'s SRQ first, where it has one).
  virtual void take_back_all() {
    take_back(&b_);
    take_back(&a_);
  }
  virtual uint32_t receives_left() { return b_.rq().available(); }

  // Died after the receive was made whole, before the send left its ring.
  void died_after_the_receive() {
    b_.local_completions()->receiving.state = shm::kLocalCompletionDone;
    ring(&a_, true)->consumer.value.store(0);
    take_back_all();
  }
  // Executed again, the send completes alone, and the next receive is still there.
  void expect_the_send_completes_alone() {
    EXPECT_TRUE(look(&a_, kStart + 1));
    const std::vector<shm::Cqe> got = completions();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 1u);
    EXPECT_EQ(got[0].opcode, IBV_WC_SEND);
    EXPECT_EQ(receives_left(), 1u) << "the next receive was taken";
  }
};

// Died after the receive was made whole, before the send left its ring: executed again, the
// send completes without its message arriving twice (rping -V saw its peer's reply out of
// turn, the message having taken the next receive).
TEST_F(ExecutorRestartTest, AMessageThatArrivedIsNotDeliveredAgain) {
  died_after_the_receive();
  expect_the_send_completes_alone();
}

// Died with the receive under way, before its ring moved and its entry went: the new process
// takes the receive and completes it once, and the send executed again does not deliver.
TEST_F(ExecutorRestartTest, AReceiveLeftUnderWayIsTakenAndCompletedOnce) {
  shm::LocalCompletion& r = b_.local_completions()->receiving;
  r.state = shm::kLocalCompletionUnderWay;
  r.cq_position = 2;  // the entry not pushed: none of the CQ's since is it
  ring(&b_, false)->consumer.value.store(0);
  ring(&a_, true)->consumer.value.store(0);
  take_back_all();
  EXPECT_EQ(r.state, shm::kLocalCompletionDone);
  EXPECT_TRUE(look(&a_, kStart + 1));
  const std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 9u);
  EXPECT_EQ(got[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(got[0].byte_len, 5u);
  EXPECT_EQ(got[1].wr_id, 1u);
  EXPECT_EQ(receives_left(), 1u);
}

// Died with the receive under way after both its stores: nothing is taken or posted again.
TEST_F(ExecutorRestartTest, AReceiveUnderWayWhoseStoresWereMadeIsNotMadeTwice) {
  b_.local_completions()->receiving.state = shm::kLocalCompletionUnderWay;
  ring(&a_, true)->consumer.value.store(0);
  take_back_all();
  EXPECT_TRUE(look(&a_, kStart + 1));
  const std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(receives_left(), 1u);
}

// Died after the send left its ring, before its entry went: the new process posts it; had it
// gone, nothing.
TEST_F(ExecutorRestartTest, ASendGoneFromItsRingGetsItsEntryOnce) {
  shm::LocalCompletion& s = a_.local_completions()->sending;
  s.state = shm::kLocalCompletionUnderWay;
  s.cq_position = 2;
  take_back_all();
  std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(s.state, shm::kLocalCompletionNone);

  s.state = shm::kLocalCompletionUnderWay;
  s.cq_position = 1;  // the entry at position 1 is it
  take_back(&a_);
  EXPECT_TRUE(completions().empty());
  EXPECT_FALSE(look(&a_, kStart + 1)) << "nothing left to execute";
}

// A reset QP has nothing under way for a later restart to finish.
TEST_F(ExecutorRestartTest, AResetForgetsTheRecords) {
  b_.local_completions()->receiving.state = shm::kLocalCompletionDone;
  forget_local_completions(&b_);
  EXPECT_EQ(b_.local_completions()->receiving.state, shm::kLocalCompletionNone);
  EXPECT_EQ(b_.local_completions()->receiving.sender_qpn, 0u);
}

// The same between two UD QPs: a datagram to one QP of this host is recorded as a SEND is.
class ExecutorUdRestartTest : public ExecutorRestartTest {
 protected:
  static constexpr uint32_t kQkey = 0x11111111;
  void SetUp() override {
    for (Qp* qp : {&a_, &b_}) {
      qp->type = IBV_QPT_UD;
      qp->set_extra(&QpExtras::qkey, kQkey);
    }
    auto ah = std::make_unique<Ah>();
    ah->pd = &pd_;
    ah->attr.dlid = container_.lid;
    ah->attr.port_num = 1;
    ah_ = session_->adopt_ah(std::move(ah))->handle;
    post_recv(&b_, 9, 100, 64);
    post_recv(&b_, 10, 200, 64);
    send_datagram(1, "hello");
    ASSERT_TRUE(look(&a_, kStart));
    const std::vector<shm::Cqe> got = completions();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].wr_id, 9u);
    EXPECT_EQ(got[0].byte_len, kGrhSize + 5);
    EXPECT_EQ(b_.local_completions()->receiving.sender_qpn, a_.qpn);
    EXPECT_EQ(b_.local_completions()->receiving.state, shm::kLocalCompletionNone);
  }
  // A signaled inline datagram of `text` from a_ to b_.
  void send_datagram(uint64_t wr_id, const char* text) {
    shm::SendWqe h{};
    h.wr_id = wr_id;
    h.opcode = IBV_WR_SEND;
    h.flags = shm::kWqeSignaled | shm::kWqeInline;
    h.inline_len = static_cast<uint32_t>(strlen(text));
    h.ah_handle = ah_;
    h.remote_qpn = b_.qpn;
    h.remote_qkey = kQkey;
    push(&a_, true, &h, sizeof(h), text, h.inline_len);
  }
  uint32_t ah_ = 0;
};

// Died after the datagram was received, before the send left its ring: executed again, the
// send completes without the datagram arriving twice.
TEST_F(ExecutorUdRestartTest, ADatagramThatArrivedIsNotDeliveredAgain) {
  died_after_the_receive();
  expect_the_send_completes_alone();
}

// A datagram to a multicast group is not recorded: the record names one receiver, and a
// group's members may be several.
TEST_F(ExecutorUdRestartTest, ADatagramToAGroupIsNotRecorded) {
  proto::Gid mgid{};
  mgid[0] = 0xff;
  mgid[15] = 1;
  ASSERT_EQ(multicast_.attach(&b_, mgid, 0xc001), 0);
  auto ah = std::make_unique<Ah>();
  ah->pd = &pd_;
  ah->attr.dlid = 0xc001;
  ah->attr.is_global = 1;
  ah->attr.dgid = mgid;
  ah->attr.port_num = 1;
  ah_ = session_->adopt_ah(std::move(ah))->handle;
  b_.local_completions()->receiving = shm::LocalCompletion{};
  shm::SendWqe h{};
  h.wr_id = 2;
  h.opcode = IBV_WR_SEND;
  h.flags = shm::kWqeSignaled | shm::kWqeInline;
  h.inline_len = 2;
  h.ah_handle = ah_;
  h.remote_qpn = proto::kMulticastQpn;
  h.remote_qkey = kQkey;
  push(&a_, true, &h, sizeof(h), "hi", 2);
  EXPECT_TRUE(look(&a_, kStart + 1));
  const std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 10u) << "the member received it";
  EXPECT_EQ(b_.local_completions()->receiving.sender_qpn, 0u);
}

// A FETCH_ADD of a_ on buffer_'s word at kCounter, its result to the word at kResult.
class ExecutorAtomicRestartTest : public ExecutorTest {
 protected:
  static constexpr uint32_t kCounter = 1024, kResult = 1032;
  void SetUp() override {
    mr_.access |= IBV_ACCESS_REMOTE_ATOMIC;
    b_.attr.qp_access_flags |= IBV_ACCESS_REMOTE_ATOMIC;
    counter() = 40;
    shm::SendWqe h{};
    h.wr_id = 5;
    h.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    h.flags = shm::kWqeSignaled;
    h.num_sge = 1;
    h.remote_addr = reinterpret_cast<uint64_t>(buffer_.data()) + kCounter;
    h.rkey = mr_.key;
    h.compare_add = 2;
    shm::Sge sge{reinterpret_cast<uint64_t>(buffer_.data()) + kResult, 8, mr_.key};
    push(&a_, true, &h, sizeof(h), &sge, sizeof(sge));
  }
  uint64_t& counter() { return *reinterpret_cast<uint64_t*>(buffer_.data() + kCounter); }
  uint64_t result() { return *reinterpret_cast<uint64_t*>(buffer_.data() + kResult); }
  void expect_one_completion() {
    const std::vector<shm::Cqe> got = completions();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 5u);
    EXPECT_EQ(got[0].opcode, IBV_WC_FETCH_ADD);
    EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  }
};

TEST_F(ExecutorAtomicRestartTest, TheIntentIsNotedThenClearedOnceTheRequestLeavesItsRing) {
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(counter(), 42u);
  EXPECT_EQ(result(), 40u);
  expect_one_completion();
  const AtomicIntent& intent = a_.local_completions()->atomic;
  EXPECT_EQ(intent.orig, 40u);
  EXPECT_EQ(intent.id, 0u);
  EXPECT_EQ(intent.state, kAtomicIntentNone);
}

// Died after the add, before the request left its ring: executed again, it returns what the
// add found and adds nothing more (before: 44, and the second add's 42 returned).
TEST_F(ExecutorAtomicRestartTest, AnAddMadeBeforeACrashIsNotMadeAgain) {
  a_.local_completions()->atomic.note(0, 40);
  counter() = 42;
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(counter(), 42u);
  EXPECT_EQ(result(), 40u);
  expect_one_completion();
}

// Died between the note and the add: the add is made.
TEST_F(ExecutorAtomicRestartTest, AnAddNotedButNotMadeIsMade) {
  a_.local_completions()->atomic.note(0, 40);
  EXPECT_TRUE(look(&a_, kStart));
  EXPECT_EQ(counter(), 42u);
  EXPECT_EQ(result(), 40u);
  expect_one_completion();
}

// The same through a shared receive queue: b_ takes its receives from srq_.
class ExecutorSrqRestartTest : public ExecutorRestartTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(test_support::make_srq(&srq_, session_.get(), &pd_, kDepth, objects_));
    ASSERT_TRUE(test_support::put_qp_on_srq(&b_, &srq_, objects_));  // b_ again, on the SRQ
    connect(&a_, &b_);
    connect(&b_, &a_);
    post_srq_recv(9, 100);
    post_srq_recv(10, 200);
    send_inline(&a_, 1, "hello");
    ASSERT_TRUE(look(&a_, kStart));
    const std::vector<shm::Cqe> got = completions();
    ASSERT_EQ(got.size(), 2u);
    ASSERT_EQ(got[0].wr_id, 9u);
    kept_ = b_.local_completions()->receiving.srq_record;
    ASSERT_NE(kept_, SrqRecords::kNone) << "the claimed receive's record";
  }
  ~ExecutorSrqRestartTest() override { objects_.remove_srq(srq_.srqn); }
  void post_srq_recv(uint64_t wr_id, uint32_t offset) {
    const shm::Sge sge{reinterpret_cast<uint64_t>(buffer_.data()) + offset, 64, mr_.key};
    ASSERT_TRUE(test_support::push_srq_recv(&srq_, wr_id, sge));
  }
  // The new process takes the SRQ back (before its QPs) from its region and records.
  void take_back_all() override {
    srq_.ring_cursor = shm::RingCursor{};
    srq_.ring().resync();
    srq_.has_claimed = false;
    srq_.claimed_record = SrqRecords::kNone;
    Session::adopt_srq_records(&srq_);
    ExecutorRestartTest::take_back_all();
  }
  uint32_t receives_left() override { return srq_.ring().available(); }
  Srq srq_;
  uint32_t kept_ = SrqRecords::kNone;
};

// Died with the receive under way before it let go of the SRQ's record of it: the new process
// took that receive back as the SRQ's next, and would have placed the next message in it a
// second time. It completes the receive once, lets go of it, and the next message takes the
// SRQ's next receive.
TEST_F(ExecutorSrqRestartTest, AReceiveTheSrqStillKeptIsCompletedOnceAndLetGoOf) {
  shm::LocalCompletion& r = b_.local_completions()->receiving;
  r.state = shm::kLocalCompletionUnderWay;
  r.cq_position = 2;
  auto* record = reinterpret_cast<shm::SrqHeldRecord*>(srq_.shm.data() + srq_.layout.records_off +
                                                       size_t{kept_} * srq_.layout.record_size);
  record->state.store(shm::kSrqRecordClaimed);
  ring(&a_, true)->consumer.value.store(0);
  take_back_all();
  EXPECT_FALSE(srq_.has_claimed);
  EXPECT_EQ(record->state.load(), shm::kSrqRecordFree);
  EXPECT_TRUE(look(&a_, kStart + 1));
  std::vector<shm::Cqe> got = completions();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 9u);
  EXPECT_EQ(got[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(got[1].wr_id, 1u);

  send_inline(&a_, 2, "again");
  EXPECT_TRUE(look(&a_, kStart + 2));
  got = completions();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 10u) << "the next message took the receive the first had";
  EXPECT_EQ(got[1].wr_id, 2u);
}

// Died after the receive was made whole: the send executed again does not deliver.
TEST_F(ExecutorSrqRestartTest, AMessageThatArrivedIsNotDeliveredAgain) {
  died_after_the_receive();
  expect_the_send_completes_alone();
}

}  // namespace
}  // namespace wharf::router
