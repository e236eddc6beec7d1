// The host-to-host engine (router/remote.h) end to end over a lossy path: two routers' data
// paths in one process (tests/support/remote_hosts.h) whose host links each go through a
// LossyProxy (tests/support/lossy_proxy.h). a's cluster file names the proxy to_b_ as b's
// address, and b's names to_a_ as a's: a router sends on the connections it dials, so to_b_
// carries a's requests and to_a_ b's ACKs and READ responses, and both carry the Hellos.
//
// The fault model, and why: a host link's stream has no link-level sequence numbers,
// checksums or credits, so taking a whole packet out of it, sending it twice or moving it
// behind the next one is exactly what the RC engine sees of a lossy network, and the links
// themselves cannot tell (lossy_proxy.h has the details). Loss of the connection is modelled
// by closing it (LossyProxy::cut), which is the links' own failure path: they reconnect
// and tell the engine, which resends what was not acknowledged. A peer that falls silent is
// a proxy that drops every packet while TCP keeps working: no link breaks, and only the
// requester's ACK timer can notice.
//
// a's ACK timeout is short (kTimeout) so that a lost packet costs milliseconds; each test
// ends in a few seconds at most (run_until's guard), usually well under one.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/clock.h"
#include "rc/timers.h"
#include "support/free_ports.h"
#include "support/lossy_proxy.h"
#include "support/remote_hosts.h"

namespace wharf::router {
namespace {

using test_support::cluster_text;
using test_support::expect_cqe;
using test_support::Faults;
using test_support::kDepth;
using test_support::LossyProxy;
using test_support::RemoteHost;
using test_support::work;

constexpr uint8_t kTimeout = 12;      // a's local ACK timeout: 16.8 ms
constexpr size_t kMemory = 1u << 20;  // each host's registered buffer
constexpr uint32_t kSlot = 64;        // b's receive buffers: kDepth slots of kSlot bytes
// a's first PSN: 128 packets before the 24-bit PSN wraps, so that the longer tests cross it.
constexpr uint32_t kFirstPsn = rc::kPsnMask - 127;

// SEND i's text: distinct for every i, so that a SEND delivered twice or out of order shows.
std::string message(uint64_t i) {
  char text[32];
  std::snprintf(text, sizeof(text), "message %04llu", static_cast<unsigned long long>(i));
  return text;
}
// Where receive wr_id's buffer is in b's memory.
uint32_t slot_of(uint64_t wr_id) { return static_cast<uint32_t>(wr_id % kDepth) * kSlot; }

class LossyLinkTest : public ::testing::Test {
 protected:
  LossyLinkTest() {
    EXPECT_NE(ports_, 0) << "no free pair of ports";
    EXPECT_NE(to_a_.port(), 0);
    EXPECT_NE(to_b_.port(), 0);
    to_b_.forward_to(ports_ + 1);
    to_a_.forward_to(ports_);
    EXPECT_TRUE(test_support::connect_hosts(a_, b_, [&] { pass(); }));
    a_.qp().attr.timeout = kTimeout;
    // Before either QP has sent or received anything (the setup above was datagrams only).
    a_.qp().attr.sq_psn = b_.qp().attr.rq_psn = kFirstPsn;
  }

  // One pass of each host, each followed by what the path between them does meanwhile.
  void pass() {
    a_.pass();
    to_b_.pump();
    b_.pass();
    to_a_.pump();
  }
  template <class Done>
  bool run_until(Done done) {
    return test_support::run_until([&] { pass(); }, done);
  }
  // Passes for `span`: time for anything still under way (a late duplicate, a packet held
  // back) to arrive, where a test checks that nothing more does.
  void run_for(std::chrono::milliseconds span) {
    const auto end = std::chrono::steady_clock::now() + span;
    while (std::chrono::steady_clock::now() < end) pass();
  }
  void set_faults(const Faults& requests, const Faults& responses) {
    to_b_.set_faults(requests);
    to_a_.set_faults(responses);
  }

