// Tests for router/scheduler.h: which QPs a data-path pass looks at, in what order, and
// when their work records go back.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "router/router.h"
#include "router/scheduler.h"
#include "router/session.h"

namespace wharf::router {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : qps_(4) {
    for (Qp& qp : qps_) qp.send_cq = &cq_;
  }
  // The QPs one pass looks at, in order; each "works" if in `working`.
  std::vector<Qp*> pass(const std::vector<Qp*>& working = {},
                        const std::vector<Qp*>& still_busy = {}) {
    std::vector<Qp*> seen;
    sched_.pass(
        [&](Qp* qp) {
          seen.push_back(qp);
          return std::find(working.begin(), working.end(), qp) != working.end();
        },
        [&](Qp* qp) {
          return std::find(still_busy.begin(), still_busy.end(), qp) != still_busy.end();
        });
    return seen;
  }
  Cq cq_;
  std::vector<Qp> qps_;
  Scheduler sched_;
};

TEST_F(SchedulerTest, AnActivatedQpIsLookedAtOnceThenOnlyWhileItWorks) {
  Qp* a = &qps_[0];
  sched_.activate(a);
  sched_.activate(a);  // twice: listed once
  EXPECT_EQ(sched_.size(), 1u);
  EXPECT_TRUE(a->active);
  // A pass that did something for it keeps it for the next; one that did nothing lets it go.
  EXPECT_EQ(pass({a}), std::vector<Qp*>{a});
  EXPECT_EQ(pass(), std::vector<Qp*>{a});
  EXPECT_TRUE(sched_.empty());
  EXPECT_FALSE(a->busy);
  EXPECT_TRUE(a->active);  // still served: its library's next post brings it back
  EXPECT_EQ(pass(), std::vector<Qp*>{});
}

TEST_F(SchedulerTest, AQpWithWorkOfItsOwnStays) {
  Qp* a = &qps_[0];
  sched_.activate(a);
  EXPECT_EQ(pass({}, {a}), std::vector<Qp*>{a});
  EXPECT_EQ(pass({}, {a}), std::vector<Qp*>{a});
  EXPECT_EQ(sched_.size(), 1u);
  pass();
  EXPECT_TRUE(sched_.empty());
}

TEST_F(SchedulerTest, EachPassStartsOneQpFurtherOn) {
  for (Qp& qp : qps_) sched_.activate(&qp);
  Qp *a = &qps_[0], *b = &qps_[1], *c = &qps_[2], *d = &qps_[3];
  const std::vector<Qp*> all{a, b, c, d};
  EXPECT_EQ(pass(all), (std::vector<Qp*>{a, b, c, d}));
  EXPECT_EQ(pass(all), (std::vector<Qp*>{b, c, d, a}));
  EXPECT_EQ(pass(all), (std::vector<Qp*>{c, d, a, b}));
}

TEST_F(SchedulerTest, APassResumesAfterTheLastQpThatWorked) {
  // Four QPs share a host link with room for two a pass: those that found no room go first
  // next time, so each gets its turn every other pass.
  for (Qp& qp : qps_) sched_.activate(&qp);
  Qp *a = &qps_[0], *b = &qps_[1], *c = &qps_[2], *d = &qps_[3];
  const std::vector<Qp*> all{a, b, c, d};
  EXPECT_EQ(pass({a, b}, all), (std::vector<Qp*>{a, b, c, d}));
  EXPECT_EQ(pass({c, d}, all), (std::vector<Qp*>{c, d, a, b}));
  EXPECT_EQ(pass({a, b}, all), (std::vector<Qp*>{a, b, c, d}));
  // Only the first worked: the next pass starts with the second.
  EXPECT_EQ(pass({c}, all), (std::vector<Qp*>{c, d, a, b}));
  EXPECT_EQ(pass({}, all), (std::vector<Qp*>{d, a, b, c}));  // none worked: one further on
}

TEST_F(SchedulerTest, ThousandsOfQpsSharingALinkWaitAtMostAFewPasses) {
  // 5,000 QPs, room for 100 a pass: every QP is served within 50 passes of its last turn
  // (starting one further on each pass, the last ones waited about 4,900).
  std::vector<Qp> many(5000);
  for (Qp& qp : many) {
    qp.send_cq = &cq_;
    sched_.activate(&qp);
  }
  std::vector<int> last(many.size(), -1);
  int worst = 0;
  for (int p = 0; p < 500; ++p) {
    int room = 100;
    sched_.pass(
        [&](Qp* qp) {
          if (room == 0) return false;
          --room;
          const size_t i = static_cast<size_t>(qp - many.data());
          if (last[i] >= 0) worst = std::max(worst, p - last[i]);
          last[i] = p;
          return true;
        },
        [](Qp*) { return true; });
  }
  EXPECT_LE(worst, 50);
  EXPECT_EQ(std::count(last.begin(), last.end(), -1), 0);
  sched_.clear();
}

