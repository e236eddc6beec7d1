// ATOMIC WRITE (ibv_wr_atomic_write): 8 bytes stored at once into remote memory that allows
// writes, 8-byte aligned; completes as IBV_WC_ATOMIC_WRITE.
#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class AtomicWriteTest : public VerbsTest {};

TEST_F(AtomicWriteTest, StoresTheEightBytesAndCompletesAsAtomicWrite) {
  ibv_qp* qb = nullptr;
  ibv_qp_ex* qa = rc_pair_ex(a_, IBV_QP_EX_WITH_ATOMIC_WRITE, b_, &qb);
  ASSERT_NE(qa, nullptr);
  Buffer dst = make_buffer(b_, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  const auto base = reinterpret_cast<uint64_t>(dst.data);
  ASSERT_EQ(post_atomic_write(qa, 0x1122334455667788ull, base + 64, dst.mr->rkey, 1), 0);
  const ibv_wc wc = wait_one(a_.cq);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
  uint64_t got = 0;
  std::memcpy(&got, dst.data + 64, 8);
  EXPECT_EQ(got, 0x1122334455667788ull);
  EXPECT_EQ(dst.data[63], 0);
  EXPECT_EQ(dst.data[72], 0);
  // Not 8-byte aligned: an invalid request.
  ASSERT_EQ(post_atomic_write(qa, 1, base + 4, dst.mr->rkey, 2), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_REM_INV_REQ_ERR);
}

TEST_F(AtomicWriteTest, NeedsRemoteWriteAccess) {
  ibv_qp* qb = nullptr;
  ibv_qp_ex* qa = rc_pair_ex(a_, IBV_QP_EX_WITH_ATOMIC_WRITE, b_, &qb);
  ASSERT_NE(qa, nullptr);
  Buffer dst = make_buffer(b_, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  ASSERT_EQ(post_atomic_write(qa, 7, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey, 1), 0);
  EXPECT_EQ(wait_one(a_.cq).status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(dst.data[0], 0);
}

}  // namespace
}  // namespace wharf::verify
