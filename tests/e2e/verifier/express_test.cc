// Express lines (router/express.h, abi/verbs/express.h): RC QPs on two hosts whose libraries
// move SENDs themselves over a connection the routers set up. What an application sees
// must not change: data, order across the line and the routers, RNR waits, completions of a
// receiver that never polls, policy (a rate-limited QP stays with its router).
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "abi/verbs/tunables.h"
#include "cluster.h"
#include "shm/cq_ring.h"
#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

class ExpressTest : public TwoHostSides<VerbsTest> {
 protected:
  // Authenticated, as a cluster is by default: lines set up after a handshake.
  static void SetUpTestSuite() {
    cluster_ = new Cluster(2, {"--express", "on"}, -1, Cluster::Links::kAuthenticated);
  }

  // A connected RC pair across the hosts, its QP regions mapped here (their counters), a
  // buffer on each side, its lines up.
  struct Pair {
    ibv_qp *qa = nullptr, *qb = nullptr;
    uint8_t *ra = nullptr, *rb = nullptr;
    Buffer src, dst;
  };
  Pair express_pair(size_t src_len, size_t dst_len) {
    return express_pair(a_, b_, src_len, dst_len);
  }
  // The same between sides x and y.
  Pair express_pair(Side& x, Side& y, size_t src_len, size_t dst_len) {
    Pair p = pair(x, y, src_len, dst_len);
    bring_up(p.qa, p.ra, p.qb, p.rb, p.src, p.dst);
    return p;
  }
  // A connected pair between sides x and y, whether or not it gets lines.
  Pair pair(Side& x, Side& y, size_t src_len, size_t dst_len) {
    Pair p;
    p.qa = create_qp_mapped(x, IBV_QPT_RC, &p.ra);
    p.qb = create_qp_mapped(y, IBV_QPT_RC, &p.rb);
    connect(p.qa, x, p.qb, y, kFullAccess);
    connect(p.qb, y, p.qa, x, kFullAccess);
    p.src = make_buffer(x, src_len, kFullAccess);
    p.dst = make_buffer(y, dst_len, kFullAccess);
    return p;
  }
  // Deregisters and unmaps the pair's buffers: large registered memory left mapped would be
  // copied into every child a later test forks.
  void release_buffers(Pair& p) {
    for (Buffer* b : {&p.src, &p.dst}) {
      free_buffer(b);
      munmap(b->data, (b->len + 4095) / 4096 * 4096);
    }
  }
  // Posts a signaled SEND of b's bytes [off, off + len).
  int send_from(ibv_qp* qp, Buffer& b, size_t off, uint32_t len, uint64_t wr_id) {
    return post_send(qp, IBV_WR_SEND, {{reinterpret_cast<uint64_t>(b.data) + off, len, b.mr->lkey}},
                     wr_id);
  }
  // Posts a signaled RDMA WRITE or READ (`op`) of `len` bytes between local buffer `local`
  // at `loff` and the peer's buffer `remote` at `roff`.
  int post_rdma(ibv_qp* qp, ibv_wr_opcode op, const Buffer& local, size_t loff,
                const Buffer& remote, size_t roff, uint32_t len, uint64_t wr_id) {
    return post_send(qp, op, {{reinterpret_cast<uint64_t>(local.data) + loff, len, local.mr->lkey}},
                     wr_id, IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(remote.data) + roff,
                     remote.mr->rkey);
  }
  // Sends qp moved over its express line (shm::QpCounters::express_msgs).
  static uint64_t express_msgs(const uint8_t* region) {
    uint64_t v;
    std::memcpy(&v, region + kQpCountersOffset + 5 * sizeof(uint64_t), sizeof(v));
    return v;
  }
  // One round trip of 64-byte SENDs, qa -> qb -> qa (each QP completing on one CQ).
  void ping(ibv_qp* qa, ibv_qp* qb, Buffer& abuf, Buffer& bbuf) {
    post_recv(qb, bbuf, 0, 64, 1);
    post_recv(qa, abuf, 0, 64, 2);
    ASSERT_EQ(send_from(qa, abuf, 0, 64, 3), 0);
    ASSERT_EQ(wait_wc(qb->recv_cq, 1).size(), 1u);
    ASSERT_EQ(send_from(qb, bbuf, 0, 64, 4), 0);
    ASSERT_EQ(wait_wc(qa->recv_cq, 2).size(), 2u);  // qa's send and its receive
    ASSERT_EQ(wait_wc(qb->recv_cq, 1).size(), 1u);  // qb's send
  }
  // Pings until both QPs have sent over their lines (the routers connect them and the
  // libraries say Ready in the background); at most 2 s.
  void bring_up(ibv_qp* qa, const uint8_t* ra, ibv_qp* qb, const uint8_t* rb, Buffer& abuf,
                Buffer& bbuf) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (express_msgs(ra) == 0 || express_msgs(rb) == 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the express lines never came up";
      ping(qa, qb, abuf, bbuf);
    }
  }
  // Pings between qa and qb, whose receives come from srq (buffers on each side, 64 bytes at
  // their start), until qa's SENDs go over its line: qb takes its line at its first post, as
  // UCX's QPs do when they answer; at most 2 s.
  void bring_up_srq(ibv_qp* qa, const uint8_t* ra, ibv_qp* qb, ibv_srq* srq, Buffer& abuf,
                    Buffer& bbuf) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (express_msgs(ra) == 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "qa's line never carried a SEND";
      post_srq_recv(srq, bbuf, 0, 64, 1);
      post_recv(qa, abuf, 0, 64, 2);
      ASSERT_EQ(send_from(qa, abuf, 0, 64, 3), 0);
      ASSERT_EQ(wait_wc(qb->recv_cq, 1).at(0).status, IBV_WC_SUCCESS);
      ASSERT_EQ(send_from(qb, bbuf, 0, 64, 4), 0);
      ASSERT_EQ(wait_wc(qa->recv_cq, 2).size(), 2u);                    // qa's send and its receive
      ASSERT_EQ(wait_wc(qb->recv_cq, 1).at(0).status, IBV_WC_SUCCESS);  // qb's send
    }
  }
  // Pings until qa's sends go on its line again (it went through its router meanwhile).
  void expect_back_on_the_line(ibv_qp* qa, const uint8_t* ra, ibv_qp* qb, Buffer& abuf,
                               Buffer& bbuf) {
    const uint64_t before = express_msgs(ra);
    for (int i = 0; i < 200 && express_msgs(ra) == before; ++i) ping(qa, qb, abuf, bbuf);
    EXPECT_GT(express_msgs(ra), before) << "the QP did not go back to its express line";
  }

  // Receives of `len` bytes each at dst + i * len, each scattered over three SGEs.
  void post_scattered_receives(ibv_qp* qp, const Buffer& dst, uint32_t n, uint32_t len) {
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t at = reinterpret_cast<uint64_t>(dst.data) + uint64_t{i} * len;
      ibv_sge r[3] = {{at, 100, dst.mr->lkey},
                      {at + 100, len / 2, dst.mr->lkey},
                      {at + 100 + len / 2, len - 100 - len / 2, dst.mr->lkey}};
      ibv_recv_wr wr{};
      ibv_recv_wr* bad = nullptr;
      wr.wr_id = i;
      wr.sg_list = r;
      wr.num_sge = 3;
      ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
    }
  }

  // Sends of `len` bytes each from src + i * len, each gathered from two SGEs.
  void post_gathered_sends(ibv_qp* qp, const Buffer& src, uint32_t n, uint32_t len) {
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t at = reinterpret_cast<uint64_t>(src.data) + uint64_t{i} * len;
      ASSERT_EQ(post_send(qp, IBV_WR_SEND,
                          {{at, 4096, src.mr->lkey}, {at + 4096, len - 4096, src.mr->lkey}}, i),
                0);
    }
  }

  // A completion channel of b_'s, and a CQ of `entries` reporting to it.
  void channel_cq_on_b(int entries, ibv_comp_channel** channel, ibv_cq** cq) {
    *channel = ibv_create_comp_channel(b_.ctx);
    ASSERT_NE(*channel, nullptr);
    *cq = ibv_create_cq(b_.ctx, entries, nullptr, *channel, 0);
    ASSERT_NE(*cq, nullptr);
  }
};

