// KeptRemoteStates (router/kept_remote_states.h): the host-to-host engine's per-QP state in a
// file that outlives the router process. A process "dies" here by dropping its object without
// releasing anything, as a SIGKILL leaves the file; the next one opens the same path.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "proto/host_wire.h"
#include "router/kept_remote_states.h"
#include "support/temp_dir.h"

namespace wharf::router {
namespace {

constexpr size_t kHosts = 3;

const KeptRemoteStates::FinishCompletions kNothingToFinish =
    [](const RemoteQpState::Unfinished& u) {
      EXPECT_FALSE(u.send.has_value());
      EXPECT_FALSE(u.receive.has_value());
    };

// A port that accepts everything it is asked to do.
struct AcceptingPort final : rc::RequesterPort<RemoteQpState::Work> {
  bool transmit(const rc::Request<RemoteQpState::Work>&) override { return true; }
  void complete(const rc::Request<RemoteQpState::Work>&, ibv_wc_status) override {}
  bool place_read(const rc::Request<RemoteQpState::Work>&, uint32_t, const uint8_t*,
                  uint32_t) override {
    return true;
  }
  bool place_atomic(const rc::Request<RemoteQpState::Work>&, uint64_t) override { return true; }
  void fail() override {}
  void rnr_refused(uint64_t, bool) override {}
};

class KeptRemoteStatesTest : public ::testing::Test {
 protected:
  std::unique_ptr<KeptRemoteStates> open(uint32_t fresh_incarnation) {
    auto kept = std::make_unique<KeptRemoteStates>();
    EXPECT_EQ(kept->open(path_, fresh_incarnation, kHosts), 0);
    return kept;
  }
  static ParkedRemoteQp parked(uint32_t next_psn, uint32_t epsn, uint32_t msn, int16_t host) {
    return ParkedRemoteQp{next_psn, epsn, msn, 0x77, host, true};
  }
  // What `kept` offers QP qpn: its active state's requester's next PSN, else its parked
  // form's; nullopt if nothing.
  struct Offer {
    bool active;
    uint32_t next_psn, epsn;
  };
  static std::optional<Offer> claim(KeptRemoteStates* kept, uint32_t qpn) {
    RemoteQpState* st = nullptr;
    ParkedRemoteQp p;
    if (!kept->claim_orphan(qpn, {}, kNothingToFinish, &st, &p)) return std::nullopt;
    if (st != nullptr) return Offer{true, st->requester.next_psn(), st->responder.epsn()};
    EXPECT_TRUE(p.parked);
    return Offer{false, p.next_psn, p.epsn};
  }

  // QP 5, active in a first process (requester at PSN 100, responder expecting 400) whose
  // responder `before` works on, continued by the next process (kept in next_): its state
  // there, or null if it was not continued active.
  RemoteQpState* continued(const std::function<void(rc::Responder*)>& before) {
    auto first = open(0x1001);
    RemoteQpState* st = first->take_active(5, RemoteQpState(100, 400));
    if (st == nullptr) return nullptr;
    before(&st->responder);
    first.reset();
    next_ = open(0x2002);
    RemoteQpState* go_on = nullptr;
    ParkedRemoteQp p;
    return next_->claim_orphan(5, {}, kNothingToFinish, &go_on, &p) ? go_on : nullptr;
  }

