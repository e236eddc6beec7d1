// The rdma_cm transitions a QP's region keeps for its restore (proto/qp_cm_step_log.h): where
// the library's replay puts them among its own ibv_modify_qp calls, and what a full, reset or
// garbled log does.
#include <errno.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <vector>

#include "proto/qp_cm_step_log.h"

namespace wharf::proto {
namespace {

// A request or step told apart by its rq_psn.
ModifyQpReq own(uint32_t tag) {
  ModifyQpReq r;
  r.qp = 5;
  r.attr_mask = IBV_QP_STATE;
  r.attr.rq_psn = tag;
  return r;
}
QpStep step(uint32_t tag) {
  QpStep s;
  s.attr_mask = IBV_QP_STATE | IBV_QP_RQ_PSN;
  s.attr.rq_psn = tag;
  return s;
}
std::vector<uint32_t> tags(const std::vector<ModifyQpReq>& l) {
  std::vector<uint32_t> t;
  for (const ModifyQpReq& r : l) t.push_back(r.attr.rq_psn);
  return t;
}

TEST(QpCmStepLogTest, StepsGoBackWhereTheRouterAppliedThemAndTheLogEmpties) {
  shm::QpCmSteps log{};
  note_cm_step(&log, step(100));         // before any of the owner's own
  note_owner_modification(&log, false);  // 1
  note_owner_modification(&log, false);  // 2
  note_cm_step(&log, step(101));
  note_cm_step(&log, step(102));
  note_owner_modification(&log, false);  // 3
  std::vector<ModifyQpReq> mine{own(1), own(2), own(3)};
  ASSERT_EQ(merge_cm_steps(&log, 5, &mine), 0);
  EXPECT_EQ(tags(mine), (std::vector<uint32_t>{100, 1, 2, 101, 102, 3}));
  EXPECT_EQ(mine[0].qp, 5u);
  EXPECT_EQ(mine[0].attr_mask, static_cast<uint32_t>(IBV_QP_STATE | IBV_QP_RQ_PSN));
  // Emptied: a second restart finds the steps in the library's list only.
  EXPECT_EQ(log.count, 0u);
  EXPECT_EQ(log.modifications, 0u);
  ASSERT_EQ(merge_cm_steps(&log, 5, &mine), 0);
  EXPECT_EQ(mine.size(), 6u);
}

// A step the router applied after a modification whose reply the library never had (the
// router died first) goes after everything the library kept.
TEST(QpCmStepLogTest, AStepAfterModificationsTheLibraryNeverHeardOfGoesLast) {
  shm::QpCmSteps log{};
  note_owner_modification(&log, false);
  note_owner_modification(&log, false);
  note_cm_step(&log, step(100));
  std::vector<ModifyQpReq> mine{own(1)};
  ASSERT_EQ(merge_cm_steps(&log, 5, &mine), 0);
  EXPECT_EQ(tags(mine), (std::vector<uint32_t>{1, 100}));
}

// The restored QP's calls are counted again from zero as the library replays them.
TEST(QpCmStepLogTest, ALogWithoutStepsIsEmptiedToo) {
  shm::QpCmSteps log{};
  note_owner_modification(&log, false);
  std::vector<ModifyQpReq> mine{own(1)};
  ASSERT_EQ(merge_cm_steps(&log, 5, &mine), 0);
  EXPECT_EQ(log.modifications, 0u);
  EXPECT_EQ(tags(mine), (std::vector<uint32_t>{1}));
}

TEST(QpCmStepLogTest, AResetForgetsTheStepsAsTheLibraryForgetsItsCalls) {
  shm::QpCmSteps log{};
  note_owner_modification(&log, false);
  note_cm_step(&log, step(100));
  note_owner_modification(&log, true);
  EXPECT_EQ(log.count, 0u);
  EXPECT_EQ(log.modifications, 0u);
  std::vector<ModifyQpReq> mine;
  ASSERT_EQ(merge_cm_steps(&log, 5, &mine), 0);
  EXPECT_TRUE(mine.empty());
}

// More steps than records: the QP cannot be restored as it was, and says so.
TEST(QpCmStepLogTest, AStepBeyondTheRecordsMakesTheRestoreFail) {
  shm::QpCmSteps log{};
  for (uint32_t i = 0; i < shm::kQpCmStepRecords; ++i) note_cm_step(&log, step(100 + i));
  EXPECT_EQ(log.lost, 0u);
  note_cm_step(&log, step(200));
  EXPECT_EQ(log.count, shm::kQpCmStepRecords);
  EXPECT_EQ(log.lost, 1u);
  std::vector<ModifyQpReq> mine{own(1)};
  EXPECT_EQ(merge_cm_steps(&log, 5, &mine), EOPNOTSUPP);
  EXPECT_EQ(tags(mine), (std::vector<uint32_t>{1}));
}

// The region is the application's memory: a count beyond the records is clamped, by the
// reader and by the writer (which then records nothing).
TEST(QpCmStepLogTest, AGarbledCountStaysWithinTheRecords) {
  shm::QpCmSteps log{};
  log.count = 1000;
  log.records[0].after_modifications = 7;
  note_cm_step(&log, step(100));
  EXPECT_EQ(log.count, 1000u);
  EXPECT_EQ(log.lost, 1u);
  log.lost = 0;
  std::vector<ModifyQpReq> mine{own(1)};
  ASSERT_EQ(merge_cm_steps(&log, 5, &mine), 0);
  EXPECT_EQ(mine.size(), 1u + shm::kQpCmStepRecords);
  EXPECT_EQ(mine.back().attr.rq_psn, 0u) << "the records the writer never filled are zero";
}

}  // namespace
}  // namespace wharf::proto
