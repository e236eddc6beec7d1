// Tag matching (IBV_SRQT_TM, ibv_post_srq_ops): a message whose TMH tag a posted buffer takes
// lands there without its header; any other tagged message is unexpected and goes, whole, to
// the SRQ's receives; a buffer posted while software is behind on unexpected messages waits
// for a SYNC; a rendezvous request is read from the sender's memory and answered with a FIN
// after the sender's SEND completed. Every receive completes on the TM-SRQ's own CQ.
#include <infiniband/tm_types.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

constexpr uint32_t kTmh = 16, kRvh = 16;

void put_be(uint8_t* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

// Writes a TMH (and, with an rvh, the RVH after it) at p.
void write_tmh(uint8_t* p, uint8_t op, uint32_t app_ctx, uint64_t tag) {
  std::memset(p, 0, kTmh);
  p[0] = op;
  put_be(p + 4, app_ctx, 4);
  put_be(p + 8, tag, 8);
}
void write_rvh(uint8_t* p, uint64_t va, uint32_t rkey, uint32_t len) {
  put_be(p, va, 8);
  put_be(p + 8, rkey, 4);
  put_be(p + 12, len, 4);
}

class TagMatchingTest : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ibv_cq_init_attr_ex ca{};
    ca.cqe = 64;
    ca.wc_flags = uint64_t{IBV_WC_STANDARD_FLAGS} | IBV_WC_EX_WITH_TM_INFO;
    tm_cq_ = ibv_create_cq_ex(b_.ctx, &ca);
    ASSERT_NE(tm_cq_, nullptr);
    srq_ = create_tm_srq(4);
    ASSERT_NE(srq_, nullptr);
    // The sender: a plain RC QP (its receives take FINs); the receiver: on the TM-SRQ.
    qa_ = create_qp(a_, IBV_QPT_RC);
    qb_ = create_qp(b_, IBV_QPT_RC, srq_);
    connect(qa_, a_, qb_, b_, kFullAccess);
    connect(qb_, b_, qa_, a_, kFullAccess);
    send_ = make_buffer(a_, 8192, kFullAccess);
    recv_ = make_buffer(b_, 8192, kFullAccess);
  }
  void TearDown() override {
    if (qb_ != nullptr) ibv_destroy_qp(qb_);
    if (qa_ != nullptr) ibv_destroy_qp(qa_);
    if (srq_ != nullptr) ibv_destroy_srq(srq_);
    if (tm_cq_ != nullptr) ibv_destroy_cq(ibv_cq_ex_to_cq(tm_cq_));
    free_buffer(&send_);
    free_buffer(&recv_);
    VerbsTest::TearDown();
  }

  ibv_srq* create_tm_srq(uint32_t tags) {
    ibv_srq_init_attr_ex sa{};
    sa.comp_mask =
        IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
    sa.srq_type = IBV_SRQT_TM;
    sa.pd = b_.pd;
    sa.cq = ibv_cq_ex_to_cq(tm_cq_);
    sa.attr.max_wr = 16;
    sa.attr.max_sge = 1;
    sa.tm_cap.max_num_tags = tags;
    sa.tm_cap.max_ops = 8;
    return ibv_create_srq_ex(b_.ctx, &sa);
  }

  // Posts one operation; returns ibv_post_srq_ops' result and leaves ADD's handle in *handle.
  int post_op(ibv_ops_wr_opcode op, uint64_t wr_id, uint32_t unexpected, uint64_t tag = 0,
              uint32_t off = 0, uint32_t len = 0, uint32_t* handle = nullptr) {
    ibv_sge sge{reinterpret_cast<uint64_t>(recv_.data + off), len, recv_.mr->lkey};
    ibv_ops_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.flags = IBV_OPS_SIGNALED;
    wr.tm.unexpected_cnt = unexpected;
    wr.tm.handle = handle != nullptr ? *handle : 0;
    wr.tm.add.recv_wr_id = wr_id + 1000;
    wr.tm.add.sg_list = &sge;
    wr.tm.add.num_sge = 1;
    wr.tm.add.tag = tag;
    wr.tm.add.mask = ~0ull;
    ibv_ops_wr* bad = nullptr;
    const int err = ibv_post_srq_ops(srq_, &wr, &bad);
    if (handle != nullptr && op == IBV_WR_TAG_ADD) *handle = wr.tm.handle;
    return err;
  }
  void post_srq_recv(uint32_t off, uint32_t len, uint64_t wr_id) {
    ibv_sge sge{reinterpret_cast<uint64_t>(recv_.data + off), len, recv_.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad;
    ASSERT_EQ(ibv_post_srq_recv(srq_, &wr, &bad), 0);
  }
  // Sends send_[off, off+len) from qa_ and waits for its completion.
  void send(uint32_t off, uint32_t len) {
    ibv_sge sge{reinterpret_cast<uint64_t>(send_.data + off), len, send_.mr->lkey};
    ASSERT_EQ(post_send(qa_, IBV_WR_SEND, {sge}, 77), 0);
    ibv_wc wc = wait_one(a_.cq);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  }

  // The next completion of the TM-SRQ's CQ, with its tag and app_ctx.
  struct TmWc {
    ibv_wc_status status = IBV_WC_GENERAL_ERR;
    ibv_wc_opcode opcode{};
    unsigned int flags = 0;
    uint64_t wr_id = 0;
    uint32_t byte_len = 0;
    uint64_t tag = 0;
    uint32_t priv = 0;
  };
  TmWc next_tm() {
    TmWc r;
    ibv_poll_cq_attr attr{};
    for (int i = 0; i < 5000000; ++i) {
      if (ibv_start_poll(tm_cq_, &attr) != 0) continue;
      r.status = tm_cq_->status;
      r.wr_id = tm_cq_->wr_id;
      r.opcode = ibv_wc_read_opcode(tm_cq_);
      r.flags = ibv_wc_read_wc_flags(tm_cq_);
      r.byte_len = ibv_wc_read_byte_len(tm_cq_);
      ibv_wc_tm_info info{};
      ibv_wc_read_tm_info(tm_cq_, &info);
      r.tag = info.tag;
      r.priv = info.priv;
      ibv_end_poll(tm_cq_);
      return r;
    }
    ADD_FAILURE() << "no completion on the TM-SRQ's CQ";
    return r;
  }

  ibv_cq_ex* tm_cq_ = nullptr;
  ibv_srq* srq_ = nullptr;
  ibv_qp* qa_ = nullptr;
  ibv_qp* qb_ = nullptr;
  Buffer send_, recv_;
};

