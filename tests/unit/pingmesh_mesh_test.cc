// Tests for Pingmesh's bookkeeping (pingmesh/mesh.h): rounds, answers, losses, the window's
// percentiles and loss ratio, peer states and the histogram, with time passed in by hand and
// a fake link that records what was sent.
#include <gtest/gtest.h>

#include <vector>

#include "pingmesh/mesh.h"

namespace wharf::pingmesh {
namespace {

namespace pm = proto::pingmesh;

constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint64_t kUs = 1000;

// Three hosts; this one is host 1, so it probes hosts 0 and 2.
class MeshTest : public ::testing::Test {
 protected:
  // A round at `now`; the probes it sent, by peer.
  std::vector<std::pair<int, pm::Probe>> round(uint64_t now, bool link_takes = true) {
    std::vector<std::pair<int, pm::Probe>> sent;
    const bool made = mesh_.tick(now, [&](int peer, const pm::Probe& p) {
      sent.emplace_back(peer, p);
      return link_takes ? Mesh::Sent::kSent : Mesh::Sent::kLost;
    });
    EXPECT_TRUE(made);
    return sent;
  }
  // The answer to `probe`, as a peer that held it `held_ns` would send it.
  static pm::Probe reply(const pm::Probe& probe, uint64_t held_ns) {
    return pm::answer(probe, 5 * kSecond, 5 * kSecond + held_ns);  // the peer's own clock
  }
  // Rounds every second from `t`, each answered after rtt_us(i) by both peers; returns the
  // time of the next round.
  template <class RttUs>
  uint64_t answered_rounds(uint64_t t, int n, RttUs rtt_us) {
    for (int i = 0; i < n; ++i, t += kSecond)
      for (const auto& [peer, probe] : round(t))
        EXPECT_TRUE(mesh_.on_reply(peer, reply(probe, 0), t + rtt_us(i) * kUs));
    return t;
  }

  Mesh mesh_{3, 1, kSecond, kSecond};
};

TEST_F(MeshTest, EachRoundProbesEveryPeerButItselfOnceAnIntervalHasPassed) {
  EXPECT_FALSE(mesh_.tick(kSecond - 1, [](int, const pm::Probe&) { return Mesh::Sent::kSent; }));
  const auto first = round(kSecond);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].first, 0);
  EXPECT_EQ(first[1].first, 2);
  EXPECT_EQ(first[0].second.kind, pm::kProbe);
  EXPECT_EQ(first[0].second.sent_ns, kSecond);
  EXPECT_EQ(first[0].second.seq, first[1].second.seq);
  EXPECT_EQ(mesh_.next_round_ns(), 2 * kSecond);
  EXPECT_FALSE(
      mesh_.tick(2 * kSecond - 1, [](int, const pm::Probe&) { return Mesh::Sent::kSent; }));
  EXPECT_NE(round(2 * kSecond)[0].second.seq, first[0].second.seq);
  EXPECT_EQ(mesh_.summary(0).state, PeerState::kUnknown);
  EXPECT_EQ(mesh_.totals(0).probes, 2u);
}

TEST_F(MeshTest, AnAnswerGivesTheRoundTripLessThePeersDelayAndThePeerIsUp) {
  const auto sent = round(kSecond);
  ASSERT_TRUE(mesh_.on_reply(0, reply(sent[0].second, 7 * kUs), kSecond + 40 * kUs));
  const PeerSummary s = mesh_.summary(0);
  EXPECT_EQ(s.state, PeerState::kUp);
  EXPECT_EQ(s.answered, 1u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.rtt_p50_ns, 33 * kUs);
  EXPECT_EQ(s.rtt_p99_ns, 33 * kUs);
  EXPECT_EQ(s.peer_delay_p50_ns, 7 * kUs);
  EXPECT_EQ(mesh_.totals(0).rtt_sum_ns, 33 * kUs);
  EXPECT_EQ(mesh_.summary(2).state, PeerState::kUnknown) << "host 2 has not answered";
}

TEST_F(MeshTest, PercentilesAreTakenOverTheAnsweredProbesOfTheWindow) {
  answered_rounds(kSecond, 10,
                  [](int i) { return 10 * (10 - static_cast<uint64_t>(i)); });  // 100..10 us
  const PeerSummary s = mesh_.summary(2);
  EXPECT_EQ(s.answered, 10u);
  EXPECT_EQ(s.rtt_min_ns, 10 * kUs);
  EXPECT_EQ(s.rtt_p50_ns, 50 * kUs);  // nearest rank: the 5th of 10
  EXPECT_EQ(s.rtt_p99_ns, 100 * kUs);
  EXPECT_EQ(s.rtt_max_ns, 100 * kUs);
  EXPECT_EQ(s.loss, 0.0);
}

