// A container that scribbles on its own shared rings, or names memory it does not own,
// gets error completions or events; the router and everyone else carry on.
#include <poll.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "shm/layout.h"
#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class HostileTest : public VerbsTest {
 protected:
  // Creates an RC QP on `s` connected to a fresh peer on b_, and returns its ring memory.
  uint8_t* qp_with_rings(Side& s, ibv_qp** qp, ibv_qp** peer) {
    uint8_t* rings = nullptr;
    *qp = create_qp_mapped(s, IBV_QPT_RC, &rings);
    *peer = create_qp(b_, IBV_QPT_RC);
    connect(*qp, s, *peer, b_, IBV_ACCESS_REMOTE_WRITE);
    connect(*peer, b_, *qp, s, IBV_ACCESS_REMOTE_WRITE);
    return rings;
  }
  // What a library does after scribbling on a ring, so the router looks at the QP: marks it
  // posted (shm/posted_marks.h). A hostile one may mark every QP, whether it has one or not.
  void mark_every_qp_posted() {
    for (uintptr_t a : mappings_named("wharf-context")) {
      auto* page = reinterpret_cast<shm::ContextPage*>(a);
      for (auto& word : page->posted) word.store(~uint64_t{0}, std::memory_order_release);
      page->posted_summary.store(~uint64_t{0}, std::memory_order_release);
    }
  }
  // Wakes the router (it may be asleep) with some ordinary work on an unrelated pair.
  void nudge_router() {
    ibv_qp *x, *y;
    rc_pair(&x, &y);
    Buffer dst = make_buffer(b_, 64, kFullAccess);
    Buffer src = make_buffer(a_, 64, kFullAccess);
    post_recv(y, dst, 0, 64, 1);
    ASSERT_EQ(
        post_send(x, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 8, src.mr->lkey}}, 1), 0);
    EXPECT_EQ(wait_wc(b_.cq, 1)[0].status, IBV_WC_SUCCESS);
    wait_wc(a_.cq, 1);
  }
};

constexpr size_t kSqProducer = 0;

TEST_F(HostileTest, SendRingIndexBeyondCapacityKillsOnlyThatQp) {
  Side c = open_side();
  ibv_qp *qp, *peer;
  uint8_t* rings = qp_with_rings(c, &qp, &peer);
  ASSERT_NE(rings, nullptr);
  auto* producer = reinterpret_cast<volatile uint32_t*>(rings + kSqProducer);
  *producer = 1000000;
  mark_every_qp_posted();
  nudge_router();
  pollfd pfd{c.ctx->async_fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1);
  ibv_async_event ev;
  ASSERT_EQ(ibv_get_async_event(c.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(ev.element.qp, qp);
  ibv_ack_async_event(&ev);
  ibv_qp_attr attr;
  ibv_qp_init_attr init;
  ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
  nudge_router();  // others still served
  close_side(&c);
}

TEST_F(HostileTest, GarbageWqeCompletesWithLocalQpOperationError) {
  Side c = open_side();
  ibv_qp *qp, *peer;
  uint8_t* rings = qp_with_rings(c, &qp, &peer);
  ASSERT_NE(rings, nullptr);
  // Slot 0: an unknown opcode with 200 SGEs, signaled, wr_id 0xabc.
  uint8_t* slot = rings + kSqSlotsOffset;
  memset(slot, 0xff, 64);
  uint64_t wr_id = 0xabc;
  memcpy(slot, &wr_id, 8);
  slot[8] = 0xee;  // opcode
  slot[9] = 1;     // signaled
  slot[10] = 200;  // num_sge
  __atomic_store_n(reinterpret_cast<uint32_t*>(rings + kSqProducer), 1u, __ATOMIC_RELEASE);
  mark_every_qp_posted();
  nudge_router();
  auto wc = wait_wc(c.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 0xabcu);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_QP_OP_ERR);
  close_side(&c);
}

TEST_F(HostileTest, AnotherContextsKeysAreNotUsable) {
  ibv_qp *qa, *qb;
  rc_pair(&qa, &qb);
  Buffer theirs = make_buffer(b_, 4096, kFullAccess);  // registered by the peer context
  memset(theirs.data, 's', 4096);
  ASSERT_EQ(post_send(qa, IBV_WR_SEND,
                      {{reinterpret_cast<uint64_t>(theirs.data), 64, theirs.mr->lkey}}, 1),
            0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_LOC_PROT_ERR);
  // An rkey of the requester's own context aimed at the responder is an access error, too.
  ibv_qp *qc, *qd;
  rc_pair(&qc, &qd);
  Buffer mine = make_buffer(a_, 4096, kFullAccess);
  ASSERT_EQ(
      post_send(qc, IBV_WR_RDMA_READ, {{reinterpret_cast<uint64_t>(mine.data), 64, mine.mr->lkey}},
                2, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(mine.data) + 1024, mine.mr->rkey),
      0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_REM_ACCESS_ERR);
}

TEST_F(HostileTest, MalformedReceiveWqeIsAReceiveWithoutBuffers) {
  Side c = open_side();
  uint8_t* rings = nullptr;
  ibv_qp* rq_owner = create_qp_mapped(c, IBV_QPT_RC, &rings);
  ASSERT_NE(rings, nullptr);
  ibv_qp* sender = create_qp(a_, IBV_QPT_RC);
  connect(sender, a_, rq_owner, c, 0);
  connect(rq_owner, c, sender, a_, 0);
  // RQ producer at 128; RQ slots follow the SQ slots (depth 64, slot size from the layout).
  ibv_qp_attr attr;
  ibv_qp_init_attr init;
  ASSERT_EQ(ibv_query_qp(rq_owner, &attr, 0, &init), 0);
  uint32_t sq_slot =
      ((64 + std::max(init.cap.max_send_sge * 16, init.cap.max_inline_data)) + 63) / 64 * 64;
  uint8_t* rq_slot = rings + kSqSlotsOffset + static_cast<size_t>(init.cap.max_send_wr) * sq_slot;
  uint64_t wr_id = 0x77;
  memcpy(rq_slot, &wr_id, 8);
  uint32_t huge = 0xffffffff;
  memcpy(rq_slot + 8, &huge, 4);
  __atomic_store_n(reinterpret_cast<uint32_t*>(rings + 128), 1u, __ATOMIC_RELEASE);
  Buffer src = make_buffer(a_, 64, kFullAccess);
  ASSERT_EQ(
      post_send(sender, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(src.data), 16, src.mr->lkey}}, 1),
      0);
  EXPECT_EQ(wait_wc(a_.cq, 1)[0].status, IBV_WC_REM_INV_REQ_ERR);
  auto rw = wait_wc(c.cq, 1);
  ASSERT_EQ(rw.size(), 1u);
  EXPECT_EQ(rw[0].wr_id, 0x77u);
  EXPECT_EQ(rw[0].status, IBV_WC_LOC_LEN_ERR);
  close_side(&c);
}

}  // namespace
}  // namespace wharf::verify
