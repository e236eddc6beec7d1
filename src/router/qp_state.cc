#include "router/qp_state.h"

#include <errno.h>

namespace wharf::router {
namespace {

struct MaskRule {
  uint32_t required;
  uint32_t optional;
};

constexpr uint32_t kAv = IBV_QP_AV;
constexpr uint32_t kAltPath = IBV_QP_ALT_PATH;
// Not in IBTA's table: an application's send rate limit (rdma-core's packet pacing). As mlx5
// takes it on the way into RTS and in RTS, every type may set it whenever the QP is or
// becomes RTS, and in SQD->SQD (where the other send-side attributes change).
constexpr uint32_t kRateLimit = IBV_QP_RATE_LIMIT;

// RTS->RTS and SQD->RTS: nothing required; path, access and timer changes allowed. `responds`:
// the QP answers reliable requests (RC, XRC target) and so has an RNR timer.
MaskRule resume_rts(bool connected, bool responds) {
  constexpr uint32_t kConnected =
      IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | kAltPath | IBV_QP_PATH_MIG_STATE | kRateLimit;
  if (responds) return {0, kConnected | IBV_QP_MIN_RNR_TIMER};
  if (connected) return {0, kConnected};
  return {0, IBV_QP_CUR_STATE | IBV_QP_QKEY | kRateLimit};
}

// Per-type (required, optional) masks of one transition. IBV_QP_STATE is handled by the caller.
// XRC follows the kernel's table: an initiator is an RC requester without a responder's
// attributes, a target an RC responder that sends only acknowledgements.
MaskRule rule(ibv_qp_type type, ibv_qp_state cur, ibv_qp_state next, bool* legal) {
  const bool rc = type == IBV_QPT_RC;
  const bool uc = type == IBV_QPT_UC;
  const bool ud = type == IBV_QPT_UD;
  const bool ini = type == IBV_QPT_XRC_SEND;
  const bool tgt = type == IBV_QPT_XRC_RECV;
  *legal = true;
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) return {0, 0};  // from any state
  // RAW_PACKET, as the kernel's table has it: a port to start with, nothing else but a rate.
  if (type == IBV_QPT_RAW_PACKET) {
    if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) return {IBV_QP_PORT, 0};
    if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) return {0, IBV_QP_PORT};
    if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) return {0, 0};
    if ((cur == IBV_QPS_RTR || cur == IBV_QPS_RTS) && next == IBV_QPS_RTS) return {0, kRateLimit};
    *legal = false;
    return {0, 0};
  }

  switch (cur) {
    case IBV_QPS_RESET:
      if (next != IBV_QPS_INIT) break;
      if (ud) return {IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, 0};
      return {IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0};
    case IBV_QPS_INIT:
      if (next == IBV_QPS_INIT) {
        if (ud) return {0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY};
        return {0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS};
      }
      if (next != IBV_QPS_RTR) break;
      if (rc || tgt)
        return {kAv | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                kAltPath | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX};
      if (uc || ini)
        return {kAv | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                kAltPath | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX};
      return {0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY};
    case IBV_QPS_RTR:
      if (next != IBV_QPS_RTS) break;
      if (rc || ini)
        return {IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                    IBV_QP_MAX_QP_RD_ATOMIC,
                IBV_QP_CUR_STATE | kAltPath | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE |
                    kRateLimit | (rc ? static_cast<uint32_t>(IBV_QP_MIN_RNR_TIMER) : 0)};
      if (tgt)
        return {IBV_QP_SQ_PSN | IBV_QP_TIMEOUT, IBV_QP_CUR_STATE | kAltPath | IBV_QP_ACCESS_FLAGS |
                                                    IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE};
      if (uc)
        return {IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | kAltPath | IBV_QP_ACCESS_FLAGS |
                                   IBV_QP_PATH_MIG_STATE | kRateLimit};
      return {IBV_QP_SQ_PSN, IBV_QP_CUR_STATE | IBV_QP_QKEY | kRateLimit};
    case IBV_QPS_RTS:
      if (next == IBV_QPS_RTS) return resume_rts(!ud, rc || tgt);
      if (next == IBV_QPS_SQD) return {0, IBV_QP_EN_SQD_ASYNC_NOTIFY};
      break;
    case IBV_QPS_SQD:
      if (next == IBV_QPS_RTS) return resume_rts(!ud, rc || tgt);
      if (next == IBV_QPS_SQD) {
        if (ini)
          return {0, kAv | kAltPath | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
                         IBV_QP_PATH_MIG_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                         IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC};
        if (tgt)
          return {0, kAv | kAltPath | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
                         IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE | IBV_QP_TIMEOUT |
                         IBV_QP_MAX_DEST_RD_ATOMIC};
        if (rc)
          return {0, kAv | kAltPath | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
                         IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE | IBV_QP_TIMEOUT |
                         IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
                         IBV_QP_MAX_DEST_RD_ATOMIC | kRateLimit};
        if (uc)
          return {0, kAv | kAltPath | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
                         IBV_QP_PATH_MIG_STATE | kRateLimit};
        return {0, IBV_QP_PKEY_INDEX | IBV_QP_QKEY | kRateLimit};
      }
      break;
    case IBV_QPS_SQE:
      // C10-...: only unreliable types have a send-queue-error state to leave.
      if (next == IBV_QPS_RTS && (uc || ud))
        return {0, static_cast<uint32_t>(IBV_QP_CUR_STATE) | kRateLimit |
                       static_cast<uint32_t>(uc ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY)};
      break;
    default: break;
  }
  *legal = false;
  return {0, 0};
}

}  // namespace

int check_qp_transition(uint32_t type, uint32_t cur, uint32_t next, uint32_t mask) {
  if (type != IBV_QPT_RC && type != IBV_QPT_UC && type != IBV_QPT_UD && type != IBV_QPT_XRC_SEND &&
      type != IBV_QPT_XRC_RECV && type != IBV_QPT_RAW_PACKET)
    return EINVAL;
  if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR) return EINVAL;
  bool legal = false;
  MaskRule r = rule(static_cast<ibv_qp_type>(type), static_cast<ibv_qp_state>(cur),
                    static_cast<ibv_qp_state>(next), &legal);
  if (!legal) return EINVAL;
  uint32_t attrs = mask & ~static_cast<uint32_t>(IBV_QP_STATE);
  if ((attrs & r.required) != r.required) return EINVAL;
  if ((attrs & ~(r.required | r.optional)) != 0) return EINVAL;
  return 0;
}

}  // namespace wharf::router
