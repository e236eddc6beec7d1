// Taking work requests out of shared memory. A slot's bytes are written by the container
// and may change under us at any time: they are copied once into router memory, and only
// the copy is validated and used (no double fetch).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "shm/layout.h"

namespace wharf::router {

struct SendWork {
  shm::SendWqe hdr;
  union {
    shm::Sge sge[shm::kMaxSendSge];
    uint8_t inline_data[shm::kMaxInline];
  };
};

struct RecvWork {
  shm::RecvWqe hdr;
  shm::Sge sge[shm::kMaxRecvSge];
};

// Copies the send WQE in `slot` (slot_size bytes) into *out. Returns false when it is
// malformed for a QP of `type` allowing max_sge SGEs: unknown or disallowed opcode, more
// SGEs than allowed, or inline data that does not fit the slot.
bool copy_send_wqe(const uint8_t* slot, uint32_t slot_size, ibv_qp_type type, uint32_t max_sge,
                   SendWork* out);

// A send WQE's payload: the bytes its SGEs or inline data name (for a READ, what it reads).
uint64_t payload_bytes(const SendWork& w);

// What a send WQE costs under a rate limit: its payload, but at least kMinChargeBytes, about
// a packet's headers, so that empty messages are limited too.
inline constexpr uint64_t kMinChargeBytes = 64;
uint64_t rate_charge(const SendWork& w);

// Copies the receive WQE in `slot`. A malformed one (too many SGEs for max_sge or the slot)
// is returned with num_sge = 0: a receive without buffers, so any data is a length error.
void copy_recv_wqe(const uint8_t* slot, uint32_t slot_size, uint32_t max_sge, RecvWork* out);

}  // namespace wharf::router
