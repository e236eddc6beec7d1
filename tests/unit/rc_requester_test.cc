// rc::Requester driven packet by packet: cumulative ACKs, READ and atomic responses, NAKs,
// timers and the max_rd_atomic window, with PSNs across the 24-bit wrap.
#include <gtest/gtest.h>

#include <vector>

#include "rc/requester.h"

namespace wharf::rc {
namespace {

namespace host = proto::host;

struct Recorder final : RequesterPort<int> {
  std::vector<std::pair<int, uint32_t>> sent;  // (work, first PSN)
  std::vector<std::pair<int, ibv_wc_status>> done;
  std::vector<uint32_t> read_index;
  uint64_t atomic = 0;
  bool refuse_placement = false;
  int failures = 0;
  int rnr = 0;
  bool isolated = false;

  bool link_full = false;  // transmit() could not send all of a request

  bool transmit(const Request<int>& r) override {
    sent.emplace_back(r.work, r.first_psn);
    return !link_full;
  }
  void complete(const Request<int>& r, ibv_wc_status s) override { done.emplace_back(r.work, s); }
  bool place_read(const Request<int>&, uint32_t index, const uint8_t*, uint32_t) override {
    read_index.push_back(index);
    return !refuse_placement;
  }
  bool place_atomic(const Request<int>&, uint64_t orig) override {
    atomic = orig;
    return !refuse_placement;
  }
  void fail() override { failures++; }
  void rnr_refused(uint64_t, bool iso) override {
    rnr++;
    isolated = iso;
  }
};

class RequesterTest : public ::testing::Test {
 protected:
  void ack(uint32_t psn, uint8_t syndrome = host::aeth_ack(), uint8_t op = host::kAcknowledge,
           uint64_t orig = 0) {
    req.on_response(op, psn, true, syndrome, orig, nullptr, 0, now, limits, port);
  }
  void read_response(uint8_t op, uint32_t psn) {
    req.on_response(op, psn, false, 0, 0, nullptr, 0, now, limits, port);
  }
  RequesterLimits limits{/*timeout=*/10, /*retry_cnt=*/3, /*rnr_retry=*/2, /*max_rd_atomic=*/2, 0};
  Recorder port;
  Requester<int> req{0xfffffe};  // the window crosses the wrap
  uint64_t now = 1000;
};

TEST_F(RequesterTest, AnAckForALaterPsnCompletesEveryEarlierMessageInOrder) {
  req.issue(1, RequestKind::kMessage, 2, now, limits, port);  // PSNs 0xfffffe, 0xffffff
  req.issue(2, RequestKind::kMessage, 1, now, limits, port);  // 0
  req.issue(3, RequestKind::kMessage, 1, now, limits, port);  // 1
  ack(0);
  ASSERT_EQ(port.done.size(), 2u);
  EXPECT_EQ(port.done[0], std::make_pair(1, IBV_WC_SUCCESS));
  EXPECT_EQ(port.done[1], std::make_pair(2, IBV_WC_SUCCESS));
  ack(0);  // a repeated ACK completes nothing more
  EXPECT_EQ(port.done.size(), 2u);
  ack(1);
  EXPECT_EQ(port.done.size(), 3u);
  EXPECT_TRUE(req.idle());
  EXPECT_EQ(req.next_psn(), 2u);
}

// A response for a PSN not sent yet (a ghost ACK from a confused or hostile peer) completes,
// fails and resends nothing; the real ACK then completes the messages.
TEST_F(RequesterTest, AResponseForAPsnNotSentYetIsDiscarded) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);  // 0xfffffe
  req.issue(2, RequestKind::kMessage, 1, now, limits, port);  // 0xffffff
  const size_t sent = port.sent.size();
  ack(5);
  ack(0);  // next_psn itself: not sent either
  ack(3, host::aeth_nak(host::kNakRemoteAccess));
  ack(3, host::aeth_nak(host::kNakPsnSequence));
  ack(3, host::aeth_ack(), host::kAtomicAcknowledge, 42);
  read_response(host::kReadResponseOnly, 4);
  EXPECT_TRUE(port.done.empty());
  EXPECT_EQ(port.failures, 0);
  EXPECT_EQ(port.sent.size(), sent);
  ack(0xffffff);
  ASSERT_EQ(port.done.size(), 2u);
  EXPECT_EQ(port.done[1], std::make_pair(2, IBV_WC_SUCCESS));
}