TEST_F(MeshTest, UnansweredProbesAreLostAtTheNextRoundAndThreeInARowMakeThePeerDown) {
  uint64_t t = answered_rounds(kSecond, 2, [](int) { return uint64_t{30}; });
  for (int i = 0; i < 3; ++i, t += kSecond) {
    const auto sent = round(t);
    // Host 2 keeps answering; host 0 is silent.
    ASSERT_TRUE(mesh_.on_reply(2, reply(sent[1].second, 0), t + 30 * kUs));
    EXPECT_EQ(mesh_.summary(0).state, PeerState::kUp) << "round " << i << ": not yet 3 lost";
  }
  round(t);  // ends the third unanswered probe
  PeerSummary s = mesh_.summary(0);
  EXPECT_EQ(s.state, PeerState::kDown);
  EXPECT_EQ(s.lost, 3u);
  EXPECT_EQ(s.answered, 2u);
  EXPECT_DOUBLE_EQ(s.loss, 3.0 / 5.0);
  EXPECT_EQ(s.rtt_p50_ns, 30 * kUs) << "the window's answered probes still give RTTs";
  EXPECT_EQ(mesh_.summary(2).state, PeerState::kUp);
  EXPECT_EQ(mesh_.summary(2).loss, 0.0);
  EXPECT_EQ(mesh_.totals(0).lost, 3u);

  // One answer brings it back up; the losses stay in the window.
  const auto sent = round(t + kSecond);
  ASSERT_TRUE(mesh_.on_reply(0, reply(sent[0].second, 0), t + kSecond + 30 * kUs));
  s = mesh_.summary(0);
  EXPECT_EQ(s.state, PeerState::kUp);
  EXPECT_EQ(s.lost, 4u) << "the probe of round t was lost too";
}

TEST_F(MeshTest, APeerThatNeverAnsweredIsUnknownUntilThreeAreLost) {
  uint64_t t = kSecond;
  for (int i = 0; i < 3; ++i, t += kSecond) round(t);
  EXPECT_EQ(mesh_.summary(0).state, PeerState::kUnknown);
  round(t);
  EXPECT_EQ(mesh_.summary(0).state, PeerState::kDown);
  EXPECT_DOUBLE_EQ(mesh_.summary(0).loss, 1.0);
}

TEST_F(MeshTest, AProbeTheLinkCannotTakeIsLostAtOnce) {
  round(kSecond, /*link_takes=*/false);
  EXPECT_EQ(mesh_.summary(0).lost, 1u);
  EXPECT_EQ(mesh_.totals(0).lost, 1u);
  EXPECT_EQ(mesh_.totals(0).probes, 1u);
}

TEST_F(MeshTest, APeerASendSkipsIsNotProbedAndHasNoFigures) {
  const auto skip_host_0 = [](int peer, const pm::Probe&) {
    return peer == 0 ? Mesh::Sent::kSkipped : Mesh::Sent::kSent;
  };
  ASSERT_TRUE(mesh_.tick(kSecond, skip_host_0));
  ASSERT_TRUE(mesh_.tick(2 * kSecond, skip_host_0));
  ASSERT_TRUE(mesh_.tick(3 * kSecond, skip_host_0));
  ASSERT_TRUE(mesh_.tick(4 * kSecond, skip_host_0));
  EXPECT_FALSE(mesh_.probed(0));
  EXPECT_EQ(mesh_.summary(0).state, PeerState::kUnknown) << "not down: never probed";
  EXPECT_EQ(mesh_.summary(0).lost, 0u);
  EXPECT_TRUE(mesh_.probed(2));
  EXPECT_EQ(mesh_.summary(2).state, PeerState::kDown) << "probed, never answered";
}