  // a sends b `count` inline SENDs (message(i), wr_id i) while keeping its send ring full,
  // and b keeps its receive ring full, receive i in slot_of(i); a receive's buffer is read
  // as soon as it completes, before it is posted again. b always has receives to spare, so a
  // SEND delivered twice would take one and show. between(received) runs after each pass.
  // Returns the texts b received, in completion order; passes a quiet period after a's last
  // completion, in which nothing more must arrive.
  template <class Between>
  std::vector<std::string> stream_sends(uint64_t count, Between between) {
    std::vector<std::string> got;
    uint64_t sent = 0, posted = 0;
    auto step = [&] {
      const std::vector<shm::Cqe>& in = b_.completions();
      while (got.size() < in.size()) {
        const shm::Cqe& c = in[got.size()];
        const uint32_t len = c.status == IBV_WC_SUCCESS ? std::min(c.byte_len, kSlot) : 0;
        got.emplace_back(reinterpret_cast<const char*>(b_.memory(slot_of(c.wr_id))), len);
      }
      for (; posted - got.size() < kDepth; ++posted) b_.post_recv(posted, slot_of(posted), kSlot);
      for (; sent < count && sent - a_.completions().size() < kDepth; ++sent)
        a_.send_inline(sent, message(sent).c_str());
      pass();
      between(got.size());
    };
    EXPECT_TRUE(test_support::run_until(step, [&] { return a_.completions().size() >= count; }))
        << got.size() << " of " << count << " received";
    const auto quiet_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < quiet_until) step();
    return got;
  }
  // Expects a's completions to be those of SENDs 0 .. count-1, in order, all successful, and
  // b's receives to have taken exactly those SENDs, in order, each once.
  void expect_sends_delivered(uint64_t count, const std::vector<std::string>& received) {
    std::vector<std::string> expected;
    for (uint64_t i = 0; i < count; ++i) expected.push_back(message(i));
    EXPECT_EQ(received, expected);
    ASSERT_EQ(a_.completions().size(), count);
    ASSERT_EQ(b_.completions().size(), count);
    for (uint64_t i = 0; i < count; ++i) {
      expect_cqe(a_.completions()[i], i, IBV_WC_SUCCESS, IBV_WC_SEND);
      expect_cqe(b_.completions()[i], i, IBV_WC_SUCCESS, IBV_WC_RECV);
    }
    EXPECT_EQ(a_.qp().state(), IBV_QPS_RTS);
    EXPECT_EQ(b_.qp().state(), IBV_QPS_RTS);
  }

