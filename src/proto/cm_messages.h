// rdma_cm over the control channel: the requests our librdmacm sends to the router and the
// event datagrams the router writes to an rdma_cm event channel's socket.
// Byte layout: docs/wire-protocol.md, "Connection manager". Field order below IS the layout.
//
// The router is the connection manager (the kernel's ucma/cma/ib_cm in rdma-core): it owns
// ports, listeners and the REQ/REP/RTU/REJ/DREQ exchange between ids; the library owns the
// QPs and moves them through their states, as rdma-core's librdmacm does.
#pragma once

#include <array>
#include <cstdint>

#include "proto/messages.h"

namespace wharf::proto {

// An IPv4 or IPv6 socket address without sockaddr's layout. `addr` holds the address bytes in
// network order: the first 4 for kCmAf4, all 16 for kCmAf6. `port` is in host order.
enum CmFamily : uint16_t { kCmAfNone = 0, kCmAf4 = 2, kCmAf6 = 10 };
struct CmAddr {
  uint16_t family = kCmAfNone;
  uint16_t port = 0;
  std::array<uint8_t, 16> addr{};
  template <class V>
  void visit(V&& v) {
    v(family), v(port), v(addr);
  }
};

// Private data fields of the IB CM messages, less the 36-byte rdma_cm header where the kernel
// puts one (rdma_cm's limits; an event reports the whole field, zero-padded).
constexpr uint8_t kCmReqPrivateData = 56;
constexpr uint8_t kCmRepPrivateData = 196;
constexpr uint8_t kCmRejPrivateData = 148;
constexpr uint8_t kCmSidrReqPrivateData = 180;
constexpr uint8_t kCmSidrRepPrivateData = 136;
constexpr size_t kCmMaxPrivateData = 196;

// IB CM reject reasons the router reports in REJECTED events' status.
constexpr int32_t kCmRejInvalidServiceId = 8;  // nobody listens on the address and port
constexpr int32_t kCmRejConsumerDefined = 28;  // the peer rejected, or went away first

// What one side of a connection tells the other (REQ, REP, SIDR REQ/REP).
struct CmConnParam {
  uint32_t qp_num = 0;  // the sender's QP (24 bits)
  uint32_t psn = 0;     // the sender's starting send PSN (24 bits)
  uint32_t qkey = 0;    // UD only
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t flow_control = 0;
  uint8_t retry_count = 0;
  uint8_t rnr_retry_count = 0;
  uint8_t srq = 0;
  uint8_t private_data_len = 0;
  uint8_t reserved = 0;
  std::array<uint8_t, kCmMaxPrivateData> private_data{};
  template <class V>
  void visit(V&& v) {
    v(qp_num), v(psn), v(qkey), v(responder_resources), v(initiator_depth), v(flow_control),
        v(retry_count), v(rnr_retry_count), v(srq), v(private_data_len), v(reserved),
        v(private_data);
  }
};

// CmOpen: makes the session an rdma_cm session of its container. A library whose router died
// or was replaced opens again with `resume` 1 and the LID its container had (0: none to keep,
// as on Ethernet), which the container keeps if it is free (EADDRINUSE: not yet; EOPNOTSUPP:
// this router resumes nothing).
struct CmOpenReq {
  uint16_t resume_lid = 0;
  uint8_t resume = 0;
  uint8_t reserved = 0;
  template <class V>
  void visit(V&& v) {
    v(resume_lid), v(resume), v(reserved);
  }
};
struct CmOpenRep {
  uint32_t vip = 0;  // host order; 0: the container has none (only loopback works)
  uint16_t lid = 0;  // 0 on an Ethernet link layer
  uint8_t link_layer = 0;
  uint8_t reserved = 0;
  Gid gid{};
  template <class V>
  void visit(V&& v) {
    v(vip), v(lid), v(link_layer), v(reserved), v(gid);
  }
};

// CmCreateChannel: request Empty with fds [the router's end of a SOCK_SEQPACKET pair]; reply
// Handle{channel}. CmDestroyChannel: Handle{channel}; EBUSY while an id still reports to it.

// After a router restart (issue #23): CmRestoreChannel: Handle{the channel's handle} with fds
// [the router's end of its pair, which the library kept]; reply Empty. CmResume: request
// Empty, reply CmResumeRep: the ids the previous router process kept for this process
// (router/kept_cm_ids.h) are continued under their handles, on their restored channels.
struct CmResumeRep {
  uint32_t ids = 0;  // how many were continued
  template <class V>
  void visit(V&& v) {
    v(ids);
  }
};

// CmCreateId: reply Handle{id}. `ps` is enum rdma_port_space, `qp_type` enum ibv_qp_type.
struct CmCreateIdReq {
  uint32_t channel = 0;
  uint16_t ps = 0;
  uint8_t qp_type = 0;
  uint8_t reserved = 0;
  template <class V>
  void visit(V&& v) {
    v(channel), v(ps), v(qp_type), v(reserved);
  }
};
// CmDestroyId: Handle{id}. Its connected peer gets DISCONNECTED (REJECTED before it was
// established); connection requests still waiting on a listener are rejected.

struct CmMigrateIdReq {
  uint32_t id = 0;
  uint32_t channel = 0;
  template <class V>
  void visit(V&& v) {
    v(id), v(channel);
  }
};

// CmBind: reply CmAddrRep with the address bound (an ephemeral port for port 0).
struct CmBindReq {
  uint32_t id = 0;
  CmAddr addr;
  template <class V>
  void visit(V&& v) {
    v(id), v(addr);
  }
};
struct CmAddrRep {
  CmAddr addr;
  template <class V>
  void visit(V&& v) {
    v(addr);
  }
};

// CmResolveAddr: binds the id first if it is not (to `src`, else to the address that reaches
// `dst`, port 0), replies CmAddrRep{the id's source address}, then reports ADDR_RESOLVED (with
// the destination's LID and GID) or ADDR_ERROR (status -EHOSTUNREACH: no container of the
// caller's virtual network has that address).
struct CmResolveAddrReq {
  uint32_t id = 0;
  uint32_t timeout_ms = 0;
  CmAddr src;  // family kCmAfNone: none given
  CmAddr dst;
  template <class V>
  void visit(V&& v) {
    v(id), v(timeout_ms), v(src), v(dst);
  }
};
// CmResolveRoute: Handle{id} after ADDR_RESOLVED; reports ROUTE_RESOLVED.

struct CmListenReq {
  uint32_t id = 0;
  uint32_t backlog = 0;
  template <class V>
  void visit(V&& v) {
    v(id), v(backlog);
  }
};

// The QP transitions that go with a connection step (rdma-core's ucma_modify_qp_rtr/rts/err
// before rdma_accept's REP, the RTU and the DREQ). The library computes them, as rdma-core's
// does; they travel with the step's request so that the step costs one exchange. The router
// applies them in order to the QP numbered `qpn`, which must belong to the calling process,
// before it takes the step; the first transition that fails fails the request (the ones
// before it stay applied, as separate ibv_modify_qp calls would) and the step is not taken.
// count 0: no transitions (qpn is ignored).
constexpr uint32_t kCmMaxQpSteps = 3;
struct QpStep {
  uint32_t attr_mask = 0;  // enum ibv_qp_attr_mask, as ModifyQpReq
  QpAttr attr;
  template <class V>
  void visit(V&& v) {
    v(attr_mask), v(attr);
  }
};
struct CmQpSteps {
  uint32_t qpn = 0;
  uint32_t count = 0;  // <= kCmMaxQpSteps
  std::array<QpStep, kCmMaxQpSteps> steps{};
  template <class V>
  void visit(V&& v) {
    v(qpn), v(count), v(steps);
  }
};

// CmConnect (after ROUTE_RESOLVED) and CmAccept (on an id from CONNECT_REQUEST). qp_num must
// name a QP of the caller's container. RC: the peer of a connect gets CONNECT_REQUEST, the
// peer of an accept CONNECT_RESPONSE. UD (SIDR): the peer of an accept gets ESTABLISHED.
// An accept's `qp` moves the QP to RTR and RTS before the REP leaves.
struct CmConnectReq {
  uint32_t id = 0;
  CmConnParam param;
  CmQpSteps qp;
  template <class V>
  void visit(V&& v) {
    v(id), v(param), v(qp);
  }
};

// CmReject: on an id from CONNECT_REQUEST, or on a connecting id after CONNECT_RESPONSE (its
// QP could not be connected). The peer gets REJECTED with status kCmRejConsumerDefined.
struct CmRejectReq {
  uint32_t id = 0;
  uint8_t private_data_len = 0;
  uint8_t reserved[3] = {};
  std::array<uint8_t, kCmRejPrivateData> private_data{};
  template <class V>
  void visit(V&& v) {
    v(id), v(private_data_len), v(reserved), v(private_data);
  }
};

// CmEstablish: the active side's RTU after CONNECT_RESPONSE (`qp` moves its QP to RTS first),
// or rdma_notify on the passive side. The passive side gets ESTABLISHED.
// CmDisconnect: on an established id (`qp` moves its QP to ERR first): both sides get
// DISCONNECTED, once.
struct CmStepReq {
  uint32_t id = 0;
  CmQpSteps qp;
  template <class V>
  void visit(V&& v) {
    v(id), v(qp);
  }
};

// CmSetOption: the options the router acts on (the library keeps the others).
enum CmRouterOption : uint32_t { kCmOptReuseAddr = 1, kCmOptAfOnly = 2 };
struct CmSetOptionReq {
  uint32_t id = 0;
  uint32_t option = 0;  // CmRouterOption
  uint32_t value = 0;
  template <class V>
  void visit(V&& v) {
    v(id), v(option), v(value);
  }
};

// ---- Router -> library, on an event channel's socket (no Header) ----
struct CmEventMsg {
  uint32_t event = 0;      // enum rdma_cm_event_type
  int32_t status = 0;      // as rdma_cm_event.status: -errno, or a reject reason for REJECTED
  uint32_t id = 0;         // CONNECT_REQUEST: the new id, already created in the session
  uint32_t listen_id = 0;  // CONNECT_REQUEST: the listener; else 0
  uint16_t ps = 0;         // CONNECT_REQUEST: the new id's port space and QP type
  uint8_t qp_type = 0;
  uint8_t reserved = 0;
  uint16_t remote_lid = 0;  // the peer's port (ADDR_RESOLVED, CONNECT_REQUEST, and the
  uint16_t reserved2 = 0;   // connection events)
  Gid remote_gid{};
  CmAddr src;  // the id's own address and its peer's, as they stand now
  CmAddr dst;
  CmConnParam param;  // CONNECT_REQUEST, CONNECT_RESPONSE, ESTABLISHED (UD), REJECTED
  template <class V>
  void visit(V&& v) {
    v(event), v(status), v(id), v(listen_id), v(ps), v(qp_type), v(reserved), v(remote_lid),
        v(reserved2), v(remote_gid), v(src), v(dst), v(param);
  }
};
constexpr size_t kCmEventSize = 4 * 4 + 4 + 4 + 16 + 2 * 20 + (4 * 3 + 8 + kCmMaxPrivateData);

// ---- Router -> router: connection management between hosts ----
// As IB CM MADs go to a port's QP1, these travel as UD SEND-only packets to QPN 1 with
// Q_Key kCmQkey on the host links (docs/wire-protocol.md, "Connection management between
// hosts"); the payload is one CmMad. A router also hands them to itself for ids of its own
// host, so one set of rules serves both.
constexpr uint32_t kCmQpn = 1;
constexpr uint32_t kCmQkey = 0x80010000;  // IBA's well-known GSI Q_Key

enum CmMadType : uint8_t {
  kCmReq = 1,        // connect (RC): receiver_comm 0, the listener is found by `dst`
  kCmRep = 2,        // accept
  kCmRtu = 3,        // the active side is established
  kCmRej = 4,        // status: the reject reason
  kCmDreq = 5,       // disconnect
  kCmSidrReq = 6,    // connect (UD)
  kCmSidrRep = 7,    // accept (status 0) or refuse (SIDR status) a SIDR REQ
  kCmAddrQuery = 8,  // who holds `dst` in the sender's tenant and network?
  kCmAddrReply = 9,  // status 0 and the holder's port, or -EHOSTUNREACH
  // Not rdma_cm: the sender's number for virtual network tenant/network (in `status`), which
  // the receiver puts in the `network` field of its packets' headers to the sender's host.
  kCmNetAnnounce = 10,
};

struct CmMad {
  uint8_t type = 0;  // CmMadType
  uint8_t qp_type = 0;
  uint16_t ps = 0;
  int32_t status = 0;
  uint32_t sender_comm = 0;    // the sending router's id (its communication ID)
  uint32_t receiver_comm = 0;  // the receiving router's id; 0 for REQ, SIDR REQ, queries
  uint16_t lid = 0;            // the sender's container's port (LID 0 on Ethernet)
  uint16_t reserved = 0;
  Gid gid{};
  Name tenant{};  // the sender's container's virtual network
  Name network{};
  CmAddr src;  // as the sender sees them: its own address first
  CmAddr dst;
  CmConnParam param;
  template <class V>
  void visit(V&& v) {
    v(type), v(qp_type), v(ps), v(status), v(sender_comm), v(receiver_comm), v(lid), v(reserved),
        v(gid), v(tenant), v(network), v(src), v(dst), v(param);
  }
};
constexpr size_t kCmMadSize = 1 + 1 + 2 + 4 + 4 + 4 + 2 + 2 + 16 + 32 + 32 + 2 * 20 + 216;

}  // namespace wharf::proto
