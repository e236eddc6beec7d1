// ibv_resize_cq: the CQ keeps the completions not yet polled, in order, and every producer
// (the router, this library's direct path, a direct-path peer) writes the new region after.
#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class ResizeCqTest : public VerbsTest {
 protected:
  // A signaled 64-byte WRITE a -> b with wr_id `id`.
  void write(ibv_qp* qa, Buffer& src, Buffer& dst, uint64_t id) {
    ASSERT_EQ(
        post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                  id, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
        0);
  }
};

TEST_F(ResizeCqTest, GrowingKeepsWaitingCompletionsInOrder) {
  ibv_cq* small = ibv_create_cq(a_.ctx, 4, nullptr, nullptr, 0);
  ASSERT_NE(small, nullptr);
  a_.cq = small;  // a's QP completes into it; closing the device frees it
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  for (uint64_t id = 0; id < 3; ++id) write(qa, src, dst, id);
  // qa executes in order: once b has received the SEND that follows, the CQ is full.
  post_recv(qb, dst, 1024, 1024, 50);
  ASSERT_EQ(
      post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 8, src.mr->lkey}}, 3), 0);
  EXPECT_EQ(wait_one(b_.cq).status, IBV_WC_SUCCESS);
  ASSERT_EQ(ibv_resize_cq(small, 100), 0);
  EXPECT_GE(small->cqe, 100);
  for (uint64_t id = 4; id < 60; ++id) write(qa, src, dst, id);
  auto wc = wait_wc(small, 60);
  ASSERT_EQ(wc.size(), 60u);
  for (uint64_t id = 0; id < 60; ++id) {
    EXPECT_EQ(wc[id].wr_id, id);
    EXPECT_EQ(wc[id].status, IBV_WC_SUCCESS);
  }
  free_buffer(&src);
}

TEST_F(ResizeCqTest, ShrinkingBelowTheWaitingEntriesIsRefusedAndChangesNothing) {
  ibv_cq* cq = ibv_create_cq(a_.ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  a_.cq = cq;
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  for (uint64_t id = 0; id < 4; ++id) write(qa, src, dst, id);
  // qa executes in order: once b has received the SEND that follows, five entries wait.
  post_recv(qb, dst, 1024, 1024, 50);
  ASSERT_EQ(
      post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 8, src.mr->lkey}}, 4), 0);
  EXPECT_EQ(wait_one(b_.cq).status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_resize_cq(cq, 4), EINVAL);
  EXPECT_EQ(ibv_resize_cq(cq, 0), EINVAL);
  EXPECT_EQ(cq->cqe, 16);
  auto wc = wait_wc(cq, 5);
  ASSERT_EQ(wc.size(), 5u);
  for (uint64_t id = 0; id < 5; ++id) EXPECT_EQ(wc[id].wr_id, id);
  ASSERT_EQ(ibv_resize_cq(cq, 2), 0);  // empty now: any size will do
  EXPECT_GE(cq->cqe, 2);
  write(qa, src, dst, 9);
  EXPECT_EQ(wait_one(cq).wr_id, 9u);
  free_buffer(&src);
}

TEST_F(ResizeCqTest, SendsAndReceivesAcrossAResizeLoseNothing) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 64 * 1024, kFullAccess);
  for (uint64_t round = 0; round < 4; ++round) {
    for (uint64_t i = 0; i < 8; ++i) post_recv(qb, dst, (round * 8 + i) * 1024, 1024, 100 + i);
    for (uint64_t i = 0; i < 8; ++i) {
      ASSERT_EQ(
          post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}}, i),
          0);
    }
    // Both CQs change size while the work is under way.
    ASSERT_EQ(ibv_resize_cq(a_.cq, static_cast<int>(64 << round)), 0);
    ASSERT_EQ(ibv_resize_cq(b_.cq, static_cast<int>(64 << (3 - round))), 0);
    auto sent = wait_wc(a_.cq, 8);
    auto got = wait_wc(b_.cq, 8);
    ASSERT_EQ(sent.size(), 8u);
    ASSERT_EQ(got.size(), 8u);
    for (uint64_t i = 0; i < 8; ++i) {
      EXPECT_EQ(sent[i].wr_id, i);
      EXPECT_EQ(got[i].wr_id, 100 + i);
      EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
    }
  }
  free_buffer(&src);
}

}  // namespace
}  // namespace wharf::verify