TEST_F(ExpressTest, SendsGoOnTheLineWithTheirBytesAndImmediates) {
  Pair p = express_pair(64 * 1024, 5 * 21 * 1024);
  ibv_qp *qa = p.qa, *qb = p.qb;
  const uint8_t* ra = p.ra;
  Buffer &src = p.src, &dst = p.dst;
  const uint64_t before = express_msgs(ra);
  fill_pattern(src.data, src.len, 9);
  // Sizes from none to a few pages, scattered over two receive SGEs.
  const uint32_t sizes[] = {0, 1, 63, 4096, 16 * 1024};
  uint32_t at = 0;
  for (uint32_t i = 0; i < 5; ++i) {
    ibv_sge r[2] = {{reinterpret_cast<uint64_t>(dst.data) + at, 10, dst.mr->lkey},
                    {reinterpret_cast<uint64_t>(dst.data) + at + 10, 20 * 1024, dst.mr->lkey}};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = 100 + i;
    wr.sg_list = r;
    wr.num_sge = 2;
    ASSERT_EQ(ibv_post_recv(qb, &wr, &bad), 0);
    at += 21 * 1024;
  }
  for (uint32_t i = 0; i < 5; ++i) {
    ibv_sge s{reinterpret_cast<uint64_t>(src.data) + i * 100, sizes[i], src.mr->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = i;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = i % 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
    wr.imm_data = htonl(0x1000 + i);
    wr.send_flags = IBV_SEND_SIGNALED;
    ASSERT_EQ(ibv_post_send(qa, &wr, &bad), 0);
  }
  auto got = wait_wc(b_.cq, 5);
  auto sent = wait_wc(a_.cq, 5);
  ASSERT_EQ(got.size(), 5u);
  ASSERT_EQ(sent.size(), 5u);
  at = 0;
  for (uint32_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(sent[i].wr_id, i);
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(sent[i].opcode, IBV_WC_SEND);
    EXPECT_EQ(got[i].wr_id, 100 + i);
    EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[i].byte_len, sizes[i]);
    EXPECT_EQ(got[i].src_qp, qa->qp_num);
    EXPECT_EQ(got[i].qp_num, qb->qp_num);
    EXPECT_EQ((got[i].wc_flags & IBV_WC_WITH_IMM) != 0, i % 2 == 1);
    if (i % 2) {
      EXPECT_EQ(got[i].imm_data, htonl(0x1000 + i));
    }
    EXPECT_EQ(std::memcmp(dst.data + at, src.data + i * 100, sizes[i]), 0);
    at += 21 * 1024;
  }
  EXPECT_EQ(express_msgs(ra) - before, 5u);
}

// Megabyte SENDs both ways at once, more than the sockets hold, while neither application
// polls for a while: each library writes what its socket takes and the rest later, the peer
// places the bytes straight into its receives, and everything arrives whole, in order.
TEST_F(ExpressTest, LargeSendsGoOnTheLineBothWaysAtOnce) {
  constexpr uint32_t kLen = 1 << 20, kCount = 6;
  Pair p = express_pair(2 * kCount * kLen, 2 * kCount * kLen);
  const uint64_t sent_a = express_msgs(p.ra), sent_b = express_msgs(p.rb);
  // Each side's first half is what it sends, its second half where it receives.
  fill_pattern(p.src.data, kCount * kLen, 21);
  fill_pattern(p.dst.data, kCount * kLen, 22);
  Buffer a_in = p.src, b_in = p.dst;
  a_in.data += kCount * kLen;
  b_in.data += kCount * kLen;
  post_scattered_receives(p.qb, b_in, kCount, kLen);
  post_scattered_receives(p.qa, a_in, kCount, kLen);
  post_gathered_sends(p.qa, p.src, kCount, kLen);
  post_gathered_sends(p.qb, p.dst, kCount, kLen);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // Each CQ gets the side's sends and its receives.
  auto on_a = wait_wc(a_.cq, 2 * kCount);
  auto on_b = wait_wc(b_.cq, 2 * kCount);
  ASSERT_EQ(on_a.size(), 2 * kCount);
  ASSERT_EQ(on_b.size(), 2 * kCount);
  uint64_t next_recv[2] = {0, 0}, next_send[2] = {0, 0};
  for (int side = 0; side < 2; ++side) {
    for (const ibv_wc& w : side == 0 ? on_a : on_b) {
      ASSERT_EQ(w.status, IBV_WC_SUCCESS);
      if (w.opcode == IBV_WC_RECV) {
        EXPECT_EQ(w.wr_id, next_recv[side]++);
        EXPECT_EQ(w.byte_len, kLen);
      } else {
        EXPECT_EQ(w.wr_id, next_send[side]++);
      }
    }
  }
  EXPECT_EQ(std::memcmp(b_in.data, p.src.data, kCount * kLen), 0);
  EXPECT_EQ(std::memcmp(a_in.data, p.dst.data, kCount * kLen), 0);
  EXPECT_EQ(express_msgs(p.ra) - sent_a, kCount);
  EXPECT_EQ(express_msgs(p.rb) - sent_b, kCount);
  release_buffers(p);
}

// SENDs posted back to back are a burst: the line writes them together at the sender's next
// poll or, when the sender stops calling verbs, when its library's helper thread services the
// line. They arrive whole and in order either way, in batches that end where their frames'
// SGEs (gathered sends) or inline bytes fill one.
TEST_F(ExpressTest, ABurstOfSendsArrivesWholeAndInOrderThoughItsSenderStopsCallingVerbs) {
  constexpr uint32_t kLen = 8192, kGathered = 12, kInline = 10, kInlineLen = 200;
  constexpr size_t kTotal = size_t{kGathered} * kLen + size_t{kInline} * kInlineLen;
  Pair p = express_pair(kTotal, kTotal);
  const uint64_t before = express_msgs(p.ra);
  fill_pattern(p.src.data, kTotal, 31);
  post_scattered_receives(p.qb, p.dst, kGathered, kLen);
  for (uint32_t i = 0; i < kInline; ++i)
    post_recv(p.qb, p.dst, size_t{kGathered} * kLen + i * kInlineLen, kInlineLen, kGathered + i);
  post_gathered_sends(p.qa, p.src, kGathered, kLen);
  for (uint32_t i = 0; i < kInline; ++i) {
    const uint64_t at = reinterpret_cast<uint64_t>(p.src.data) + uint64_t{kGathered} * kLen +
                        uint64_t{i} * kInlineLen;
    ASSERT_EQ(post_send(p.qa, IBV_WR_SEND, {{at, kInlineLen, p.src.mr->lkey}}, kGathered + i,
                        IBV_SEND_SIGNALED | IBV_SEND_INLINE),
              0);
  }
  // a_'s CQ is polled only once b_ has everything.
  auto got = wait_wc(b_.cq, kGathered + kInline);
  ASSERT_EQ(got.size(), kGathered + kInline);
  for (uint32_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[i].wr_id, i);
    EXPECT_EQ(got[i].byte_len, i < kGathered ? kLen : kInlineLen);
  }
  EXPECT_EQ(std::memcmp(p.dst.data, p.src.data, kTotal), 0);
  auto sent = wait_wc(a_.cq, kGathered + kInline);
  ASSERT_EQ(sent.size(), kGathered + kInline);
  for (const ibv_wc& w : sent) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  EXPECT_EQ(express_msgs(p.ra) - before, kGathered + kInline);
  release_buffers(p);
}

