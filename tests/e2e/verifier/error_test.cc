// Each error completion the issue lists, provoked as hardware would see it.
#include <fcntl.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class ErrorTest : public VerbsTest {};

TEST_F(ErrorTest, RecvBufferTooSmallIsLocLenAtResponderAndRemInvReqAtRequester) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  post_recv(qb, dst, 0, 100, 1);
  post_recv(qb, dst, 100, 100, 2);
  ASSERT_EQ(
      post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 500, src.mr->lkey}}, 9),
      0);
  auto sw = wait_wc(a_.cq, 1);
  EXPECT_EQ(sw[0].status, IBV_WC_REM_INV_REQ_ERR);
  auto rw = wait_wc(b_.cq, 2);  // the failed receive, then the flushed one
  ASSERT_EQ(rw.size(), 2u);
  EXPECT_EQ(rw[0].wr_id, 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_LOC_LEN_ERR);
  EXPECT_EQ(rw[1].wr_id, 2u);
  EXPECT_EQ(rw[1].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(ErrorTest, BadLkeyIsLocProtAndLaterWorkIsFlushed) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  ASSERT_EQ(post_send(qa, IBV_WR_SEND,
                      {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey ^ 0x5500}}, 1),
            0);
  ASSERT_EQ(
      post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}}, 2, 0),
      0);  // unsignaled, but flushed completions are always reported
  auto sw = wait_wc(a_.cq, 2);
  ASSERT_EQ(sw.size(), 2u);
  EXPECT_EQ(sw[0].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(sw[1].wr_id, 2u);
  EXPECT_EQ(sw[1].status, IBV_WC_WR_FLUSH_ERR);
  ibv_qp_attr attr;
  ibv_qp_init_attr init;
  ASSERT_EQ(ibv_query_qp(qa, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
}

TEST_F(ErrorTest, OutOfRangeSgeIsLocProt) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  ASSERT_EQ(post_send(qa, IBV_WR_SEND,
                      {{reinterpret_cast<uint64_t>(src.data) + 4000, 200, src.mr->lkey}}, 1),
            0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_LOC_PROT_ERR);
}

TEST_F(ErrorTest, ReadIntoMrWithoutLocalWriteIsLocProt) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer local = make_buffer(a_, 4096, 0);
  Buffer remote = make_buffer(b_, 4096, kFullAccess);
  ASSERT_EQ(post_send(qa, IBV_WR_RDMA_READ,
                      {{reinterpret_cast<uint64_t>(local.data), 64, local.mr->lkey}}, 1,
                      IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(remote.data), remote.mr->rkey),
            0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_LOC_PROT_ERR);
}

TEST_F(ErrorTest, WrongRkeyOrMissingRemoteAccessIsRemAccess) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer ro = make_buffer(b_, 4096, IBV_ACCESS_REMOTE_READ);
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                1, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(ro.data), ro.mr->rkey),
      0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ro.data[0], 0);  // nothing was written

  ibv_qp *qc, *qd;
  rc_pair(&qc, &qd);
  Buffer rw = make_buffer(b_, 4096, kFullAccess);
  ASSERT_EQ(
      post_send(qc, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                2, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(rw.data) + 4090, rw.mr->rkey),
      0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_REM_ACCESS_ERR);

  // An rkey of the requester's own MR does not reach the responder's memory.
  ibv_qp *qe, *qf;
  rc_pair(&qe, &qf);
  ASSERT_EQ(
      post_send(qe, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                3, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(src.data), src.mr->rkey),
      0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(ErrorTest, MisalignedAtomicIsRemInvReq) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer res = make_buffer(a_, 64, kFullAccess);
  Buffer target = make_buffer(b_, 64, kFullAccess);
  ASSERT_EQ(post_atomic(qa, IBV_WR_ATOMIC_FETCH_AND_ADD, res,
                        reinterpret_cast<uint64_t>(target.data) + 4, target.mr->rkey, 1),
            0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(ErrorTest, NoReceiveExhaustsRnrRetry) {
  ibv_qp* qa = create_qp(a_, IBV_QPT_RC);
  ibv_qp* qb = create_qp(b_, IBV_QPT_RC);
  connect(qa, a_, qb, b_, kFullAccess & ~IBV_ACCESS_LOCAL_WRITE, /*rnr_retry=*/2);
  connect(qb, b_, qa, a_, kFullAccess & ~IBV_ACCESS_LOCAL_WRITE, 2, 7, 14, /*min_rnr_timer=*/1);
  Buffer src = make_buffer(a_, 64, kFullAccess);
  ASSERT_EQ(
      post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}}, 1), 0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
}

