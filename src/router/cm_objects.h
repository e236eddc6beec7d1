// rdma_cm objects as the router keeps them (proto/cm_messages.h): event channels and ids. Both
// belong to one Session, like verbs objects. The two ids of a connection know each other by
// host and communication ID (the IB CM's local/remote comm IDs), whether they are on one
// router or two.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "common/unique_fd.h"
#include "proto/cm_messages.h"

namespace wharf::router {

class Session;
struct Container;

// An IPv4 or IPv6 address and port as a library named it (the family is kept, so events
// report addresses as the application gave them).
struct CmAddress {
  uint16_t family = proto::kCmAfNone;
  uint16_t port = 0;
  std::array<uint8_t, 16> ip{};

  // IPv4 (or IPv4-mapped IPv6) address in host order, if it is one.
  std::optional<uint32_t> v4() const;
  bool is_any() const;       // 0.0.0.0 or ::
  bool is_loopback() const;  // 127/8, ::1 or ::ffff:127/104
  // The same address, ignoring the port (IPv4 equals its mapped IPv6 form).
  bool same_ip(const CmAddress& o) const;

  static std::optional<CmAddress> from_wire(const proto::CmAddr& a);  // nullopt: bad family
  proto::CmAddr to_wire() const;
  static CmAddress ipv4(uint32_t host_order, uint16_t port);
};

// The router's end of an rdma_cm event channel: events wait in `backlog` while the library's
// end is full (the router never blocks on a library).
struct CmChannel {
  uint32_t handle = 0;
  Session* owner = nullptr;
  UniqueFd sock;
  std::deque<std::array<uint8_t, proto::kCmEventSize>> backlog;
  bool watched = false;  // registered for EPOLLOUT while backlog is not empty
  int users = 0;         // ids reporting to it
};

// The IB CM's view of an id, reduced to what rdma_cm exposes.
enum class CmState : uint8_t {
  kIdle,
  kBound,
  kResolving,  // waiting for another host's router to answer an address query
  kAddrResolved,
  kRouteResolved,
  kListening,
  kConnecting,   // active: REQ sent, waiting for REP or REJ
  kRequested,    // passive: REQ received (CONNECT_REQUEST), not yet answered
  kAccepted,     // passive: REP sent, waiting for RTU
  kResponded,    // active: REP received (CONNECT_RESPONSE), RTU not yet sent
  kEstablished,  // both sides; also a UD id once its SIDR exchange is done
  kClosed,       // disconnected or rejected: only destroy is left
};
const char* cm_state_name(CmState s);
// Whether a DREQ closes an id in state s: one its peer may consider connected (the passive
// side before RTU, the active side before it sent RTU, and established ones).
constexpr bool closed_by_dreq(CmState s) {
  return s == CmState::kEstablished || s == CmState::kAccepted || s == CmState::kResponded;
}

// peer_host of an id whose peer is on this router.
constexpr int kThisHost = -1;

struct CmId {
  uint32_t handle = 0;
  uint32_t comm = 0;  // router-wide communication ID (CmManager), never 0
  Session* owner = nullptr;
  CmChannel* channel = nullptr;
  uint16_t ps = 0;      // enum rdma_port_space
  uint8_t qp_type = 0;  // enum ibv_qp_type
  bool active = false;  // the connecting side
  bool bound = false;   // holds `local` in the port table
  bool reuseaddr = false;
  bool afonly = false;
  CmState state = CmState::kIdle;
  uint32_t backlog = 0;  // listeners
  CmAddress local;
  CmAddress remote;
  // The peer's port, once known (address resolution, or the request that made this id).
  uint16_t remote_lid = 0;
  proto::Gid remote_gid{};
  // The other end of the connection being made or made (peer_comm 0: none yet, or no more),
  // or, while kResolving, the host asked.
  int peer_host = kThisHost;
  uint32_t peer_comm = 0;
  // Passive: the comm of the requester whose REQ made this id (peer_comm until it ends).
  uint32_t requester_comm = 0;
  // While kConnecting, kAccepted or kResolving: when waiting fails (CmManager::expire_st).
  uint64_t deadline_ns = 0;
  CmId* listener = nullptr;     // passive, while kRequested: whose request this is
  std::vector<CmId*> requests;  // listener: its ids in kRequested
  // Its slot in the file that outlives the router process (KeptCmIds; ~0: none), and whether
  // it changed since it was last written there (CmManager::keep_changed_st).
  uint32_t kept_slot = ~uint32_t{0};
  bool kept_dirty = false;
};

}  // namespace wharf::router