// A QP moved to SQD while its line holds SENDs (written, or waiting in a burst) lets the line
// finish them: each is delivered and completed once, in order. Until 2026-11-29 the router
// also took them over, so the peer got the ones already in the socket twice and the sender
// never saw most completions (4 of 60).
TEST_F(ExpressTest, SendsOnALineWhenTheQpMovesToSqdAreDeliveredAndCompletedOnce) {
  constexpr uint32_t kLen = 16384, kCount = 60;  // within the QPs' 64 work requests
  constexpr size_t kTotal = size_t{kLen} * kCount;
  Pair p = express_pair(kTotal, kTotal + kLen * 4);
  fill_pattern(p.src.data, kTotal, 41);
  // Room for every SEND twice over: a SEND delivered twice would take a second receive.
  for (uint32_t i = 0; i < kCount + 4; ++i) post_recv(p.qb, p.dst, size_t{i} * kLen, kLen, i);
  for (uint32_t i = 0; i < kCount; ++i)
    ASSERT_EQ(send_from(p.qa, p.src, size_t{i} * kLen, kLen, i), 0);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_SQD;
  ASSERT_EQ(ibv_modify_qp(p.qa, &attr, IBV_QP_STATE), 0);
  attr.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(ibv_modify_qp(p.qa, &attr, IBV_QP_STATE), 0);
  auto got = wait_wc(b_.cq, kCount);
  ASSERT_EQ(got.size(), kCount);
  for (uint32_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[i].wr_id, i);
  }
  EXPECT_EQ(std::memcmp(p.dst.data, p.src.data, kTotal), 0);
  auto sent = wait_wc(a_.cq, kCount);
  ASSERT_EQ(sent.size(), kCount);
  for (const ibv_wc& w : sent) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  // Nothing more arrives: no SEND took a second receive.
  ibv_wc extra;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ibv_poll_cq(b_.cq, 1, &extra), 0)
      << "a SEND was delivered twice (wr_id " << extra.wr_id << ")";
  release_buffers(p);
}

// A large SEND that finds no receive is refused while its bytes are still arriving: the
// receiver discards them, the routers redo it (waiting for a receive), the SENDs behind it
// follow, and the line is used again afterwards.
TEST_F(ExpressTest, ALargeSendWithoutAReceiveIsDiscardedAndRedoneThroughTheRouters) {
  constexpr uint32_t kLen = 3 << 20, kCount = 3;
  Pair p = express_pair(kCount * kLen, kCount * kLen);
  fill_pattern(p.src.data, p.src.len, 31);
  std::memset(p.dst.data, 0, p.dst.len);
  post_gathered_sends(p.qa, p.src, kCount, kLen);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ibv_wc none;
  EXPECT_EQ(ibv_poll_cq(a_.cq, 1, &none), 0) << "a send completed without a receive";
  post_scattered_receives(p.qb, p.dst, kCount, kLen);
  auto sent = wait_wc(a_.cq, kCount);
  auto got = wait_wc(b_.cq, kCount);
  ASSERT_EQ(sent.size(), kCount);
  ASSERT_EQ(got.size(), kCount);
  for (uint64_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(sent[i].wr_id, i);
    EXPECT_EQ(got[i].wr_id, i);
    EXPECT_EQ(got[i].byte_len, kLen);
  }
  EXPECT_EQ(std::memcmp(p.dst.data, p.src.data, kCount * kLen), 0);
  expect_back_on_the_line(p.qa, p.ra, p.qb, p.src, p.dst);
  release_buffers(p);
}

// A SEND that finds no receive is refused on the line and goes through the routers, which
// wait for one (RNR); the sends behind it follow it there and everything arrives in order.
TEST_F(ExpressTest, ASendWithoutAReceiveWaitsThroughTheRoutersAndOrderHolds) {
  Pair p = express_pair(4096, 4096);
  ibv_qp *qa = p.qa, *qb = p.qb;
  const uint8_t* ra = p.ra;
  Buffer &src = p.src, &dst = p.dst;
  fill_pattern(src.data, src.len, 3);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(send_from(qa, src, i * 64, 64, i), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ibv_wc none;
  EXPECT_EQ(ibv_poll_cq(a_.cq, 1, &none), 0) << "a send completed without a receive";
  for (uint32_t i = 0; i < 4; ++i) post_recv(qb, dst, i * 64, 64, 10 + i);
  auto sent = wait_wc(a_.cq, 4);
  auto got = wait_wc(b_.cq, 4);
  ASSERT_EQ(sent.size(), 4u);
  ASSERT_EQ(got.size(), 4u);
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(sent[i].wr_id, i);
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[i].wr_id, 10 + i);
  }
  EXPECT_EQ(std::memcmp(dst.data, src.data, 4 * 64), 0);
  expect_back_on_the_line(qa, ra, qb, src, dst);
}

// A SEND waits in its router for a receive (RNR); the next SEND goes on the line behind it
// and a WRITE behind that. ibv_post_send of the WRITE returns at once (it once waited for the
// line's SEND, which waited for the router's, which waited for a receive this very thread
// was to post), and once receives come everything completes in posting order.
TEST_F(ExpressTest, WorkBehindALineWaitingOnItsRouterIsPostedWithoutWaiting) {
  Pair p = express_pair(8192, 8192);
  ibv_qp *qa = p.qa, *qb = p.qb;
  Buffer &src = p.src, &dst = p.dst;
  fill_pattern(src.data, src.len, 5);
  ASSERT_EQ(send_from(qa, src, 0, 64, 1), 0);
  // Refused on the line (no receive), the first SEND is now in a's router, waiting.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_EQ(send_from(qa, src, 64, 64, 2), 0);
  std::atomic<bool> posted{false};
  std::thread writer([&] {
    EXPECT_EQ(
        post_send(qa, IBV_WR_RDMA_WRITE,
                  {{reinterpret_cast<uint64_t>(src.data) + 4096, 4096, src.mr->lkey}}, 3,
                  IBV_SEND_SIGNALED, reinterpret_cast<uint64_t>(dst.data) + 4096, dst.mr->rkey),
        0);
    posted = true;
  });
  for (int ms = 0; ms < 2000 && !posted; ++ms)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(posted) << "ibv_post_send waited for work that waits for a receive";
  post_recv(qb, dst, 0, 64, 10);
  post_recv(qb, dst, 64, 64, 11);
  writer.join();
  auto sent = wait_wc(a_.cq, 3);
  ASSERT_EQ(sent.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(sent[i].wr_id, i + 1);
  }
  auto got = wait_wc(b_.cq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 10u);
  EXPECT_EQ(got[1].wr_id, 11u);
  EXPECT_EQ(std::memcmp(dst.data, src.data, 128), 0);
  EXPECT_EQ(std::memcmp(dst.data + 4096, src.data + 4096, 4096), 0);
  expect_back_on_the_line(qa, p.ra, qb, src, dst);
}