  test_support::TempDir dir_{"wharf-kept-states"};
  std::string path_ = dir_.path() + "/wharfd.sock.state";
  std::unique_ptr<KeptRemoteStates> next_;
};

TEST_F(KeptRemoteStatesTest, TheNextProcessKeepsTheIncarnationAndContinuesEachQp) {
  auto first = open(0x1001);
  EXPECT_TRUE(first->persistent());
  EXPECT_EQ(first->incarnation(), 0x1001u);
  // QP 5 active: three requests of 1, 2 and 1 packets sent from PSN 100, the first
  // acknowledged; its responder in the middle of a message that began at PSN 400.
  RemoteQpState* st = first->take_active(5, RemoteQpState(100, 400));
  ASSERT_NE(st, nullptr);
  AcceptingPort port;
  const rc::RequesterLimits limits{14, 7, 7, 16, 0};
  for (uint32_t packets : {1u, 2u, 1u})
    ASSERT_TRUE(st->requester.issue({}, rc::RequestKind::kMessage, packets, 0, limits, port));
  st->requester.on_response(proto::host::kAcknowledge, 100, true, proto::host::aeth_ack(), 0,
                            nullptr, 0, 0, limits, port);
  ASSERT_EQ(st->requester.window().size(), 2u);
  st->responder.begin_message(proto::host::kSendFirst, 400);
  st->responder.accept(400);
  st->responder.accept(401);
  st->requester_host = 2;
  // QP 9 parked.
  first->keep_parked(9, parked(7, 8, 3, 1));
  first.reset();  // killed: nothing released

  auto second = open(0x2002);
  EXPECT_EQ(second->incarnation(), 0x1001u) << "a router that kept its state is not new";
  EXPECT_EQ(second->orphans(), 2u);
  RemoteQpState* go_on = nullptr;
  ParkedRemoteQp p;
  ASSERT_TRUE(second->claim_orphan(5, {}, kNothingToFinish, &go_on, &p));
  ASSERT_NE(go_on, nullptr) << "an active QP goes on active";
  EXPECT_TRUE(second->holds(go_on));
  EXPECT_EQ(go_on->requester.next_psn(), 101u) << "from the oldest request not acknowledged";
  EXPECT_TRUE(go_on->requester.idle());
  EXPECT_EQ(go_on->responder.epsn(), 400u) << "from the start of the message in progress";
  EXPECT_FALSE(go_on->responder.in_message());
  EXPECT_EQ(go_on->requester_host, 2);
  EXPECT_FALSE(second->claim_orphan(5, {}, kNothingToFinish, &go_on, &p)) << "claimed once";
  ASSERT_TRUE(second->claim_orphan(9, {}, kNothingToFinish, &go_on, &p));
  EXPECT_EQ(go_on, nullptr) << "a parked QP goes on parked";
  EXPECT_EQ(p.next_psn, 7u);
  EXPECT_EQ(p.epsn, 8u);
  EXPECT_EQ(p.msn, 3u);
  EXPECT_EQ(p.peer_incarnation, 0x77u);
}

// An atomic the old process executed, whose answer the requester did not get, comes again as
// a duplicate: the new process answers it from the results it kept, never executing it twice.
TEST_F(KeptRemoteStatesTest, TheResultsOfExecutedAtomicsAreKept) {
  RemoteQpState* go_on = continued([](rc::Responder* r) {
    r->accept(400);
    r->end_message();
    r->remember_atomic(400, 0xfeed);
  });
  ASSERT_NE(go_on, nullptr);
  EXPECT_EQ(go_on->responder.epsn(), 401u);
  uint64_t orig = 0;
  ASSERT_TRUE(go_on->responder.recall_atomic(400, &orig));
  EXPECT_EQ(orig, 0xfeedu);
  EXPECT_FALSE(go_on->responder.quiescent()) << "it keeps them: never parked";
}

// An atomic the old process changed its target for but had not taken yet comes again as a
// new request: the new process finds the value it read, and does not change the target twice.
TEST_F(KeptRemoteStatesTest, TheIntentOfAnAtomicUnderWayIsKept) {
  RemoteQpState* go_on = continued([](rc::Responder* r) { r->atomic_intent()->note(400, 0xbeef); });
  ASSERT_NE(go_on, nullptr);
  EXPECT_EQ(go_on->responder.epsn(), 400u);
  uint64_t orig = 0;
  EXPECT_FALSE(go_on->responder.atomic_intent()->made_before(400, 0xbeef, &orig));
  ASSERT_TRUE(go_on->responder.atomic_intent()->made_before(400, 0xbef0, &orig));
  EXPECT_EQ(orig, 0xbeefu);
}

TEST_F(KeptRemoteStatesTest, AProcessKilledBeforeItsQpsWereRestoredStillLeavesThem) {
  auto first = open(0x1001);
  first->keep_parked(9, parked(7, 8, 3, 1));
  first.reset();
  open(0x2002).reset();  // killed again, nothing claimed
  auto third = open(0x3003);
  EXPECT_EQ(third->incarnation(), 0x1001u);
  EXPECT_TRUE(claim(third.get(), 9).has_value());
}

// The state of a QP whose oldest request's WQE left the send ring (its completion under
// way) and whose receive of a three-packet message left the receive queue: the continuation
// neither sends that request again nor places the message again, and the two completions
// are given to be finished; with the WQEs still in their rings, both go again.
class KeptCompletionsTest : public KeptRemoteStatesTest {
 protected:
  void SetUp() override {
    auto first = open(0x1001);
    RemoteQpState* st = first->take_active(5, RemoteQpState(100, 400));
    ASSERT_NE(st, nullptr);
    AcceptingPort port;
    const rc::RequesterLimits limits{14, 7, 7, 16, 0};
    uint32_t ring_index = 10;
    for (uint32_t packets : {2u, 1u}) {
      RemoteQpState::Work w;
      w.ring_index = ring_index++;
      ASSERT_TRUE(st->requester.issue(w, rc::RequestKind::kMessage, packets, 0, limits, port));
    }
    st->sending.ring_index = 10;  // the first's completion, recorded before its WQE left
    st->sending.post = true;
    st->sending.cqe.wr_id = 0x5e;
    st->responder.begin_message(proto::host::kSendFirst, 400);
    for (uint32_t psn : {400u, 401u}) st->responder.accept(psn);
    RemoteQpState::CompletionUnderWay& rec = st->receiving;
    rec.message_psn = 400;
    rec.end_psn = 402;
    rec.msn = st->responder.msn();
    rec.ring_index = 7;
    rec.post = true;
    rec.cqe.wr_id = 0x7e;
    rec.srq_record = srq_record_;
    first.reset();
    second_ = open(0x2002);
  }
  // Claims QP 5 with its rings' consumer indices at `tails`; what was given to finish.
  RemoteQpState::Unfinished claim_five(RemoteQpState::RingTails tails) {
    RemoteQpState::Unfinished given;
    RemoteQpState* st = nullptr;
    ParkedRemoteQp p;
    EXPECT_TRUE(second_->claim_orphan(
        5, tails, [&](const RemoteQpState::Unfinished& u) { given = u; }, &st, &p));
    EXPECT_NE(st, nullptr);
    go_on_ = st;
    return given;
  }
  std::unique_ptr<KeptRemoteStates> second_;
  RemoteQpState* go_on_ = nullptr;
  uint32_t srq_record_ = SrqRecords::kNone;  // the receive's, from an SRQ
};

TEST_F(KeptCompletionsTest, WorkThatLeftItsRingIsFinishedNotDoneAgain) {
  const RemoteQpState::Unfinished u = claim_five({11, 8});
  ASSERT_TRUE(u.send.has_value());
  EXPECT_EQ(u.send->cqe.wr_id, 0x5eu);
  ASSERT_TRUE(u.receive.has_value());
  EXPECT_EQ(u.receive->cqe.wr_id, 0x7eu);
  ASSERT_NE(go_on_, nullptr);
  EXPECT_EQ(go_on_->requester.next_psn(), 102u) << "from the request after it";
  EXPECT_EQ(go_on_->responder.epsn(), 403u) << "after the message";
  EXPECT_EQ(go_on_->responder.msn(), 1u);
}

TEST_F(KeptCompletionsTest, WorkStillInItsRingGoesAgain) {
  const RemoteQpState::Unfinished u = claim_five({10, 7});
  EXPECT_FALSE(u.send.has_value());
  EXPECT_FALSE(u.receive.has_value());
  ASSERT_NE(go_on_, nullptr);
  EXPECT_EQ(go_on_->requester.next_psn(), 100u);
  EXPECT_EQ(go_on_->responder.epsn(), 400u);
  EXPECT_EQ(go_on_->responder.msn(), 0u);
}

// The same receive from an SRQ (record 3 of its records): taken once the SRQ's records no
// longer keep it; one the new process took back, as this QP's held receive or the SRQ's
// next, was not (the message goes again into it).
class KeptSrqCompletionsTest : public KeptCompletionsTest {
 protected:
  void SetUp() override {
    srq_record_ = 3;
    KeptCompletionsTest::SetUp();
  }
  static constexpr uint32_t kNone = SrqRecords::kNone;
};

TEST_F(KeptSrqCompletionsTest, AReceiveTheSrqNoLongerKeepsIsFinishedNotTakenAgain) {
  const RemoteQpState::Unfinished u = claim_five({11, 0, kNone, 5});
  ASSERT_TRUE(u.receive.has_value());
  EXPECT_EQ(u.receive->cqe.wr_id, 0x7eu);
  ASSERT_NE(go_on_, nullptr);
  EXPECT_EQ(go_on_->responder.epsn(), 403u) << "after the message";
}

TEST_F(KeptSrqCompletionsTest, AReceiveTheQpStillHoldsGoesAgain) {
  const RemoteQpState::Unfinished u = claim_five({11, 0, 3, kNone});
  EXPECT_FALSE(u.receive.has_value());
  ASSERT_NE(go_on_, nullptr);
  EXPECT_EQ(go_on_->responder.epsn(), 400u);
}

TEST_F(KeptSrqCompletionsTest, AReceiveThatIsTheSrqsNextAgainGoesAgain) {
  const RemoteQpState::Unfinished u = claim_five({11, 0, kNone, 3});
  EXPECT_FALSE(u.receive.has_value());
  ASSERT_NE(go_on_, nullptr);
  EXPECT_EQ(go_on_->responder.epsn(), 400u);
}

// The completions are finished before the continuation is kept: a process killed while it
// finishes them leaves the old state, from which the next one finishes them again (and finds
// them in their CQs).
TEST_F(KeptCompletionsTest, AProcessKilledWhileFinishingLeavesTheOldState) {
  RemoteQpState* st = nullptr;
  ParkedRemoteQp p;
  std::unique_ptr<KeptRemoteStates> third;
  ASSERT_TRUE(second_->claim_orphan(
      5, {11, 8},
      [&](const RemoteQpState::Unfinished&) {
        third = open(0x3003);  // the process dies here; the next one reads the file
      },
      &st, &p));
  RemoteQpState::Unfinished again;
  RemoteQpState* go_on = nullptr;
  ASSERT_TRUE(third->claim_orphan(
      5, {11, 8}, [&](const RemoteQpState::Unfinished& u) { again = u; }, &go_on, &p));
  EXPECT_TRUE(again.send.has_value());
  EXPECT_TRUE(again.receive.has_value());
}

// A QP moving between active and parked is in two slots for an instant: the later one counts.
TEST_F(KeptRemoteStatesTest, AQpInTwoSlotsContinuesFromTheLaterOne) {
  auto first = open(0x1001);
  first->keep_parked(4, parked(10, 20, 1, -1));
  ASSERT_NE(first->take_active(4, RemoteQpState(parked(30, 40, 2, -1))), nullptr);  // unparking
  RemoteQpState* st = first->take_active(6, RemoteQpState(50, 60));
  ASSERT_NE(st, nullptr);
  first->keep_parked(6, parked(70, 80, 3, -1));  // parking: active slot not yet released
  first.reset();
  auto second = open(0x2002);
  const auto four = claim(second.get(), 4);
  ASSERT_TRUE(four.has_value());
  EXPECT_TRUE(four->active);
  EXPECT_EQ(four->next_psn, 30u);
  const auto six = claim(second.get(), 6);
  ASSERT_TRUE(six.has_value());
  EXPECT_FALSE(six->active);
  EXPECT_EQ(six->next_psn, 70u);
}

TEST_F(KeptRemoteStatesTest, ReleasedStatesAreNotContinued) {
  auto first = open(0x1001);
  RemoteQpState* st = first->take_active(5, RemoteQpState(1, 2));
  ASSERT_TRUE(first->holds(st));
  first->release_active(st);
  first->keep_parked(9, parked(7, 8, 3, 1));
  first->release_parked(9);
  first.reset();
  EXPECT_EQ(open(0x2002)->orphans(), 0u);
}

TEST_F(KeptRemoteStatesTest, AContinuationNamingAHostBeyondTheClusterIsDropped) {
  auto first = open(0x1001);
  first->keep_parked(9, parked(7, 8, 3, static_cast<int16_t>(kHosts)));
  first->keep_parked(10, parked(7, 8, 3, 0));
  first.reset();
  auto second = open(0x2002);
  EXPECT_FALSE(claim(second.get(), 9).has_value());
  EXPECT_TRUE(claim(second.get(), 10).has_value());
}

TEST_F(KeptRemoteStatesTest, ContinuationsNoQpClaimedAreForgottenAfterTheirTime) {
  auto first = open(0x1001);
  first->keep_parked(9, parked(7, 8, 3, 1));
  first.reset();
  auto second = open(0x2002);
  second->drop_stale_orphans(now_ns());
  EXPECT_EQ(second->orphans(), 1u) << "too early";
  second->drop_stale_orphans(now_ns() + KeptRemoteStates::kOrphanLifeNs);
  EXPECT_EQ(second->orphans(), 0u);
  second.reset();
  EXPECT_EQ(open(0x3003)->orphans(), 0u) << "forgotten in the file too";
}

// Anything but this layout's file, mode and owner starts afresh: a new incarnation, and the
// peers fail the QPs they had with the old one.
TEST_F(KeptRemoteStatesTest, AFileOfAnotherLayoutOrModeStartsAfresh) {
  auto first = open(0x1001);
  first->keep_parked(9, parked(7, 8, 3, 1));
  first.reset();
  ASSERT_EQ(chmod(path_.c_str(), 0644), 0);
  auto second = open(0x2002);
  EXPECT_EQ(second->incarnation(), 0x2002u) << "a file others may write is not trusted";
  EXPECT_EQ(second->orphans(), 0u);
  second.reset();

  {  // the right size, another magic
    const int fd = ::open(path_.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, "WHARFKS0", 8, 0), 8);
    close(fd);
  }
  EXPECT_EQ(open(0x3003)->incarnation(), 0x3003u);

  ASSERT_EQ(truncate(path_.c_str(), 4096), 0);  // another size
  EXPECT_EQ(open(0x4004)->incarnation(), 0x4004u);
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(KeptRemoteStatesTest, WithoutAPathNothingOutlivesTheProcess) {
  KeptRemoteStates kept;
  ASSERT_EQ(kept.open("", 0x1001, kHosts), 0);
  EXPECT_FALSE(kept.persistent());
  RemoteQpState* st = kept.take_active(5, RemoteQpState(1, 2));
  ASSERT_NE(st, nullptr);
  EXPECT_TRUE(kept.holds(st));
  kept.release_active(st);
  kept.trim();
  EXPECT_EQ(kept.take_active(6, RemoteQpState(3, 4))->requester.next_psn(), 3u)
      << "a trimmed slot is whole again";
}

}  // namespace
}  // namespace wharf::router