TEST_F(TagMatchingTest, TheDeviceReportsTagMatchingOnRc) {
  ibv_device_attr_ex attr{};
  ASSERT_EQ(ibv_query_device_ex(b_.ctx, nullptr, &attr), 0);
  EXPECT_EQ(attr.tm_caps.flags & IBV_TM_CAP_RC, static_cast<uint32_t>(IBV_TM_CAP_RC));
  EXPECT_GE(attr.tm_caps.max_num_tags, 4u);
  EXPECT_GE(attr.tm_caps.max_rndv_hdr_size, kTmh + kRvh);
  EXPECT_GE(attr.tm_caps.max_sge, 1u);
}

TEST_F(TagMatchingTest, AnEagerMessageLandsInTheBufferItsTagTakesWithoutItsHeader) {
  uint32_t handle = 0;
  ASSERT_EQ(post_op(IBV_WR_TAG_ADD, 1, 0, 0x4242, 0, 512, &handle), 0);
  TmWc add = next_tm();
  EXPECT_EQ(add.status, IBV_WC_SUCCESS);
  EXPECT_EQ(add.opcode, IBV_WC_TM_ADD);
  EXPECT_EQ(add.wr_id, 1u);
  EXPECT_EQ(add.flags & IBV_WC_TM_SYNC_REQ, 0u);
  write_tmh(send_.data, IBV_TMH_EAGER, 0xc0ffee, 0x4242);
  fill_pattern(send_.data + kTmh, 300, 3);
  send(0, kTmh + 300);
  TmWc got = next_tm();
  EXPECT_EQ(got.status, IBV_WC_SUCCESS);
  EXPECT_EQ(got.opcode, IBV_WC_TM_RECV);
  EXPECT_EQ(got.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID),
            static_cast<unsigned>(IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID));
  EXPECT_EQ(got.wr_id, 1001u);  // the buffer's recv_wr_id
  EXPECT_EQ(got.byte_len, 300u);
  EXPECT_EQ(got.tag, 0x4242u);
  EXPECT_EQ(got.priv, 0xc0ffeeu);
  EXPECT_EQ(memcmp(recv_.data, send_.data + kTmh, 300), 0);
  // The buffer is gone: deleting it now fails.
  ASSERT_EQ(post_op(IBV_WR_TAG_DEL, 2, 0, 0, 0, 0, &handle), 0);
  TmWc del = next_tm();
  EXPECT_EQ(del.status, IBV_WC_TM_ERR);
  EXPECT_EQ(del.opcode, IBV_WC_TM_DEL);
  // Nothing went to the QP's own receive CQ.
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(b_.cq, 1, &wc), 0);
}

