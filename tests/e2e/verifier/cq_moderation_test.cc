// CQ event moderation (ibv_modify_cq): an armed, moderated CQ raises its completion event
// once `cq_count` completions arrived or `cq_period` us after the first of them, whether the
// completions are the QP's own (send) or its peer's (receive) — also where the direct path
// would otherwise write them from the libraries.
#include <errno.h>
#include <poll.h>

#include <chrono>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class ModerationTest : public VerbsTest {
 protected:
  void SetUp() override {
    VerbsTest::SetUp();
    ch_ = ibv_create_comp_channel(a_.ctx);
    ASSERT_NE(ch_, nullptr);
    cq_ = ibv_create_cq(a_.ctx, 64, nullptr, ch_, 0);
    ASSERT_NE(cq_, nullptr);
    qa_ = create_rc_qp_on(a_, cq_);
    qb_ = create_qp(b_, IBV_QPT_RC);
    connect(qa_, a_, qb_, b_, kFullAccess);
    connect(qb_, b_, qa_, a_, kFullAccess);
    src_ = make_buffer(a_, 4096, kFullAccess);
    dst_ = make_buffer(b_, 4096, kFullAccess);
  }
  void TearDown() override {
    ibv_destroy_qp(qb_);
    ibv_destroy_qp(qa_);
    ibv_destroy_cq(cq_);
    ibv_destroy_comp_channel(ch_);
    free_buffer(&src_);
    free_buffer(&dst_);
    VerbsTest::TearDown();
  }

  int moderate(uint16_t count, uint16_t period_us, uint32_t mask = IBV_CQ_ATTR_MODERATE) {
    ibv_modify_cq_attr attr{};
    attr.attr_mask = mask;
    attr.moderate.cq_count = count;
    attr.moderate.cq_period = period_us;
    return ibv_modify_cq(cq_, &attr);
  }
  // A signaled WRITE from a to b, whose completion is taken from the CQ.
  void write_once() {
    ibv_sge sge{reinterpret_cast<uint64_t>(src_.data), 64, src_.mr->lkey};
    ASSERT_EQ(post_send(qa_, IBV_WR_RDMA_WRITE, {sge}, 1, IBV_SEND_SIGNALED,
                        reinterpret_cast<uint64_t>(dst_.data), dst_.mr->rkey),
              0);
    EXPECT_EQ(wait_one(cq_).status, IBV_WC_SUCCESS);
  }
  // Whether the channel has an event within timeout_ms; takes and acknowledges it if so.
  bool event_within(int timeout_ms) {
    pollfd p{ch_->fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return false;
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    EXPECT_EQ(ibv_get_cq_event(ch_, &cq, &ctx), 0);
    EXPECT_EQ(cq, cq_);
    ibv_ack_cq_events(cq_, 1);
    return true;
  }

  ibv_comp_channel* ch_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qa_ = nullptr;
  ibv_qp* qb_ = nullptr;
  Buffer src_, dst_;
};

TEST_F(ModerationTest, TheDeviceReportsItsModerationLimits) {
  ibv_device_attr_ex attr{};
  ASSERT_EQ(ibv_query_device_ex(a_.ctx, nullptr, &attr), 0);
  EXPECT_EQ(attr.cq_mod_caps.max_cq_count, 0xffff);
  EXPECT_EQ(attr.cq_mod_caps.max_cq_period, 0xfff);
}

TEST_F(ModerationTest, AnEventWaitsForItsCountOfCompletions) {
  ASSERT_EQ(moderate(3, 0), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  write_once();
  write_once();
  EXPECT_FALSE(event_within(100));  // two of three: held back
  write_once();
  EXPECT_TRUE(event_within(5000));
  // Re-armed, the count starts again.
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  write_once();
  EXPECT_FALSE(event_within(100));
}

TEST_F(ModerationTest, APeriodRaisesTheEventOfFewerCompletions) {
  constexpr int kPeriodUs = 2000;
  ASSERT_EQ(moderate(100, kPeriodUs), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  const auto before = std::chrono::steady_clock::now();
  write_once();
  EXPECT_TRUE(event_within(5000));
  // Never before the period has run from the completion (which came after `before`).
  EXPECT_GE(std::chrono::steady_clock::now() - before, std::chrono::microseconds(kPeriodUs));
}

TEST_F(ModerationTest, ReceiveCompletionsThePeerWritesAreModeratedToo) {
  // qb sends to qa, whose receive CQ is the moderated one.
  ASSERT_EQ(moderate(2, 0), 0);
  for (uint32_t i = 0; i < 2; ++i) post_recv(qa_, src_, 1024 + i * 64, 64, 10 + i);
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  ibv_sge sge{reinterpret_cast<uint64_t>(dst_.data), 32, dst_.mr->lkey};
  ASSERT_EQ(post_send(qb_, IBV_WR_SEND, {sge}, 20), 0);
  EXPECT_EQ(wait_one(b_.cq).status, IBV_WC_SUCCESS);
  EXPECT_EQ(wait_one(cq_).wr_id, 10u);
  EXPECT_FALSE(event_within(100));
  ASSERT_EQ(post_send(qb_, IBV_WR_SEND, {sge}, 21), 0);
  EXPECT_EQ(wait_one(b_.cq).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(event_within(5000));
  EXPECT_EQ(wait_one(cq_).wr_id, 11u);
}

TEST_F(ModerationTest, ZeroLimitsMeanAnEventPerCompletionAgain) {
  ASSERT_EQ(moderate(8, 0), 0);
  ASSERT_EQ(moderate(0, 0), 0);
  ASSERT_EQ(ibv_req_notify_cq(cq_, 0), 0);
  write_once();
  EXPECT_TRUE(event_within(5000));
}

TEST_F(ModerationTest, BadAttributesAreRefused) {
  EXPECT_EQ(moderate(1, 1, 0), EINVAL);                         // nothing to modify
  EXPECT_EQ(moderate(1, 1, IBV_CQ_ATTR_RESERVED), EOPNOTSUPP);  // an attribute it lacks
  EXPECT_EQ(moderate(1, 0x1000), EINVAL);                       // above max_cq_period
  EXPECT_EQ(moderate(0xffff, 0xfff), 0);
}

}  // namespace
}  // namespace wharf::verify
