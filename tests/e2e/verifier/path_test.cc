// Work that moves between the direct intra-host path and the router (docs/ARCHITECTURE.md,
// "The direct path"): whichever path each work request takes, completions stay in order and
// keys stop working the moment they are deregistered. Also run with the direct path off
// (verify.router_only), where the same results must hold.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class PathTest : public VerbsTest {
 protected:
  // A connected RC pair for one long message: `qp` on side a with a CQ of its own (so its
  // completion can be told apart), `peer` on side b, receiving from `srq` if it has one.
  struct LongPair {
    ibv_cq* cq = nullptr;
    ibv_qp* qp = nullptr;
    ibv_qp* peer = nullptr;
    ibv_srq* srq = nullptr;
  };
  enum class Receives { kOwnQueue, kSharedQueue };
  void make_long_pair(LongPair* p, Receives receives = Receives::kOwnQueue) {
    p->cq = ibv_create_cq(a_.ctx, 16, nullptr, nullptr, 0);
    ASSERT_NE(p->cq, nullptr);
    if (receives == Receives::kSharedQueue) {
      p->srq = create_srq(b_);
      ASSERT_NE(p->srq, nullptr);
    }
    p->qp = create_rc_qp_on(a_, p->cq, 16);
    p->peer = create_qp(b_, IBV_QPT_RC, p->srq);
    ASSERT_NE(p->qp, nullptr);
    ASSERT_NE(p->peer, nullptr);
    connect(p->qp, a_, p->peer, b_, kFullAccess);
    connect(p->peer, b_, p->qp, a_, kFullAccess);
  }
  void destroy(const LongPair& p) {
    EXPECT_EQ(ibv_destroy_qp(p.qp), 0);
    EXPECT_EQ(ibv_destroy_qp(p.peer), 0);
    EXPECT_EQ(ibv_destroy_cq(p.cq), 0);
    if (p.srq != nullptr) {
      EXPECT_EQ(ibv_destroy_srq(p.srq), 0);
    }
  }
  // How long a wait for a long message may last: its copy takes 0.1 s to seconds (first
  // touch of fresh mappings), and under ASan on a loaded CI 5 s were not enough, twice.
  // These tests assert orders and contents, never a speed.
  static constexpr std::chrono::seconds kCopyBound{60};

  // With the long message (wr_id 1) of `big` under way, a 64-byte WRITE (wr_id 2) on
  // `small` from `src` to raddr/rkey completes before it; then the long one completes.
  // (A 64-byte SEND instead when op says so; raddr and rkey are then unused.)
  // What is asserted is the order, not a speed, so both waits are long ones (kCopyBound).
  void overtake(const LongPair& big, ibv_qp* small, const Buffer& src, uint64_t raddr,
                uint32_t rkey, ibv_wr_opcode op = IBV_WR_RDMA_WRITE) {
    usleep(5000);  // the router is into the copy, which takes far longer
    ASSERT_EQ(post_send(small, op, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}}, 2,
                        IBV_SEND_SIGNALED, raddr, rkey),
              0);
    ibv_wc wc = wait_one(a_.cq, kCopyBound);
    EXPECT_EQ(wc.wr_id, 2u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    ibv_wc none;
    EXPECT_EQ(ibv_poll_cq(big.cq, 1, &none), 0) << "the long message finished first";
    wc = wait_one(big.cq, kCopyBound);
    EXPECT_EQ(wc.wr_id, 1u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  }
  // Posts a long SEND (wr_id 1) of len bytes of src on big and moves big.peer to ERR while
  // it is under way: the receive it was landing in (wr_id 9) is flushed.
  void cut_off_long_send(const LongPair& big, const Buffer& src, size_t len) {
    ASSERT_EQ(post_send(big.qp, IBV_WR_SEND,
                        {{reinterpret_cast<uint64_t>(src.data), static_cast<uint32_t>(len),
                          src.mr->lkey}},
                        1, IBV_SEND_SIGNALED),
              0);
    usleep(5000);  // the router is into the copy, which takes far longer (about 50 ms here)
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(big.peer, &attr, IBV_QP_STATE), 0);
    const ibv_wc wc = wait_one(b_.cq);
    EXPECT_EQ(wc.wr_id, 9u);
    EXPECT_EQ(wc.qp_num, big.peer->qp_num);
    ASSERT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << "the SEND finished before its receiver failed";
  }
  static bool router_only() {
    const char* mode = getenv("WHARF_VERIFY_DIRECT_PATH");
    return mode != nullptr && strcmp(mode, "off") == 0;
  }
};