TEST_F(TagMatchingTest, AnUnmatchedTagIsUnexpectedAndHoldsNewBuffersUntilSync) {
  post_srq_recv(4096, 1024, 501);
  post_srq_recv(5120, 1024, 502);
  write_tmh(send_.data, IBV_TMH_EAGER, 0, 0x99);
  fill_pattern(send_.data + kTmh, 100, 4);
  send(0, kTmh + 100);
  TmWc unexpected = next_tm();
  EXPECT_EQ(unexpected.status, IBV_WC_SUCCESS);
  EXPECT_EQ(unexpected.opcode, IBV_WC_TM_RECV);
  EXPECT_EQ(unexpected.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID), 0u);
  EXPECT_EQ(unexpected.wr_id, 501u);
  EXPECT_EQ(unexpected.byte_len, kTmh + 100);
  EXPECT_EQ(memcmp(recv_.data + 4096, send_.data, kTmh + 100), 0);  // header and all
  // Software has not counted that message yet: the buffer it adds now is held, and says so.
  ASSERT_EQ(post_op(IBV_WR_TAG_ADD, 3, 0, 0x99, 0, 512), 0);
  TmWc add = next_tm();
  EXPECT_EQ(add.opcode, IBV_WC_TM_ADD);
  EXPECT_NE(add.flags & IBV_WC_TM_SYNC_REQ, 0u);
  send(0, kTmh + 100);  // the held buffer does not take it
  TmWc again = next_tm();
  EXPECT_EQ(again.wr_id, 502u);
  EXPECT_EQ(again.flags & IBV_WC_TM_MATCH, 0u);
  // Caught up (two unexpected messages): the held buffer matches.
  ASSERT_EQ(post_op(IBV_WR_TAG_SYNC, 4, 2), 0);
  TmWc sync = next_tm();
  EXPECT_EQ(sync.opcode, IBV_WC_TM_SYNC);
  EXPECT_EQ(sync.flags & IBV_WC_TM_SYNC_REQ, 0u);
  send(0, kTmh + 100);
  TmWc matched = next_tm();
  EXPECT_EQ(matched.wr_id, 1003u);
  EXPECT_NE(matched.flags & IBV_WC_TM_MATCH, 0u);
}

TEST_F(TagMatchingTest, NoTagAndHeaderlessMessagesGoWholeToTheSrq) {
  post_srq_recv(4096, 1024, 601);
  post_srq_recv(5120, 1024, 602);
  write_tmh(send_.data, IBV_TMH_NO_TAG, 0, 0x4242);
  send(0, 64);
  TmWc no_tag = next_tm();
  EXPECT_EQ(no_tag.opcode, IBV_WC_TM_NO_TAG);
  EXPECT_EQ(no_tag.wr_id, 601u);
  EXPECT_EQ(no_tag.byte_len, 64u);
  send(0, 8);  // shorter than a TMH: an ordinary receive
  TmWc plain = next_tm();
  EXPECT_EQ(plain.opcode, IBV_WC_RECV);
  EXPECT_EQ(plain.wr_id, 602u);
  EXPECT_EQ(plain.byte_len, 8u);
}