// A WRITE (the routers' work) between two express SENDs: the receiver sees the WRITE's bytes
// before the second SEND, and the sender's completions come in posting order; after the
// WRITEs stop, the SENDs go back on the line.
TEST_F(ExpressTest, AWriteBetweenTwoSendsKeepsItsPlace) {
  Pair p = express_pair(8192, 8192);
  ibv_qp *qa = p.qa, *qb = p.qb;
  const uint8_t* ra = p.ra;
  Buffer &src = p.src, &dst = p.dst;
  const uint64_t before = express_msgs(ra);
  // SENDs posted a hold or more after the WRITE before them (a machine that stalled the test
  // that long): only these may go on the line again. The clock is read before the WRITE is
  // posted and after the SEND, so a SEND counted as early was early to the library too.
  const auto hold = std::chrono::nanoseconds(abi::express_hold_ns());
  int late_sends = 0;
  std::chrono::steady_clock::time_point write_posted{};
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    fill_pattern(src.data, src.len, static_cast<uint32_t>(round));
    std::memset(dst.data, 0, dst.len);
    post_recv(qb, dst, 0, 64, 1);
    post_recv(qb, dst, 64, 64, 2);
    ASSERT_EQ(send_from(qa, src, 0, 64, 1), 0);
    if (round > 0 && std::chrono::steady_clock::now() - write_posted >= hold) ++late_sends;
    write_posted = std::chrono::steady_clock::now();
    ASSERT_EQ(post_rdma(qa, IBV_WR_RDMA_WRITE, src, 4096, dst, 4096, 4096, 2), 0);
    ASSERT_EQ(send_from(qa, src, 64, 64, 3), 0);
    if (std::chrono::steady_clock::now() - write_posted >= hold) ++late_sends;
    auto got = wait_wc(b_.cq, 2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[1].wr_id, 2u);
    EXPECT_EQ(std::memcmp(dst.data + 4096, src.data + 4096, 4096), 0)
        << "the WRITE had not landed when the SEND behind it did";
    auto sent = wait_wc(a_.cq, 3);
    ASSERT_EQ(sent.size(), 3u);
    for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(sent[i].wr_id, i + 1);
  }
  // The first round's first SEND went on the line, and the WRITE waited for it; from then on
  // the QP's SENDs follow its WRITEs through the routers (the tunable express_hold_ns)...
  EXPECT_GE(express_msgs(ra) - before, 1u);
  EXPECT_LE(express_msgs(ra) - before, 1u + late_sends) << late_sends << " SENDs came late";
  // ...and go back to the line once it has posted no WRITE for that long (10 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  expect_back_on_the_line(qa, ra, qb, src, dst);
}

// While its peer READs its memory in long messages (the routers answer them), a QP's SENDs
// go through the routers with those READs rather than on its line (UCX's rendezvous: the
// sender's next RTS while the receiver reads; docs/PERFORMANCE.md), with their bytes and in
// order; once it was read so no more, they go back on the line.
TEST_F(ExpressTest, AQpWhosePeerReadsItInBulkSendsThroughTheRouters) {
  constexpr uint32_t kRead = 256 * 1024;  // four packets of 64 KiB: a bulk READ
  Pair p = express_pair(2 * kRead, 2 * kRead);
  ibv_qp *qa = p.qa, *qb = p.qb;
  const uint8_t* ra = p.ra;
  Buffer &src = p.src, &dst = p.dst;
  constexpr int kRounds = 20;
  const uint64_t before = express_msgs(ra);
  // SENDs posted once the window the READ's packets opened may have closed (the router keeps
  // it open kBulkWindowNs past a packet, moving its end in steps of a tenth of that): only
  // these, sent by a machine that stalled the test, may go on the line. The clock is read
  // before the READ is posted, which is before any packet of it.
  const auto window = std::chrono::nanoseconds(shm::kBulkWindowNs * 9 / 10);
  int late_sends = 0;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(round);
    fill_pattern(src.data, src.len, static_cast<uint32_t>(round));
    std::memset(dst.data, 0, dst.len);
    const auto read_posted = std::chrono::steady_clock::now();
    ASSERT_EQ(post_rdma(qb, IBV_WR_RDMA_READ, dst, kRead, src, kRead, kRead, 1), 0);
    auto read = wait_wc(b_.cq, 1);
    ASSERT_EQ(read.size(), 1u);
    ASSERT_EQ(read[0].status, IBV_WC_SUCCESS);
    ASSERT_EQ(std::memcmp(dst.data + kRead, src.data + kRead, kRead), 0);
    post_recv(qb, dst, 0, 64, 2);
    ASSERT_EQ(send_from(qa, src, 0, 64, 3), 0);
    if (std::chrono::steady_clock::now() - read_posted >= window) ++late_sends;
    auto got = wait_wc(b_.cq, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].wr_id, 2u);
    EXPECT_EQ(std::memcmp(dst.data, src.data, 64), 0);
    ASSERT_EQ(wait_wc(a_.cq, 1).size(), 1u);
  }
  EXPECT_LE(express_msgs(ra) - before, static_cast<uint64_t>(late_sends))
      << "the SENDs went on the line while their peer read the QP's memory (" << late_sends
      << " came late)";
  // ...and go back to the line once it has been read no more for longer than the hold.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  expect_back_on_the_line(qa, ra, qb, src, dst);
  release_buffers(p);
}

// Run by verify.express_no_hold (WHARF_EXPRESS_HOLD_US=0: one-sided work holds no SENDs
// back): a SEND posted while the router still carries the QP's READ goes to the router
// behind it, not onto the line to wait there for all of the router's work (which kept the
// line owing a write, and its pollers awake, for as long: UCX's ATS behind the READs of the
// messages after it); it completes after the READ, with its bytes.
TEST_F(ExpressTest, ASendBehindWorkTheRouterCarriesGoesToTheRouter) {
  const char* hold = getenv("WHARF_EXPRESS_HOLD_US");
  if (hold == nullptr || strcmp(hold, "0") != 0)
    GTEST_SKIP() << "needs WHARF_EXPRESS_HOLD_US=0 (run by verify.express_no_hold)";
  constexpr uint32_t kRead = 8u << 20;  // moved by the routers for milliseconds
  Pair p = express_pair(kRead + 4096, kRead + 4096);
  ibv_qp *qa = p.qa, *qb = p.qb;
  const uint8_t* rb = p.rb;
  Buffer &src = p.src, &dst = p.dst;
  fill_pattern(src.data, src.len, 7);
  fill_pattern(dst.data, dst.len, 8);
  const uint64_t before = express_msgs(rb);
  post_recv(qa, src, 0, 64, 1);
  // qb reads qa's memory, then sends to qa at once.
  ASSERT_EQ(post_rdma(qb, IBV_WR_RDMA_READ, dst, 4096, src, 4096, kRead, 2), 0);
  ASSERT_EQ(send_from(qb, dst, 0, 64, 3), 0);
  auto done = wait_wc(b_.cq, 2);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].wr_id, 2u);
  EXPECT_EQ(done[1].wr_id, 3u);
  for (const ibv_wc& wc : done) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(dst.data + 4096, src.data + 4096, kRead), 0);
  auto got = wait_wc(a_.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::memcmp(src.data, dst.data, 64), 0);
  EXPECT_EQ(express_msgs(rb), before) << "the SEND went on the line behind the router's READ";
  // With the router done, the QP's SENDs go on the line again.
  expect_back_on_the_line(qb, rb, qa, dst, src);
  release_buffers(p);
}