// Sends posted before any receive wait (RNR) and then complete in order; later sends, once
// the queue is drained, still do.
TEST_F(PathTest, SendsWaitingForReceivesCompleteInOrderOnceTheyArePosted) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  fill_pattern(src.data, 4096, 7);
  for (uint32_t i = 0; i < 3; ++i)
    ASSERT_EQ(
        post_send(qa, IBV_WR_SEND,
                  {{reinterpret_cast<uint64_t>(src.data + i * 64), 64, src.mr->lkey}}, 100 + i),
        0);
  ibv_wc early;
  EXPECT_EQ(ibv_poll_cq(a_.cq, 1, &early), 0);  // nothing can complete without a receive
  for (uint32_t i = 0; i < 4; ++i) post_recv(qb, dst, i * 64, 64, 200 + i);
  auto sent = wait_wc(a_.cq, 3);
  auto got = wait_wc(b_.cq, 3);
  ASSERT_EQ(sent.size(), 3u);
  ASSERT_EQ(got.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(sent[i].wr_id, 100 + i);
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[i].wr_id, 200 + i);
    EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[i].byte_len, 64u);
  }
  ASSERT_EQ(post_send(qa, IBV_WR_SEND,
                      {{reinterpret_cast<uint64_t>(src.data + 3 * 64), 64, src.mr->lkey}}, 103),
            0);
  EXPECT_EQ(wait_wc(a_.cq, 1).at(0).wr_id, 103u);
  EXPECT_EQ(wait_wc(b_.cq, 1).at(0).wr_id, 203u);
  EXPECT_EQ(memcmp(dst.data, src.data, 4 * 64), 0);
}

// A key the writer has used (and may have cached) is refused once its owner deregisters it.
TEST_F(PathTest, WriteAfterThePeerDeregistersIsARemoteAccessError) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  fill_pattern(src.data, 4096, 3);
  ibv_sge sge{reinterpret_cast<uint64_t>(src.data), 256, src.mr->lkey};
  const auto raddr = reinterpret_cast<uint64_t>(dst.data);
  const uint32_t rkey = dst.mr->rkey;
  ASSERT_EQ(post_send(qa, IBV_WR_RDMA_WRITE, {sge}, 1, IBV_SEND_SIGNALED, raddr, rkey), 0);
  EXPECT_EQ(wait_wc(a_.cq, 1).at(0).status, IBV_WC_SUCCESS);
  EXPECT_EQ(memcmp(dst.data, src.data, 256), 0);
  ASSERT_EQ(ibv_dereg_mr(dst.mr), 0);
  dst.mr = nullptr;
  memset(dst.data, 0, 4096);
  ASSERT_EQ(post_send(qa, IBV_WR_RDMA_WRITE, {sge}, 2, IBV_SEND_SIGNALED, raddr, rkey), 0);
  auto wc = wait_wc(a_.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(dst.data[0], 0);  // nothing written
}