  // The proxies first: the routers' ports are then chosen among those they do not hold.
  LossyProxy to_b_;
  LossyProxy to_a_;
  const int ports_ = test_support::free_ports(2);  // where a's and b's routers listen
  RemoteHost a_{cluster_text(ports_, to_b_.port()), "a", 5, 0xc6120105, kMemory};
  RemoteHost b_{cluster_text(to_a_.port(), ports_ + 1), "b", 1029, 0xc6120205, kMemory};
};

TEST_F(LossyLinkTest, EverySendArrivesOnceAndInOrderThoughPacketsAreLostRepeatedAndReordered) {
  set_faults({.drop_every = 5, .duplicate_every = 7, .swap_every = 11},
             {.drop_every = 3, .duplicate_every = 4, .swap_every = 5});
  constexpr uint64_t kSends = 300;
  const std::vector<std::string> received = stream_sends(kSends, [](size_t) {});
  expect_sends_delivered(kSends, received);

  // Lost requests and answers were made good by sending requests again, and counted.
  EXPECT_GT(a_.link_stats(1).retransmitted_packets, 0u);
  // The faults happened, to requests and to answers alike.
  for (const LossyProxy* proxy : {&to_b_, &to_a_}) {
    EXPECT_GT(proxy->counts().dropped, 0u);
    EXPECT_GT(proxy->counts().duplicated, 0u);
    EXPECT_GT(proxy->counts().swapped, 0u);
    EXPECT_EQ(proxy->counts().malformed, 0u);
  }
}

// "When a link returns, unacknowledged packets are resent at once": whatever the cut lost
// (requests, ACKs, both) goes again, and nothing the responder executed runs twice.
TEST_F(LossyLinkTest, EverySendArrivesOnceAndInOrderThoughTheLinksAreCutAgainAndAgain) {
  constexpr uint64_t kSends = 200;
  constexpr size_t kCutEvery = 40;  // received SENDs
  size_t next_cut = kCutEvery;
  int cuts = 0;
  const std::vector<std::string> received = stream_sends(kSends, [&](size_t got) {
    if (got < next_cut || next_cut >= kSends) return;
    to_b_.cut();
    to_a_.cut();
    ++cuts;
    next_cut += kCutEvery;
  });
  expect_sends_delivered(kSends, received);
  EXPECT_EQ(cuts, 4);
  // a dialled b again after each cut, through the proxy.
  EXPECT_EQ(to_b_.counts().accepted, 1u + static_cast<uint64_t>(cuts));
}

// Messages of several packets each way: a lost middle packet is a sequence gap (NAK, go back),
// a lost last one waits for the ACK timeout, a READ response lost or repeated is asked again
// or ignored. Every round writes new bytes and reads them back.
TEST_F(LossyLinkTest, WritesAndReadsOfSeveralPacketsMoveTheRightBytesThoughPacketsAreLost) {
  set_faults({.drop_every = 3, .duplicate_every = 5, .swap_every = 4},
             {.drop_every = 4, .duplicate_every = 3, .swap_every = 5});
  // Four packets each way, the last one short.
  constexpr uint32_t kLen = 3 * proto::host::kMaxSegment + 1000;
  constexpr uint64_t kRounds = 6;
  for (uint64_t round = 0; round < kRounds; ++round) {
    // Bytes that differ between rounds and between the packets of a message: a packet placed
    // at another's offset, or left over from the last round, shows.
    std::vector<uint8_t> bytes(kLen);
    for (uint32_t j = 0; j < kLen; ++j)
      bytes[j] = static_cast<uint8_t>(j * 7 + (j >> 16) * 101 + round * 29);
    std::memcpy(a_.memory(0), bytes.data(), kLen);
    std::memset(a_.memory(kLen), 0, kLen);
    a_.post_send(work(IBV_WR_RDMA_WRITE, 2 * round, b_.address(0), b_.rkey()), 0, kLen);
    a_.post_send(work(IBV_WR_RDMA_READ, 2 * round + 1, b_.address(0), b_.rkey()), kLen, kLen);
    ASSERT_TRUE(run_until([&] { return a_.completions().size() == 2 * round + 2; }))
        << "round " << round;

    expect_cqe(a_.completions()[2 * round], 2 * round, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    expect_cqe(a_.completions()[2 * round + 1], 2 * round + 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
    EXPECT_EQ(a_.completions()[2 * round + 1].byte_len, kLen);
    EXPECT_EQ(std::memcmp(b_.memory(0), bytes.data(), kLen), 0) << "written, round " << round;
    EXPECT_EQ(std::memcmp(a_.memory(kLen), bytes.data(), kLen), 0) << "read, round " << round;
  }
  EXPECT_TRUE(b_.completions().empty());  // one-sided: b's application hears nothing
  for (const LossyProxy* proxy : {&to_b_, &to_a_}) {
    EXPECT_GT(proxy->counts().dropped, 0u);
    EXPECT_EQ(proxy->counts().malformed, 0u);
  }
}

// An atomic runs once however often its request arrives: a repeat is answered from the
// responder's cache of results (which covers max_rd_atomic requests), so a lost atomic ACK
// does not add twice. Each fetch-and-add returns the count of those before it.
TEST_F(LossyLinkTest, FetchAndAddsAddOnceEachThoughRequestsAndAnswersAreLostAndRepeated) {
  set_faults({.drop_every = 4, .duplicate_every = 3, .swap_every = 5},
             {.drop_every = 3, .duplicate_every = 4, .swap_every = 7});
  constexpr uint64_t kAdds = 100;
  constexpr uint32_t kCounter = 4096;  // in b's memory; a's results at 8 * wr_id
  uint64_t posted = 0;
  auto step = [&] {
    for (; posted < kAdds && posted - a_.completions().size() < kDepth; ++posted) {
      shm::SendWqe add = work(IBV_WR_ATOMIC_FETCH_AND_ADD, posted, b_.address(kCounter), b_.rkey());
      add.compare_add = 1;
      a_.post_send(add, static_cast<uint32_t>(8 * posted), 8);
    }
    pass();
  };
  ASSERT_TRUE(test_support::run_until(step, [&] { return a_.completions().size() == kAdds; }));

  for (uint64_t i = 0; i < kAdds; ++i) {
    expect_cqe(a_.completions()[i], i, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
    uint64_t before = 0;
    std::memcpy(&before, a_.memory(static_cast<uint32_t>(8 * i)), 8);
    EXPECT_EQ(before, i) << "fetch-and-add " << i;
  }
  uint64_t total = 0;
  std::memcpy(&total, b_.memory(kCounter), 8);
  EXPECT_EQ(total, kAdds);
  for (const LossyProxy* proxy : {&to_b_, &to_a_}) {
    EXPECT_GT(proxy->counts().dropped, 0u);
    EXPECT_GT(proxy->counts().duplicated, 0u);
  }
}

// With retry_cnt 0 the first ACK timeout fails the QP, so only a resend when the link
// returns can complete these requests; the timeout (2.1 s) leaves time for that and ends the
// test well inside run_until's guard if it does not happen.
TEST_F(LossyLinkTest, RequestsOutstandingWhenTheLinkIsCutAreResentAsSoonAsItReturns) {
  a_.qp().attr.timeout = 19;
  a_.qp().attr.retry_cnt = 0;
  b_.post_recv(11, 0, 64);
  b_.post_recv(12, 64, 64);
  std::memcpy(a_.memory(0), "written", 7);
  std::memcpy(b_.memory(1024), "peer bytes", 10);
  // Everything a sends is lost until the cut.
  set_faults({.black_hole = true}, {});
  a_.send_inline(1, "first");
  a_.post_send(work(IBV_WR_RDMA_WRITE, 2, b_.address(512), b_.rkey()), 0, 7);
  a_.post_send(work(IBV_WR_RDMA_READ, 3, b_.address(1024), b_.rkey()), 2048, 10);
  a_.send_inline(4, "last");
  ASSERT_TRUE(run_until([&] { return to_b_.dropped().size() == 4; }));
  EXPECT_TRUE(a_.completions().empty());
  EXPECT_TRUE(b_.completions().empty());

  set_faults({}, {});
  to_b_.cut();
  to_a_.cut();
  ASSERT_TRUE(
      run_until([&] { return a_.completions().size() == 4 && b_.completions().size() == 2; }));

  const std::vector<shm::Cqe>& done = a_.completions();
  expect_cqe(done[0], 1u, IBV_WC_SUCCESS, IBV_WC_SEND);
  expect_cqe(done[1], 2u, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
  expect_cqe(done[2], 3u, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
  expect_cqe(done[3], 4u, IBV_WC_SUCCESS, IBV_WC_SEND);
  EXPECT_EQ(std::memcmp(a_.memory(2048), "peer bytes", 10), 0);
  EXPECT_EQ(std::memcmp(b_.memory(512), "written", 7), 0);
  expect_cqe(b_.completions()[0], 11u, IBV_WC_SUCCESS, IBV_WC_RECV);
  expect_cqe(b_.completions()[1], 12u, IBV_WC_SUCCESS, IBV_WC_RECV);
  EXPECT_EQ(std::memcmp(b_.memory(0), "first", 5), 0);
  EXPECT_EQ(std::memcmp(b_.memory(64), "last", 4), 0);
  EXPECT_EQ(to_b_.counts().accepted, 2u);  // a dialled b again, through the proxy
}

// IBTA 9.7.6.1.3: the requester waits the local ACK timeout after the first transmission and
// after each of retry_cnt retransmissions; only then does the oldest request fail with
// RETRY_EXC_ERR, and ERR flushes the rest. No link breaks meanwhile: TCP delivers to the
// proxy, which drops.
TEST_F(LossyLinkTest, ARequesterWhosePeerFallsSilentFailsWithRetryExceededOnlyAfterEveryRetry) {
  constexpr uint8_t kSilentTimeout = 13;  // 33.6 ms
  constexpr uint8_t kRetries = 3;
  a_.qp().attr.timeout = kSilentTimeout;
  a_.qp().attr.retry_cnt = kRetries;
  b_.post_recv(11, 0, 64);
  std::memcpy(a_.memory(0), "written", 7);
  set_faults({.black_hole = true}, {.black_hole = true});

  const uint64_t start = now_ns();
  a_.send_inline(1, "into the void");
  a_.post_send(work(IBV_WR_RDMA_WRITE, 2, b_.address(512), b_.rkey()), 0, 7);
  ASSERT_TRUE(run_until([&] { return a_.completions().size() == 2; }));
  const uint64_t elapsed = now_ns() - start;

  expect_cqe(a_.completions()[0], 1u, IBV_WC_RETRY_EXC_ERR, IBV_WC_SEND);
  expect_cqe(a_.completions()[1], 2u, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(a_.qp().state(), IBV_QPS_ERR);
  EXPECT_GE(elapsed, (kRetries + 1) * rc::ack_timeout_ns(kSilentTimeout));
  // Each of the two went once and then once per retry, and nothing reached b.
  const std::vector<proto::host::PacketHeader>& lost = to_b_.dropped();
  ASSERT_EQ(lost.size(), 2u * (kRetries + 1));
  const uint32_t first_psn = lost[0].psn;
  for (size_t i = 0; i < lost.size(); ++i)
    EXPECT_EQ(lost[i].psn, rc::psn_add(first_psn, static_cast<uint32_t>(i % 2))) << i;
  EXPECT_TRUE(b_.completions().empty());
  EXPECT_TRUE(to_a_.dropped().empty());  // b had nothing to answer
  EXPECT_EQ(b_.qp().state(), IBV_QPS_RTS);
}

// A local ACK timeout of 0 is infinite (IBTA 9.7.6.1.3): a silent peer never makes such a
// requester fail (it sends again every 100 ms, rc::ack_timeout_ns). Before rc::out_of_retries
// the retries were counted against those 100 ms, and the request below failed with
// RETRY_EXC_ERR after (retry_cnt + 1) x 100 ms = 200 ms.
TEST_F(LossyLinkTest, ARequesterWithAnInfiniteAckTimeoutWaitsForASilentPeerForEver) {
  a_.qp().attr.timeout = 0;
  a_.qp().attr.retry_cnt = 1;
  b_.post_recv(11, 0, 64);
  set_faults({.black_hole = true}, {.black_hole = true});
  a_.send_inline(1, "are you there");
  run_for(std::chrono::milliseconds(1000));  // five times what the engine waits today
  EXPECT_TRUE(a_.completions().empty());
  EXPECT_EQ(a_.qp().state(), IBV_QPS_RTS);
}

}  // namespace
}  // namespace wharf::router