// The receiving application posts receives and then never calls a verb: its library's helper
// thread still executes what arrives, and the sender's sends complete.
TEST_F(ExpressTest, AReceiverThatNeverPollsStillCompletesTheSender) {
  Pair p = express_pair(4096, 4096);
  ibv_qp *qa = p.qa, *qb = p.qb;
  const uint8_t* ra = p.ra;
  Buffer &src = p.src, &dst = p.dst;
  const uint64_t before = express_msgs(ra);
  for (uint32_t i = 0; i < 8; ++i) post_recv(qb, dst, i * 64, 64, i);
  for (uint64_t i = 0; i < 8; ++i) ASSERT_EQ(send_from(qa, src, i * 64, 64, i), 0);
  auto sent = wait_wc(a_.cq, 8);  // b's CQ is not polled meanwhile
  ASSERT_EQ(sent.size(), 8u);
  for (const ibv_wc& w : sent) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
  EXPECT_EQ(express_msgs(ra) - before, 8u);
  EXPECT_EQ(wait_wc(b_.cq, 8).size(), 8u);
  EXPECT_EQ(std::memcmp(dst.data, src.data, 8 * 64), 0);
}

// A thread waiting for an event of a CQ whose QP has a line spins on the line, then sleeps
// on the line and the channel together: a Message arriving ends the wait with the event. A
// channel the application then sets O_NONBLOCK is answered as it asks, EAGAIN, at once.
TEST_F(ExpressTest, AnEventWaitEndsWithTheLinesMessageAndHonoursANonBlockingChannel) {
  ibv_comp_channel* channel = ibv_create_comp_channel(b_.ctx);
  ASSERT_NE(channel, nullptr);
  ibv_cq* cq = ibv_create_cq(b_.ctx, 64, nullptr, channel, 0);
  ASSERT_NE(cq, nullptr);
  Side eb = b_;
  eb.cq = cq;  // qb completes on the channel's CQ
  Pair p = express_pair(a_, eb, 4096, 4096);
  auto wait_for_event = [&](int* err) {
    ibv_cq* got = nullptr;
    void* ctx = nullptr;
    const int rc = ibv_get_cq_event(channel, &got, &ctx);
    *err = rc == 0 ? 0 : errno;
    if (rc == 0) ibv_ack_cq_events(got, 1);
    return rc == 0 && got == cq;
  };
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    post_recv(p.qb, p.dst, 0, 64, 7);
    ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
    std::thread sender([&] {
      usleep(50000);  // the waiter is asleep by then
      EXPECT_EQ(send_from(p.qa, p.src, 0, 64, 8), 0);
    });
    int err = 0;
    EXPECT_TRUE(wait_for_event(&err)) << strerror(err);
    sender.join();
    EXPECT_EQ(wait_wc(cq, 1).size(), 1u);
    EXPECT_EQ(wait_wc(a_.cq, 1).size(), 1u);
  }
  const int flags = fcntl(channel->fd, F_GETFL);
  ASSERT_EQ(fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK), 0);
  post_recv(p.qb, p.dst, 0, 64, 9);
  ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
  std::atomic<bool> returned{false};
  int err = 0;
  std::thread waiter([&] {
    EXPECT_FALSE(wait_for_event(&err));
    returned = true;
  });
  for (int i = 0; i < 200 && !returned; ++i) usleep(10000);
  EXPECT_TRUE(returned) << "ibv_get_cq_event waited on a channel set O_NONBLOCK";
  if (!returned) {
    EXPECT_EQ(send_from(p.qa, p.src, 0, 64, 10), 0);  // ends the wait
  }
  waiter.join();
  if (returned) {
    EXPECT_EQ(err, EAGAIN);
    EXPECT_EQ(send_from(p.qa, p.src, 0, 64, 10), 0);
  }
  EXPECT_EQ(wait_wc(a_.cq, 1).size(), 1u);
  EXPECT_EQ(wait_wc(cq, 1).size(), 1u);
  EXPECT_EQ(ibv_destroy_qp(p.qa), 0);
  EXPECT_EQ(ibv_destroy_qp(p.qb), 0);
  ibv_cq* pending = nullptr;
  void* ctx = nullptr;
  if (ibv_get_cq_event(channel, &pending, &ctx) == 0) ibv_ack_cq_events(pending, 1);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(channel), 0);
  release_buffers(p);
}

// Polls a CQ for no completions until stopped, as an application's loop polls: that
// services the lines of the CQ's QPs (and leaves the completions to the test).
class CqServicer {
 public:
  explicit CqServicer(ibv_cq* cq)
      : thread_([this, cq] {
          while (!stop_.load()) {
            ibv_poll_cq(cq, 0, nullptr);
            usleep(50);
          }
        }) {}
  ~CqServicer() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Waits up to `ms` for the channel's fd to be readable: with poll(), or (use_epoll) with an
// epoll set of the caller's own holding the fd, as UCX and libfabric wait. True if it is.
bool channel_readable(ibv_comp_channel* channel, int ms, bool use_epoll) {
  if (!use_epoll) {
    pollfd p{channel->fd, POLLIN, 0};
    return poll(&p, 1, ms) == 1;
  }
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  epoll_event got{};
  const bool ready = ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, channel->fd, &ev) == 0 &&
                     epoll_wait(ep, &got, 1, ms) == 1;
  if (ep >= 0) close(ep);
  return ready;
}