// A post list alternating between memory the writer can map (memfd-backed) and memory only
// the router reaches (a shared mapping, written with process_vm_writev): in order, all there.
TEST_F(PathTest, WorkRequestsAcrossBothPathsCompleteInOrder) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 8192, kFullAccess);
  Buffer mapped = make_buffer(b_, 8192, kFullAccess);
  void* shared = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  ibv_mr* shared_mr = ibv_reg_mr(b_.pd, shared, 8192, kFullAccess);
  ASSERT_NE(shared_mr, nullptr);
  fill_pattern(src.data, 8192, 11);

  constexpr int kWrites = 8;
  ibv_sge sges[kWrites];
  ibv_send_wr wrs[kWrites] = {};
  for (int i = 0; i < kWrites; ++i) {
    sges[i] = ibv_sge{reinterpret_cast<uint64_t>(src.data + i * 1024), 1024, src.mr->lkey};
    wrs[i].wr_id = i;
    wrs[i].opcode = IBV_WR_RDMA_WRITE;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].send_flags = IBV_SEND_SIGNALED;
    const bool to_shared = i % 2 == 1;
    wrs[i].wr.rdma.remote_addr =
        reinterpret_cast<uint64_t>(to_shared ? static_cast<uint8_t*>(shared) : mapped.data) +
        i * 1024;
    wrs[i].wr.rdma.rkey = to_shared ? shared_mr->rkey : mapped.mr->rkey;
    wrs[i].next = i + 1 < kWrites ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qa, wrs, &bad), 0);
  auto wc = wait_wc(a_.cq, kWrites);
  ASSERT_EQ(wc.size(), static_cast<size_t>(kWrites));
  for (int i = 0; i < kWrites; ++i) {
    EXPECT_EQ(wc[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
    const uint8_t* landed = (i % 2 == 1 ? static_cast<uint8_t*>(shared) : mapped.data) + i * 1024;
    EXPECT_EQ(memcmp(landed, src.data + i * 1024, 1024), 0) << i;
  }
  EXPECT_EQ(ibv_dereg_mr(shared_mr), 0);
  munmap(shared, 8192);
}

// A peer that receives into an SRQ: its RDMA writes may run on the direct path (they take no
// receive WQE) while its sends go through the router, and the mix completes in order.
TEST_F(PathTest, WritesAndSendsToAPeerOnAnSrqCompleteInOrder) {
  ibv_srq* srq = create_srq(b_);
  ASSERT_NE(srq, nullptr);
  ibv_qp* qa = create_qp(a_, IBV_QPT_RC);
  ibv_qp* qb = create_qp(b_, IBV_QPT_RC, srq);
  const int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  connect(qa, a_, qb, b_, access);
  connect(qb, b_, qa, a_, access);
  Buffer src = make_buffer(a_, 8192, kFullAccess);
  Buffer dst = make_buffer(b_, 8192, kFullAccess);
  fill_pattern(src.data, 8192, 5);
  for (uint32_t i = 0; i < 4; ++i) {
    ibv_sge s{reinterpret_cast<uint64_t>(dst.data + 4096 + i * 256), 256, dst.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = 300 + i;
    wr.sg_list = &s;
    wr.num_sge = 1;
    ibv_recv_wr* bad;
    ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
  }
  // Writes and sends alternating: 8 writes of 256 B to the first 2 KiB, 4 sends of 256 B.
  for (uint32_t i = 0; i < 12; ++i) {
    const uint32_t off = i * 256;
    ibv_sge sge{reinterpret_cast<uint64_t>(src.data + off), 256, src.mr->lkey};
    if (i % 3 == 2)
      ASSERT_EQ(post_send(qa, IBV_WR_SEND, {sge}, i), 0);
    else
      ASSERT_EQ(post_send(qa, IBV_WR_RDMA_WRITE, {sge}, i, IBV_SEND_SIGNALED,
                          reinterpret_cast<uint64_t>(dst.data + off), dst.mr->rkey),
                0);
  }
  auto sent = wait_wc(a_.cq, 12);
  auto got = wait_wc(b_.cq, 4);
  ASSERT_EQ(sent.size(), 12u);
  ASSERT_EQ(got.size(), 4u);
  for (uint32_t i = 0; i < 12; ++i) {
    EXPECT_EQ(sent[i].wr_id, i);
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS);
  }
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].wr_id, 300 + i);
    EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[i].byte_len, 256u);
    EXPECT_EQ(memcmp(dst.data + 4096 + i * 256, src.data + (3 * i + 2) * 256, 256), 0) << i;
  }
  for (uint32_t i = 0; i < 12; ++i) {
    if (i % 3 != 2) {
      EXPECT_EQ(memcmp(dst.data + i * 256, src.data + i * 256, 256), 0) << i;
    }
  }

  // With the direct path on, a write to the SRQ peer is done when ibv_post_send returns.
  const char* mode = getenv("WHARF_VERIFY_DIRECT_PATH");
  if (mode == nullptr || strcmp(mode, "off") != 0) {
    int done_in_post = 0;
    for (uint32_t i = 0; i < 32; ++i) {
      ibv_sge sge{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey};
      ASSERT_EQ(post_send(qa, IBV_WR_RDMA_WRITE, {sge}, 1000 + i, IBV_SEND_SIGNALED,
                          reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
                0);
      ibv_wc wc;
      if (ibv_poll_cq(a_.cq, 1, &wc) == 1)
        ++done_in_post;
      else
        wait_wc(a_.cq, 1);
    }
    EXPECT_EQ(done_in_post, 32);
  }
  EXPECT_EQ(ibv_destroy_qp(qb), 0);
  EXPECT_EQ(ibv_destroy_qp(qa), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

// A registration going away makes the router wait out every library busy on the direct
// path (for at most 100 ms; a library busy longer loses the direct path). A long copy looks
// between its parts whether the router is waiting, so ibv_dereg_mr returns while another
// thread's 512 MiB WRITE is still being copied; that WRITE then starts over (its keys may
// have changed), completes with every byte, and the QP keeps its direct path.
//
// The scene is set so that only a router that waits for the whole copy fails it. A first
// small WRITE fetches the peer's description and both keys, so the long one copies from the
// start (a WRITE whose set-up fails goes to the router, and ibv_post_send returns at once).
// The deregistration is issued only once the copy is seen under way (its first page
// arrived, its last not), not after a fixed sleep, and the scene is played up to three
// times, as a preempted test thread may wake only after the whole copy (under CI load the
// test once saw ibv_post_send return before ibv_dereg_mr).
TEST_F(PathTest, DeregisteringDoesNotWaitForAnotherThreadsLongDirectCopy) {
  const char* mode = getenv("WHARF_VERIFY_DIRECT_PATH");
  if (mode != nullptr && strcmp(mode, "off") == 0) GTEST_SKIP() << "needs the direct path";
  constexpr size_t kLen = size_t{512} << 20;
  constexpr size_t kPage = 4096;
  constexpr uint8_t kUnwritten = 0xff;  // no page of src carries it (markers are < 251)
  auto marker = [](size_t offset) { return static_cast<uint8_t>((offset / kPage) % 251); };
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, kLen, kFullAccess);
  Buffer dst = make_buffer(b_, kLen, kFullAccess);
  for (size_t i = 0; i < kLen; i += kPage) src.data[i] = marker(i);
  auto write_all = [&](uint64_t wr_id) {
    return post_send(
        qa, IBV_WR_RDMA_WRITE,
        {{reinterpret_cast<uint64_t>(src.data), static_cast<uint32_t>(kLen), src.mr->lkey}}, wr_id,
        IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey);
  };
  // The set-up, before anything is deregistered: the long WRITE starts copying when posted.
  ASSERT_EQ(
      post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                7, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
      0);
  ASSERT_EQ(wait_one(a_.cq).status, IBV_WC_SUCCESS);

  int seen_under_way = 0, returned_during_copy = 0;
  for (int attempt = 0; attempt < 3 && returned_during_copy == 0; ++attempt) {
    for (size_t i = 0; i < kLen; i += kPage) dst.data[i] = kUnwritten;
    Buffer other = make_buffer(a_, kPage, kFullAccess);
    std::atomic<bool> posted{false};
    std::thread writer([&] {
      EXPECT_EQ(write_all(1), 0);
      posted = true;
    });
    volatile const uint8_t* first = dst.data;
    volatile const uint8_t* last = dst.data + kLen - kPage;
    while (*first == kUnwritten && !posted) std::this_thread::yield();
    if (!posted && *last == kUnwritten) {
      ++seen_under_way;
      ASSERT_EQ(ibv_dereg_mr(other.mr), 0);
      other.mr = nullptr;
      if (!posted) ++returned_during_copy;
    }
    writer.join();
    ibv_wc wc = wait_one(a_.cq);
    EXPECT_EQ(wc.wr_id, 1u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    size_t wrong = 0;
    for (size_t i = 0; i < kLen; i += kPage) wrong += dst.data[i] != marker(i);
    EXPECT_EQ(wrong, 0u) << "attempt " << attempt;
    free_buffer(&other);
    munmap(other.data, kPage);
  }
  EXPECT_GT(seen_under_way, 0) << "the copy never ran long enough to be seen under way";
  EXPECT_GT(returned_during_copy, 0) << "ibv_dereg_mr waited for the whole copy each of the "
                                     << seen_under_way << " time(s) it was called during it";
  // Had the router waited past its bound, the QP would have lost the direct path for good:
  // small writes would no longer be done when ibv_post_send returns.
  int done_in_post = 0;
  for (uint32_t i = 0; i < 32; ++i) {
    ASSERT_EQ(
        post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                  100 + i, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
        0);
    ibv_wc small;
    if (ibv_poll_cq(a_.cq, 1, &small) == 1)
      ++done_in_post;
    else
      wait_wc(a_.cq, 1);
  }
  EXPECT_EQ(done_in_post, 32);
  free_buffer(&src);
  free_buffer(&dst);
  munmap(src.data, kLen);
  munmap(dst.data, kLen);
}

// The first direct-path work request of a QP asks the router for the peer's description. It
// does so without the QP's lock: while that request waits (the router is stopped here),
// another thread's post to the same QP, which goes to the send ring, returns at once; the
// first one then follows it there, behind it.
TEST_F(PathTest, ASetUpRequestToTheRouterDoesNotHoldTheQueuePairsLock) {
  const char* mode = getenv("WHARF_VERIFY_DIRECT_PATH");
  if (mode != nullptr && strcmp(mode, "off") == 0) GTEST_SKIP() << "needs the direct path";
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer src = make_buffer(a_, 4096, kFullAccess);
  Buffer dst = make_buffer(b_, 4096, kFullAccess);
  std::atomic<bool> posting{false}, other_posted{false};
  router_->pause();
  std::thread first([&] {
    posting = true;
    EXPECT_EQ(
        post_send(qa, IBV_WR_RDMA_WRITE, {{reinterpret_cast<uint64_t>(src.data), 64, src.mr->lkey}},
                  1, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
        0);
  });
  while (!posting) std::this_thread::yield();
  usleep(20000);  // into its request to the stopped router
  std::thread other([&] {
    // ATOMIC WRITE is the router's alone (8 bytes stored at once).
    uint64_t value = 0x1122334455667788;
    ibv_sge sge{reinterpret_cast<uint64_t>(&value), 8, 0};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = 2;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data) + 64;
    wr.wr.rdma.rkey = dst.mr->rkey;
    EXPECT_EQ(ibv_post_send(qa, &wr, &bad), 0);
    other_posted = true;
  });
  for (int i = 0; i < 200 && !other_posted; ++i) usleep(10000);
  EXPECT_TRUE(other_posted) << "a post waited for another thread's request to the router";
  router_->resume();
  first.join();
  other.join();
  auto wcs = wait_wc(a_.cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 2u);  // the ring's first, as the first post followed it there
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[1].wr_id, 1u);
  EXPECT_EQ(wcs[1].status, IBV_WC_SUCCESS);
  free_buffer(&src);
  free_buffer(&dst);
}

// Through the router (the direct path off), a long RDMA WRITE is copied a part per pass, so
// another QP's small WRITE posted while it runs completes long before it (the router copied
// a 512 MiB message whole before serving anyone else).
TEST_F(PathTest, ALongWriteThroughTheRouterDoesNotHoldUpAnotherQueuePair) {
  if (!router_only()) GTEST_SKIP() << "needs --direct-path off";
  constexpr size_t kLen = size_t{512} << 20;
  LongPair big;
  ASSERT_NO_FATAL_FAILURE(make_long_pair(&big));
  ibv_qp *small, *small_peer;
  rc_pair(&small, &small_peer);
  Buffer src = make_buffer(a_, kLen, kFullAccess);
  Buffer dst = make_buffer(b_, kLen, kFullAccess);
  for (size_t i = 0; i < kLen; i += 4096) src.data[i] = static_cast<uint8_t>(i >> 12);
  ASSERT_EQ(
      post_send(big.qp, IBV_WR_RDMA_WRITE,
                {{reinterpret_cast<uint64_t>(src.data), static_cast<uint32_t>(kLen), src.mr->lkey}},
                1, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data), dst.mr->rkey),
      0);
  overtake(big, small, src, reinterpret_cast<uint64_t>(dst.data) + kLen - 64, dst.mr->rkey);
  size_t wrong = 0;
  for (size_t i = 0; i < kLen; i += 4096) wrong += dst.data[i] != static_cast<uint8_t>(i >> 12);
  EXPECT_EQ(wrong, 0u);
  free_buffer(&src);
  free_buffer(&dst);
  munmap(src.data, kLen);
  munmap(dst.data, kLen);
  destroy(big);
}

