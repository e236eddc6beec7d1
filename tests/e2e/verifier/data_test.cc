// Every opcode moves exactly the right bytes: SGE lists, inline, immediate data, atomics,
// memfd-backed and unaligned (process_vm) buffers.
#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class DataTest : public VerbsTest {};

TEST_F(DataTest, SendScattersThreeSgesIntoTwoRecvSges) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 8192, kFullAccess);
  Buffer dst = make_buffer(b_, 8192, kFullAccess);
  fill_pattern(src.data, 8192, 1);
  // Receive into [0,1000) and [4000,8000) of dst.
  ibv_sge rs[2] = {{reinterpret_cast<uint64_t>(dst.data), 1000, dst.mr->lkey},
                   {reinterpret_cast<uint64_t>(dst.data + 4000), 4000, dst.mr->lkey}};
  ibv_recv_wr rwr{};
  rwr.wr_id = 77;
  rwr.sg_list = rs;
  rwr.num_sge = 2;
  ibv_recv_wr* rbad;
  ASSERT_EQ(ibv_post_recv(qb, &rwr, &rbad), 0);
  // Send [10,510) [2000,3000) [6000,6100) = 1600 bytes.
  std::vector<ibv_sge> ss = {{reinterpret_cast<uint64_t>(src.data + 10), 500, src.mr->lkey},
                             {reinterpret_cast<uint64_t>(src.data + 2000), 1000, src.mr->lkey},
                             {reinterpret_cast<uint64_t>(src.data + 6000), 100, src.mr->lkey}};
  ASSERT_EQ(post_send(qa, IBV_WR_SEND, ss, 5), 0);
  auto sw = wait_wc(a_.cq, 1);
  auto rw = wait_wc(b_.cq, 1);
  ASSERT_EQ(sw.size(), 1u);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sw[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(sw[0].wr_id, 5u);
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rw[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(rw[0].wr_id, 77u);
  EXPECT_EQ(rw[0].byte_len, 1600u);
  EXPECT_EQ(rw[0].qp_num, qb->qp_num);
  EXPECT_EQ(rw[0].src_qp, qa->qp_num);
  EXPECT_EQ(rw[0].slid, a_.port.lid);
  EXPECT_FALSE(rw[0].wc_flags & IBV_WC_WITH_IMM);
  std::vector<uint8_t> expect;
  expect.insert(expect.end(), src.data + 10, src.data + 510);
  expect.insert(expect.end(), src.data + 2000, src.data + 3000);
  expect.insert(expect.end(), src.data + 6000, src.data + 6100);
  EXPECT_EQ(0, memcmp(dst.data, expect.data(), 1000));
  EXPECT_EQ(0, memcmp(dst.data + 4000, expect.data() + 1000, 600));
  EXPECT_EQ(dst.data[1000], 0);  // nothing written past the first SGE
  EXPECT_EQ(dst.data[4600], 0);  // nor past the message
}

TEST_F(DataTest, SendWithImmediateCarriesImmAndSolicitedFlagIsHarmless) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 64, kFullAccess);
  Buffer dst = make_buffer(b_, 64, kFullAccess);
  fill_pattern(src.data, 64, 2);
  post_recv(qb, dst, 0, 64, 1);
  ibv_sge s{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htobe32(0xdeadbeef);
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
  ibv_send_wr* bad;
  ASSERT_EQ(ibv_post_send(qa, &wr, &bad), 0);
  auto rw = wait_wc(b_.cq, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_TRUE(rw[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(be32toh(rw[0].imm_data), 0xdeadbeefu);
  EXPECT_EQ(0, memcmp(src.data, dst.data, 64));
  wait_wc(a_.cq, 1);
}

TEST_F(DataTest, InlineSendUsesBytesAsOfPostTime) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  uint8_t stack_bytes[200];
  fill_pattern(stack_bytes, sizeof(stack_bytes), 3);
  uint8_t expect[200];
  memcpy(expect, stack_bytes, sizeof(expect));
  Buffer dst = make_buffer(b_, 256, kFullAccess);
  post_recv(qb, dst, 0, 256, 1);
  // Inline data needs no memory registration: lkey 0 is never looked at.
  ASSERT_EQ(post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(stack_bytes), 200, 0}}, 9,
                      IBV_SEND_SIGNALED | IBV_SEND_INLINE),
            0);
  memset(stack_bytes, 0xee, sizeof(stack_bytes));
  auto rw = wait_wc(b_.cq, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].byte_len, 200u);
  EXPECT_EQ(0, memcmp(dst.data, expect, 200));
  auto sw = wait_wc(a_.cq, 1);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
}