TEST_F(RequesterTest, AReadCompletesOnlyWithItsLastResponseAndIgnoresDuplicates) {
  req.issue(1, RequestKind::kRead, 3, now, limits, port);  // 0xfffffe .. 0
  req.issue(2, RequestKind::kMessage, 1, now, limits, port);
  ack(1);  // cumulative ACKs do not complete a READ, nor what follows it
  EXPECT_TRUE(port.done.empty());
  read_response(host::kReadResponseFirst, 0xfffffe);
  read_response(host::kReadResponseFirst, 0xfffffe);  // duplicate: not placed again
  read_response(host::kReadResponseLast, 0);          // out of order: ignored
  read_response(host::kReadResponseMiddle, 0xffffff);
  EXPECT_EQ(port.read_index, (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(port.done.empty());
  read_response(host::kReadResponseLast, 0);
  ASSERT_EQ(port.done.size(), 1u);
  EXPECT_EQ(port.done[0], std::make_pair(1, IBV_WC_SUCCESS));
  ack(1);
  EXPECT_EQ(port.done.size(), 2u);
}

TEST_F(RequesterTest, AnAtomicCompletesWithItsOwnAckAndTheOriginalValue) {
  req.issue(7, RequestKind::kAtomic, 1, now, limits, port);
  ack(0xfffffe);  // a plain ACK is not the atomic's answer
  EXPECT_TRUE(port.done.empty());
  ack(0xfffffe, host::aeth_ack(), host::kAtomicAcknowledge, 41);
  ASSERT_EQ(port.done.size(), 1u);
  EXPECT_EQ(port.atomic, 41u);
}

TEST_F(RequesterTest, AResultThatCannotBePlacedFailsTheQpWithLocalProtectionError) {
  port.refuse_placement = true;
  req.issue(1, RequestKind::kRead, 1, now, limits, port);
  read_response(host::kReadResponseOnly, 0xfffffe);
  ASSERT_EQ(port.done.size(), 1u);
  EXPECT_EQ(port.done[0].second, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(port.failures, 1);
}

TEST_F(RequesterTest, NakCodesCompleteTheOldestWithTheStatusIbtaNames) {
  const std::pair<host::NakCode, ibv_wc_status> cases[] = {
      {host::kNakInvalidRequest, IBV_WC_REM_INV_REQ_ERR},
      {host::kNakRemoteAccess, IBV_WC_REM_ACCESS_ERR},
      {host::kNakRemoteOperational, IBV_WC_REM_OP_ERR}};
  for (const auto& [code, status] : cases) {
    Recorder p;
    Requester<int> r(5);
    r.issue(1, RequestKind::kMessage, 1, now, limits, p);
    r.issue(2, RequestKind::kMessage, 1, now, limits, p);
    r.on_response(host::kAcknowledge, 5, true, host::aeth_nak(code), 0, nullptr, 0, now, limits, p);
    ASSERT_EQ(p.done.size(), 1u);
    EXPECT_EQ(p.done[0], std::make_pair(1, status));
    EXPECT_EQ(p.failures, 1);
    EXPECT_TRUE(r.flush(p));  // the rest is flushed once the QP is in ERR
    EXPECT_EQ(p.done[1], std::make_pair(2, IBV_WC_WR_FLUSH_ERR));
  }
}

TEST_F(RequesterTest, ASequenceNakResendsTheWholeWindow) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  req.issue(2, RequestKind::kMessage, 1, now, limits, port);
  port.sent.clear();
  ack(0xfffffe, host::aeth_nak(host::kNakPsnSequence));
  EXPECT_EQ(port.sent.size(), 2u);
  EXPECT_TRUE(port.done.empty());
}

TEST_F(RequesterTest, RetryExceededOnlyAfterRetryCountTimeouts) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  const uint64_t timeout = ack_timeout_ns(limits.timeout);
  for (int i = 0; i < limits.retry_cnt; ++i) {
    EXPECT_FALSE(req.tick(req.deadline() - 1, limits, port));  // not yet
    EXPECT_EQ(req.deadline(), now + timeout * (i + 1));
    EXPECT_TRUE(req.tick(req.deadline(), limits, port));  // retransmitted
    EXPECT_TRUE(port.done.empty());
  }
  EXPECT_EQ(port.sent.size(), 1u + limits.retry_cnt);
  EXPECT_TRUE(req.tick(req.deadline(), limits, port));
  ASSERT_EQ(port.done.size(), 1u);
  EXPECT_EQ(port.done[0].second, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(port.failures, 1);
}

// A local ACK timeout of 0 is infinite (IBTA 9.7.6.1.3): the request goes again every
// 100 ms for as long as nobody answers, and never fails, whatever retry_cnt says.
TEST_F(RequesterTest, AnInfiniteAckTimeoutSendsAgainButNeverFails) {
  limits.timeout = 0;
  limits.retry_cnt = 1;
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  for (int i = 0; i < 300; ++i) {  // past retry_cnt, and past any 8-bit count of attempts
    EXPECT_EQ(req.deadline(), now + (i + 1) * ack_timeout_ns(0));
    EXPECT_TRUE(req.tick(req.deadline(), limits, port));
  }
  EXPECT_TRUE(port.done.empty());
  EXPECT_EQ(port.failures, 0);
  EXPECT_EQ(port.sent.size(), 301u);
}

// A message the link takes in several goes: the ACK timer counts from its last packet sent,
// not from when it was issued, and an idle window ignores the call.
TEST_F(RequesterTest, TheAckTimerRunsFromTheLastPacketTransmitted) {
  req.transmitted(now + 5, limits);
  EXPECT_EQ(req.deadline(), 0u);
  req.issue(1, RequestKind::kMessage, 64, now, limits, port);
  const uint64_t timeout = ack_timeout_ns(limits.timeout);
  EXPECT_EQ(req.deadline(), now + timeout);
  req.transmitted(now + timeout - 1, limits);  // more of it left just before the timeout
  EXPECT_FALSE(req.tick(now + timeout, limits, port));
  EXPECT_EQ(req.deadline(), now + 2 * timeout - 1);
  req.transmitted(now + 1, limits);  // an earlier time never brings the deadline forward
  EXPECT_EQ(req.deadline(), now + 2 * timeout - 1);
  EXPECT_TRUE(req.tick(req.deadline(), limits, port));  // then it times out as ever
  EXPECT_EQ(port.sent.size(), 2u);
}

TEST_F(RequesterTest, ProgressRestartsTheRetryCount) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  req.issue(2, RequestKind::kMessage, 1, now, limits, port);
  for (int i = 0; i < limits.retry_cnt; ++i) req.tick(req.deadline(), limits, port);
  now = req.deadline();
  ack(0xfffffe);  // message 1 done: the count starts again for message 2
  for (int i = 0; i < limits.retry_cnt; ++i) req.tick(req.deadline(), limits, port);
  EXPECT_EQ(port.done.size(), 1u);
  EXPECT_EQ(port.failures, 0);
}

TEST_F(RequesterTest, RnrWaitsTheNakTimerProbesWithTheOldestThenSendsTheRest) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  req.issue(2, RequestKind::kMessage, 1, now, limits, port);
  port.sent.clear();
  ack(0xfffffe, host::aeth_rnr(3));  // 30 us
  EXPECT_TRUE(req.holding());
  EXPECT_EQ(req.deadline(), now + rnr_timer_ns(3));
  EXPECT_FALSE(req.tick(req.deadline() - 1, limits, port));
  EXPECT_TRUE(req.tick(req.deadline(), limits, port));
  ASSERT_EQ(port.sent.size(), 1u);  // the probe: the refused request only
  EXPECT_EQ(port.sent[0].first, 1);
  EXPECT_TRUE(req.holding());
  ack(0xfffffe);  // accepted: the rest follows
  EXPECT_EQ(port.sent.size(), 2u);
  EXPECT_EQ(port.sent[1].first, 2);
  EXPECT_FALSE(req.holding());
}

