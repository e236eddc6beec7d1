// Memory windows: a window gives remote access to its range only, with its own rights and (type
// 2) through the QP that bound it; its key is never a local key; invalidation (LOCAL_INV,
// SEND_WITH_INV, a zero-length type 1 bind, deallocation) takes the access away; the rules of a
// bind are enforced by the router, not only the library.
#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class MwTest : public VerbsTest {
 protected:
  static constexpr int kBindable = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;

  // A signaled 64-byte WRITE from src to raddr/rkey on qp; its completion status.
  ibv_wc_status write64(ibv_qp* qp, Buffer& src, uint64_t raddr, uint32_t rkey, uint64_t wr_id) {
    EXPECT_EQ(
        post_send(qp, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                  wr_id, IBV_SEND_SIGNALED, raddr, rkey),
        0);
    return wait_one(a_.cq).status;
  }
  // Binds type 2 window mw on b's side through qb; returns the new key (0 on failure).
  uint32_t bind2(ibv_qp* qb, ibv_mw* mw, Buffer& dst, uint64_t off, uint64_t len, int access) {
    const uint32_t key = ibv_inc_rkey(mw->rkey);
    EXPECT_EQ(post_bind(qb, mw, key, dst.mr, reinterpret_cast<uint64_t>(dst.data) + off, len,
                        static_cast<unsigned>(access), 77),
              0);
    const ibv_wc wc = wait_one(b_.cq);
    return wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW ? key : 0;
  }
};

TEST_F(MwTest, AType2WindowReachesItsRangeWithItsRightsOnly) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kBindable);  // no remote access of its own
  std::memset(src.data, 0x5a, 64);
  ibv_mw* mw = ibv_alloc_mw(b_.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t key = bind2(qb, mw, dst, 1024, 128, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(key, 0u);
  const auto base = reinterpret_cast<uint64_t>(dst.data);
  EXPECT_EQ(write64(qa, src, base + 1024 + 64, key, 1), IBV_WC_SUCCESS);
  EXPECT_EQ(dst.data[1024 + 64], 0x5a);
  EXPECT_EQ(dst.data[1024 + 63], 0);
  // One byte past the window's end: the QP enters ERR, nothing lands.
  EXPECT_EQ(write64(qa, src, base + 1024 + 65, key, 2), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(dst.data[1024 + 128], 0);
  free_buffer(&src);
}

TEST_F(MwTest, AWindowWithoutReadRightsRefusesAReadAndItsKeyIsNoLocalKey) {
  ibv_qp *qa, *qb, *qa2, *qb2;
  rc_pair(&qa, &qb);
  connected_rc_pair(a_, &qa2, b_, &qb2);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kBindable | IBV_ACCESS_REMOTE_READ);
  ibv_mw* mw = ibv_alloc_mw(b_.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t key = bind2(qb, mw, dst, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(key, 0u);
  // a reads through the write-only window (the registration itself allows reads).
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_READ, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}}, 7,
                IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), key),
      0);
  ibv_wc wc = wait_one(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  // b sends from its own buffer naming the window's key as an lkey: a local protection error.
  Buffer rbuf = make_buffer(a_, 4096, kFullAccess);
  post_recv(qa2, rbuf, 0, 4096, 5);
  ASSERT_EQ(post_send(qb2, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(dst.data), 64, key}}, 6), 0);
  wc = wait_one(b_.cq);
  EXPECT_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
  free_buffer(&src);
  free_buffer(&rbuf);
}