TEST_F(DataTest, InlineLargerThanGrantedIsRejectedAtPost) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  std::vector<uint8_t> big(4096);
  ibv_qp_attr attr;
  ibv_qp_init_attr init;
  ASSERT_EQ(ibv_query_qp(qa, &attr, 0, &init), 0);
  EXPECT_GE(init.cap.max_inline_data, 256u);
  EXPECT_EQ(post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(big.data()), 4096, 0}}, 1,
                      IBV_SEND_INLINE),
            EINVAL);
}

TEST_F(DataTest, RdmaWriteAndWriteWithImm) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 1 << 20, kFullAccess);
  Buffer dst = make_buffer(b_, 1 << 20, kFullAccess);
  fill_pattern(src.data, 1 << 20, 4);
  ASSERT_EQ(post_send(qa, IBV_WR_RDMA_WRITE,
                      {{reinterpret_cast<uint64_t>(src.data), (1 << 20) - 100, src.mr->lkey}}, 1,
                      IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data + 100), dst.mr->rkey),
            0);
  auto sw = wait_wc(a_.cq, 1);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sw[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(0, memcmp(dst.data + 100, src.data, (1 << 20) - 100));
  EXPECT_EQ(dst.data[99], 0);

  Buffer rbuf = make_buffer(b_, 64, kFullAccess);
  post_recv(qb, rbuf, 0, 64, 42);
  ibv_sge s{reinterpret_cast<uint64_t>(src.data), 300, src.mr->lkey};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.imm_data = htobe32(1234);
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data);
  wr.wr.rdma.rkey = dst.mr->rkey;
  memset(dst.data, 0, 300);
  ibv_send_wr* bad;
  ASSERT_EQ(ibv_post_send(qa, &wr, &bad), 0);
  auto rw = wait_wc(b_.cq, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(rw[0].wr_id, 42u);
  EXPECT_EQ(rw[0].byte_len, 300u);
  EXPECT_EQ(be32toh(rw[0].imm_data), 1234u);
  EXPECT_EQ(0, memcmp(dst.data, src.data, 300));
  wait_wc(a_.cq, 1);
}

