// The router killed (SIGKILL) and started again on its socket, or upgraded in place (wharfd
// --upgrade), under running work (issue #23):
// the libraries resume their sessions with the new router process, and the work goes on with
// no error completion: every SEND arrives exactly once, in order, with its bytes, and every
// WRITE lands. Runs in each of the verifier's modes (direct path on, router only); across
// hosts, with either end's router restarted (the new process continues its connections from
// the state the old one kept, router/kept_remote_states.h, and the peer goes back N).
#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "cluster.h"
#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class RestartTest : public VerbsTest {
 protected:
  // kMsgs messages from a_ to b_ (each a SEND, every fourth also a WRITE) while `restart`
  // is called once a third of them arrived: each arrives once, in order, with its bytes.
  // The QPs' ACK timeout (4.096 us * 2^timeout) and 7 retries outlast the restart.
  // kThroughSrq: b_'s QP takes its receives from an SRQ (resized once before, so that the
  // region it is restored from is the one it was moved to).
  enum Receives { kOwnQueue, kThroughSrq };
  void sends_and_writes_go_on_across(const std::function<void()>& restart, uint8_t timeout,
                                     Receives receives = kOwnQueue);
};

constexpr uint32_t kMsgLen = 65536;
constexpr uint32_t kSlots = 32;   // receive slots, and send/WRITE slots
constexpr uint32_t kWindow = 16;  // sends outstanding at most
constexpr uint32_t kMsgs = 3000;

// Message i's bytes: its number, then a pattern of it.
void fill_message(uint8_t* p, uint32_t i) {
  fill_pattern(p, kMsgLen, i);
  std::memcpy(p, &i, sizeof(i));
}
bool is_message(const uint8_t* p, uint32_t i) {
  std::vector<uint8_t> want(kMsgLen);
  fill_message(want.data(), i);
  return std::memcmp(p, want.data(), kMsgLen) == 0;
}

