// Internal objects of our librdmacm: each embeds the public rdma-core struct as its first member
// and converts back with to_*() helpers (as rdma-core's cma_id_private does).
//
// Threading: an Id's connection fields are written by the thread that owns the id's operation or
// processes its event, as in rdma-core (the application serializes calls on one id). The event
// counters are guarded by the registry mutex (registry.h), which also keeps an Id alive while an
// event for it is being built.
#pragma once

#include <rdma/rdma_cma.h>

#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "proto/cm_messages.h"

namespace wharf::rdmacm {

// rdma-core's error convention for int-returning librdmacm calls.
inline int fail(int err) {
  errno = err;
  return -1;
}

struct Channel {
  rdma_event_channel channel;  // must stay first
  uint32_t handle = 0;         // the router's channel
  // The router's end of the pair, kept so that a router that dies closes no end a waiting
  // rdma_get_cm_event sees, and given to the next router process (issue #23).
  int router_end = -1;
};

inline Channel* to_channel(rdma_event_channel* c) { return reinterpret_cast<Channel*>(c); }

// What the id knows of the other side of its connection, from CONNECT_REQUEST (passive) or
// CONNECT_RESPONSE / ESTABLISHED (active): the inputs of rdma_init_qp_attr's RTR and RTS.
struct Peer {
  bool known = false;
  uint32_t qp_num = 0;
  uint32_t psn = 0;
  uint32_t qkey = 0;
  uint8_t retry_count = 7;
  uint8_t rnr_retry_count = 7;
};

struct Id {
  rdma_cm_id id{};  // must stay first
  uint32_t handle = 0;
  // A synchronous id (created with a NULL channel) owns its channel and waits for the event of
  // each operation itself; the last event stays in id.event until the next operation acks it.
  bool sync = false;

  // Events handed to the application (rdma_get_cm_event) and acked (rdma_ack_cm_event). Guarded
  // by the registry mutex; rdma_destroy_id waits on `acked_cv` until both are equal.
  uint64_t handed = 0;
  uint64_t acked = 0;
  std::condition_variable acked_cv;

  // Connection state, as rdma-core's cma_id_private and the kernel's cm_id keep it.
  uint8_t initiator_depth = 0;
  uint8_t responder_resources = 0;
  uint32_t local_psn = 0;      // random 24-bit starting send PSN
  bool connect_error = false;  // CONNECT_RESPONSE could not be completed: drop what follows
  // The access flags the id's QP was last moved to INIT with (-1: not yet). The INIT -> INIT
  // transition before RTR is skipped when it would change nothing: one router request less
  // per connection side.
  int64_t init_access = -1;
  Peer peer;
  uint16_t remote_lid = 0;

  // Options the library keeps (rdma_set_option).
  uint8_t tos = 0;
  bool ack_timeout_set = false;
  uint8_t ack_timeout = 0;

  // rdma_create_ep on a passive id: the attributes rdma_get_request creates QPs with.
  std::unique_ptr<ibv_qp_init_attr> qp_init_attr;
  // rdma_create_ep on an active id: rai->ai_connect, sent before the connect's own data.
  std::vector<uint8_t> connect_data;
  // Multicast groups joined (rdma_join_multicast), as rdma-core's cma_multicast: the address
  // and context the application gave, and once MULTICAST_JOIN came, the group's MGID and
  // MLID, to which the id's QP is then attached (unless it joined as a send-only member).
  struct Group {
    proto::CmAddr addr{};
    void* context = nullptr;
    bool send_only = false;
    bool joined = false;
    proto::Gid mgid{};
    uint16_t mlid = 0;
  };
  std::vector<Group> groups;
};

inline Id* to_id(rdma_cm_id* id) { return reinterpret_cast<Id*>(id); }

// An event handed to the application. `owner` is the id whose counters the ack completes: the
// event's id, or the listener for CONNECT_REQUEST (as the kernel counts it).
struct Event {
  rdma_cm_event event{};  // must stay first
  Id* owner = nullptr;
  uint8_t private_data[proto::kCmMaxPrivateData] = {};
};

inline Event* to_event(rdma_cm_event* e) { return reinterpret_cast<Event*>(e); }

inline bool is_ud(ibv_qp_type t) { return t == IBV_QPT_UD; }

}  // namespace wharf::rdmacm