// A long SEND into a receive queue goes a part per pass too, and lands at the right offset
// of every buffer the receive scatters into: another QP's small WRITE posted while it runs
// completes long before it (the router placed a SEND whole before serving anyone else).
TEST_F(PathTest, ALongSendThroughTheRouterDoesNotHoldUpAnotherQueuePair) {
  if (!router_only()) GTEST_SKIP() << "needs --direct-path off";
  constexpr size_t kLen = size_t{256} << 20;
  constexpr size_t kGap = 4096;  // between the receive's buffers
  LongPair big;
  ASSERT_NO_FATAL_FAILURE(make_long_pair(&big));
  ibv_qp *small, *small_peer;
  rc_pair(&small, &small_peer);
  Buffer src = make_buffer(a_, kLen, kFullAccess);
  Buffer dst = make_buffer(b_, kLen + 2 * kGap, kFullAccess);
  auto pattern = [](size_t i) { return static_cast<uint8_t>((i >> 12) + i * 7); };
  for (size_t i = 0; i < kLen; ++i) src.data[i] = pattern(i);
  // Three buffers, the first two ending inside a part: message offset m lands at
  // dst + m + kGap x (the buffers before it).
  const size_t cut[2] = {(1u << 20) + 123, kLen / 2 + 777};
  ibv_sge rsge[3] = {
      {reinterpret_cast<uint64_t>(dst.data), static_cast<uint32_t>(cut[0]), dst.mr->lkey},
      {reinterpret_cast<uint64_t>(dst.data + cut[0] + kGap), static_cast<uint32_t>(cut[1] - cut[0]),
       dst.mr->lkey},
      {reinterpret_cast<uint64_t>(dst.data + cut[1] + 2 * kGap),
       static_cast<uint32_t>(kLen - cut[1]), dst.mr->lkey}};
  ibv_recv_wr rwr{};
  rwr.wr_id = 9;
  rwr.sg_list = rsge;
  rwr.num_sge = 3;
  ibv_recv_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_recv(big.peer, &rwr, &bad), 0);
  ASSERT_EQ(
      post_send(big.qp, IBV_WR_SEND,
                {{reinterpret_cast<uint64_t>(src.data), static_cast<uint32_t>(kLen), src.mr->lkey}},
                1, IBV_SEND_SIGNALED),
      0);
  overtake(big, small, src, reinterpret_cast<uint64_t>(dst.data) + cut[0],  // in a gap
           dst.mr->rkey);
  ibv_wc wc = wait_one(b_.cq);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.byte_len, kLen);
  size_t wrong = 0;
  for (size_t m = 0; m < kLen; ++m) {
    const size_t at = m + (m >= cut[0] ? kGap : 0) + (m >= cut[1] ? kGap : 0);
    wrong += dst.data[at] != pattern(m);
  }
  EXPECT_EQ(wrong, 0u);
  free_buffer(&src);
  free_buffer(&dst);
  munmap(src.data, kLen);
  munmap(dst.data, kLen + 2 * kGap);
  destroy(big);
}

