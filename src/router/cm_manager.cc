// The connection manager's rules, after the kernel's cma.c and ib_cm for one subnet: port
// ownership (cma_check_port), the REQ -> REP -> RTU handshake with REJ at any point before
// RTU, DREQ once per connection, SIDR for UD. See cm_manager.h.
#include "router/cm_manager.h"

#include <errno.h>
#include <rdma/rdma_cma.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "proto/datagram.h"
#include "router/peer_rules.h"
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {
namespace {

// The Linux default ip_local_port_range, which the kernel's rdma_cm uses too.
constexpr uint32_t kEphemeralFirst = 32768;
constexpr uint32_t kEphemeralCount = 60999 - 32768 + 1;
constexpr uint16_t kPrivilegedPorts = 1024;
// Events one channel may hold back for a library that does not read them; beyond this they
// are dropped (logged), so a stuck application cannot grow the router without bound.
constexpr size_t kMaxChannelBacklog = 65536;
// SIDR REP statuses (IBA 12.11.2) reported as UNREACHABLE's status for UD.
constexpr int32_t kSidrUnsupported = 1;
constexpr int32_t kSidrReject = 2;

bool is_ud(const CmId* id) { return id->qp_type == IBV_QPT_UD; }

// What the receiving side of a REQ or REP sees: the sender's responder resources are its own
// initiator depth and vice versa (ib_cm swaps them), and the private data field is reported
// whole.
proto::CmConnParam as_received(const proto::CmConnParam& sent, uint8_t field_size) {
  proto::CmConnParam p = sent;
  p.responder_resources = sent.initiator_depth;
  p.initiator_depth = sent.responder_resources;
  std::fill(p.private_data.begin() + std::min<size_t>(sent.private_data_len, field_size),
            p.private_data.end(), 0);
  p.private_data_len = field_size;
  return p;
}

}  // namespace

const Container* CmManager::container_of(const CmId* id) const { return id->owner->container(); }

const Container* CmManager::destination_st(const CmId* from, const CmAddress& ip) const {
  const Container* self = container_of(from);
  if (ip.is_loopback()) return self;
  auto v4 = ip.v4();
  if (!v4 || *v4 == 0) return nullptr;
  const Container* c = router_->container_with_vip(*v4);
  return c != nullptr && same_network(self, c) ? c : nullptr;
}

bool CmManager::may_bind_ip(const CmId* id, const CmAddress& a) const {
  if (a.is_any() || a.is_loopback()) return true;
  auto v4 = a.v4();
  const Container* c = container_of(id);
  return v4 && c->vip != 0 && *v4 == c->vip;
}

// cma_check_port: who may share a port. Two ids share it when both set REUSEADDR (and the
// other does not listen), or when AFONLY keeps their families apart; otherwise a wildcard
// on either side is EADDRNOTAVAIL and the same address EADDRINUSE.
int CmManager::check_port(const CmId* id, const CmAddress& a, bool reuse) const {
  auto it = ports_.find({container_of(id), id->ps, a.port});
  if (it == ports_.end()) return 0;
  for (const CmId* cur : it->second) {
    if (cur == id) continue;
    if (reuse && cur->reuseaddr && cur->state != CmState::kListening) continue;
    if (id->afonly && cur->afonly && a.family != cur->local.family) continue;
    if (a.is_any() || cur->local.is_any()) return EADDRNOTAVAIL;
    if (a.same_ip(cur->local)) return EADDRINUSE;
  }
  return 0;
}

int CmManager::take_port(CmId* id, CmAddress a) {
  if (a.port == 0) {
    // Ephemeral: the first free port from a moving start, as the kernel's random walk.
    uint32_t start = next_ephemeral_;
    for (uint32_t i = 0; i < kEphemeralCount; ++i) {
      a.port = static_cast<uint16_t>(kEphemeralFirst + (start + i) % kEphemeralCount);
      if (ports_.count({container_of(id), id->ps, a.port}) == 0) {
        next_ephemeral_ = (start + i + 1) % kEphemeralCount;
        break;
      }
      a.port = 0;
    }
    if (a.port == 0) return EADDRNOTAVAIL;
  } else {
    if (a.port < kPrivilegedPorts && id->owner->uid() != 0) return EACCES;
    if (int err = check_port(id, a, id->reuseaddr); err != 0) return err;
  }
  id->local = a;
  id->bound = true;
  ports_[{container_of(id), id->ps, a.port}].push_back(id);
  return 0;
}

void CmManager::release_port(CmId* id) {
  if (!id->bound) return;
  auto it = ports_.find({container_of(id), id->ps, id->local.port});
  if (it != ports_.end()) {
    std::erase(it->second, id);
    if (it->second.empty()) ports_.erase(it);
  }
  id->bound = false;
}

int CmManager::bind_st(CmId* id, const CmAddress& addr) {
  if (id->state != CmState::kIdle) return EINVAL;
  if (!may_bind_ip(id, addr)) return EADDRNOTAVAIL;
  if (int err = take_port(id, addr); err != 0) return err;
  id->state = CmState::kBound;
  return 0;
}

int CmManager::resolve_addr_st(CmId* id, const CmAddress* src, const CmAddress& dst) {
  if (id->state != CmState::kIdle && id->state != CmState::kBound) return EINVAL;
  if (id->state == CmState::kIdle) {
    // Bound to the given source, else to the address that reaches dst: loopback for a
    // loopback destination, the container's vIP otherwise.
    CmAddress a;
    if (src != nullptr) {
      a = *src;
    } else {
      a.family = dst.family;
    }
    if (a.is_any()) {
      const uint32_t vip = container_of(id)->vip;
      const uint32_t chosen = dst.is_loopback() || vip == 0 ? 0x7f000001 : vip;
      const uint16_t port = a.port;
      a = CmAddress::ipv4(chosen, port);
      if (dst.family == proto::kCmAf6 && dst.v4()) {  // keep IPv4-mapped IPv6 as it came
        a.family = proto::kCmAf6;
        std::memmove(a.ip.data() + 12, a.ip.data(), 4);
        std::fill(a.ip.begin(), a.ip.begin() + 12, 0);
        a.ip[10] = a.ip[11] = 0xff;
      }
    }
    if (int err = bind_st(id, a); err != 0) return err;
  }
  id->remote = dst;
  const Container* to = destination_st(id, dst);
  if (to == nullptr) {
    post_st(id, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
    return 0;
  }
  id->state = CmState::kAddrResolved;
  proto::CmEventMsg ev = event_for(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
  set_remote_port(&ev, to);
  post_st(id, ev);
  return 0;
}

int CmManager::resolve_route_st(CmId* id) {
  if (id->state != CmState::kAddrResolved) return EINVAL;
  const Container* to = destination_st(id, id->remote);
  if (to == nullptr) {
    post_st(id, RDMA_CM_EVENT_ROUTE_ERROR, -EHOSTUNREACH);
    return 0;
  }
  id->state = CmState::kRouteResolved;
  proto::CmEventMsg ev = event_for(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  set_remote_port(&ev, to);
  post_st(id, ev);
  return 0;
}

int CmManager::listen_st(CmId* id, uint32_t backlog) {
  if (id->state == CmState::kListening) {
    id->backlog = backlog;
    return 0;
  }
  if (id->state == CmState::kIdle) {
    if (int err = bind_st(id, CmAddress::ipv4(0, 0)); err != 0) return err;
  }
  if (id->state != CmState::kBound) return EINVAL;
  // A listener owns its address even among REUSEADDR ids.
  if (int err = check_port(id, id->local, false); err != 0) return err;
  id->state = CmState::kListening;
  id->backlog = backlog;
  return 0;
}

CmId* CmManager::find_listener(const Container* c, uint16_t ps, const CmAddress& dst) const {
  auto it = ports_.find({c, ps, dst.port});
  if (it == ports_.end()) return nullptr;
  for (CmId* l : it->second) {
    if (l->state != CmState::kListening) continue;
    if (!l->local.is_any()) {
      if (l->local.same_ip(dst)) return l;
      continue;
    }
    // A wildcard takes its own family, and IPv4 too unless AFONLY (IPV6_V6ONLY's rule).
    if (l->local.family == dst.family || (!l->afonly && dst.v4())) return l;
  }
  return nullptr;
}

bool CmManager::owns_qp(const CmId* id, uint32_t qpn) const {
  const Qp* qp = router_->qp_by_qpn(qpn);
  return qp != nullptr && qp->owner->container() == container_of(id);
}

int CmManager::connect_st(CmId* id, const proto::CmConnParam& p) {
  if (id->state != CmState::kRouteResolved && id->state != CmState::kAddrResolved) return EINVAL;
  const uint8_t limit = is_ud(id) ? proto::kCmSidrReqPrivateData : proto::kCmReqPrivateData;
  if (p.private_data_len > limit) return EINVAL;
  if (!is_ud(id) && !owns_qp(id, p.qp_num)) return EINVAL;
  id->active = true;
  const Container* to = destination_st(id, id->remote);
  CmId* l = to == nullptr ? nullptr : find_listener(to, id->ps, id->remote);
  if (l == nullptr || l->requests.size() >= kMaxChannelBacklog) {
    id->state = CmState::kClosed;
    if (is_ud(id)) {
      post_st(id, RDMA_CM_EVENT_UNREACHABLE, kSidrUnsupported);
    } else {
      post_rejected_st(id, proto::kCmRejInvalidServiceId, nullptr, 0);
    }
    return 0;
  }
  // The passive side's new id, in the listener's session and channel (ucma's conn request).
  auto made = std::make_unique<CmId>();
  made->channel = l->channel;
  made->ps = l->ps;
  made->qp_type = l->qp_type;
  made->state = CmState::kRequested;
  made->local = id->remote;
  made->remote = id->local;
  made->peer = id;
  made->listener = l;
  CmId* n = l->owner->adopt_cm_id(std::move(made));
  n->channel->users++;
  l->requests.push_back(n);
  id->peer = n;
  id->state = CmState::kConnecting;

  proto::CmEventMsg ev = event_for(n, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  ev.listen_id = l->handle;
  set_remote_port(&ev, container_of(id));
  ev.param = as_received(p, is_ud(id) ? proto::kCmSidrReqPrivateData : proto::kCmReqPrivateData);
  post_st(n, ev);
  return 0;
}

void CmManager::unlink_request(CmId* id) {
  if (id->listener == nullptr) return;
  std::erase(id->listener->requests, id);
  id->listener = nullptr;
}

int CmManager::accept_st(CmId* id, const proto::CmConnParam& p) {
  if (id->state != CmState::kRequested || id->peer == nullptr) return EINVAL;
  const uint8_t limit = is_ud(id) ? proto::kCmSidrRepPrivateData : proto::kCmRepPrivateData;
  if (p.private_data_len > limit) return EINVAL;
  if (!owns_qp(id, p.qp_num)) return EINVAL;
  unlink_request(id);
  CmId* a = id->peer;
  proto::CmEventMsg ev;
  if (is_ud(id)) {
    // SIDR REP: the requester learns the QP and Q_Key; no connection remains.
    id->state = a->state = CmState::kEstablished;
    id->peer = a->peer = nullptr;
    ev = event_for(a, RDMA_CM_EVENT_ESTABLISHED, 0);
    ev.param = as_received(p, limit);
  } else {
    id->state = CmState::kAccepted;
    a->state = CmState::kResponded;
    ev = event_for(a, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
    ev.param = as_received(p, limit);
  }
  set_remote_port(&ev, container_of(id));
  post_st(a, ev);
  return 0;
}

int CmManager::reject_st(CmId* id, const uint8_t* data, uint8_t len) {
  if (len > proto::kCmRejPrivateData) return EINVAL;
  const bool passive = id->state == CmState::kRequested;
  if (!passive && id->state != CmState::kResponded) return EINVAL;
  unlink_request(id);
  CmId* other = id->peer;
  id->state = CmState::kClosed;
  id->peer = nullptr;
  if (other == nullptr) return 0;  // the requester went away first
  other->peer = nullptr;
  other->state = CmState::kClosed;
  if (is_ud(other)) {
    post_st(other, RDMA_CM_EVENT_UNREACHABLE, kSidrReject);
  } else {
    post_rejected_st(other, proto::kCmRejConsumerDefined, data, len);
  }
  return 0;
}

int CmManager::establish_st(CmId* id) {
  if (id->state == CmState::kResponded) {
    // The active side's RTU.
    id->state = CmState::kEstablished;
    CmId* p = id->peer;
    if (p != nullptr && p->state == CmState::kAccepted) {
      p->state = CmState::kEstablished;
      post_st(p, RDMA_CM_EVENT_ESTABLISHED, 0);
    }
    return 0;
  }
  if (id->state == CmState::kAccepted) {
    // rdma_notify: the passive QP saw traffic before the RTU (IBV_EVENT_COMM_EST).
    id->state = CmState::kEstablished;
    post_st(id, RDMA_CM_EVENT_ESTABLISHED, 0);
    return 0;
  }
  return id->state == CmState::kEstablished ? 0 : EINVAL;
}

int CmManager::disconnect_st(CmId* id) {
  switch (id->state) {
    case CmState::kClosed: return 0;  // the peer disconnected first: DREQ already seen
    case CmState::kEstablished:
    case CmState::kAccepted:
    case CmState::kResponded: break;
    default: return EINVAL;
  }
  if (is_ud(id)) return EINVAL;
  CmId* p = id->peer;
  id->state = CmState::kClosed;
  id->peer = nullptr;
  post_st(id, RDMA_CM_EVENT_DISCONNECTED, 0);
  if (p != nullptr) {
    p->peer = nullptr;
    p->state = CmState::kClosed;
    post_st(p, RDMA_CM_EVENT_DISCONNECTED, 0);
  }
  return 0;
}

int CmManager::set_option_st(CmId* id, uint32_t option, uint32_t value) {
  switch (option) {
    case proto::kCmOptReuseAddr:
      // rdma_set_reuseaddr: before bind, or to set it (never on a listener).
      if (id->state == CmState::kIdle || (value != 0 && id->state != CmState::kListening)) {
        id->reuseaddr = value != 0;
        return 0;
      }
      return EINVAL;
    case proto::kCmOptAfOnly:
      if (id->state != CmState::kIdle) return EINVAL;
      id->afonly = value != 0;
      return 0;
    default: return ENOSYS;
  }
}

void CmManager::destroy_st(CmId* id) {
  // A listener's unanswered requests are refused (their ids stay, closed, with their owner).
  for (CmId* r : std::vector<CmId*>(id->requests)) {
    r->listener = nullptr;
    reject_st(r, nullptr, 0);
  }
  id->requests.clear();
  unlink_request(id);
  if (CmId* p = id->peer; p != nullptr) {
    p->peer = nullptr;
    const CmState was = p->state;
    p->state = CmState::kClosed;
    if (was == CmState::kEstablished && !is_ud(p)) {
      post_st(p, RDMA_CM_EVENT_DISCONNECTED, 0);
    } else if (was == CmState::kConnecting || was == CmState::kRequested ||
               was == CmState::kAccepted || was == CmState::kResponded) {
      if (is_ud(p)) {
        post_st(p, RDMA_CM_EVENT_UNREACHABLE, kSidrReject);
      } else {
        post_rejected_st(p, proto::kCmRejConsumerDefined, nullptr, 0);
      }
    }
    id->peer = nullptr;
  }
  release_port(id);
  if (id->channel != nullptr) id->channel->users--;
  id->channel = nullptr;
}

proto::CmEventMsg CmManager::event_for(const CmId* id, uint32_t type, int32_t status) const {
  proto::CmEventMsg ev;
  ev.event = type;
  ev.status = status;
  ev.id = id->handle;
  ev.ps = id->ps;
  ev.qp_type = id->qp_type;
  ev.src = id->local.to_wire();
  ev.dst = id->remote.to_wire();
  if (id->peer != nullptr) set_remote_port(&ev, container_of(id->peer));
  return ev;
}

void CmManager::set_remote_port(proto::CmEventMsg* ev, const Container* c) const {
  const bool ethernet = router_->config().link_layer == IBV_LINK_LAYER_ETHERNET;
  ev->remote_lid = ethernet ? 0 : c->lid;
  ev->remote_gid = c->gid;
}

void CmManager::post_rejected_st(CmId* id, int32_t reason, const uint8_t* data, uint8_t len) {
  proto::CmEventMsg ev = event_for(id, RDMA_CM_EVENT_REJECTED, reason);
  if (data != nullptr && len != 0) std::memcpy(ev.param.private_data.data(), data, len);
  ev.param.private_data_len = proto::kCmRejPrivateData;
  post_st(id, ev);
}

void CmManager::post_st(CmId* id, uint32_t type, int32_t status) {
  post_st(id, event_for(id, type, status));
}

void CmManager::post_st(CmId* id, const proto::CmEventMsg& ev) {
  CmChannel* ch = id->channel;
  if (ch == nullptr || !ch->sock.valid()) return;
  std::array<uint8_t, proto::kCmEventSize> buf{};
  if (proto::encode(ev, buf.data(), buf.size()) != buf.size()) return;
  if (ch->backlog.size() >= kMaxChannelBacklog) {
    spdlog::warn("session pid {}: rdma_cm event {} dropped: channel {} holds {} unread",
                 ch->owner->pid(), ev.event, ch->handle, ch->backlog.size());
    return;
  }
  ch->backlog.push_back(buf);
  if (!flush_st(ch)) router_->watch_cm_channel_st(ch);
}

bool CmManager::flush_st(CmChannel* ch) {
  while (!ch->backlog.empty()) {
    const auto& buf = ch->backlog.front();
    int err =
        proto::send_datagram(ch->sock.get(), buf.data(), buf.size(), nullptr, 0, MSG_DONTWAIT);
    if (err == EAGAIN || err == EWOULDBLOCK) return false;
    if (err != 0) {
      // The library closed its end (EPIPE): nobody will read these.
      ch->backlog.clear();
      return true;
    }
    ch->backlog.pop_front();
  }
  return true;
}

}  // namespace wharf::router
