// ibv_import_device and the object imports, within one process (abi/verbs/import_verbs.cc):
// an imported context shares the original's objects by handle and outlives its closing.
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class ImportTest : public VerbsTest {
 protected:
  // A context imported from a duplicate of a_'s cmd_fd, as pyverbs' tests make one.
  ibv_context* import_a() {
    const int fd = fcntl(a_.ctx->cmd_fd, F_DUPFD_CLOEXEC, 0);
    EXPECT_GE(fd, 0);
    ibv_context* c = ibv_import_device(fd);
    EXPECT_NE(c, nullptr) << strerror(errno);
    return c;
  }
};

// A QP made on the imported context, in the imported PD, sends from the imported MR and
// receives into it; b_ writes into it with the original's rkey.
TEST_F(ImportTest, ObjectsImportedByHandleCarryTraffic) {
  Buffer mem = make_buffer(a_, 4096, kFullAccess);
  Buffer peer = make_buffer(b_, 4096, kFullAccess);
  ibv_context* ctx = import_a();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_import_pd(ctx, a_.pd->handle);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(pd->handle, a_.pd->handle);
  ibv_mr* mr = ibv_import_mr(pd, mem.mr->handle);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->lkey, mem.mr->lkey);
  EXPECT_EQ(mr->rkey, mem.mr->rkey);
  EXPECT_EQ(mr->length, mem.mr->length);
  EXPECT_EQ(mr->addr, nullptr);

  ibv_cq* cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  Side imported{ctx, pd, cq, a_.port, a_.gid};
  ibv_qp* qi = create_qp(imported, IBV_QPT_RC);
  ASSERT_NE(qi, nullptr);
  ibv_qp* qb = create_qp(b_, IBV_QPT_RC);
  connect(qi, imported, qb, b_, kFullAccess);
  connect(qb, b_, qi, imported, kFullAccess);

  fill_pattern(mem.data, 256, 9);
  post_recv(qb, peer, 0, 256, 7);
  ASSERT_EQ(post_send(qi, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(mem.data), 256, mr->lkey}}, 1),
            0);
  EXPECT_EQ(wait_one(cq).status, IBV_WC_SUCCESS);
  EXPECT_EQ(wait_one(b_.cq).status, IBV_WC_SUCCESS);
  EXPECT_EQ(memcmp(peer.data, mem.data, 256), 0);

  fill_pattern(peer.data + 1024, 512, 4);
  ASSERT_EQ(post_send(qb, IBV_WR_RDMA_WRITE,
                      {{reinterpret_cast<uint64_t>(peer.data + 1024), 512, peer.mr->lkey}}, 2,
                      IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(mem.data + 1024), mr->rkey),
            0);
  EXPECT_EQ(wait_one(b_.cq).status, IBV_WC_SUCCESS);
  EXPECT_EQ(memcmp(mem.data + 1024, peer.data + 1024, 512), 0);

  EXPECT_EQ(ibv_destroy_qp(qi), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  ibv_unimport_mr(mr);
  ibv_unimport_pd(pd);
  EXPECT_EQ(ibv_close_device(ctx), 0);
  // The original PD and context are untouched by the unimports and the import's closing.
  ibv_qp *qa, *qb2;
  rc_pair(&qa, &qb2);
  write_and_check(qa, a_, b_);
}

// What names no context or object of this process is refused as rdma-core refuses it.
TEST_F(ImportTest, UnknownDescriptorsAndHandlesAreRefused) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(p[0]), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  close(p[0]);
  close(p[1]);
  ibv_context* ctx = import_a();
  ASSERT_NE(ctx, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(ctx, 0xfffff), nullptr);
  EXPECT_EQ(errno, EINVAL);
  Buffer other = make_buffer(b_, 4096, kFullAccess);  // another context's registration
  ibv_pd* pd = ibv_import_pd(ctx, a_.pd->handle);
  ASSERT_NE(pd, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(pd, other.mr->handle + 1000), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_import_dm(ctx, 12345), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_unimport_pd(pd);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

// Closing the original first leaves the imported context working until it is closed too.
TEST_F(ImportTest, AnImportedContextOutlivesTheOriginal) {
  ibv_context* ctx = import_a();
  ASSERT_NE(ctx, nullptr);
  ibv_pd* pd = ibv_import_pd(ctx, a_.pd->handle);
  ASSERT_NE(pd, nullptr);
  ASSERT_EQ(ibv_close_device(a_.ctx), 0);
  a_ = Side{};
  ibv_pd* fresh = ibv_alloc_pd(ctx);
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(fresh), 0);
  ibv_device_attr attr;
  EXPECT_EQ(ibv_query_device(ctx, &attr), 0);
  ibv_unimport_pd(pd);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

// Device memory imported by handle is the same memory.
TEST_F(ImportTest, AnImportedDmSharesItsBytes) {
  ibv_alloc_dm_attr da{};
  da.length = 4096;
  ibv_dm* dm = ibv_alloc_dm(a_.ctx, &da);
  ASSERT_NE(dm, nullptr);
  ibv_context* ctx = import_a();
  ASSERT_NE(ctx, nullptr);
  ibv_dm* imported = ibv_import_dm(ctx, dm->handle);
  ASSERT_NE(imported, nullptr);
  uint8_t in[256], out[256] = {};
  fill_pattern(in, sizeof(in), 3);
  ASSERT_EQ(ibv_memcpy_to_dm(dm, 512, in, sizeof(in)), 0);
  ASSERT_EQ(ibv_memcpy_from_dm(out, imported, 512, sizeof(out)), 0);
  EXPECT_EQ(memcmp(in, out, sizeof(in)), 0);
  ibv_unimport_dm(imported);
  EXPECT_EQ(ibv_free_dm(dm), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

}  // namespace
}  // namespace wharf::verify
