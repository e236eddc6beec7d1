// The IBTA modify_qp transition table as router/qp_state.h encodes it.
#include <errno.h>
#include <gtest/gtest.h>

#include "router/qp_state.h"

namespace wharf::router {
namespace {

constexpr uint32_t S = IBV_QP_STATE;
constexpr uint32_t kRcInit = S | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
constexpr uint32_t kUdInit = S | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
constexpr uint32_t kRcRtr = S | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
constexpr uint32_t kUcRtr = S | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
constexpr uint32_t kRcRts = S | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

struct Case {
  uint32_t type;
  uint32_t cur, next;
  uint32_t mask;
  int expect;
};

template <size_t N>
void expect_all(const Case (&cases)[N]) {
  for (const Case& c : cases) {
    EXPECT_EQ(check_qp_transition(c.type, c.cur, c.next, c.mask), c.expect)
        << "type " << c.type << " " << c.cur << "->" << c.next << " mask " << std::hex << c.mask;
  }
}

TEST(QpStateTest, TransitionTableMatchesIbta) {
  const Case cases[] = {
      {IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit, 0},
      {IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit & ~IBV_QP_ACCESS_FLAGS, EINVAL},
      {IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit | IBV_QP_QKEY, EINVAL},
      {IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, kUdInit, 0},
      {IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit, EINVAL},
      {IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_RTR, kRcRtr, EINVAL},
      {IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_RTS, kRcRts, EINVAL},
      {IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_INIT, IBV_QP_ACCESS_FLAGS, 0},
      {IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr, 0},
      {IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr & ~IBV_QP_MIN_RNR_TIMER, EINVAL},
      {IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, kUcRtr, 0},
      {IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, kUcRtr | IBV_QP_MIN_RNR_TIMER, EINVAL},
      {IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTR, S, 0},
      {IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTR, S | IBV_QP_AV, EINVAL},
      {IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts, 0},
      {IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts & ~IBV_QP_RETRY_CNT, EINVAL},
      {IBV_QPT_UC, IBV_QPS_RTR, IBV_QPS_RTS, S | IBV_QP_SQ_PSN, 0},
      {IBV_QPT_UD, IBV_QPS_RTR, IBV_QPS_RTS, S | IBV_QP_SQ_PSN | IBV_QP_QKEY, 0},
      {IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_MIN_RNR_TIMER, 0},
      {IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_DEST_QPN, EINVAL},
      {IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_SQD, S, 0},
      {IBV_QPT_RC, IBV_QPS_SQD, IBV_QPS_RTS, S, 0},
      {IBV_QPT_RC, IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_TIMEOUT, 0},
      {IBV_QPT_RC, IBV_QPS_SQE, IBV_QPS_RTS, S, EINVAL},  // RC has no SQE exit
      {IBV_QPT_UC, IBV_QPS_SQE, IBV_QPS_RTS, S, 0},
      {IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_ERR, S, 0},
      {IBV_QPT_RC, IBV_QPS_ERR, IBV_QPS_RESET, S, 0},
      {IBV_QPT_RC, IBV_QPS_ERR, IBV_QPS_RTS, S, EINVAL},
      {IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_ERR, S | IBV_QP_QKEY, EINVAL},  // no attrs to ERR
      {99, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit, EINVAL},
      {IBV_QPT_RC, 42, IBV_QPS_INIT, kRcInit, EINVAL},
  };
  expect_all(cases);
}

// XRC as the kernel's table has it: an initiator requests like RC without responder
// attributes; a target responds like RC and needs only a timeout and a PSN for RTS.
TEST(QpStateTest, XrcInitiatorsRequestAndTargetsRespond) {
  constexpr uint32_t kIni = IBV_QPT_XRC_SEND, kTgt = IBV_QPT_XRC_RECV;
  const Case cases[] = {
      {kIni, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit, 0},
      {kTgt, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit, 0},
      {kIni, IBV_QPS_INIT, IBV_QPS_RTR, kUcRtr, 0},
      {kIni, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr, EINVAL},  // no responder resources
      {kTgt, IBV_QPS_INIT, IBV_QPS_RTR, kRcRtr, 0},
      {kTgt, IBV_QPS_INIT, IBV_QPS_RTR, kUcRtr, EINVAL},
      {kIni, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts, 0},
      {kIni, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts | IBV_QP_MIN_RNR_TIMER, EINVAL},
      {kTgt, IBV_QPS_RTR, IBV_QPS_RTS, S | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT, 0},
      {kTgt, IBV_QPS_RTR, IBV_QPS_RTS, kRcRts, EINVAL},  // it sends no requests to retry
      {kTgt, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_MIN_RNR_TIMER, 0},
      {kIni, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_MIN_RNR_TIMER, EINVAL},
      {kIni, IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_RETRY_CNT, 0},
      {kTgt, IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_RETRY_CNT, EINVAL},
      {kTgt, IBV_QPS_SQD, IBV_QPS_SQD, IBV_QP_MAX_DEST_RD_ATOMIC, 0},
      {kIni, IBV_QPS_SQE, IBV_QPS_RTS, S, EINVAL},
  };
  expect_all(cases);
}

// RAW_PACKET as the kernel's table has it: a port into INIT, then nothing but a rate limit.
TEST(QpStateTest, RawPacketQpsNeedOnlyAPort) {
  constexpr uint32_t kRaw = IBV_QPT_RAW_PACKET;
  const Case cases[] = {
      {kRaw, IBV_QPS_RESET, IBV_QPS_INIT, S | IBV_QP_PORT, 0},
      {kRaw, IBV_QPS_RESET, IBV_QPS_INIT, S, EINVAL},
      {kRaw, IBV_QPS_RESET, IBV_QPS_INIT, kRcInit, EINVAL},  // no P_Key or access flags
      {kRaw, IBV_QPS_INIT, IBV_QPS_RTR, S, 0},
      {kRaw, IBV_QPS_INIT, IBV_QPS_RTR, S | IBV_QP_QKEY, EINVAL},
      {kRaw, IBV_QPS_RTR, IBV_QPS_RTS, S, 0},
      {kRaw, IBV_QPS_RTS, IBV_QPS_RTS, S | IBV_QP_RATE_LIMIT, 0},
      {kRaw, IBV_QPS_RTS, IBV_QPS_SQD, S, EINVAL},
      {kRaw, IBV_QPS_RTS, IBV_QPS_ERR, S, 0},
  };
  expect_all(cases);
}

}  // namespace
}  // namespace wharf::router