TEST_F(SchedulerTest, AQpActivatedDuringAPassIsLookedAtInThatPass) {
  Qp *a = &qps_[0], *b = &qps_[1];
  sched_.activate(a);
  std::vector<Qp*> seen;
  sched_.pass(
      [&](Qp* qp) {
        seen.push_back(qp);
        if (qp == a) sched_.activate(b);  // a's work reached its peer b
        return false;
      },
      [](Qp*) { return false; });
  EXPECT_EQ(seen, (std::vector<Qp*>{a, b}));
  // b's look came after its activation and found nothing to do: both leave.
  EXPECT_TRUE(sched_.empty());
  EXPECT_FALSE(b->busy);
  EXPECT_TRUE(b->active);
}

TEST_F(SchedulerTest, AWorkRecordGoesBackWhenItsQpLeaves) {
  Qp *a = &qps_[0], *b = &qps_[1];
  sched_.activate(a);
  sched_.activate(b);
  sched_.work(a).copied_bytes = 10;
  sched_.work(b).rnr_attempts = 1;
  EXPECT_EQ(sched_.qps_with_work(), 2u);
  EXPECT_EQ(&sched_.work(a), a->work_under_way);  // one record per QP
  pass({}, {b});
  pass({}, {b});  // a leaves: not woken, no work of its own
  EXPECT_EQ(a->work_under_way, nullptr);
  EXPECT_EQ(sched_.qps_with_work(), 1u);
  sched_.deactivate(b);
  EXPECT_FALSE(b->active);
  EXPECT_EQ(b->work_under_way, nullptr);
  EXPECT_EQ(sched_.qps_with_work(), 0u);
  EXPECT_TRUE(sched_.empty());
}

TEST_F(SchedulerTest, AQpWithoutASendCqIsNeverLookedAt) {
  Qp target;  // an XRC target: no queues of its own
  sched_.activate(&target);
  EXPECT_TRUE(sched_.empty());
  EXPECT_FALSE(target.active);
}

TEST_F(SchedulerTest, LongCopiesGoInSmallerPartsWhileShortMessagesRun) {
  const uint64_t t = 5'000'000'000;
  EXPECT_EQ(sched_.copy_part(t), Scheduler::kCopyPart);
  sched_.saw_short_work(t);
  EXPECT_EQ(sched_.copy_part(t + 1), Scheduler::kCopyPartShared);
  EXPECT_EQ(sched_.copy_part(t + Scheduler::kShortWorkNs), Scheduler::kCopyPart);
}

TEST_F(SchedulerTest, ClearingGivesEveryRecordBack) {
  for (Qp& qp : qps_) {
    sched_.activate(&qp);
    sched_.work(&qp).paced_until_ns = 1;
  }
  sched_.clear();
  EXPECT_EQ(sched_.qps_with_work(), 0u);
  for (Qp& qp : qps_) EXPECT_FALSE(qp.busy);
}

// A QP its container's rate limit holds back waits until the bucket has refilled, and that
// wait is counted as the container's throttled time
// (wharf_container_ratelimit_throttled_seconds_total).
TEST(SchedulerRateTest, TheTimeARateLimitHoldsWorkBackIsCountedForItsContainer) {
  RouterConfig cfg;
  cfg.socket_path = "/nonexistent/wharf-scheduler-test.sock";  // never started
  Router router(cfg);
  Container c;
  Session session(&router, UniqueFd(), getpid(), 0, &c);
  Qp qp;
  qp.owner = &session;
  constexpr uint64_t kNow = 1'000'000'000;
  c.rate.configure(8'000'000, 1000, kNow);  // 1 MB/s, 1000 bytes deep: a byte per us
  Scheduler sched;
  // A full bucket lets a message through and goes into debt for what it lacked.
  EXPECT_TRUE(sched.admit(&qp, 2000, kNow));
  EXPECT_EQ(c.throttled_ns, 0u);
  EXPECT_FALSE(sched.admit(&qp, 1000, kNow));
  const uint64_t until = qp.work().paced_until_ns;
  EXPECT_GT(until, kNow);
  EXPECT_EQ(c.throttled_ns, until - kNow);
  EXPECT_TRUE(sched.admit(&qp, 1000, until)) << "refilled by then";
  EXPECT_EQ(c.throttled_ns, until - kNow);
}

}  // namespace
}  // namespace wharf::router
