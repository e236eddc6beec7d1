// Tests for the host-to-host engine (router/remote.h) on its own: two routers' data paths in
// one process joined by real host links on loopback (tests/support/remote_hosts.h). Each host
// has one container with an RC QP connected by hand to the other host's; work requests are
// written into the rings as a library writes them, each host runs passes as the router's loop
// does, and completions are read from the CQs as a library reads them.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/remote_hosts.h"

namespace wharf::router {
namespace {

using test_support::expect_cqe;
using test_support::kMemory;
using test_support::RemoteHost;
using test_support::work;

class RemotePathTest : public ::testing::Test {
 protected:
  // The QPs connected to each other, and each host's network number known to the other (a
  // request carries its receiver's number: one sent before that would be dropped). Each host
  // registers `memory` bytes; b's QP takes its receives from an SRQ if `b_on_srq`.
  explicit RemotePathTest(size_t memory = kMemory, bool b_on_srq = false)
      : a_{cluster_, "a", 5, 0xc6120105, memory},      // 198.18.1.5
        b_{cluster_, "b", 1029, 0xc6120205, memory} {  // 198.18.2.5
    if (b_on_srq) b_.use_srq();
    EXPECT_TRUE(test_support::connect_hosts(a_, b_, [&] { pass(); }));
  }

  void pass() {
    a_.pass();
    b_.pass();
  }
  // Runs passes of both hosts until done() holds; false if it did not within 5 s (a guard
  // against hanging, not a limit on speed).
  template <class Done>
  bool run_until(Done done) {
    return test_support::run_until([&] { pass(); }, done);
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

  const std::string cluster_ = test_support::two_host_cluster();
  RemoteHost a_;
  RemoteHost b_;
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

// Packets of 16 KiB or more keep the bulk windows of their QP's CQs open (the router moves a
// long message: pollers there nap, shm::bulk_nap_ns): at the sender of a WRITE, and at both
// ends of a READ. Short messages do not, nor does the target of a WRITE, whose application
// may be watching its memory.
class RemotePathBulkTest : public RemotePathTest {
 protected:
  static constexpr uint32_t kLong = 256 * 1024;  // four packets
  RemotePathBulkTest() : RemotePathTest(2 * kLong) {}
};

TEST_F(RemotePathBulkTest, LongWritesAndReadsOpenTheBulkWindowsOfTheEndsThatAwaitTheRouter) {
  a_.post_send(work(IBV_WR_RDMA_WRITE, 1, b_.address(0), b_.rkey()), 0, 4096);
  a_.post_send(work(IBV_WR_RDMA_READ, 2, b_.address(0), b_.rkey()), 8192, 4096);
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 2; }));
  EXPECT_EQ(a_.bulk_until_ns(), 0u);
  EXPECT_EQ(b_.bulk_until_ns(), 0u);

  const uint64_t before_write = now_ns();
  a_.post_send(work(IBV_WR_RDMA_WRITE, 3, b_.address(0), b_.rkey()), 0, kLong);
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 3; }));
  EXPECT_EQ(a_.completions()[2].status, IBV_WC_SUCCESS);
  EXPECT_GE(a_.bulk_until_ns(), before_write + shm::kBulkWindowNs);
  EXPECT_EQ(b_.bulk_until_ns(), 0u);

  // The window moves only by more than a tenth of itself: wait that long for a visible move.
  const uint64_t after_write = a_.bulk_until_ns();
  const uint64_t before_read = now_ns();
  while (now_ns() - before_read <= shm::kBulkWindowNs / 10) std::this_thread::yield();
  a_.post_send(work(IBV_WR_RDMA_READ, 4, b_.address(0), b_.rkey()), kLong, kLong);
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 4; }));
  EXPECT_EQ(a_.completions()[3].status, IBV_WC_SUCCESS);
  EXPECT_GT(a_.bulk_until_ns(), after_write);                       // receiving the responses
  EXPECT_GE(b_.bulk_until_ns(), before_read + shm::kBulkWindowNs);  // sending them
  EXPECT_TRUE(b_.completions().empty());
}