TEST_F(ErrorTest, InfiniteRnrRetryWaitsForTheReceive) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);  // rnr_retry 7
  Buffer src = make_buffer(a_, 64, kFullAccess);
  Buffer dst = make_buffer(b_, 64, kFullAccess);
  fill_pattern(src.data, 64, 11);
  ASSERT_EQ(
      post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}}, 1), 0);
  usleep(100000);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(a_.cq, 1, &wc), 0);  // still retrying
  post_recv(qb, dst, 0, 64, 2);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_SUCCESS);
  wait_wc(b_.cq, 1);
  EXPECT_EQ(0, memcmp(src.data, dst.data, 64));
}

TEST_F(ErrorTest, PeerDestroyedIsRetryExceededAfterTimeout) {
  ibv_qp* qa = create_qp(a_, IBV_QPT_RC);
  ibv_qp* qb = create_qp(b_, IBV_QPT_RC);
  connect(qa, a_, qb, b_, kFullAccess & ~IBV_ACCESS_LOCAL_WRITE, 7, /*retry_cnt=*/2,
          /*timeout=*/10);
  connect(qb, b_, qa, a_, kFullAccess & ~IBV_ACCESS_LOCAL_WRITE);
  ASSERT_EQ(ibv_destroy_qp(qb), 0);
  Buffer src = make_buffer(a_, 64, kFullAccess);
  ASSERT_EQ(
      post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}}, 1), 0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_RETRY_EXC_ERR);
}

TEST_F(ErrorTest, ModifyToErrorFlushesEveryOutstandingReceive) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  for (int i = 0; i < 5; ++i) post_recv(qb, dst, i * 64, 64, 100 + i);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(qb, &attr, IBV_QP_STATE), 0);
  auto rw = wait_wc(b_.cq, 5);
  ASSERT_EQ(rw.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(rw[i].wr_id, 100u + i);
    EXPECT_EQ(rw[i].status, IBV_WC_WR_FLUSH_ERR);
  }
  // Posting in ERR is allowed and is flushed too, also once the router has gone to sleep
  // (regression: receives did not wake it).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  post_recv(qb, dst, 0, 64, 200);
  EXPECT_EQ(wait_wc(b_.cq, 1)[0].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(ErrorTest, ModifyQpEnforcesTheStateMachine) {
  ibv_qp* qp = create_qp(a_, IBV_QPT_RC);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);  // RESET -> RTS is illegal
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX),
            EINVAL);  // no access
  EXPECT_EQ(ibv_modify_qp(
                qp, &a,
                IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY),
            EINVAL);  // Q_Key is not an RC attribute
  a.port_num = 2;
  EXPECT_EQ(
      ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS),
      EINVAL);  // no such port
  a.port_num = 1;
  ASSERT_EQ(
      ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS),
      0);
  EXPECT_EQ(qp->state, IBV_QPS_INIT);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);  // RTR needs AV, MTU, QPN, PSN, ...
  // Posting a send before RTS fails synchronously.
  EXPECT_EQ(post_send(qp, IBV_WR_SEND, {}, 1), EINVAL);
  a.qp_state = IBV_QPS_RESET;
  EXPECT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
  ibv_qp_attr q;
  ibv_qp_init_attr init;
  ASSERT_EQ(ibv_query_qp(qp, &q, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_RESET);
  EXPECT_EQ(init.qp_type, IBV_QPT_RC);
}