// A READ response that overtakes the ACK of the probe acknowledges the probe too: it is
// progress, so the probe ends and the rest of the window goes (it stayed held for ever).
TEST_F(RequesterTest, AReadResponseOvertakingTheProbesAckEndsTheProbe) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);  // 0xfffffe
  req.issue(2, RequestKind::kRead, 1, now, limits, port);     // 0xffffff
  req.issue(3, RequestKind::kMessage, 1, now, limits, port);  // 0
  ack(0xfffffe, host::aeth_rnr(1));
  req.tick(req.deadline(), limits, port);  // the probe
  port.sent.clear();
  read_response(host::kReadResponseOnly, 0xffffff);
  ASSERT_EQ(port.done.size(), 2u);
  EXPECT_FALSE(req.holding());
  ASSERT_EQ(port.sent.size(), 1u);  // the rest of the window
  EXPECT_EQ(port.sent[0].first, 3);
  ack(0);
  EXPECT_TRUE(req.idle());
  EXPECT_FALSE(req.holding());
}

// The refused request completes during the RNR wait (an earlier copy of it was taken after
// all): the wait ends and the rest of the window goes (it stayed held for ever).
TEST_F(RequesterTest, TheRefusedRequestCompletingEndsTheRnrWait) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  req.issue(2, RequestKind::kMessage, 1, now, limits, port);
  ack(0xfffffe, host::aeth_rnr(20));
  port.sent.clear();
  ack(0xfffffe);
  EXPECT_FALSE(req.holding());
  ASSERT_EQ(port.sent.size(), 1u);
  EXPECT_EQ(port.sent[0].first, 2);
  ack(0xffffff);
  EXPECT_TRUE(req.idle());
  EXPECT_FALSE(req.holding());
}

