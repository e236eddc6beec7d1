// On-demand paging: MRs registered with IBV_ACCESS_ON_DEMAND pin and remap nothing, so memory
// mapped after the registration is reached, and an implicit MR (address NULL, length
// SIZE_MAX) names the whole address space; an unmapped address in it fails the work request
// with an error completion, as on hardware, instead of faulting anyone.
#include <sys/mman.h>

#include <cstdint>
#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class OdpTest : public VerbsTest {};

constexpr int kOdpAccess = kFullAccess | IBV_ACCESS_ON_DEMAND;

TEST_F(OdpTest, AnImplicitMrReachesMemoryMappedAfterIt) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  ibv_mr* implicit_b = ibv_reg_mr(b_.pd, nullptr, SIZE_MAX, kOdpAccess);
  ASSERT_NE(implicit_b, nullptr) << strerror(errno);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  std::memset(src.data, 0x5a, 4096);
  // Mapped after the registration: an explicit MR could not name it.
  void* late = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(late, MAP_FAILED);
  auto* dst = static_cast<uint8_t*>(late) + 100;
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 4096, src.mr->lkey}},
                1, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst), implicit_b->rkey),
      0);
  auto wc = wait_wc(a_.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(dst[0], 0x5a);
  EXPECT_EQ(dst[4095], 0x5a);
  EXPECT_EQ(dst[4096], 0);
  munmap(late, 8192);
  EXPECT_EQ(ibv_dereg_mr(implicit_b), 0);
  free_buffer(&src);
}

TEST_F(OdpTest, AnUnmappedAddressInAnImplicitMrFailsTheWork) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  ibv_mr* implicit_a = ibv_reg_mr(a_.pd, nullptr, SIZE_MAX, kOdpAccess);
  ASSERT_NE(implicit_a, nullptr) << strerror(errno);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  // A page nobody may read (kept reserved, so no later mapping can land there).
  void* gone = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(gone, MAP_FAILED);
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(gone), 64, implicit_a->lkey}},
                2, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
      0);
  auto wc = wait_wc(a_.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
  munmap(gone, 4096);
  EXPECT_EQ(ibv_dereg_mr(implicit_a), 0);
  free_buffer(&dst);
}

TEST_F(OdpTest, AdviseMrChecksItsArguments) {
  Buffer odp{};
  odp.len = 8192;
  odp.data = static_cast<uint8_t*>(
      mmap(nullptr, odp.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ibv_mr* mr = ibv_reg_mr(a_.pd, odp.data, odp.len, kOdpAccess);
  ASSERT_NE(mr, nullptr);
  Buffer plain = make_buffer(a_, 4096, kFullAccess);
  ibv_sge in{reinterpret_cast<uint64_t>(odp.data), 4096, mr->lkey};
  EXPECT_EQ(
      ibv_advise_mr(a_.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &in, 1),
      0);
  ibv_sge past{reinterpret_cast<uint64_t>(odp.data) + 4096, 8192, mr->lkey};
  EXPECT_EQ(ibv_advise_mr(a_.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &past, 1), EINVAL);
  ibv_sge not_odp{reinterpret_cast<uint64_t>(plain.data), 64, plain.mr->lkey};
  EXPECT_EQ(ibv_advise_mr(a_.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &not_odp, 1), EINVAL);
  EXPECT_EQ(ibv_advise_mr(a_.pd, static_cast<ibv_advise_mr_advice>(7), 0, &in, 1), EINVAL);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(odp.data, odp.len);
  free_buffer(&plain);
}

}  // namespace
}  // namespace wharf::verify