TEST_F(DataTest, RdmaReadFetchesRemoteBytes) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer local = make_buffer(a_, 65536, kFullAccess);
  Buffer remote = make_buffer(b_, 65536, kFullAccess);
  fill_pattern(remote.data, 65536, 5);
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_READ,
                {{reinterpret_cast<uint64_t>(local.data), 30000, local.mr->lkey},
                 {reinterpret_cast<uint64_t>(local.data + 40000), 20000, local.mr->lkey}},
                3, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(remote.data + 7), remote.mr->rkey),
      0);
  auto sw = wait_wc(a_.cq, 1);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(sw[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(0, memcmp(local.data, remote.data + 7, 30000));
  EXPECT_EQ(0, memcmp(local.data + 40000, remote.data + 7 + 30000, 20000));
}

TEST_F(DataTest, AtomicsReturnOldValueAndApplyOnce) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer res = make_buffer(a_, 64, kFullAccess);
  Buffer target = make_buffer(b_, 64, kFullAccess);
  auto* t = reinterpret_cast<uint64_t*>(target.data);
  t[0] = 100;
  auto* r = reinterpret_cast<uint64_t*>(res.data);
  const uint64_t raddr = reinterpret_cast<uint64_t>(t);
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(post_atomic(qa, IBV_WR_ATOMIC_FETCH_AND_ADD, res, raddr, target.mr->rkey, 5), 0);
  auto sw = wait_wc(a_.cq, 10);
  for (auto& w : sw) {
    EXPECT_EQ(w.status, IBV_WC_SUCCESS);
    EXPECT_EQ(w.opcode, IBV_WC_FETCH_ADD);
  }
  EXPECT_EQ(t[0], 150u);
  EXPECT_EQ(r[0], 145u);  // the last fetch saw the value before its own add

  ASSERT_EQ(post_atomic(qa, IBV_WR_ATOMIC_CMP_AND_SWP, res, raddr, target.mr->rkey, 150, 7), 0);
  sw = wait_wc(a_.cq, 1);
  EXPECT_EQ(sw[0].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(r[0], 150u);
  EXPECT_EQ(t[0], 7u);
  // Mismatch: no swap, the old value is returned.
  ASSERT_EQ(post_atomic(qa, IBV_WR_ATOMIC_CMP_AND_SWP, res, raddr, target.mr->rkey, 999, 1), 0);
  wait_wc(a_.cq, 1);
  EXPECT_EQ(r[0], 7u);
  EXPECT_EQ(t[0], 7u);
}

TEST_F(DataTest, UnalignedBuffersUseTheSlowPathCorrectly) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  // Misaligned by 123 bytes: head and tail pages are reached with process_vm_*.
  Buffer src = make_buffer(a_, 3 * 4096 + 50, kFullAccess, 123);
  Buffer dst = make_buffer(b_, 3 * 4096 + 50, kFullAccess, 321);
  fill_pattern(src.data, src.len, 6);
  ASSERT_EQ(post_send(qa, IBV_WR_RDMA_WRITE,
                      {{reinterpret_cast<uint64_t>(src.data), static_cast<uint32_t>(src.len),
                        src.mr->lkey}},
                      1, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
            0);
  auto sw = wait_wc(a_.cq, 1);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(0, memcmp(src.data, dst.data, src.len));
  // And an atomic on an unmapped (tail) word.
  auto* word = reinterpret_cast<uint64_t*>(dst.data + 3 * 4096 + 8 -
                                           (reinterpret_cast<uintptr_t>(dst.data) & 7));
  *word = 41;
  Buffer res = make_buffer(a_, 8, kFullAccess);
  ASSERT_EQ(post_atomic(qa, IBV_WR_ATOMIC_FETCH_AND_ADD, res, reinterpret_cast<uint64_t>(word),
                        dst.mr->rkey, 1),
            0);
  sw = wait_wc(a_.cq, 1);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(*word, 42u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(res.data), 41u);
}

TEST_F(DataTest, UcSendAndWrite) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb, IBV_QPT_UC);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  fill_pattern(src.data, 4096, 7);
  post_recv(qb, dst, 0, 4096, 1);
  ASSERT_EQ(
      post_send(qa, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 1000, src.mr->lkey}}, 1),
      0);
  auto rw = wait_wc(b_.cq, 1);
  EXPECT_EQ(rw[0].byte_len, 1000u);
  EXPECT_EQ(0, memcmp(src.data, dst.data, 1000));
  wait_wc(a_.cq, 1);
  ASSERT_EQ(post_send(qa, IBV_WR_RDMA_WRITE,
                      {{reinterpret_cast<uint64_t>(src.data + 1000), 3000, src.mr->lkey}}, 2,
                      IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data + 1000), dst.mr->rkey),
            0);
  wait_wc(a_.cq, 1);
  EXPECT_EQ(0, memcmp(src.data, dst.data, 4000));
}