// b's QP on an SRQ.
class RemotePathSrqTest : public RemotePathTest {
 protected:
  static constexpr uint32_t kLong = 128 * 1024;  // two packets
  RemotePathSrqTest() : RemotePathTest(2 * kLong, /*b_on_srq=*/true) {}
  const RemoteQpState::CompletionUnderWay& receiving() { return b_.qp().remote->receiving; }
};

// A receive from the SRQ is recorded, before it is let go of, with the SRQ's record of it (a
// next process finds the receive taken once the SRQ no longer keeps it): the SRQ's next for a
// message of one packet, the one the QP held for a message of two.
TEST_F(RemotePathSrqTest, AReceiveFromTheSrqIsRecordedWithTheSrqsRecordOfIt) {
  b_.post_srq_recv(11, 0, 64);
  b_.post_srq_recv(12, kLong, kLong);
  a_.send_inline(1, "hello");
  ASSERT_TRUE(run_until([&] { return b_.completions().size() == 1; }));
  expect_cqe(b_.completions()[0], 11u, IBV_WC_SUCCESS, IBV_WC_RECV);
  ASSERT_NE(b_.qp().remote, nullptr);
  EXPECT_NE(receiving().srq_record, SrqRecords::kNone);
  EXPECT_EQ(receiving().cqe.wr_id, 11u);

  a_.post_send(work(IBV_WR_SEND, 2), 0, kLong);
  ASSERT_TRUE(run_until([&] { return b_.completions().size() == 2; }));
  expect_cqe(b_.completions()[1], 12u, IBV_WC_SUCCESS, IBV_WC_RECV);
  EXPECT_EQ(b_.completions()[1].byte_len, kLong);
  EXPECT_NE(receiving().srq_record, SrqRecords::kNone);
  EXPECT_EQ(receiving().cqe.wr_id, 12u);
}

TEST_F(RemotePathTest, AWriteWithAKeyThePeerDoesNotHaveIsARemoteAccessError) {
  expect_write_refused(b_.address(512), b_.rkey() ^ 0x100);
}

TEST_F(RemotePathTest, AWritePastTheEndOfThePeersRegistrationIsARemoteAccessError) {
  expect_write_refused(b_.address(kMemory - 2), b_.rkey());
}

// A responder takes RC requests only from the host and QP it is connected to (issue #19):
// a's WRITE to b, whose QP is connected to another QPN, is dropped and counted; a retries
// until RETRY_EXC_ERR and b's memory is untouched.
TEST_F(RemotePathTest, ARequestFromAQpTheResponderIsNotConnectedToIsDroppedAndCounted) {
  b_.qp().attr.dest_qp_num = a_.qp().qpn ^ 0x10000;  // the same slot, another generation
  a_.qp().attr.timeout = 8;                          // 1 ms
  a_.qp().attr.retry_cnt = 2;
  std::memcpy(a_.memory(0), "abcd", 4);
  a_.post_send(work(IBV_WR_RDMA_WRITE, 1, b_.address(0), b_.rkey()), 0, 4);
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 1; }));
  EXPECT_EQ(a_.completions()[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(b_.counters().stray_packets_dropped, 3u);  // the request and its two retries
  EXPECT_EQ(std::vector<uint8_t>(b_.memory(0), b_.memory(kMemory)),
            std::vector<uint8_t>(kMemory, 0));
  EXPECT_EQ(b_.qp().state(), IBV_QPS_RTS);
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
  // Each refusal is counted on a's link to b, and each wait's end sent the SEND again.
  const links::HostLinks::LinkStats link = a_.link_stats(1);
  EXPECT_EQ(link.rnr_naks, a_.counters().rnr_naks_received);
  EXPECT_GE(link.retransmitted_packets, link.rnr_naks);
  EXPECT_EQ(b_.link_stats(0).retransmitted_packets, 0u) << "b sent nothing again";
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

// b's previous process changed the target for a's next atomic and died before it took the
// request (its intent noted in the kept state under the PSN): the request, new to this
// process, is answered from the intent and the target changes once (before: twice).
TEST_F(RemotePathTest, AnAtomicWhoseChangeAPreviousProcessMadeIsNotMadeAgain) {
  const uint64_t start = 5;
  std::memcpy(b_.memory(1536), &start, 8);
  shm::SendWqe add = work(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, b_.address(1536), b_.rkey());
  add.compare_add = 3;
  a_.post_send(add, 0, 8);
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 1; }));
  ASSERT_NE(b_.qp().remote, nullptr);
  rc::Responder& rs = b_.qp().remote->responder;
  EXPECT_EQ(rs.atomic_intent()->state, kAtomicIntentNone) << "cleared once taken";

  rs.atomic_intent()->note(rs.epsn(), 8);
  const uint64_t made = 11;
  std::memcpy(b_.memory(1536), &made, 8);
  add.wr_id = 2;
  a_.post_send(add, 8, 8);
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 2; }));
  EXPECT_EQ(a_.completions()[1].status, IBV_WC_SUCCESS);
  uint64_t returned = 0, now_held = 0;
  std::memcpy(&returned, a_.memory(8), 8);
  std::memcpy(&now_held, b_.memory(1536), 8);
  EXPECT_EQ(returned, 8u);
  EXPECT_EQ(now_held, 11u);
}