void RestartTest::sends_and_writes_go_on_across(const std::function<void()>& restart,
                                                uint8_t timeout, Receives receives) {
  ibv_srq* srq = nullptr;
  if (receives == kThroughSrq) {
    ASSERT_NE(srq = create_srq(b_, kSlots / 2), nullptr);
    ibv_srq_attr grown{};
    grown.max_wr = kSlots;
    ASSERT_EQ(ibv_modify_srq(srq, &grown, IBV_SRQ_MAX_WR), 0);
  }
  ibv_qp* qa = create_qp(a_, IBV_QPT_RC);
  ibv_qp* qb = create_qp(b_, IBV_QPT_RC, srq);
  ASSERT_NE(qa, nullptr);
  ASSERT_NE(qb, nullptr);

  connect(qa, a_, qb, b_, kFullAccess, 7, 7, timeout);
  connect(qb, b_, qa, a_, kFullAccess, 7, 7, timeout);
  Buffer src = make_buffer(a_, 2 * kSlots * kMsgLen, kFullAccess);
  Buffer dst = make_buffer(b_, 2 * kSlots * kMsgLen, kFullAccess);
  uint8_t* const written = dst.data + kSlots * kMsgLen;  // WRITEs' slots
  const auto post_receive = [&](uint32_t r) {
    if (srq != nullptr) {
      post_srq_recv(srq, dst, r * kMsgLen, kMsgLen, r);
    } else {
      post_recv(qb, dst, r * kMsgLen, kMsgLen, r);
    }
  };

  for (uint32_t r = 0; r < kSlots; ++r) post_receive(r);
  uint32_t posted = 0, sent = 0, received = 0;
  bool restarted = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (received < kMsgs) {
    ASSERT_TRUE(std::chrono::steady_clock::now() < deadline)
        << "stuck: " << received << " received, " << sent << " sent of " << posted;
    // Message i goes as a SEND; every fourth also as a WRITE into slot i % kSlots.
    while (posted < kMsgs && posted - sent < kWindow) {
      const uint32_t i = posted;
      uint8_t* slot = src.data + (i % kSlots) * kMsgLen;
      fill_message(slot, i);
      ibv_sge sge{reinterpret_cast<uint64_t>(slot), kMsgLen, src.mr->lkey};
      if (i % 4 == 0) {
        ASSERT_EQ(
            post_send(qa, IBV_WR_RDMA_WRITE, {sge}, (1ull << 32) | i, 0,
                      reinterpret_cast<uint64_t>(written + (i % kSlots) * kMsgLen), dst.mr->rkey),
            0);
      }
      ASSERT_EQ(post_send(qa, IBV_WR_SEND, {sge}, i), 0);
      ++posted;
    }
    if (!restarted && received >= kMsgs / 3) {
      restart();
      restarted = true;
    }
    // The receiver: message `received` comes next, in its slot, with its bytes.
    ibv_wc wc[kWindow];
    int n = ibv_poll_cq(b_.cq, static_cast<int>(kWindow), wc);
    ASSERT_GE(n, 0);
    for (int k = 0; k < n; ++k) {
      ASSERT_EQ(wc[k].status, IBV_WC_SUCCESS) << "receive of message " << received;
      ASSERT_EQ(wc[k].opcode, IBV_WC_RECV);
      const uint32_t slot = static_cast<uint32_t>(wc[k].wr_id);
      ASSERT_EQ(slot, received % kSlots) << "a receive completed out of order";
      ASSERT_TRUE(is_message(dst.data + slot * kMsgLen, received))
          << "message " << received << " lost, repeated or torn";
      ++received;
      post_receive(slot);
    }
    // The sender: SENDs complete in order; a completed WRITE has landed.
    n = ibv_poll_cq(a_.cq, static_cast<int>(kWindow), wc);
    ASSERT_GE(n, 0);
    for (int k = 0; k < n; ++k) {
      ASSERT_EQ(wc[k].status, IBV_WC_SUCCESS) << "send completion after " << sent;
      if (wc[k].opcode == IBV_WC_RDMA_WRITE) {
        const auto i = static_cast<uint32_t>(wc[k].wr_id);
        ASSERT_TRUE(is_message(written + (i % kSlots) * kMsgLen, i) ||
                    posted - i > kSlots)  // its slot may be written again by now
            << "WRITE " << i << " did not land";
        continue;
      }
      ASSERT_EQ(wc[k].wr_id, sent) << "a send completed out of order";
      ++sent;
    }
  }
  // Nothing more comes: no message was delivered twice.
  ibv_wc extra;
  EXPECT_EQ(ibv_poll_cq(b_.cq, 1, &extra), 0);
  EXPECT_TRUE(restarted);
  ibv_destroy_qp(qa);
  ibv_destroy_qp(qb);
  if (srq != nullptr) {
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
  }
  free_buffer(&src);
  free_buffer(&dst);
}

TEST_F(RestartTest, SendsAndWritesGoOnExactlyOnceAcrossAKilledAndRestartedRouter) {
  sends_and_writes_go_on_across([] { router_->restart(); }, 14);
}

TEST_F(RestartTest, SendsThroughAnSrqGoOnExactlyOnceAcrossAKilledAndRestartedRouter) {
  sends_and_writes_go_on_across([] { router_->restart(); }, 14, kThroughSrq);
}

TEST_F(RestartTest, SendsAndWritesGoOnExactlyOnceAcrossAnUpgradedRouter) {
  sends_and_writes_go_on_across([] { router_->upgrade(); }, 14);
}

// Side a_ on host 0's router, b_ on host 1's.
class CrossHostRestartTest : public TwoHostSides<RestartTest> {};

// The requester's router: the new process sends again, under the same PSNs, what the old one
// had not seen acknowledged (the peer answers duplicates without executing them again). The
// environment names the other router by then (b_ was opened last): a_ resumes on the router
// it was opened on (a bug this found: the library resumed on WHARF_ROUTER as it was now).
TEST_F(CrossHostRestartTest, SendsAndWritesGoOnExactlyOnceWhenTheSendersRouterRestarts) {
  sends_and_writes_go_on_across([] { cluster_->router(0).restart(); }, 17);
}