// A long SEND into a shared receive queue goes a part per pass too, and keeps the receive it
// started in: another QP's SEND into the same SRQ meanwhile completes long before it, in the
// next receive (the router placed a SEND into an SRQ whole before serving anyone else).
TEST_F(PathTest, ALongSendIntoASharedReceiveQueueKeepsItsReceiveAndHoldsUpNoOne) {
  if (!router_only()) GTEST_SKIP() << "needs --direct-path off";
  constexpr size_t kLen = size_t{256} << 20;
  LongPair big;
  ASSERT_NO_FATAL_FAILURE(make_long_pair(&big, Receives::kSharedQueue));
  ibv_srq* srq = big.srq;
  ibv_qp* small = create_qp(a_, IBV_QPT_RC);
  ibv_qp* small_peer = create_qp(b_, IBV_QPT_RC, srq);
  ASSERT_NE(small, nullptr);
  ASSERT_NE(small_peer, nullptr);
  connect(small, a_, small_peer, b_, kFullAccess);
  connect(small_peer, b_, small, a_, kFullAccess);
  Buffer src = make_buffer(a_, kLen, kFullAccess);
  Buffer first = make_buffer(b_, kLen, kFullAccess);
  Buffer second = make_buffer(b_, kLen, kFullAccess);
  auto pattern = [](size_t i) { return static_cast<uint8_t>((i >> 12) + i * 5 + 3); };
  for (size_t i = 0; i < kLen; ++i) src.data[i] = pattern(i);
  post_srq_recv(srq, first, 0, static_cast<uint32_t>(kLen), 9);
  post_srq_recv(srq, second, 0, static_cast<uint32_t>(kLen), 10);
  ASSERT_EQ(
      post_send(big.qp, IBV_WR_SEND,
                {{reinterpret_cast<uint64_t>(src.data), static_cast<uint32_t>(kLen), src.mr->lkey}},
                1, IBV_SEND_SIGNALED),
      0);
  overtake(big, small, src, 0, 0, IBV_WR_SEND);
  for (ibv_wc got : wait_wc(b_.cq, 2)) {
    EXPECT_EQ(got.status, IBV_WC_SUCCESS);
    if (got.qp_num == small_peer->qp_num) {
      EXPECT_EQ(got.wr_id, 10u) << "the short SEND took the receive the long one is filling";
      EXPECT_EQ(got.byte_len, 64u);
    } else {
      EXPECT_EQ(got.qp_num, big.peer->qp_num);
      EXPECT_EQ(got.wr_id, 9u);
      EXPECT_EQ(got.byte_len, kLen);
    }
  }
  size_t wrong = 0;
  for (size_t i = 0; i < kLen; ++i) wrong += first.data[i] != pattern(i);
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(memcmp(second.data, src.data, 64), 0);
  for (Buffer* b : {&src, &first, &second}) {
    free_buffer(b);
    munmap(b->data, kLen);
  }
  EXPECT_EQ(ibv_destroy_qp(small), 0);
  EXPECT_EQ(ibv_destroy_qp(small_peer), 0);
  destroy(big);
}

