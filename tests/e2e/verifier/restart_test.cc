// The router killed (SIGKILL) and started again on its socket under running work (issue #23):
// the libraries resume their sessions with the new router process, and the work goes on with
// no error completion: every SEND arrives exactly once, in order, with its bytes, and every
// WRITE lands. Runs in each of the verifier's modes (direct path on, router only).
#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class RestartTest : public VerbsTest {};

constexpr uint32_t kMsgLen = 1024;
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

TEST_F(RestartTest, SendsAndWritesGoOnExactlyOnceAcrossAKilledAndRestartedRouter) {
  ibv_qp* qa = nullptr;
  ibv_qp* qb = nullptr;
  rc_pair(&qa, &qb);
  ASSERT_NE(qa, nullptr);
  Buffer src = make_buffer(a_, 2 * kSlots * kMsgLen, kFullAccess);
  Buffer dst = make_buffer(b_, 2 * kSlots * kMsgLen, kFullAccess);
  uint8_t* const written = dst.data + kSlots * kMsgLen;  // WRITEs' slots

  for (uint32_t r = 0; r < kSlots; ++r) post_recv(qb, dst, r * kMsgLen, kMsgLen, r);
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
      router_->restart();
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
      post_recv(qb, dst, slot * kMsgLen, kMsgLen, slot);
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
  free_buffer(&src);
  free_buffer(&dst);
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
