// Fuzz target for router/wqe.h: the copy-and-validate step every work request written by a
// container goes through. Input: [qp type][max_sge][slot size selector] then the slot bytes.
// The slot is an exactly-sized heap block, so AddressSanitizer sees any read past it.
// Checked: an accepted send WQE has an opcode its QP type allows, SGEs or inline data within
// the QP's limits and the slot, and router memory holding exactly the slot's bytes; a receive
// WQE never comes back with more SGEs than allowed or than its slot holds.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_check.h"
#include "proto/qp_rules.h"
#include "router/wqe.h"

using namespace wharf;
using namespace wharf::router;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const ibv_qp_type types[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD};
  ibv_qp_type type = types[data[0] % 3];
  uint32_t max_sge = data[1] % (shm::kMaxSendSge + 1);
  uint32_t slot_size = sizeof(shm::SendWqe) + (data[2] % 40) * 16u;
  std::vector<uint8_t> slot(slot_size);
  size_t n = size - 3 < slot_size ? size - 3 : slot_size;
  std::memcpy(slot.data(), data + 3, n);

  SendWork w;
  if (copy_send_wqe(slot.data(), slot_size, type, max_sge, &w)) {
    WHARF_FUZZ_CHECK(proto::opcode_allowed(type, w.hdr.opcode), "accepted a disallowed opcode");
    const uint32_t room = slot_size - sizeof(shm::SendWqe);
    if (w.hdr.flags & shm::kWqeInline) {
      WHARF_FUZZ_CHECK(w.hdr.inline_len <= room && w.hdr.inline_len <= shm::kMaxInline,
                       "inline data larger than the slot");
      WHARF_FUZZ_CHECK(
          std::memcmp(w.inline_data, slot.data() + sizeof(shm::SendWqe), w.hdr.inline_len) == 0,
          "inline bytes differ from the slot");
    } else {
      WHARF_FUZZ_CHECK(w.hdr.num_sge <= max_sge && w.hdr.num_sge * sizeof(shm::Sge) <= room,
                       "more SGEs than allowed");
      WHARF_FUZZ_CHECK(std::memcmp(w.sge, slot.data() + sizeof(shm::SendWqe),
                                   w.hdr.num_sge * sizeof(shm::Sge)) == 0,
                       "SGEs differ from the slot");
    }
  }

  uint32_t recv_slot = sizeof(shm::RecvWqe) + (data[2] % 40) * 16u;
  if (recv_slot <= slot_size) {
    RecvWork r;
    copy_recv_wqe(slot.data(), recv_slot, max_sge, &r);
    WHARF_FUZZ_CHECK(r.hdr.num_sge <= max_sge && r.hdr.num_sge <= shm::kMaxRecvSge &&
                         sizeof(shm::RecvWqe) + r.hdr.num_sge * sizeof(shm::Sge) <= recv_slot,
                     "receive WQE with too many SGEs");
  }
  return 0;
}