// An application asleep on its channel's fd (nonblocking, as UCX, libfabric and rsockets set
// it) wakes when a Message arrives on a line of one of the channel's CQs, and its
// ibv_get_cq_event then returns the CQ's event, for each of six QPs of one CQ (a CQ used to
// watch four); on the sending side, whose CQ has no channel, polls service all six lines.
// Run with the helper thread's interval far longer than the wait (verify.express_sleepers)
// this fails unless the library itself watches the lines.
TEST_F(ExpressTest, AnApplicationAsleepOnItsChannelsFdWakesForEveryLinesMessage) {
  constexpr int kPairs = 6;
  ibv_comp_channel* channel = nullptr;
  Side eb = b_;
  ASSERT_NO_FATAL_FAILURE(channel_cq_on_b(256, &channel, &eb.cq));
  ibv_cq* cq = eb.cq;
  // Both sides serviced while the lines come up (the test drives both from one thread), and
  // the sender's side from then on, as its own application would.
  CqServicer sending_side(a_.cq);
  std::vector<Pair> pairs;
  {
    CqServicer receiving_side(cq);
    for (int i = 0; i < kPairs; ++i) {
      SCOPED_TRACE(i);
      pairs.push_back(express_pair(a_, eb, 4096, 4096));
    }
  }
  const int flags = fcntl(channel->fd, F_GETFL);
  ASSERT_EQ(fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK), 0);
  for (int i = 0; i < kPairs; ++i) {
    SCOPED_TRACE(i);
    Pair& p = pairs[static_cast<size_t>(i)];
    post_recv(p.qb, p.dst, 0, 64, 100 + static_cast<uint64_t>(i));
    ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
    std::thread sender([&] {
      usleep(20000);  // the waiter is asleep by then
      EXPECT_EQ(send_from(p.qa, p.src, 0, 64, 200 + static_cast<uint64_t>(i)), 0);
    });
    // Each readiness is followed by ibv_get_cq_event, as the application's loop does; one
    // without an event (an acknowledgement woke it) answers EAGAIN and the wait goes on.
    bool got_event = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!got_event && std::chrono::steady_clock::now() < deadline) {
      if (!channel_readable(channel, 1000, i % 2 == 1)) continue;
      ibv_cq* ev_cq = nullptr;
      void* ev_ctx = nullptr;
      if (ibv_get_cq_event(channel, &ev_cq, &ev_ctx) == 0) {
        EXPECT_EQ(ev_cq, cq);
        ibv_ack_cq_events(ev_cq, 1);
        got_event = true;
      } else {
        EXPECT_EQ(errno, EAGAIN);
      }
    }
    sender.join();
    EXPECT_TRUE(got_event) << "no event while asleep on the channel's fd";
    auto recv = wait_wc(cq, 1);
    ASSERT_EQ(recv.size(), 1u);
    EXPECT_EQ(recv[0].wr_id, 100 + static_cast<uint64_t>(i));
    // The receiver's next poll acknowledges what it executed: the send completes.
    ibv_wc sent{};
    for (int tries = 0; tries < 10000 && ibv_poll_cq(a_.cq, 1, &sent) == 0; ++tries) {
      ibv_poll_cq(cq, 0, nullptr);
      usleep(1000);
    }
    EXPECT_EQ(sent.wr_id, 200 + static_cast<uint64_t>(i));
    EXPECT_EQ(sent.status, IBV_WC_SUCCESS);
  }
  for (Pair& p : pairs) {
    EXPECT_GT(express_msgs(p.ra), 0u);
    EXPECT_EQ(ibv_destroy_qp(p.qa), 0);
    EXPECT_EQ(ibv_destroy_qp(p.qb), 0);
    release_buffers(p);
  }
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(channel), 0);
}

// Two threads wait on one channel (blocking) for the events of two CQs whose QPs have lines.
// When the first Message comes, both wake; one takes the event, and the other must go back
// to watching the lines (were it to sleep on the channel's socket, where only the router
// writes, the second Message would not end its wait: a thread still waiting is ended by a
// signal, and the test fails). The window in which the other thread saw the first event
// raised but not yet taken, which used to send it to the socket, is too narrow for this test
// to hit reliably.
TEST_F(ExpressTest, TwoThreadsWaitingOnOneChannelBothGetTheirEvents) {
  ibv_comp_channel* channel = nullptr;
  Side e1 = b_, e2 = b_;
  ASSERT_NO_FATAL_FAILURE(channel_cq_on_b(64, &channel, &e1.cq));
  e2.cq = ibv_create_cq(b_.ctx, 64, nullptr, channel, 0);
  ASSERT_NE(e2.cq, nullptr);
  Pair p1, p2;
  {
    CqServicer sending_side(a_.cq), first(e1.cq), second(e2.cq);
    p1 = express_pair(a_, e1, 4096, 4096);
    p2 = express_pair(a_, e2, 4096, 4096);
  }
  CqServicer sending_side(a_.cq);
  struct sigaction sa {};
  sa.sa_handler = [](int) {};  // no SA_RESTART: a blocked read ends with EINTR
  struct sigaction old {};
  ASSERT_EQ(sigaction(SIGUSR2, &sa, &old), 0);
  post_recv(p1.qb, p1.dst, 0, 64, 1);
  post_recv(p2.qb, p2.dst, 0, 64, 2);
  ASSERT_EQ(ibv_req_notify_cq(e1.cq, 0), 0);
  ASSERT_EQ(ibv_req_notify_cq(e2.cq, 0), 0);
  std::atomic<int> returned{0};
  ibv_cq* got[2] = {nullptr, nullptr};
  auto waiter = [&](int i) {
    void* ctx = nullptr;
    if (ibv_get_cq_event(channel, &got[i], &ctx) == 0)
      ibv_ack_cq_events(got[i], 1);
    else
      got[i] = nullptr;
    ++returned;
  };
  std::thread w0(waiter, 0), w1(waiter, 1);
  usleep(50000);  // both asleep
  ASSERT_EQ(send_from(p1.qa, p1.src, 0, 64, 11), 0);
  for (int i = 0; i < 1000 && returned < 1; ++i) usleep(10000);
  usleep(20000);  // the other one back to waiting, wherever it waits
  ASSERT_EQ(send_from(p2.qa, p2.src, 0, 64, 12), 0);
  for (int i = 0; i < 1000 && returned < 2; ++i) usleep(10000);
  const bool both = returned == 2;
  for (std::thread* t : {&w0, &w1}) pthread_kill(t->native_handle(), SIGUSR2);
  w0.join();
  w1.join();
  sigaction(SIGUSR2, &old, nullptr);
  EXPECT_TRUE(both) << "a waiter slept through a line's Message";
  EXPECT_TRUE((got[0] == e1.cq && got[1] == e2.cq) || (got[0] == e2.cq && got[1] == e1.cq));
  EXPECT_EQ(wait_wc(e1.cq, 1).size(), 1u);
  EXPECT_EQ(wait_wc(e2.cq, 1).size(), 1u);
  for (Pair* p : {&p1, &p2}) {
    EXPECT_EQ(ibv_destroy_qp(p->qa), 0);
    EXPECT_EQ(ibv_destroy_qp(p->qb), 0);
    release_buffers(*p);
  }
  EXPECT_EQ(ibv_destroy_cq(e1.cq), 0);
  EXPECT_EQ(ibv_destroy_cq(e2.cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(channel), 0);
}

// A line whose peer went away ends in end of file, which is readable for ever: the channel
// watching it is readable until a wait services the line, and quiet after. The library's
// helper thread services a line idle for WHARF_EXPRESS_IDLE_US (1 ms by default) too, and
// takes a broken one off its CQ's set at once, so the end is certain to show on the channel
// only where the helper sleeps longer than the wait (verify.express_sleepers); a test that
// required it everywhere failed when the helper got there first (ASan, a loaded machine).
TEST_F(ExpressTest, ALineWhosePeerWentAwayLeavesItsChannelQuiet) {
  const char* idle_us = getenv("WHARF_EXPRESS_IDLE_US");
  const bool helper_sleeps = idle_us != nullptr && strtoull(idle_us, nullptr, 10) >= 20'000'000;
  ibv_comp_channel* channel = nullptr;
  Side eb = b_;
  ASSERT_NO_FATAL_FAILURE(channel_cq_on_b(64, &channel, &eb.cq));
  ibv_cq* cq = eb.cq;
  Pair p;
  {
    CqServicer sending_side(a_.cq), receiving_side(cq);
    p = express_pair(a_, eb, 4096, 4096);
  }
  const int flags = fcntl(channel->fd, F_GETFL);
  ASSERT_EQ(fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK), 0);
  ASSERT_EQ(ibv_destroy_qp(p.qa), 0);  // the peer library and router close their ends
  const bool showed = channel_readable(channel, helper_sleeps ? 10000 : 1000, false);
  if (helper_sleeps) {
    ASSERT_TRUE(showed) << "the line's end never showed";
  }
  if (showed) {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    EXPECT_NE(ibv_get_cq_event(channel, &ev_cq, &ev_ctx), 0);
    EXPECT_EQ(errno, EAGAIN);
  }
  EXPECT_FALSE(channel_readable(channel, 0, false)) << "the broken line keeps the fd readable";
  EXPECT_EQ(ibv_destroy_qp(p.qb), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(channel), 0);
  release_buffers(p);
}