// Pingmesh (router/remote_pingmesh.cc): two routers probing every 10 ms answer each other's
// probes over their link, and each sees the other up with a round trip and nothing lost.
TEST(RemotePathPingmeshTest, RoutersAnswerEachOthersProbesAndSeeEachOtherUp) {
  const std::string cluster = test_support::two_host_cluster();
  constexpr uint64_t kInterval = 10'000'000;
  RemoteHost a{cluster, "a", 5, 0xc6120105, kMemory, kInterval};
  RemoteHost b{cluster, "b", 1029, 0xc6120205, kMemory, kInterval};
  const auto answered = [](const RemoteHost& h, int peer) {
    return h.remote().pingmesh()->summary(peer).answered;
  };
  ASSERT_NE(a.remote().pingmesh(), nullptr);
  ASSERT_TRUE(test_support::run_until(
      [&] {
        a.pass();
        b.pass();
      },
      [&] { return answered(a, 1) >= 3 && answered(b, 0) >= 3; }));
  for (const auto& [host, peer] : {std::pair<const RemoteHost*, int>{&a, 1}, {&b, 0}}) {
    const pingmesh::PeerSummary s = host->remote().pingmesh()->summary(peer);
    EXPECT_EQ(s.state, pingmesh::PeerState::kUp);
    EXPECT_GT(s.rtt_p50_ns, 0u);
    EXPECT_LE(s.rtt_p50_ns, s.rtt_p99_ns);
    // Only the first round, sent before the link was up, may have gone unanswered.
    EXPECT_LE(s.lost, 1u);
    EXPECT_EQ(host->remote().pingmesh()->summary(host == &a ? 0 : 1).answered, 0u) << "itself";
  }
}

// Pingmesh within tenants' networks: a probes within acme/blue (which b serves: its container
// is there) and acme/red (which b numbers only when a announces it). Each probe carries b's
// number for its network, which b must know to answer; until b announced that number, a
// does not probe b within that network.
TEST(RemotePathPingmeshTest, ProbesWithinATenantNetworkReachTheRoutersThatServeIt) {
  const std::string cluster = test_support::two_host_cluster();
  constexpr uint64_t kInterval = 10'000'000;
  RemoteHost a{
      cluster, "a", 5, 0xc6120105, kMemory, kInterval, {{"acme", "blue"}, {"acme", "red"}}};
  RemoteHost b{cluster, "b", 1029, 0xc6120205, kMemory, kInterval};
  const auto& meshes = a.remote().network_meshes();
  ASSERT_EQ(meshes.size(), 2u);
  ASSERT_EQ(meshes[0].network, "blue");
  ASSERT_TRUE(test_support::run_until(
      [&] {
        a.pass();
        b.pass();
      },
      [&] {
        return meshes[0].mesh->summary(1).answered >= 3 && meshes[1].mesh->summary(1).answered >= 3;
      }));
  for (const RemotePath::NetworkMesh& m : meshes) {
    EXPECT_EQ(m.mesh->summary(1).state, pingmesh::PeerState::kUp) << m.network;
    EXPECT_GT(m.mesh->summary(1).rtt_p50_ns, 0u) << m.network;
    EXPECT_EQ(m.mesh->summary(1).lost, 0u) << m.network << ": no probe before b's number";
  }
  EXPECT_EQ(b.remote().network_meshes().size(), 0u);
}

}  // namespace
}  // namespace wharf::router