TEST_F(DataTest, UdDeliversGrhAndDropsWrongQkeyAndMissingReceive) {
  ibv_qp* qa = create_qp(a_, IBV_QPT_UD);
  ibv_qp* qb = create_qp(b_, IBV_QPT_UD);
  to_rts_ud(qa, 0x1111);
  to_rts_ud(qb, 0x2222);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 8192, kFullAccess);
  fill_pattern(src.data, 4096, 8);
  ibv_ah_attr ah_attr{};
  ah_attr.is_global = 1;
  ah_attr.grh.dgid = b_.gid;
  ah_attr.grh.hop_limit = 1;
  ah_attr.port_num = 1;
  ibv_ah* ah = ibv_create_ah(a_.pd, &ah_attr);
  ASSERT_NE(ah, nullptr);
  auto send_ud = [&](uint32_t qkey, uint32_t len, uint64_t id) {
    return post_ud(qa, ah, qb->qp_num, qkey, reinterpret_cast<uint64_t>(src.data), len,
                   src.mr->lkey, id);
  };
  // No receive posted: dropped, but the send still completes successfully.
  ASSERT_EQ(send_ud(0x2222, 100, 1), 0);
  auto sw = wait_wc(a_.cq, 1);
  EXPECT_EQ(sw[0].status, IBV_WC_SUCCESS);
  post_recv(qb, dst, 0, 4096 + 40, 10);
  ASSERT_EQ(send_ud(0x9999, 100, 2), 0);  // wrong Q_Key: dropped
  wait_wc(a_.cq, 1);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(b_.cq, 1, &wc), 0);
  ASSERT_EQ(send_ud(0x2222, 4096, 3), 0);
  auto rw = wait_wc(b_.cq, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rw[0].byte_len, 4096u + 40);
  EXPECT_TRUE(rw[0].wc_flags & IBV_WC_GRH);
  EXPECT_EQ(rw[0].src_qp, qa->qp_num);
  auto* grh = reinterpret_cast<ibv_grh*>(dst.data);
  EXPECT_EQ(0, memcmp(&grh->sgid, &a_.gid, 16));
  EXPECT_EQ(0, memcmp(&grh->dgid, &b_.gid, 16));
  EXPECT_EQ(0, memcmp(dst.data + 40, src.data, 4096));
  wait_wc(a_.cq, 1);
  // A reply address built from the completion reaches the sender.
  ibv_ah* back = ibv_create_ah_from_wc(b_.pd, &rw[0], grh, 1);
  ASSERT_NE(back, nullptr);
  ibv_destroy_ah(back);
  // Larger than the UD MTU (4096): a local length error at the sender.
  Buffer big = make_buffer(a_, 8192, kFullAccess);
  ASSERT_EQ(
      post_ud(qa, ah, qb->qp_num, 0x2222, reinterpret_cast<uint64_t>(big.data), 8192, big.mr->lkey),
      0);
  sw = wait_wc(a_.cq, 1);
  EXPECT_EQ(sw[0].status, IBV_WC_LOC_LEN_ERR);
  ibv_destroy_ah(ah);
}

TEST_F(DataTest, QkeyWithHighBitUsesTheQpQkey) {
  ibv_qp* qa = create_qp(a_, IBV_QPT_UD);
  ibv_qp* qb = create_qp(b_, IBV_QPT_UD);
  to_rts_ud(qa, 0x2222);
  to_rts_ud(qb, 0x2222);
  Buffer src = make_buffer(a_, 64, kFullAccess);
  Buffer dst = make_buffer(b_, 128, kFullAccess);
  post_recv(qb, dst, 0, 128, 1);
  ibv_ah_attr ah_attr{};
  ah_attr.dlid = b_.port.lid;
  ah_attr.port_num = 1;
  ibv_ah* ah = ibv_create_ah(a_.pd, &ah_attr);
  // Q_Key with bit 31 set: the sender's own QP Q_Key (0x2222) is used.
  ASSERT_EQ(post_ud(qa, ah, qb->qp_num, 0x80000000, reinterpret_cast<uint64_t>(src.data), 64,
                    src.mr->lkey),
            0);
  auto rw = wait_wc(b_.cq, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_FALSE(rw[0].wc_flags & IBV_WC_GRH);  // LID-routed: no GRH
  EXPECT_EQ(rw[0].byte_len, 64u + 40);
  wait_wc(a_.cq, 1);
  ibv_destroy_ah(ah);
}

}  // namespace
}  // namespace wharf::verify