// A receive taken off an SRQ by a long SEND under way is flushed with its QP: the receiver
// failing between two parts completes it with WR_FLUSH_ERR, as a QP's own receives are.
TEST_F(PathTest, AReceiveHeldFromAnSrqIsFlushedWhenItsQueuePairFails) {
  if (!router_only()) GTEST_SKIP() << "needs --direct-path off";
  constexpr size_t kLen = size_t{256} << 20;
  LongPair big;
  ASSERT_NO_FATAL_FAILURE(make_long_pair(&big, Receives::kSharedQueue));
  ibv_srq* srq = big.srq;
  Buffer src = make_buffer(a_, kLen, kFullAccess);
  Buffer dst = make_buffer(b_, kLen, kFullAccess);
  post_srq_recv(srq, dst, 0, static_cast<uint32_t>(kLen), 9);
  ASSERT_NO_FATAL_FAILURE(cut_off_long_send(big, src, kLen));
  for (Buffer* b : {&src, &dst}) {
    free_buffer(b);
    munmap(b->data, kLen);
  }
  destroy(big);
}

// A long SEND whose receiver fails between two parts is retried from its first byte: the
// receive the receiver posts after it reconnects gets the whole message, not its tail.
TEST_F(PathTest, ASendCutOffByItsReceiverStartsOverInTheNextReceive) {
  if (!router_only()) GTEST_SKIP() << "needs --direct-path off";
  constexpr size_t kLen = size_t{256} << 20;
  LongPair big;
  ASSERT_NO_FATAL_FAILURE(make_long_pair(&big));
  Buffer src = make_buffer(a_, kLen, kFullAccess);
  Buffer first = make_buffer(b_, kLen, kFullAccess);
  Buffer second = make_buffer(b_, kLen, kFullAccess);
  auto pattern = [](size_t i) { return static_cast<uint8_t>((i >> 12) + i * 7 + 1); };
  for (size_t i = 0; i < kLen; ++i) src.data[i] = pattern(i);
  post_recv(big.peer, first, 0, static_cast<uint32_t>(kLen), 9);
  ASSERT_NO_FATAL_FAILURE(cut_off_long_send(big, src, kLen));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(big.peer, &attr, IBV_QP_STATE), 0);
  connect(big.peer, b_, big.qp, a_, kFullAccess);
  post_recv(big.peer, second, 0, static_cast<uint32_t>(kLen), 10);
  ibv_wc wc = wait_one(big.cq, kCopyBound);  // the requester retries within its retry count
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  wc = wait_one(b_.cq, kCopyBound);
  EXPECT_EQ(wc.wr_id, 10u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.byte_len, kLen);
  size_t wrong = 0;
  for (size_t i = 0; i < kLen; ++i) wrong += second.data[i] != pattern(i);
  EXPECT_EQ(wrong, 0u);
  for (Buffer* b : {&src, &first, &second}) {
    free_buffer(b);
    munmap(b->data, kLen);
  }
  destroy(big);
}

}  // namespace
}  // namespace wharf::verify