TEST_F(MeshTest, LateRepeatedForgedAndMisdirectedAnswersChangeNothing) {
  const auto first = round(kSecond);
  round(2 * kSecond);  // the first round's probes are lost now
  EXPECT_FALSE(mesh_.on_reply(0, reply(first[0].second, 0), 2 * kSecond + 10)) << "late";
  const auto sent = round(3 * kSecond);
  pm::Probe forged = reply(sent[0].second, 0);
  forged.sent_ns += 1;
  EXPECT_FALSE(mesh_.on_reply(0, forged, 3 * kSecond + 10)) << "not what we sent";
  pm::Probe other = reply(sent[0].second, 0);
  other.seq += kWindow;  // the same slot, another probe
  EXPECT_FALSE(mesh_.on_reply(0, other, 3 * kSecond + 10));
  EXPECT_FALSE(mesh_.on_reply(0, sent[0].second, 3 * kSecond + 10)) << "a probe, not an answer";
  EXPECT_FALSE(mesh_.on_reply(1, reply(sent[0].second, 0), 3 * kSecond + 10)) << "itself";
  EXPECT_FALSE(mesh_.on_reply(3, reply(sent[0].second, 0), 3 * kSecond + 10)) << "no such host";
  EXPECT_FALSE(mesh_.on_reply(-1, reply(sent[0].second, 0), 3 * kSecond + 10));
  EXPECT_FALSE(mesh_.on_reply(0, reply(sent[0].second, 0), 3 * kSecond - 1)) << "before it went";
  EXPECT_EQ(mesh_.totals(0).answered, 0u);

  EXPECT_TRUE(mesh_.on_reply(0, reply(sent[0].second, 0), 3 * kSecond + 10));
  EXPECT_FALSE(mesh_.on_reply(0, reply(sent[0].second, 0), 3 * kSecond + 20)) << "repeated";
  EXPECT_EQ(mesh_.totals(0).answered, 1u);
}

TEST_F(MeshTest, APeerClaimingToHaveHeldAProbeLongerThanItsRoundTripIsNotBelieved) {
  const auto sent = round(kSecond);
  ASSERT_TRUE(mesh_.on_reply(0, reply(sent[0].second, kSecond), kSecond + 40 * kUs));
  EXPECT_EQ(mesh_.summary(0).rtt_p50_ns, 0u);
  EXPECT_EQ(mesh_.summary(0).peer_delay_p50_ns, 40 * kUs);
  pm::Probe backwards = pm::answer(sent[1].second, 9 * kSecond, 8 * kSecond);
  ASSERT_TRUE(mesh_.on_reply(2, backwards, kSecond + 40 * kUs));
  EXPECT_EQ(mesh_.summary(2).rtt_p50_ns, 40 * kUs);
  EXPECT_EQ(mesh_.summary(2).peer_delay_p50_ns, 0u);
}

TEST_F(MeshTest, TheWindowSlidesButTheTotalsKeepEverything) {
  uint64_t t = kSecond;
  round(t);
  t += kSecond;  // that round's probes are lost at the next
  answered_rounds(t, static_cast<int>(kWindow), [](int) { return uint64_t{20}; });
  const PeerSummary s = mesh_.summary(0);
  EXPECT_EQ(s.lost, 0u) << "the loss left the window";
  EXPECT_EQ(s.answered, kWindow);
  EXPECT_EQ(mesh_.totals(0).lost, 1u);
  EXPECT_EQ(mesh_.totals(0).probes, kWindow + 1);
}

TEST_F(MeshTest, TheHistogramCountsEachRoundTripUnderItsBucket) {
  answered_rounds(kSecond, 3, [](int i) { return uint64_t(i == 0 ? 3 : i == 1 ? 30 : 5000000); });
  const PeerTotals& t = mesh_.totals(0);
  EXPECT_EQ(t.rtt_buckets[0], 1u);                   // 3 us <= 5 us
  EXPECT_EQ(t.rtt_buckets[3], 1u);                   // 30 us <= 50 us
  EXPECT_EQ(t.rtt_buckets[kRttBuckets.size()], 1u);  // 5 s: +Inf
  EXPECT_EQ(t.answered, 3u);
}

TEST_F(MeshTest, ARouterThatFellBehindProbesOnceAndResumesAnIntervalLater) {
  round(kSecond);
  round(10 * kSecond);
  EXPECT_EQ(mesh_.next_round_ns(), 11 * kSecond);
  EXPECT_EQ(mesh_.totals(0).probes, 2u);
}

TEST(ProbeWireTest, OnlyWholeProbesOfAKnownKindWithReservedZeroDecode) {
  pm::Probe p;
  p.seq = 7;
  p.sent_ns = 123;
  uint8_t b[pm::kProbeSize + 1] = {};
  ASSERT_EQ(proto::encode(p, b, sizeof(b)), pm::kProbeSize);
  pm::Probe out;
  EXPECT_TRUE(pm::decode_probe(b, pm::kProbeSize, &out));
  EXPECT_EQ(out.seq, 7u);
  EXPECT_EQ(out.sent_ns, 123u);
  EXPECT_FALSE(pm::decode_probe(b, pm::kProbeSize - 1, &out));
  EXPECT_FALSE(pm::decode_probe(b, pm::kProbeSize + 1, &out));
  b[2] = 1;  // reserved
  EXPECT_FALSE(pm::decode_probe(b, pm::kProbeSize, &out));
  b[2] = 0;
  b[0] = 3;  // kind
  EXPECT_FALSE(pm::decode_probe(b, pm::kProbeSize, &out));
}

}  // namespace
}  // namespace wharf::pingmesh
