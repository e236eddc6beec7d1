// Extended CQs: every completion carries the time it was made, on the device's free-running
// clock (ibv_query_rt_values_ex's) and as wall-clock nanoseconds.
#include <time.h>

#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class CqExTest : public VerbsTest {};

uint64_t ns_of(const timespec& ts) {
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t device_clock_ns(ibv_context* ctx) {
  ibv_values_ex v{};
  v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
  EXPECT_EQ(ibv_query_rt_values_ex(ctx, &v), 0);
  return ns_of(v.raw_clock);
}

TEST_F(CqExTest, CompletionsCarryTheirTime) {
  ibv_cq_init_attr_ex attr{};
  attr.cqe = 16;
  attr.wc_flags = uint64_t{IBV_WC_STANDARD_FLAGS} | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  ibv_cq_ex* cq = ibv_create_cq_ex(a_.ctx, &attr);
  ASSERT_NE(cq, nullptr);
  a_.cq = ibv_cq_ex_to_cq(cq);  // a's QP completes into it; closing the device frees it
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  timespec real_before{};
  clock_gettime(CLOCK_REALTIME, &real_before);
  const uint64_t before = device_clock_ns(a_.ctx);
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                7, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
      0);
  ibv_poll_cq_attr poll{};
  int ret = ENOENT;
  for (int i = 0; i < 1000000 && ret == ENOENT; ++i) ret = ibv_start_poll(cq, &poll);
  ASSERT_EQ(ret, 0);
  const uint64_t stamp = ibv_wc_read_completion_ts(cq);
  const uint64_t wallclock = ibv_wc_read_completion_wallclock_ns(cq);
  EXPECT_EQ(cq->wr_id, 7u);
  EXPECT_EQ(cq->status, IBV_WC_SUCCESS);
  ibv_end_poll(cq);
  timespec real_after{};
  clock_gettime(CLOCK_REALTIME, &real_after);
  const uint64_t after = device_clock_ns(a_.ctx);
  EXPECT_GE(stamp, before);
  EXPECT_LE(stamp, after);
  // The wall-clock form is the same instant: within the time the test took (and a little for
  // the clocks' offset being read apart).
  EXPECT_GE(wallclock + 1000000, ns_of(real_before));
  EXPECT_LE(wallclock, ns_of(real_after) + 1000000);
  free_buffer(&src);
  free_buffer(&dst);
}

TEST_F(CqExTest, UnkeptFieldsAreNotSupported) {
  ibv_cq_init_attr_ex attr{};
  attr.cqe = 16;
  errno = 0;
  attr.wc_flags = IBV_WC_EX_WITH_CVLAN;
  EXPECT_EQ(ibv_create_cq_ex(a_.ctx, &attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  attr.wc_flags = IBV_WC_EX_WITH_FLOW_TAG;
  EXPECT_EQ(ibv_create_cq_ex(a_.ctx, &attr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

}  // namespace
}  // namespace wharf::verify