TEST_F(MwTest, AType2WindowIsReachedOnlyThroughTheQpThatBoundIt) {
  ibv_qp *qa, *qb, *qa2, *qb2;
  rc_pair(&qa, &qb);
  connected_rc_pair(a_, &qa2, b_, &qb2);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kBindable);
  ibv_mw* mw = ibv_alloc_mw(b_.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t key = bind2(qb, mw, dst, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(key, 0u);
  EXPECT_EQ(write64(qa2, src, reinterpret_cast<uint64_t>(dst.data), key, 1), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(write64(qa, src, reinterpret_cast<uint64_t>(dst.data), key, 2), IBV_WC_SUCCESS);
  free_buffer(&src);
}

TEST_F(MwTest, InvalidationsTakeTheAccessAway) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kBindable);
  const auto base = reinterpret_cast<uint64_t>(dst.data);
  ibv_mw* mw = ibv_alloc_mw(b_.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  // LOCAL_INV, then the window binds again (it is free) under a newer key.
  uint32_t key = bind2(qb, mw, dst, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(key, 0u);
  ASSERT_EQ(post_invalidate(qb, IBV_WR_LOCAL_INV, {}, key, 8), 0);
  ibv_wc wc = wait_one(b_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_LOCAL_INV);
  mw->rkey = key;
  key = bind2(qb, mw, dst, 0, 4096, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(key, 0u);
  // SEND_WITH_INV from a: b's receive completion names the key; then the window is closed.
  Buffer rbuf = make_buffer(b_, 4096, kFullAccess);
  post_recv(qb, rbuf, 0, 4096, 9);
  ASSERT_EQ(post_invalidate(qa, IBV_WR_SEND_WITH_INV,
                            {{reinterpret_cast<uint64_t>(src.data), 16, src.mr->lkey}}, key, 10),
            0);
  wc = wait_one(b_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(wc.invalidated_rkey, key);
  wc = wait_one(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(write64(qa, src, base, key, 11), IBV_WC_REM_ACCESS_ERR);
  free_buffer(&src);
}

TEST_F(MwTest, AType1BindMovesTheKeyAndAZeroLengthBindCloses) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kBindable);
  const auto base = reinterpret_cast<uint64_t>(dst.data);
  ibv_mw* mw = ibv_alloc_mw(b_.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  const uint32_t unbound = mw->rkey;
  ibv_mw_bind bind{};
  bind.wr_id = 3;
  bind.send_flags = IBV_SEND_SIGNALED;
  bind.bind_info = ibv_mw_bind_info{dst.mr, base, 4096, IBV_ACCESS_REMOTE_WRITE};
  ASSERT_EQ(ibv_bind_mw(qb, mw, &bind), 0);
  ibv_wc wc = wait_one(b_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_NE(mw->rkey, unbound);
  EXPECT_EQ(mw->rkey >> 8, unbound >> 8);
  const uint32_t key = mw->rkey;
  // A type 1 window is not bound through ibv_post_send.
  EXPECT_EQ(post_bind(qb, mw, ibv_inc_rkey(key), dst.mr, base, 64, IBV_ACCESS_REMOTE_WRITE, 4),
            EINVAL);
  EXPECT_EQ(write64(qa, src, base, key, 1), IBV_WC_SUCCESS);
  bind.bind_info.length = 0;
  ASSERT_EQ(ibv_bind_mw(qb, mw, &bind), 0);
  wc = wait_one(b_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(write64(qa, src, base, key, 2), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  free_buffer(&src);
}

TEST_F(MwTest, TheRouterRefusesABindTheRulesForbid) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  // A registration without IBV_ACCESS_MW_BIND: the bind completes in error, the QP in ERR.
  Buffer plain = make_buffer(b_, 4096, kFullAccess);
  ibv_mw* mw = ibv_alloc_mw(b_.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  ASSERT_EQ(post_bind(qb, mw, ibv_inc_rkey(mw->rkey), plain.mr,
                      reinterpret_cast<uint64_t>(plain.data), 64, IBV_ACCESS_REMOTE_WRITE, 1),
            0);
  ibv_wc wc = wait_one(b_.cq);
  EXPECT_EQ(wc.status, IBV_WC_MW_BIND_ERR);
  // Library checks: another index in the key, a window of another PD.
  ibv_qp *qa2, *qb2;
  connected_rc_pair(a_, &qa2, b_, &qb2);
  Buffer dst = make_buffer(b_, 4096, kBindable);
  EXPECT_EQ(post_bind(qb2, mw, mw->rkey + 0x100, dst.mr, reinterpret_cast<uint64_t>(dst.data), 64,
                      IBV_ACCESS_REMOTE_WRITE, 2),
            EINVAL);
  ibv_pd* other = ibv_alloc_pd(b_.ctx);
  ibv_mw* foreign = ibv_alloc_mw(other, IBV_MW_TYPE_2);
  ASSERT_NE(foreign, nullptr);
  EXPECT_EQ(post_bind(qb2, foreign, ibv_inc_rkey(foreign->rkey), dst.mr,
                      reinterpret_cast<uint64_t>(dst.data), 64, IBV_ACCESS_REMOTE_WRITE, 3),
            EINVAL);
  EXPECT_EQ(ibv_alloc_mw(b_.pd, static_cast<ibv_mw_type>(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(MwTest, ARegistrationWithABoundWindowCannotGo) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer dst = make_buffer(b_, 4096, kBindable);
  ibv_mw* mw = ibv_alloc_mw(b_.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  ASSERT_NE(bind2(qb, mw, dst, 0, 4096, IBV_ACCESS_REMOTE_WRITE), 0u);
  EXPECT_EQ(ibv_dereg_mr(dst.mr), EBUSY);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);  // deallocation invalidates
  EXPECT_EQ(ibv_dereg_mr(dst.mr), 0);
  dst.mr = nullptr;
  free_buffer(&dst);
}

}  // namespace
}  // namespace wharf::verify