// The responder's router: the new process expects the PSN the old one expected, and the
// requester goes back N to it.
TEST_F(CrossHostRestartTest, SendsAndWritesGoOnExactlyOnceWhenTheReceiversRouterRestarts) {
  sends_and_writes_go_on_across([] { cluster_->router(1).restart(); }, 17);
}

TEST_F(CrossHostRestartTest, SendsAndWritesGoOnExactlyOnceWhenTheReceiversRouterIsUpgraded) {
  sends_and_writes_go_on_across([] { cluster_->router(1).upgrade(); }, 17);
}

TEST_F(CrossHostRestartTest, SendsThroughAnSrqGoOnExactlyOnceWhenTheReceiversRouterRestarts) {
  sends_and_writes_go_on_across([] { cluster_->router(1).restart(); }, 17, kThroughSrq);
}

// FETCH_ADDs through restarts of the responder's router, each killed while an add is in
// flight (executed or not yet): each add returns the sum of those before it and the counter
// ends at their number, so none was lost or executed twice (the new process answers the
// duplicate of one the old executed from the atomic results it kept).
TEST_F(CrossHostRestartTest, FetchAndAddsApplyOnceEachWhenTheRespondersRouterRestarts) {
  constexpr uint64_t kAdds = 1500;
  ibv_qp* qa = create_qp(a_, IBV_QPT_RC);
  ibv_qp* qb = create_qp(b_, IBV_QPT_RC);
  ASSERT_NE(qa, nullptr);
  ASSERT_NE(qb, nullptr);
  connect(qa, a_, qb, b_, kFullAccess, 7, 7, 17);
  connect(qb, b_, qa, a_, kFullAccess, 7, 7, 17);
  Buffer counter = make_buffer(b_, 8, kFullAccess);
  Buffer result = make_buffer(a_, 8, kFullAccess);
  std::memset(counter.data, 0, 8);
  for (uint64_t i = 0; i < kAdds; ++i) {
    ASSERT_EQ(post_atomic(qa, IBV_WR_ATOMIC_FETCH_AND_ADD, result,
                          reinterpret_cast<uint64_t>(counter.data), counter.mr->rkey, 1, 0, i),
              0);
    if (i % 250 == 125) cluster_->router(1).restart();
    const ibv_wc wc = wait_one(a_.cq);
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << "add " << i;
    uint64_t before = 0;
    std::memcpy(&before, result.data, 8);
    ASSERT_EQ(before, i) << "add " << i << " was executed twice, or one before it was lost";
  }
  uint64_t total = 0;
  std::memcpy(&total, counter.data, 8);
  EXPECT_EQ(total, kAdds);
  ibv_destroy_qp(qa);
  ibv_destroy_qp(qb);
  free_buffer(&result);
  free_buffer(&counter);
}

// A forked child owns none of its parent's sessions: closing the parent's device there, or
// the router going away, must neither join the parent's watch thread (which does not exist in
// the child) nor stop it, nor resume the parent's session from the child (a bug this found:
// the child's close stopped the parent's watch and then joined a thread it did not have).
TEST_F(RestartTest, AForkedChildNeitherStopsNorResumesItsParentsSession) {
  ibv_qp* qa = nullptr;
  ibv_qp* qb = nullptr;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, kMsgLen, kFullAccess);
  Buffer dst = make_buffer(b_, kMsgLen, kFullAccess);
  pid_t child = fork();
  if (child == 0) {
    ibv_close_device(a_.ctx);  // the parent's; frees the child's copy only
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child crashed or hung";
  router_->restart();
  // The parent's watch noticed and resumed: work goes on without any control verb first.
  fill_message(src.data, 7);
  post_recv(qb, dst, 0, kMsgLen, 1);
  ibv_sge sge{reinterpret_cast<uint64_t>(src.data), kMsgLen, src.mr->lkey};
  ASSERT_EQ(post_send(qa, IBV_WR_SEND, {sge}, 2), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);
  EXPECT_EQ(wait_one(b_.cq).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(is_message(dst.data, 7));
  ibv_destroy_qp(qa);
  ibv_destroy_qp(qb);
  free_buffer(&src);
  free_buffer(&dst);
}

}  // namespace
}  // namespace wharf::verify