TEST_F(RequesterTest, RnrRetryRefusalsInARowFailWithRnrRetryExceeded) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  for (int i = 0; i < limits.rnr_retry; ++i) {
    ack(0xfffffe, host::aeth_rnr(1));
    now = req.deadline();
    req.tick(now, limits, port);
  }
  EXPECT_TRUE(port.done.empty());
  ack(0xfffffe, host::aeth_rnr(1));
  ASSERT_EQ(port.done.size(), 1u);
  EXPECT_EQ(port.done[0].second, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_EQ(port.rnr, limits.rnr_retry + 1);
}

TEST_F(RequesterTest, RnrRetrySevenRetriesForEverUnlessTheWatchdogIsolates) {
  limits.rnr_retry = kRnrRetryInfinite;
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  for (int i = 0; i < 100; ++i) {
    ack(0xfffffe, host::aeth_rnr(1));
    now = req.deadline();
    req.tick(now, limits, port);
  }
  EXPECT_TRUE(port.done.empty());
  limits.watchdog_ns = 500000;  // the QP has been refused for ~1 ms already
  ack(0xfffffe, host::aeth_rnr(1));
  ASSERT_EQ(port.done.size(), 1u);
  EXPECT_EQ(port.done[0].second, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_TRUE(port.isolated);
}

TEST_F(RequesterTest, NoMoreReadsAndAtomicsInFlightThanMaxRdAtomic) {
  EXPECT_TRUE(req.may_issue(RequestKind::kRead, limits));
  req.issue(1, RequestKind::kRead, 1, now, limits, port);
  req.issue(2, RequestKind::kAtomic, 1, now, limits, port);
  EXPECT_FALSE(req.may_issue(RequestKind::kRead, limits));
  EXPECT_FALSE(req.may_issue(RequestKind::kAtomic, limits));
  EXPECT_TRUE(req.may_issue(RequestKind::kMessage, limits));
  read_response(host::kReadResponseOnly, 0xfffffe);
  EXPECT_TRUE(req.may_issue(RequestKind::kRead, limits));
}

TEST_F(RequesterTest, AFullWindowAdmitsNothingUntilTheOldestIsAcknowledged) {
  Requester<int, 4> small(0);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(small.may_issue(RequestKind::kMessage, limits));
    ASSERT_TRUE(small.issue(i, RequestKind::kMessage, 1, now, limits, port));
  }
  EXPECT_FALSE(small.may_issue(RequestKind::kMessage, limits));
  port.sent.clear();
  EXPECT_FALSE(small.issue(4, RequestKind::kMessage, 1, now, limits, port));
  EXPECT_TRUE(port.sent.empty());  // refused whole: not sent, no PSN taken
  EXPECT_EQ(small.next_psn(), 4u);
  small.on_response(host::kAcknowledge, 0, true, host::aeth_ack(), 0, nullptr, 0, now, limits,
                    port);
  ASSERT_TRUE(small.may_issue(RequestKind::kMessage, limits));
  ASSERT_TRUE(small.issue(4, RequestKind::kMessage, 1, now, limits, port));
  EXPECT_EQ(port.sent.back(), std::make_pair(4, 4u));
}

