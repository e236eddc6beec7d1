#include "router/wqe.h"

#include <cstring>

namespace wharf::router {

bool opcode_allowed(ibv_qp_type type, uint8_t op) {
  switch (op) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM: return true;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return type == IBV_QPT_RC || type == IBV_QPT_UC;
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return type == IBV_QPT_RC;
    default: return false;
  }
}

bool copy_send_wqe(const uint8_t* slot, uint32_t slot_size, ibv_qp_type type, uint32_t max_sge,
                   SendWork* out) {
  if (slot_size < sizeof(shm::SendWqe)) return false;
  std::memcpy(&out->hdr, slot, sizeof(out->hdr));
  const uint32_t room = slot_size - static_cast<uint32_t>(sizeof(shm::SendWqe));
  if (out->hdr.flags & shm::kWqeInline) {
    if (out->hdr.inline_len > room || out->hdr.inline_len > shm::kMaxInline) return false;
    std::memcpy(out->inline_data, slot + sizeof(shm::SendWqe), out->hdr.inline_len);
    out->hdr.num_sge = 0;
  } else {
    const uint32_t n = out->hdr.num_sge;
    if (n > max_sge || n > shm::kMaxSendSge || n * sizeof(shm::Sge) > room) return false;
    std::memcpy(out->sge, slot + sizeof(shm::SendWqe), n * sizeof(shm::Sge));
  }
  return opcode_allowed(type, out->hdr.opcode);
}

void copy_recv_wqe(const uint8_t* slot, uint32_t slot_size, uint32_t max_sge, RecvWork* out) {
  std::memcpy(&out->hdr, slot, sizeof(out->hdr));
  uint32_t n = out->hdr.num_sge;
  if (n > max_sge || n > shm::kMaxRecvSge ||
      sizeof(shm::RecvWqe) + n * sizeof(shm::Sge) > slot_size) {
    out->hdr.num_sge = 0;
    n = 0;
  }
  std::memcpy(out->sge, slot + sizeof(shm::RecvWqe), n * sizeof(shm::Sge));
}

}  // namespace wharf::router