TEST_F(ErrorTest, RegistrationChecksAccessFlagsAndDeallocChecksUsers) {
  std::vector<uint8_t> buf(4096);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(a_.pd, buf.data(), buf.size(), IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_mr* mr = ibv_reg_mr(a_.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(a_.pd), EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// The GID table has empty entries, as an RNIC's does: they read as the zero GID, are absent
// from the table query, and no address vector may use one as its source.
TEST_F(ErrorTest, AnEmptyGidEntryReadsAsZeroAndCannotBeASource) {
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(a_.ctx, 1, &port), 0);
  ASSERT_GT(port.gid_tbl_len, 1);
  ibv_gid gid{};
  gid.raw[0] = 0xfe;
  ASSERT_EQ(ibv_query_gid(a_.ctx, 1, 1, &gid), 0);
  EXPECT_EQ(gid.global.subnet_prefix, 0u);
  EXPECT_EQ(gid.global.interface_id, 0u);
  EXPECT_EQ(ibv_query_gid(a_.ctx, 1, port.gid_tbl_len, &gid), -1);
  ibv_gid_entry entry{};
  EXPECT_EQ(ibv_query_gid_ex(a_.ctx, 1, 0, &entry, 0), 0);
  EXPECT_EQ(memcmp(entry.gid.raw, a_.gid.raw, 16), 0);
  EXPECT_EQ(ibv_query_gid_ex(a_.ctx, 1, 1, &entry, 0), ENODATA);
  std::vector<ibv_gid_entry> table(port.gid_tbl_len);
  EXPECT_EQ(ibv_query_gid_table(a_.ctx, table.data(), table.size(), 0), 1);
  EXPECT_EQ(table[0].gid_index, 0u);
  EXPECT_EQ(ibv_query_gid_table(a_.ctx, table.data(), 0, 0), -EINVAL);

  ibv_ah_attr ah{};
  ah.port_num = 1;
  ah.is_global = 1;
  ah.grh.dgid = b_.gid;
  ah.grh.hop_limit = 64;
  ah.grh.sgid_index = 1;
  errno = 0;
  EXPECT_EQ(ibv_create_ah(a_.pd, &ah), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ah.grh.sgid_index = 0;
  ibv_ah* good = ibv_create_ah(a_.pd, &ah);
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(ibv_destroy_ah(good), 0);
}

// As rdma-core's, which searches the table with ibv_query_pkey: the index of a P_Key in the
// table, else -1 with errno set (it returned -errno).
TEST_F(ErrorTest, PkeyQueriesReturnAsRdmaCoreDoes) {
  __be16 pkey = 0;
  ASSERT_EQ(ibv_query_pkey(a_.ctx, 1, 0, &pkey), 0);
  EXPECT_EQ(ibv_get_pkey_index(a_.ctx, 1, pkey), 0);
  errno = 0;
  EXPECT_EQ(ibv_get_pkey_index(a_.ctx, 1, htobe16(0x1234)), -1);
  EXPECT_EQ(errno, ENOENT);
  errno = 0;
  EXPECT_EQ(ibv_get_pkey_index(a_.ctx, 2, pkey), -1);
  EXPECT_NE(errno, 0);
  errno = 0;
  EXPECT_EQ(ibv_query_pkey(a_.ctx, 1, -1, &pkey), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(ibv_query_pkey(a_.ctx, 2, 0, &pkey), -1);
}

TEST_F(ErrorTest, UnsupportedVerbsSayEopnotsupp) {
  // Enhanced connection establishment is not implemented.
  ibv_qp* qp = create_qp(a_, IBV_QPT_RC);
  ASSERT_NE(qp, nullptr);
  ibv_ece ece{};
  EXPECT_EQ(ibv_query_ece(qp, &ece), EOPNOTSUPP);
  EXPECT_EQ(ibv_set_ece(qp, &ece), EOPNOTSUPP);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

}  // namespace
}  // namespace wharf::verify