TEST_F(TagMatchingTest, ARendezvousReadsTheDataAndTheFinFollowsTheSendsCompletion) {
  // The FIN's receive at the sender.
  post_recv(qa_, send_, 6144, 64, 900);
  fill_pattern(send_.data + 4096, 2048, 9);
  write_tmh(send_.data, IBV_TMH_RNDV, 5, 0x77);
  write_rvh(send_.data + kTmh, reinterpret_cast<uint64_t>(send_.data + 4096), send_.mr->rkey, 2048);
  ASSERT_EQ(post_op(IBV_WR_TAG_ADD, 5, 0, 0x77, 0, 4096), 0);
  EXPECT_EQ(next_tm().opcode, IBV_WC_TM_ADD);
  ibv_sge sge{reinterpret_cast<uint64_t>(send_.data), kTmh + kRvh, send_.mr->lkey};
  ASSERT_EQ(post_send(qa_, IBV_WR_SEND, {sge}, 77), 0);
  // The sender sees its SEND complete, then the FIN: the request's headers, opcode FIN.
  std::vector<ibv_wc> at_sender = wait_wc(a_.cq, 2);
  ASSERT_EQ(at_sender.size(), 2u);
  EXPECT_EQ(at_sender[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(at_sender[1].opcode, IBV_WC_RECV);
  EXPECT_EQ(at_sender[1].wr_id, 900u);
  EXPECT_EQ(at_sender[1].byte_len, kTmh + kRvh);
  EXPECT_EQ(send_.data[6144], IBV_TMH_FIN);
  EXPECT_EQ(memcmp(send_.data + 6144 + 1, send_.data + 1, kTmh + kRvh - 1), 0);
  TmWc match = next_tm();
  EXPECT_EQ(match.opcode, IBV_WC_TM_RECV);
  EXPECT_EQ(match.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID),
            static_cast<unsigned>(IBV_WC_TM_MATCH));
  EXPECT_EQ(match.tag, 0x77u);
  EXPECT_EQ(match.priv, 5u);
  TmWc data = next_tm();
  EXPECT_EQ(data.status, IBV_WC_SUCCESS);
  EXPECT_EQ(data.wr_id, 1005u);
  EXPECT_EQ(data.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID),
            static_cast<unsigned>(IBV_WC_TM_DATA_VALID));
  EXPECT_EQ(data.byte_len, 2048u);
  EXPECT_EQ(memcmp(recv_.data, send_.data + 4096, 2048), 0);
}

TEST_F(TagMatchingTest, ARendezvousTooBigForItsBufferIsLeftToSoftware) {
  write_tmh(send_.data, IBV_TMH_RNDV, 0, 0x78);
  write_rvh(send_.data + kTmh, reinterpret_cast<uint64_t>(send_.data + 4096), send_.mr->rkey, 4096);
  ASSERT_EQ(post_op(IBV_WR_TAG_ADD, 6, 0, 0x78, 0, 64), 0);
  EXPECT_EQ(next_tm().opcode, IBV_WC_TM_ADD);
  post_recv(qa_, send_, 6144, 64, 901);  // a FIN would land here: none may come
  send(0, kTmh + kRvh);
  TmWc got = next_tm();
  EXPECT_EQ(got.status, IBV_WC_TM_RNDV_INCOMPLETE);
  EXPECT_NE(got.flags & IBV_WC_TM_MATCH, 0u);
  EXPECT_EQ(got.wr_id, 1006u);
  EXPECT_EQ(memcmp(recv_.data, send_.data, kTmh + kRvh), 0);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(a_.cq, 1, &wc), 0);
}

TEST_F(TagMatchingTest, BadOperationsAndObjectsAreRefused) {
  for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(post_op(IBV_WR_TAG_ADD, 10 + i, 0, i, 0, 64), 0);
  EXPECT_EQ(post_op(IBV_WR_TAG_ADD, 20, 0, 9, 0, 64), ENOMEM);  // the list is full
  ibv_ops_wr wr{};
  wr.opcode = IBV_WR_TAG_ADD;
  wr.tm.add.num_sge = 2;  // more than tm_caps.max_sge
  ibv_sge sges[2]{};
  wr.tm.add.sg_list = sges;
  ibv_ops_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_srq_ops(srq_, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  // Not a TM-SRQ.
  ibv_srq_init_attr basic{};
  basic.attr.max_wr = 4;
  basic.attr.max_sge = 1;
  ibv_srq* plain = ibv_create_srq(b_.pd, &basic);
  ASSERT_NE(plain, nullptr);
  wr.tm.add.num_sge = 1;
  EXPECT_EQ(ibv_post_srq_ops(plain, &wr, &bad), EINVAL);
  EXPECT_EQ(ibv_destroy_srq(plain), 0);
  // Sizes outside the device's.
  EXPECT_EQ(create_tm_srq(0), nullptr);
  EXPECT_EQ(create_tm_srq(1u << 20), nullptr);
  // Tag matching is for RC QPs.
  ibv_qp_init_attr qa{};
  qa.send_cq = qa.recv_cq = b_.cq;
  qa.srq = srq_;
  qa.qp_type = IBV_QPT_UC;
  qa.cap.max_send_wr = 4;
  qa.cap.max_send_sge = 1;
  EXPECT_EQ(ibv_create_qp(b_.pd, &qa), nullptr);
}

}  // namespace
}  // namespace wharf::verify
