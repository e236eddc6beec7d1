#include "router/wqe.h"

#include <cstring>

#include "proto/qp_rules.h"

namespace wharf::router {

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
  return proto::opcode_allowed(type, out->hdr.opcode);
}

uint64_t payload_bytes(const SendWork& w) {
  if (w.hdr.flags & shm::kWqeInline) return w.hdr.inline_len;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < w.hdr.num_sge && i < shm::kMaxSendSge; ++i) bytes += w.sge[i].length;
  return bytes;
}

uint64_t rate_charge(const SendWork& w) {
  const uint64_t bytes = payload_bytes(w);
  return bytes < kMinChargeBytes ? kMinChargeBytes : bytes;
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