// The routers pace a rate-limited QP: its sends stop going on the line (and come back to it
// when the limit is lifted).
TEST_F(ExpressTest, ARateLimitedQpSendsThroughItsRouter) {
  Pair p = express_pair(4096, 4096);
  ibv_qp *qa = p.qa, *qb = p.qb;
  const uint8_t* ra = p.ra;
  Buffer &src = p.src, &dst = p.dst;
  ibv_qp_rate_limit_attr limit{};
  limit.rate_limit = 100000;  // kbps
  ASSERT_EQ(ibv_modify_qp_rate_limit(qa, &limit), 0);
  const uint64_t before = express_msgs(ra);
  for (uint32_t i = 0; i < 10; ++i) {
    post_recv(qb, dst, 0, 64, i);
    ASSERT_EQ(send_from(qa, src, 0, 64, i), 0);
    ASSERT_EQ(wait_wc(a_.cq, 1).size(), 1u);
    ASSERT_EQ(wait_wc(b_.cq, 1).size(), 1u);
  }
  EXPECT_EQ(express_msgs(ra), before);
  limit.rate_limit = 0;
  ASSERT_EQ(ibv_modify_qp_rate_limit(qa, &limit), 0);
  expect_back_on_the_line(qa, ra, qb, src, dst);
}

// A QP on a shared receive queue (UCX's receives all go to SRQs) takes its peer's SENDs from
// its express line, claiming each receive from the SRQ, while its router places another QP's
// SENDs in the same SRQ. Every receive is used exactly once, each message lands whole in the
// receive its completion names, and each sender's order holds.
TEST_F(ExpressTest, AQpOnAnSrqTakesSendsFromItsLineWhileTheRouterFillsTheSameSrq) {
  constexpr uint32_t kDepth = 32, kSlot = 64, kPerSender = 400, kWindow = 8;
  ibv_srq* srq = create_srq(b_, kDepth);
  ASSERT_NE(srq, nullptr);
  uint8_t *ra = nullptr, *rb = nullptr;
  ibv_qp* qa = create_qp_mapped(a_, IBV_QPT_RC, &ra);  // host a: sends over the line
  ibv_qp* qb = create_qp_mapped(b_, IBV_QPT_RC, &rb, srq);
  connect(qa, a_, qb, b_, kFullAccess);
  connect(qb, b_, qa, a_, kFullAccess);
  ibv_qp* ql = create_qp(b_, IBV_QPT_RC, srq);  // host b: qs -> ql through b's router
  ibv_qp* qs = create_qp(b_, IBV_QPT_RC);
  connect(ql, b_, qs, b_, kFullAccess);
  connect(qs, b_, ql, b_, kFullAccess);
  Buffer asrc = make_buffer(a_, kPerSender * kSlot, kFullAccess);
  Buffer bsrc = make_buffer(b_, kPerSender * kSlot, kFullAccess);
  Buffer dst = make_buffer(b_, kDepth * kSlot, kFullAccess);
  // Message i of sender t: its 64 bytes say (t, i) throughout.
  auto fill = [](Buffer& b, uint8_t t) {
    for (uint32_t i = 0; i < kPerSender; ++i)
      for (uint32_t k = 0; k < kSlot; ++k) b.data[i * kSlot + k] = static_cast<uint8_t>(t + i + k);
  };
  bring_up_srq(qa, ra, qb, srq, asrc, dst);
  fill(asrc, 1);
  fill(bsrc, 2);
  std::vector<bool> posted(kDepth, true);
  for (uint32_t r = 0; r < kDepth; ++r) post_srq_recv(srq, dst, r * kSlot, kSlot, r);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  uint32_t sent[2] = {0, 0}, done[2] = {0, 0}, received[2] = {0, 0};
  ibv_qp* senders[2] = {qa, qs};
  Buffer* sources[2] = {&asrc, &bsrc};
  const uint64_t line_before = express_msgs(ra);
  while (received[0] < kPerSender || received[1] < kPerSender) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "received " << received[0] << " and " << received[1];
    for (int t = 0; t < 2; ++t) {
      while (sent[t] < kPerSender && sent[t] - done[t] < kWindow) {
        ASSERT_EQ(send_from(senders[t], *sources[t], sent[t] * kSlot, kSlot, 1000 + sent[t]), 0);
        ++sent[t];
      }
    }
    ibv_wc wc[16];
    const int na = ibv_poll_cq(a_.cq, 16, wc);
    ASSERT_GE(na, 0);
    for (int i = 0; i < na; ++i) {
      ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS);
      ++done[0];
    }
    const int nb = ibv_poll_cq(b_.cq, 16, wc);
    ASSERT_GE(nb, 0);
    for (int i = 0; i < nb; ++i) {
      ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[i].status);
      if (wc[i].opcode == IBV_WC_SEND) {
        ++done[1];
        continue;
      }
      ASSERT_EQ(wc[i].opcode, IBV_WC_RECV);
      const uint64_t r = wc[i].wr_id;
      ASSERT_LT(r, kDepth);
      ASSERT_TRUE(posted[r]) << "receive " << r << " completed twice";
      posted[r] = false;
      const int t = wc[i].qp_num == qb->qp_num ? 0 : 1;
      if (t == 1) {
        ASSERT_EQ(wc[i].qp_num, ql->qp_num);
      }
      ASSERT_EQ(wc[i].byte_len, kSlot);
      const uint32_t n = received[t]++;  // each sender's messages arrive in order
      for (uint32_t k = 0; k < kSlot; ++k)
        ASSERT_EQ(dst.data[r * kSlot + k], static_cast<uint8_t>(t + 1 + n + k))
            << "sender " << t << " message " << n << " byte " << k;
      post_srq_recv(srq, dst, r * kSlot, kSlot, r);
      posted[r] = true;
    }
  }
  for (const ibv_wc& w : wait_wc(a_.cq, static_cast<int>(kPerSender - done[0])))
    ASSERT_EQ(w.status, IBV_WC_SUCCESS);
  EXPECT_GT(express_msgs(ra), line_before) << "no SEND went over the line";
  ASSERT_EQ(ibv_destroy_qp(qb), 0);
  ASSERT_EQ(ibv_destroy_qp(ql), 0);
  ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

