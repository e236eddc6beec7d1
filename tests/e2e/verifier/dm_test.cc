// Device memory: ibv_alloc_dm, the copies in and out (4-byte aligned, within the DM), MRs on it
// (zero based) that RDMA reaches, and a DM that cannot be freed while an MR uses it.
#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class DmTest : public VerbsTest {};

TEST_F(DmTest, RdmaWriteLandsInDeviceMemory) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  ibv_device_attr_ex attr{};
  ASSERT_EQ(ibv_query_device_ex(b_.ctx, nullptr, &attr), 0);
  ASSERT_GE(attr.max_dm_size, 8192u);
  ibv_alloc_dm_attr dm_attr{8192, 0, 0};
  ibv_dm* dm = ibv_alloc_dm(b_.ctx, &dm_attr);
  ASSERT_NE(dm, nullptr) << strerror(errno);
  const int access = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  EXPECT_EQ(ibv_reg_dm_mr(b_.pd, dm, 0, 8192, IBV_ACCESS_LOCAL_WRITE), nullptr);  // not zero based
  ibv_mr* mr = ibv_reg_dm_mr(b_.pd, dm, 4096, 4096, access);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_free_dm(dm), EBUSY);

  Buffer src = make_buffer(a_, 4096, kFullAccess);
  std::memset(src.data, 0x3c, 4096);
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 100, src.mr->lkey}},
                1, IBV_SEND_SIGNALED, 8, mr->rkey),  // zero based: offset 8 of the MR
      0);
  auto wc = wait_wc(a_.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  uint8_t got[112] = {};
  ASSERT_EQ(ibv_memcpy_from_dm(got, dm, 4096, sizeof(got)), 0);
  EXPECT_EQ(got[7], 0);
  EXPECT_EQ(got[8], 0x3c);
  EXPECT_EQ(got[107], 0x3c);
  EXPECT_EQ(got[108], 0);
  // Past the MR (4096 bytes from offset 4096 of the DM): a remote access error.
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                2, IBV_SEND_SIGNALED, 4090, mr->rkey),
      0);
  wc = wait_wc(a_.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);
  free_buffer(&src);
}

TEST_F(DmTest, CopiesAreAlignedAndBounded) {
  ibv_alloc_dm_attr dm_attr{100, 0, 0};
  ibv_dm* dm = ibv_alloc_dm(a_.ctx, &dm_attr);
  ASSERT_NE(dm, nullptr);
  uint8_t buf[128] = {1, 2, 3, 4};
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 0, buf, 100), 0);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 2, buf, 4), EINVAL);    // unaligned offset
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 0, buf, 6), EINVAL);    // unaligned length
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 0, buf, 104), EINVAL);  // past the end
  EXPECT_EQ(ibv_memcpy_from_dm(buf, dm, 96, 8), EINVAL);
  uint8_t back[4] = {};
  EXPECT_EQ(ibv_memcpy_from_dm(back, dm, 0, 4), 0);
  EXPECT_EQ(back[3], 4);
  ibv_alloc_dm_attr too_big{1u << 30, 0, 0};
  EXPECT_EQ(ibv_alloc_dm(a_.ctx, &too_big), nullptr);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

}  // namespace
}  // namespace wharf::verify
