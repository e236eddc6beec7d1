// ibv_rereg_mr keeps an MR's keys while it changes what they name (translation, PD, access),
// and a QP moved to RESET leaves none of its completions in its CQs.
#include <unistd.h>

#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class ReregTest : public VerbsTest {};

TEST_F(ReregTest, KeysStayAndNameTheNewTranslation) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer first = make_buffer(b_, 4096, kFullAccess);
  Buffer second = make_buffer(b_, 4096, kFullAccess);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  std::memset(src.data, 0x7e, 4096);
  ibv_mr* mr = first.mr;
  const uint32_t lkey = mr->lkey, rkey = mr->rkey;
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, second.data, 4096, 0), 0);
  EXPECT_EQ(mr->lkey, lkey);
  EXPECT_EQ(mr->rkey, rkey);
  EXPECT_EQ(mr->addr, second.data);
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                1, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(second.data), rkey),
      0);
  auto wc = wait_wc(a_.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(second.data[63], 0x7e);
  EXPECT_EQ(first.data[0], 0);
  // The old range is no longer the key's.
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                2, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(first.data), rkey),
      0);
  wc = wait_wc(a_.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  // Bad arguments leave the MR as it was.
  EXPECT_EQ(ibv_rereg_mr(mr, 0, nullptr, nullptr, 0, 0), IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_REMOTE_WRITE),  // remote write needs local write
            IBV_REREG_MR_ERR_CMD);
  EXPECT_EQ(mr->rkey, rkey);
  free_buffer(&src);
}

TEST_F(ReregTest, AnMrMovedToAnotherPdIsNotTheQpsAnyMore) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  ibv_pd* other = ibv_alloc_pd(b_.ctx);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), 0);
  EXPECT_EQ(dst.mr->pd, other);
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                1, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
      0);
  auto wc = wait_wc(a_.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_PD, b_.pd, nullptr, 0, 0), 0);
  free_buffer(&dst);
  free_buffer(&src);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

TEST_F(ReregTest, ResetLeavesNoCompletionsOfTheQp) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer buf = make_buffer(b_, 4096, kFullAccess);
  for (int i = 0; i < 3; ++i) post_recv(qb, buf, 0, 64, 10 + i);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(qb, &attr, IBV_QP_STATE), 0);
  for (int i = 0; i < 100; ++i) {  // the router flushes the three receives into the CQ
    ibv_qp_attr q{};
    ibv_qp_init_attr init{};
    ibv_query_qp(qb, &q, IBV_QP_STATE, &init);
    usleep(1000);
  }
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(qb, &attr, IBV_QP_STATE), 0);
  ibv_wc left[4];
  EXPECT_EQ(ibv_poll_cq(b_.cq, 4, left), 0);
  free_buffer(&buf);
}

}  // namespace
}  // namespace wharf::verify
