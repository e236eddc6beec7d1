// Shared by the bench tools: bringing an RC QP from RESET to RTS with LID addressing.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

// Moves qp (in RESET) to RTS, connected to QP dest_qpn at LID dlid on port 1: MTU 4096, remote
// `access` allowed (REMOTE WRITE by default), one READ/atomic in flight each way, RNR timer 0.64 ms
// (12, as perftest and the rdma-core examples use), retry_cnt 7, RNR retried forever, ACK timeout
// ack_timeout (4.096 us x 2^ack_timeout). Returns the transition that failed ("INIT", "RTR",
// "RTS"), or nullptr.
inline const char* rc_qp_to_rts(ibv_qp* qp, uint32_t dest_qpn, uint16_t dlid, uint8_t ack_timeout,
                                int access = IBV_ACCESS_REMOTE_WRITE) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = static_cast<unsigned>(access);
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return "INIT";
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = dest_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.dlid = dlid;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return "RTR";
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = ack_timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;  // forever
  a.max_rd_atomic = 1;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                        IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
    return "RTS";
  return nullptr;
}
