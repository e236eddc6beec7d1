// Verbs rules the library (synchronous post checks) and the router (which never trusts the
// library) both apply. Header-only: the library links no router code.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

namespace wharf::proto {

// True if a QP of `type` may post send opcode `op` (IBTA 9.x: RDMA READ and atomics are
// reliable-connection operations; UD carries sends only; an XRC initiator does what an RC
// requester does but windows and ATOMIC WRITE, and an XRC target posts nothing; a RAW_PACKET
// QP sends whole Ethernet frames, without immediate data).
inline bool opcode_allowed(ibv_qp_type type, uint32_t op) {
  const bool rc = type == IBV_QPT_RC;
  const bool xrc = type == IBV_QPT_XRC_SEND;
  switch (op) {
    case IBV_WR_SEND: return type != IBV_QPT_XRC_RECV;
    case IBV_WR_SEND_WITH_IMM: return type != IBV_QPT_XRC_RECV && type != IBV_QPT_RAW_PACKET;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return rc || xrc || type == IBV_QPT_UC;
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return rc || xrc;
    case IBV_WR_ATOMIC_WRITE:
    case IBV_WR_SEND_WITH_INV: return rc;
    // Memory windows are bound and invalidated through connected QPs (IBTA 10.6.7).
    case IBV_WR_BIND_MW:
    case IBV_WR_LOCAL_INV: return rc || type == IBV_QPT_UC;
    default: return false;
  }
}

// Work requests that act on the requester's own memory windows and move no data: executed
// in send-queue order by the router (never the direct path), each fencing what came before.
inline bool is_window_op(uint32_t op) { return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV; }

// What a send opcode does at the responder, which the router's paths and the library's
// direct path all consult: whether it consumes a receive WQE (sends, and RDMA WRITE with
// immediate, IBTA 9.7.x), whether it carries immediate data, whether it is an 8-byte atomic
// (CMP_AND_SWP, FETCH_AND_ADD), and which access the responder QP and the rkey must grant (0: it
// names no remote memory).
inline bool consumes_receive(uint32_t op) {
  return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_SEND_WITH_INV ||
         op == IBV_WR_RDMA_WRITE_WITH_IMM;
}
inline bool carries_immediate(uint32_t op) {
  return op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}
inline bool is_atomic(uint32_t op) {
  return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
inline uint32_t remote_access_needed(uint32_t op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_ATOMIC_WRITE: return IBV_ACCESS_REMOTE_WRITE;
    case IBV_WR_RDMA_READ: return IBV_ACCESS_REMOTE_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_ACCESS_REMOTE_ATOMIC;
    default: return 0;
  }
}

// ATOMIC WRITE (IBTA 1.5): 8 bytes, from the WR's data, stored at once into 8-byte aligned
// remote memory the responder allows writes to.
constexpr uint32_t kAtomicWriteSize = 8;

// The fields an RSS QP may hash (IBV_RX_HASH_*): addresses and ports, not inner headers or
// IPsec SPIs.
constexpr uint64_t kRssHashFields = IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 |
                                    IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6 |
                                    IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |
                                    IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP;

// The ibv_wc opcode that completes send opcode `op`.
inline ibv_wc_opcode send_wc_opcode(uint32_t op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    case IBV_WR_ATOMIC_WRITE: return IBV_WC_ATOMIC_WRITE;
    case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
    case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
    default: return IBV_WC_SEND;
  }
}

}  // namespace wharf::proto