// An SRQ whose limit is armed is drained by SENDs from an express line: the limit event still
// comes (the router raises it as it counts the SRQ's receives, so the lines leave such an SRQ
// to it until the application has read the event).
TEST_F(ExpressTest, AnSrqLimitArmedIsReachedByMessagesFromTheLine) {
  ibv_srq* srq = create_srq(b_, 16);
  ASSERT_NE(srq, nullptr);
  uint8_t *ra = nullptr, *rb = nullptr;
  ibv_qp* qa = create_qp_mapped(a_, IBV_QPT_RC, &ra);
  ibv_qp* qb = create_qp_mapped(b_, IBV_QPT_RC, &rb, srq);
  connect(qa, a_, qb, b_, kFullAccess);
  connect(qb, b_, qa, a_, kFullAccess);
  Buffer src = make_buffer(a_, 64, kFullAccess);
  Buffer dst = make_buffer(b_, 16 * 64, kFullAccess);
  bring_up_srq(qa, ra, qb, srq, src, dst);
  for (uint32_t i = 0; i < 8; ++i) post_srq_recv(srq, dst, i * 64, 64, 100 + i);
  ibv_srq_attr limit{};
  limit.srq_limit = 6;
  ASSERT_EQ(ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT), 0);
  // 8 posted, 3 consumed: 5 < 6.
  for (uint32_t i = 0; i < 3; ++i) ASSERT_EQ(send_from(qa, src, 0, 64, 200 + i), 0);
  ASSERT_EQ(wait_wc(b_.cq, 3).size(), 3u);
  ASSERT_EQ(wait_wc(a_.cq, 3).size(), 3u);
  pollfd pfd{b_.ctx->async_fd, POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1) << "no limit event";
  ibv_async_event ev;
  ASSERT_EQ(ibv_get_async_event(b_.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
  EXPECT_EQ(ev.element.srq, srq);
  ibv_ack_async_event(&ev);
  // Read: the line takes the SRQ's receives again.
  const uint64_t before = express_msgs(ra);
  ASSERT_EQ(send_from(qa, src, 0, 64, 300), 0);
  ASSERT_EQ(wait_wc(b_.cq, 1).at(0).status, IBV_WC_SUCCESS);
  ASSERT_EQ(wait_wc(a_.cq, 1).at(0).status, IBV_WC_SUCCESS);
  for (int i = 0; i < 50 && express_msgs(ra) == before; ++i) {
    post_srq_recv(srq, dst, 0, 64, 400 + i);
    ASSERT_EQ(send_from(qa, src, 0, 64, 400 + i), 0);
    ASSERT_EQ(wait_wc(b_.cq, 1).at(0).status, IBV_WC_SUCCESS);
    ASSERT_EQ(wait_wc(a_.cq, 1).at(0).status, IBV_WC_SUCCESS);
  }
  EXPECT_GT(express_msgs(ra), before) << "the line did not take the SRQ's receives again";
  ASSERT_EQ(ibv_destroy_qp(qb), 0);
  ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

// A process with lines (its helper thread servicing the idle ones) forks: each child
// opens and closes the device and exits. None may hang (a child once inherited the helper's
// mutex locked and waited on it forever in ibv_close_device). The forks are made by a fresh
// process, GoogleTest running this test again alone in a new one (a death test, "threadsafe"
// style): a fork of the suite's process, grown by the tests before, takes ~50 ms.
TEST_F(ExpressTest, ChildrenForkedWhileLinesAreServicedDoNotHang) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto fork_children = [this]() -> std::string {
    // The helper services idle lines every 100 us (the least WHARF_EXPRESS_IDLE_US; this
    // process has not read it yet), eight of them, so that it holds its mutex often enough
    // for a few hundred forks to catch it held (without the fork handlers, a child then hangs).
    setenv("WHARF_EXPRESS_IDLE_US", "100", 1);
    for (int i = 0; i < 8; ++i) {
      Pair p = express_pair(4096, 4096);
      if (express_msgs(p.ra) == 0) return "a pair got no line";
    }
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (n == 0) return "no device";
    std::string failure;
    for (int i = 0; i < 300 && failure.empty(); ++i) {
      const pid_t child = fork();
      if (child < 0) return "fork failed";
      if (child == 0) {
        ibv_context* ctx = ibv_open_device(list[0]);
        if (ctx != nullptr) ibv_close_device(ctx);
        _exit(ctx != nullptr ? 0 : 1);
      }
      int status = 0;
      pid_t done = 0;
      for (int ms = 0; ms < 5000 && (done = waitpid(child, &status, WNOHANG)) == 0; ++ms)
        usleep(1000);
      if (done == 0) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
        failure = "child " + std::to_string(i) + " hung";
      } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        failure = "child " + std::to_string(i) + " failed";
      }
    }
    ibv_free_device_list(list);
    return failure;
  };
  EXPECT_EXIT(
      {
        const std::string failure = fork_children();
        TearDown();
        TearDownTestSuite();
        if (!failure.empty()) fprintf(stderr, "%s\n", failure.c_str());
        _exit(failure.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Routers that hold at most one line at a time (--express-lines 1), three hosts: a_ on the
// first, b_ on the second, and the tests that need it open a side on the third.
class ExpressLinesTest : public ExpressTest {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster(3, {"--express", "on", "--express-lines", "1"}, -1,
                           Cluster::Links::kAuthenticated);
  }
};

// The second pair's SENDs all go through the routers and arrive; once the first pair is gone a
// new pair gets a line.

TEST_F(ExpressLinesTest, QpsBeyondTheRoutersLinesGoThroughTheRouters) {
  Pair first = express_pair(4096, 4096);
  uint8_t *ra = nullptr, *rb = nullptr;
  ibv_qp* qa = create_qp_mapped(a_, IBV_QPT_RC, &ra);
  ibv_qp* qb = create_qp_mapped(b_, IBV_QPT_RC, &rb);
  connect(qa, a_, qb, b_, kFullAccess);
  connect(qb, b_, qa, a_, kFullAccess);
  for (int i = 0; i < 50; ++i) ping(qa, qb, first.src, first.dst);
  EXPECT_EQ(express_msgs(ra), 0u);
  EXPECT_EQ(express_msgs(rb), 0u);
  ASSERT_EQ(ibv_destroy_qp(qa), 0);
  ASSERT_EQ(ibv_destroy_qp(qb), 0);
  ASSERT_EQ(ibv_destroy_qp(first.qa), 0);
  ASSERT_EQ(ibv_destroy_qp(first.qb), 0);
  release_buffers(first);
  Pair next = express_pair(4096, 4096);  // fails unless the first pair's line was released
  EXPECT_GT(express_msgs(next.ra), 0u);
}

// A router whose peer turns its line away (the peer holds its one line already) keeps no room
// taken: once the peer has room again, a new pair gets a line. (The connecting router used to
// hand its end to its library before the peer answered, and the dead line held its room
// until the QP went.)
TEST_F(ExpressLinesTest, ALineThePeerTurnsAwayHoldsNoRoom) {
  setenv("WHARF_ROUTER", cluster_->router(2).socket().c_str(), 1);
  Side c = open_side();
  Pair first = express_pair(a_, c, 4096, 4096);  // the first and third routers' one line each
  Pair turned_away = pair(b_, c, 4096, 4096);
  for (int i = 0; i < 20; ++i)
    ping(turned_away.qa, turned_away.qb, turned_away.src, turned_away.dst);
  EXPECT_EQ(express_msgs(turned_away.ra), 0u);
  ASSERT_EQ(ibv_destroy_qp(first.qa), 0);  // the third router has room again
  ASSERT_EQ(ibv_destroy_qp(first.qb), 0);
  release_buffers(first);
  // The turned-away pair stays: a line it held would leave the second router no room.
  Pair next = express_pair(b_, c, 4096, 4096);
  EXPECT_GT(express_msgs(next.ra), 0u);
  for (Pair* p : {&turned_away, &next}) {
    ASSERT_EQ(ibv_destroy_qp(p->qa), 0);
    ASSERT_EQ(ibv_destroy_qp(p->qb), 0);
    release_buffers(*p);
  }
  close_side(&c);
}

}  // namespace
}  // namespace wharf::verify