TEST_F(RequesterTest, ALostLinkReplaysTheWindowWhenItMayReconnectNotAtTheTimeout) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  port.sent.clear();
  EXPECT_TRUE(req.link_lost(now + 5000));
  EXPECT_EQ(req.deadline(), now + 5000);
  EXPECT_FALSE(req.tick(now + 4999, limits, port));
  EXPECT_TRUE(req.tick(now + 5000, limits, port));
  EXPECT_EQ(port.sent.size(), 1u);
  Requester<int> empty(0);
  EXPECT_FALSE(empty.link_lost(now));
}

// A peer router that restarted dials us first: the link is back before the backoff's time.
TEST_F(RequesterTest, AWindowWaitingForTheLinkGoesAgainAsSoonAsItIsBack) {
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  port.sent.clear();
  EXPECT_FALSE(req.link_back(now)) << "it was not waiting for the link";
  ASSERT_TRUE(req.link_lost(now + 50000));
  EXPECT_TRUE(req.link_back(now + 10));
  EXPECT_EQ(req.deadline(), now + 10);
  EXPECT_TRUE(req.tick(now + 10, limits, port));
  EXPECT_EQ(port.sent.size(), 1u);
  Requester<int> empty(0);
  EXPECT_FALSE(empty.link_back(now));
}

TEST_F(RequesterTest, UnreliableRequestsCompleteAtOnceWithTheirOwnPsns) {
  req.issue_unreliable(1, 3, port);
  req.issue_unreliable(2, 1, port);
  EXPECT_TRUE(req.idle());
  EXPECT_EQ(port.done.size(), 2u);
  EXPECT_EQ(port.sent[1].second, 1u);  // 0xfffffe + 3 wraps to 1
  EXPECT_EQ(req.deadline(), 0u);
}

// One the link took only part of is the owner's to complete once the rest went: its buffer
// is the application's again only then.
TEST_F(RequesterTest, AnUnreliableRequestTheLinkTookOnlyPartOfIsNotCompleted) {
  port.link_full = true;
  req.issue_unreliable(1, 3, port);
  EXPECT_TRUE(port.done.empty());
  EXPECT_EQ(port.sent.size(), 1u);
  EXPECT_TRUE(req.idle());
  EXPECT_EQ(req.next_psn(), 1u);  // its PSNs are taken all the same
}

TEST_F(RequesterTest, AbandoningTheOldestReportsWhetherAnythingWasOutstanding) {
  EXPECT_FALSE(req.abandon_oldest(IBV_WC_RETRY_EXC_ERR, port));
  req.issue(1, RequestKind::kMessage, 1, now, limits, port);
  EXPECT_TRUE(req.abandon_oldest(IBV_WC_RETRY_EXC_ERR, port));
  EXPECT_EQ(port.done[0], std::make_pair(1, IBV_WC_RETRY_EXC_ERR));
}

// Quiescent (nothing outstanding, no wait pending) is when an owner may keep next_psn()
// alone: a requester made from it goes on with the same PSNs.
TEST_F(RequesterTest, OnlyAQuiescentRequesterIsContinuedFromItsNextPsn) {
  EXPECT_TRUE(req.quiescent());
  req.issue(1, RequestKind::kMessage, 2, now, limits, port);
  EXPECT_FALSE(req.quiescent());
  ack(0xffffff);
  EXPECT_TRUE(req.quiescent());
  EXPECT_FALSE(req.link_lost(now));  // nothing to replay: still quiescent
  EXPECT_TRUE(req.quiescent());
  Requester<int> continued(req.next_psn());
  continued.issue(2, RequestKind::kMessage, 1, now, limits, port);
  EXPECT_EQ(port.sent.back(), std::make_pair(2, 0u));  // 0xfffffe + 2 wraps to 0
  // An RNR wait is not quiescent.
  continued.on_response(host::kAcknowledge, 0, true, host::aeth_rnr(3), 0, nullptr, 0, now, limits,
                        port);
  EXPECT_FALSE(continued.quiescent());
}

}  // namespace
}  // namespace wharf::rc
