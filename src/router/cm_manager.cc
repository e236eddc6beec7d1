// The connection manager's rules, after the kernel's cma.c and ib_cm: port ownership
// (cma_check_port), the REQ -> REP -> RTU handshake with REJ at any point before the RTU,
// DREQ once per connection, SIDR for UD, and address resolution in the caller's virtual
// network. See cm_manager.h.
#include "router/cm_manager.h"

#include <errno.h>
#include <rdma/rdma_cma.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/clock.h"
#include "proto/datagram.h"
#include "proto/multicast.h"
#include "proto/vip_gid.h"
#include "proto/wire_names.h"
#include "router/host_objects.h"
#include "router/peer_rules.h"
#include "router/router_config.h"
#include "router/session.h"

namespace wharf::router {
namespace {

// CmManager::by_request_'s key: the requester's host (kThisHost included) and its comm.
uint64_t request_key(int host, uint32_t comm) {
  return uint64_t{static_cast<uint32_t>(host)} << 32 | comm;
}

// The Linux default ip_local_port_range, which the kernel's rdma_cm uses too.
constexpr uint32_t kEphemeralFirst = 32768;
constexpr uint32_t kEphemeralCount = 60999 - 32768 + 1;
constexpr uint16_t kPrivilegedPorts = 1024;
// Events one channel may hold back for a library that does not read them, and requests one
// listener may have waiting; beyond these, events are dropped (logged) and requests rejected,
// so a stuck application cannot grow the router without bound.
constexpr size_t kMaxChannelBacklog = 65536;
constexpr size_t kMaxWaitingRequests = 65536;
// SIDR REP statuses (IBA 12.11.2), reported as UNREACHABLE's status for UD.
constexpr int32_t kSidrUnsupported = 1;
constexpr int32_t kSidrReject = 2;
// REJ reason when a MAD could not be sent (IBA: the CM's timeout).
constexpr int32_t kCmRejTimeout = 1;

bool is_ud(const CmId* id) { return id->qp_type == IBV_QPT_UD; }

bool handshaking(CmState s) {
  return s == CmState::kConnecting || s == CmState::kRequested || s == CmState::kAccepted ||
         s == CmState::kResponded;
}

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

CmManager::CmManager(const RouterConfig& cfg, const HostObjects& objects, CmEnvironment& env)
    : cfg_(cfg), objects_(objects), env_(env) {
  if (int err = kept_.open(cfg.kept_cm_path); err != 0)
    spdlog::warn("{}: {}; rdma_cm ids will not outlive this process", cfg.kept_cm_path,
                 strerror(err));
  else if (kept_.left() != 0)
    spdlog::info("rdma_cm ids of the previous process: {} to continue", kept_.left());
}

void CmManager::add_st(CmId* id) {
  changed(id);
  if (next_comm_ == 1) next_comm_ = static_cast<uint32_t>(now_ns()) | 1;  // differs per start
  do {
    id->comm = next_comm_++;
  } while (id->comm == 0 || by_comm_.count(id->comm) != 0);
  by_comm_[id->comm] = id;
}

const Container* CmManager::container_of(const CmId* id) const { return id->owner->container(); }

const Container* CmManager::holder_st(const Container* self, const std::string& tenant,
                                      const std::string& network, const CmAddress& ip) const {
  if (ip.is_loopback()) return self;
  auto v4 = ip.v4();
  if (!v4 || *v4 == 0) return nullptr;
  return env_.container_with_vip(*v4, tenant, network);
}

int CmManager::host_of(const CmAddress& ip, const Container* asker) const {
  if (ip.is_loopback()) return kThisHost;
  auto v4 = ip.v4();
  if (!v4 || *v4 == 0) return -2;
  if (holder_st(asker, asker->tenant, asker->network, ip) != nullptr) return kThisHost;
  proto::AhAttr ah;
  ah.is_global = 1;
  ah.dgid = proto::gid_for_vip(*v4);
  const int h = env_.cm_host_for(ah, asker);
  return h >= 0 ? h : -2;
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
  changed(id);
  if (id->state != CmState::kIdle) return EINVAL;
  if (!may_bind_ip(id, addr)) return EADDRNOTAVAIL;
  if (int err = take_port(id, addr); err != 0) return err;
  id->state = CmState::kBound;
  return 0;
}

int CmManager::resolve_addr_st(CmId* id, const CmAddress* src, const CmAddress& dst,
                               uint32_t timeout_ms) {
  changed(id);
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
  const bool ethernet = cfg_.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (auto mgid = group_gid(id, dst)) {  // a multicast group: resolved at once, as ARP does
    id->remote_lid = ethernet ? 0 : proto::mlid_of(*mgid);
    id->remote_gid = *mgid;
    id->state = CmState::kAddrResolved;
    post_st(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    return 0;
  }
  const Container* self = container_of(id);
  const int host = host_of(dst, self);
  if (host == kThisHost) {
    const Container* to = holder_st(self, self->tenant, self->network, dst);
    if (to == nullptr) {
      post_st(id, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
      return 0;
    }
    id->remote_lid = ethernet ? 0 : to->lid;
    id->remote_gid = to->gid;
    id->state = CmState::kAddrResolved;
    post_st(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
  } else if (host >= 0) {
    // ARP's part: the router of the host whose subnet holds dst answers for its containers.
    id->state = CmState::kResolving;
    id->peer_host = host;
    id->peer_comm = 0;
    wait_st(id, timeout_ms != 0 ? uint64_t{timeout_ms} * 1000000 : cfg_.cm_timeout_ns);
    send_st(host, mad_from(id, proto::kCmAddrQuery));
  } else {
    post_st(id, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
  }
  return 0;
}

std::optional<proto::Gid> CmManager::group_gid(const CmId* id, const CmAddress& a) const {
  const bool ethernet = cfg_.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (auto v4 = a.v4()) {
    if ((*v4 >> 28) != 0xe) return std::nullopt;  // 224.0.0.0/4
    const uint8_t ip[4] = {static_cast<uint8_t>(*v4 >> 24), static_cast<uint8_t>(*v4 >> 16),
                           static_cast<uint8_t>(*v4 >> 8), static_cast<uint8_t>(*v4)};
    return proto::mgid_of_ipv4(ip, ethernet, id->ps == RDMA_PS_UDP);
  }
  if (a.family == proto::kCmAf6 && a.ip[0] == 0xff) return a.ip;  // an IPv6 group is its MGID
  return std::nullopt;
}

int CmManager::join_multicast_st(CmId* id, const CmAddress& group) {
  changed(id);
  if (id->state == CmState::kIdle) return EINVAL;
  auto mgid = group_gid(id, group);
  if (!mgid) return EINVAL;
  proto::CmEventMsg ev = event_for(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
  const bool ethernet = cfg_.link_layer == IBV_LINK_LAYER_ETHERNET;
  ev.remote_lid = ethernet ? 0 : proto::mlid_of(*mgid);
  ev.remote_gid = *mgid;
  ev.dst = group.to_wire();
  ev.param.qp_num = proto::kMulticastQpn;
  ev.param.qkey = proto::kRdmaUdpQkey;
  post_st(id, ev);
  return 0;
}

int CmManager::resolve_route_st(CmId* id) {
  changed(id);
  if (id->state != CmState::kAddrResolved) return EINVAL;
  id->state = CmState::kRouteResolved;
  post_st(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  return 0;
}

int CmManager::listen_st(CmId* id, uint32_t backlog) {
  changed(id);
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
  const Qp* qp = objects_.qp_by_qpn(qpn);
  return qp != nullptr && qp->owner->container() == container_of(id);
}

int CmManager::connect_st(CmId* id, const proto::CmConnParam& p) {
  changed(id);
  if (id->state != CmState::kRouteResolved && id->state != CmState::kAddrResolved) return EINVAL;
  const uint8_t limit = is_ud(id) ? proto::kCmSidrReqPrivateData : proto::kCmReqPrivateData;
  if (p.private_data_len > limit) return EINVAL;
  if (!is_ud(id) && !owns_qp(id, p.qp_num)) return EINVAL;
  const int host = host_of(id->remote, container_of(id));
  if (host < kThisHost) return EHOSTUNREACH;  // its address moved away since it resolved
  id->active = true;
  id->state = CmState::kConnecting;
  id->peer_host = host;
  id->peer_comm = 0;
  wait_st(id, cfg_.cm_timeout_ns);
  proto::CmMad m = mad_from(id, is_ud(id) ? proto::kCmSidrReq : proto::kCmReq);
  m.param = p;
  send_st(host, m);
  return 0;
}

int CmManager::accept_st(CmId* id, const proto::CmConnParam& p) {
  changed(id);
  if (id->state != CmState::kRequested || id->peer_comm == 0) return EINVAL;
  const uint8_t limit = is_ud(id) ? proto::kCmSidrRepPrivateData : proto::kCmRepPrivateData;
  if (p.private_data_len > limit) return EINVAL;
  if (!owns_qp(id, p.qp_num)) return EINVAL;
  unlink_request(id);
  proto::CmMad m = mad_from(id, is_ud(id) ? proto::kCmSidrRep : proto::kCmRep);
  m.param = p;
  if (is_ud(id)) {
    // SIDR REP: the requester learns the QP and Q_Key; no connection remains.
    id->state = CmState::kEstablished;
    send_to_peer_st(id, m);
    id->peer_comm = 0;
  } else {
    id->state = CmState::kAccepted;
    wait_st(id, cfg_.cm_timeout_ns);
    send_to_peer_st(id, m);
  }
  return 0;
}

int CmManager::reject_st(CmId* id, const uint8_t* data, uint8_t len) {
  changed(id);
  if (len > proto::kCmRejPrivateData) return EINVAL;
  const bool passive = id->state == CmState::kRequested;
  if (!passive && id->state != CmState::kResponded) return EINVAL;
  unlink_request(id);
  proto::CmMad m = mad_from(id, is_ud(id) ? proto::kCmSidrRep : proto::kCmRej);
  m.status = is_ud(id) ? kSidrReject : proto::kCmRejConsumerDefined;
  m.param.private_data_len = len;
  if (len != 0) std::memcpy(m.param.private_data.data(), data, len);
  id->state = CmState::kClosed;
  send_to_peer_st(id, m);
  id->peer_comm = 0;
  return 0;
}

int CmManager::establish_st(CmId* id) {
  changed(id);
  if (id->state == CmState::kResponded) {
    // The active side's RTU.
    id->state = CmState::kEstablished;
    send_to_peer_st(id, mad_from(id, proto::kCmRtu));
    return 0;
  }
  if (id->state == CmState::kAccepted) {
    // rdma_notify: the passive QP saw traffic before the RTU (IBV_EVENT_COMM_EST); the RTU
    // that follows changes nothing.
    id->state = CmState::kEstablished;
    post_st(id, RDMA_CM_EVENT_ESTABLISHED, 0);
    return 0;
  }
  return id->state == CmState::kEstablished ? 0 : EINVAL;
}

int CmManager::disconnect_st(CmId* id) {
  changed(id);
  switch (id->state) {
    case CmState::kClosed: return 0;  // the peer disconnected first: DREQ already seen
    case CmState::kEstablished:
    case CmState::kAccepted:
    case CmState::kResponded: break;
    default: return EINVAL;
  }
  if (is_ud(id)) return EINVAL;
  send_to_peer_st(id, mad_from(id, proto::kCmDreq));
  id->state = CmState::kClosed;
  id->peer_comm = 0;
  post_st(id, RDMA_CM_EVENT_DISCONNECTED, 0);
  return 0;
}

int CmManager::set_option_st(CmId* id, uint32_t option, uint32_t value) {
  changed(id);
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
  if (detached_) return;
  // A listener's unanswered requests are refused (their ids stay, closed, with their owner).
  for (CmId* r : std::vector<CmId*>(id->requests)) {
    r->listener = nullptr;
    reject_st(r, nullptr, 0);
  }
  id->requests.clear();
  // The peer learns as from the IB CM: REJ before the RTU, DREQ after, SIDR REP for a UD
  // request never answered. An active id still waiting for its REP names its peer by the REJ
  // alone (receiver_st matches it by our communication ID).
  if (id->peer_comm != 0 || id->state == CmState::kConnecting) {
    proto::CmMad m;
    if (id->state == CmState::kEstablished || id->state == CmState::kAccepted ||
        id->state == CmState::kResponded) {
      m = mad_from(id, id->state == CmState::kEstablished ? proto::kCmDreq : proto::kCmRej);
    } else if (is_ud(id)) {
      m = mad_from(id, id->state == CmState::kRequested ? proto::kCmSidrRep : 0);
    } else {
      m = mad_from(id, handshaking(id->state) ? proto::kCmRej : 0);
    }
    m.status = is_ud(id) ? kSidrReject : proto::kCmRejConsumerDefined;
    if (m.type != 0) send_st(id->peer_host, m);
  }
  unlink_request(id);
  release_port(id);
  if (id->channel != nullptr) id->channel->users--;
  id->channel = nullptr;
  by_comm_.erase(id->comm);  // its deadline, if any, is skipped when it comes
  if (id->requester_comm != 0) by_request_.erase(request_key(id->peer_host, id->requester_comm));
  if (id->kept_dirty) std::erase(dirty_, id);
  kept_.release(id->kept_slot);
  id->kept_slot = KeptCmIds::kNoSlot;
}

// ---- MADs ----

proto::CmMad CmManager::mad_from(const CmId* id, uint8_t type) const {
  const Container* c = container_of(id);
  proto::CmMad m;
  m.type = type;
  m.qp_type = id->qp_type;
  m.ps = id->ps;
  m.sender_comm = id->comm;
  m.receiver_comm = id->peer_comm;
  m.lid = cfg_.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : c->lid;
  m.gid = c->gid;
  m.tenant = proto::to_wire_name<std::tuple_size_v<proto::Name>>(c->tenant);
  m.network = proto::to_wire_name<std::tuple_size_v<proto::Name>>(c->network);
  m.src = id->local.to_wire();
  m.dst = id->remote.to_wire();
  return m;
}

void CmManager::send_to_peer_st(CmId* id, proto::CmMad m) {
  if (id->peer_comm == 0) return;
  m.receiver_comm = id->peer_comm;
  send_st(id->peer_host, m);
}

// To this router: handed over in place. To another: a datagram on the host link; if it
// cannot go (no link, queue full), the sender hears what the IB CM reports when its MAD is
// never answered, at once.
void CmManager::send_st(int host, const proto::CmMad& m) {
  if (host == kThisHost) return on_mad_st(kThisHost, m);
  if (env_.send_cm_st(host, m)) return;
  proto::CmMad failed;
  failed.sender_comm = m.receiver_comm;
  failed.receiver_comm = m.sender_comm;
  switch (m.type) {
    case proto::kCmReq: failed.type = proto::kCmRej, failed.status = kCmRejTimeout; break;
    case proto::kCmSidrReq:
      failed.type = proto::kCmSidrRep, failed.status = kSidrUnsupported;
      break;
    case proto::kCmAddrQuery:
      failed.type = proto::kCmAddrReply, failed.status = -EHOSTUNREACH;
      break;
    default: return;  // an answer that is lost: its receiver hears of the link's loss
  }
  on_mad_st(host, failed);
}

// An answer to a MAD whose receiver does not exist (any more), as if from that receiver.
void CmManager::answer_st(int host, const proto::CmMad& to, uint8_t type, int32_t status) {
  proto::CmMad m;
  m.type = type;
  m.status = status;
  m.sender_comm = to.receiver_comm;
  m.receiver_comm = to.sender_comm;
  send_st(host, m);
}

// The id a MAD is for: the one it names, if the sender is that id's peer (or the host it
// asked, before the peer's ID is known). A REJ naming nobody is for the passive id whose
// requester it comes from (the requester went away before it knew that id).
CmId* CmManager::receiver_st(int from, const proto::CmMad& m) const {
  if (m.receiver_comm == 0)
    return m.type == proto::kCmRej ? made_for_request(from, m.sender_comm) : nullptr;
  auto it = by_comm_.find(m.receiver_comm);
  if (it == by_comm_.end()) return nullptr;
  CmId* id = it->second;
  if (id->peer_host != from || (id->peer_comm != 0 && id->peer_comm != m.sender_comm))
    return nullptr;
  return id;
}

CmId* CmManager::made_for_request(int from, uint32_t comm) const {
  auto it = by_request_.find(request_key(from, comm));
  return it == by_request_.end() ? nullptr : it->second;
}

void CmManager::on_mad_st(int from, const proto::CmMad& m) {
  if (m.type == proto::kCmReq || m.type == proto::kCmSidrReq) return on_request_st(from, m);
  if (m.type == proto::kCmAddrQuery) return on_addr_query_st(from, m);
  CmId* id = receiver_st(from, m);
  if (id == nullptr) {
    // A REP for an id that is gone: refuse it, so the passive side does not wait forever.
    if (m.type == proto::kCmRep) answer_st(from, m, proto::kCmRej, proto::kCmRejConsumerDefined);
    // A DREQ for an id whose process has not resumed since a restart: it hears it when it
    // does (restore_st).
    if (m.type == proto::kCmDreq && m.receiver_comm != 0)
      kept_.disconnect_left(m.receiver_comm, from, m.sender_comm);
    return;
  }
  proto::CmEventMsg ev;
  switch (m.type) {
    case proto::kCmAddrReply:
      if (id->state != CmState::kResolving) return;
      if (m.status != 0) {
        id->state = CmState::kBound;
        post_st(id, RDMA_CM_EVENT_ADDR_ERROR, m.status < 0 ? m.status : -EHOSTUNREACH);
        return;
      }
      id->remote_lid = m.lid;
      id->remote_gid = m.gid;
      id->state = CmState::kAddrResolved;
      post_st(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
      return;
    case proto::kCmRep:
      if (id->state != CmState::kConnecting || is_ud(id)) return;
      id->peer_comm = m.sender_comm;
      id->remote_lid = m.lid;
      id->remote_gid = m.gid;
      id->state = CmState::kResponded;
      ev = event_for(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
      ev.param = as_received(m.param, proto::kCmRepPrivateData);
      return post_st(id, ev);
    case proto::kCmSidrRep:
      if (id->state != CmState::kConnecting || !is_ud(id)) return;
      if (m.status != 0) return lose_peer_st(id, m.status, nullptr, 0);
      id->remote_lid = m.lid;
      id->remote_gid = m.gid;
      id->state = CmState::kEstablished;
      ev = event_for(id, RDMA_CM_EVENT_ESTABLISHED, 0);
      ev.param = as_received(m.param, proto::kCmSidrRepPrivateData);
      post_st(id, ev);
      id->peer_comm = 0;
      return;
    case proto::kCmRtu:
      if (id->state != CmState::kAccepted) return;  // after rdma_notify: nothing new
      id->state = CmState::kEstablished;
      return post_st(id, RDMA_CM_EVENT_ESTABLISHED, 0);
    case proto::kCmRej:
      if (!handshaking(id->state)) return;
      return lose_peer_st(id, m.status, m.param.private_data.data(),
                          std::min(m.param.private_data_len, proto::kCmRejPrivateData));
    case proto::kCmDreq:
      if (!closed_by_dreq(id->state)) return;
      id->state = CmState::kClosed;
      id->peer_comm = 0;
      return post_st(id, RDMA_CM_EVENT_DISCONNECTED, 0);
    default: return;
  }
}

// REQ / SIDR REQ: a new passive id on the listener of the destination, in the listener's
// session and channel (ucma's connection request), or a refusal.
void CmManager::on_request_st(int from, const proto::CmMad& m) {
  const bool ud = m.type == proto::kCmSidrReq;
  auto dst = CmAddress::from_wire(m.dst);
  auto src = CmAddress::from_wire(m.src);
  if (!dst || !src || m.sender_comm == 0) return;
  // A REQ seen before (hostile, or a peer's repeat): its passive id exists already.
  if (made_for_request(from, m.sender_comm) != nullptr) return;
  // Loopback names the requester's own container, so only requests from this router may use it.
  const Container* self = nullptr;
  if (from == kThisHost) {
    auto it = by_comm_.find(m.sender_comm);
    if (it == by_comm_.end()) return;
    self = container_of(it->second);
  }
  const Container* c =
      holder_st(self, proto::from_wire_name(m.tenant), proto::from_wire_name(m.network), *dst);
  CmId* l = c == nullptr ? nullptr : find_listener(c, m.ps, *dst);
  if (l == nullptr || is_ud(l) != ud || l->requests.size() >= kMaxWaitingRequests) {
    if (ud) return answer_st(from, m, proto::kCmSidrRep, kSidrUnsupported);
    return answer_st(from, m, proto::kCmRej, proto::kCmRejInvalidServiceId);
  }
  auto made = std::make_unique<CmId>();
  made->channel = l->channel;
  made->ps = l->ps;
  made->qp_type = l->qp_type;
  made->state = CmState::kRequested;
  made->local = *dst;
  made->remote = *src;
  made->remote_lid = m.lid;
  made->remote_gid = m.gid;
  made->peer_host = from;
  made->peer_comm = m.sender_comm;
  made->requester_comm = m.sender_comm;
  made->listener = l;
  CmId* n = l->owner->adopt_cm_id(std::move(made));
  add_st(n);
  by_request_[request_key(from, m.sender_comm)] = n;
  n->channel->users++;
  l->requests.push_back(n);
  proto::CmEventMsg ev = event_for(n, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  ev.listen_id = l->handle;
  ev.param = as_received(m.param, ud ? proto::kCmSidrReqPrivateData : proto::kCmReqPrivateData);
  post_st(n, ev);
}

// Another router asks who holds an address in its container's tenant and network.
void CmManager::on_addr_query_st(int from, const proto::CmMad& m) {
  auto dst = CmAddress::from_wire(m.dst);
  if (from == kThisHost || !dst || m.sender_comm == 0) return;
  const Container* c =
      holder_st(nullptr, proto::from_wire_name(m.tenant), proto::from_wire_name(m.network), *dst);
  proto::CmMad r;
  r.type = proto::kCmAddrReply;
  r.receiver_comm = m.sender_comm;
  if (c == nullptr) {
    r.status = -EHOSTUNREACH;
  } else {
    r.lid = cfg_.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : c->lid;
    r.gid = c->gid;
  }
  send_st(from, r);
}

void CmManager::lose_peer_st(CmId* id, int32_t reject_reason, const uint8_t* data, uint8_t len) {
  const CmState was = id->state;
  id->state = CmState::kClosed;
  id->peer_comm = 0;
  unlink_request(id);
  if (was == CmState::kEstablished) {
    if (!is_ud(id)) post_st(id, RDMA_CM_EVENT_DISCONNECTED, 0);
    return;
  }
  if (!handshaking(was)) return;
  if (is_ud(id)) return post_st(id, RDMA_CM_EVENT_UNREACHABLE, reject_reason);
  proto::CmEventMsg ev = event_for(id, RDMA_CM_EVENT_REJECTED, reject_reason);
  if (data != nullptr && len != 0) std::memcpy(ev.param.private_data.data(), data, len);
  ev.param.private_data_len = proto::kCmRejPrivateData;
  post_st(id, ev);
}

void CmManager::on_host_lost_st(int host, bool link_only) {
  std::vector<CmId*> lost;
  for (const auto& [comm, id] : by_comm_)
    if (id->peer_host == host && (id->state == CmState::kResolving || handshaking(id->state) ||
                                  (!link_only && id->state == CmState::kEstablished)))
      lost.push_back(id);
  for (CmId* id : lost) {
    if (id->state == CmState::kResolving) {
      id->state = CmState::kBound;
      post_st(id, RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH);
    } else if (id->peer_comm != 0 || id->state == CmState::kConnecting) {
      lose_peer_st(id, is_ud(id) ? kSidrUnsupported : kCmRejTimeout, nullptr, 0);
    }
  }
}

// ---- Ids that outlive the process ----

void CmManager::changed(CmId* id) {
  if (!kept_.persistent() || id->kept_dirty) return;
  id->kept_dirty = true;
  dirty_.push_back(id);
}

KeptCmId CmManager::record_of(const CmId* id) const {
  KeptCmId k;
  k.netns_ino = container_of(id)->netns_ino;
  k.pid = id->owner->pid();
  k.handle = id->handle;
  k.comm = id->comm;
  k.channel = id->channel != nullptr ? id->channel->handle : 0;
  k.backlog = id->backlog;
  k.peer_comm = id->peer_comm;
  k.requester_comm = id->requester_comm;
  k.peer_host = id->peer_host;
  k.ps = id->ps;
  k.remote_lid = id->remote_lid;
  k.qp_type = id->qp_type;
  k.state = static_cast<uint8_t>(id->state);
  k.active = id->active;
  k.bound = id->bound;
  k.reuseaddr = id->reuseaddr;
  k.afonly = id->afonly;
  k.local = id->local.to_wire();
  k.remote = id->remote.to_wire();
  k.remote_gid = id->remote_gid;
  return k;
}

void CmManager::keep_changed_st() {
  for (CmId* id : dirty_) {
    id->kept_dirty = false;
    id->kept_slot = kept_.keep(id->kept_slot, record_of(id));
  }
  dirty_.clear();
  if (kept_.left() != 0) kept_.drop_stale(now_ns());
}

// An address as a kept record holds it: none yet (family kCmAfNone), or one of from_wire's.
std::optional<CmAddress> CmManager::kept_address(const proto::CmAddr& a) {
  if (a.family == proto::kCmAfNone) return CmAddress{};
  return CmAddress::from_wire(a);
}

void CmManager::detach_st() {
  if (!kept_.persistent()) return;
  keep_changed_st();
  kept_.close();
  detached_ = true;
}

int CmManager::restore_st(CmId* id, const KeptCmId& k, uint32_t slot) {
  id->kept_slot = slot;  // kept or released with the id from now on
  auto local = kept_address(k.local);
  auto remote = kept_address(k.remote);
  if (!local || !remote || k.comm == 0 || k.state > static_cast<uint8_t>(CmState::kClosed) ||
      !env_.cm_host_known(k.peer_host))
    return EINVAL;
  if (by_comm_.count(k.comm) != 0) return EADDRINUSE;
  id->comm = k.comm;
  id->ps = k.ps;
  id->qp_type = k.qp_type;
  id->active = k.active != 0;
  id->reuseaddr = k.reuseaddr != 0;
  id->afonly = k.afonly != 0;
  id->backlog = k.backlog;
  id->remote = *remote;
  id->remote_lid = k.remote_lid;
  id->remote_gid = k.remote_gid;
  id->peer_host = k.peer_host;
  id->peer_comm = k.peer_comm;
  id->local = *local;
  if (k.bound != 0) {
    if (int err = take_port(id, *local); err != 0) return err;
  }
  by_comm_[id->comm] = id;
  if (k.requester_comm != 0) {
    id->requester_comm = k.requester_comm;
    by_request_[request_key(id->peer_host, id->requester_comm)] = id;
  }
  id->state = static_cast<CmState>(k.state);
  changed(id);
  // What it was waiting for went with the old process: it fails as its wait would have.
  if (k.peer_left != 0) {
    id->peer_comm = 0;
    post_st(id, RDMA_CM_EVENT_DISCONNECTED, 0);
  } else if (id->state == CmState::kResolving) {
    id->state = CmState::kBound;
    post_st(id, RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT);
  } else if (handshaking(id->state)) {
    // expire_st fails it at once: REJ to the peer, UNREACHABLE here.
    if (id->state != CmState::kConnecting) id->state = CmState::kAccepted;
    wait_st(id, 0);
  }
  return 0;
}

void CmManager::wait_st(CmId* id, uint64_t ns) {
  id->deadline_ns = now_ns() + ns;
  deadlines_.emplace(id->deadline_ns, id->comm);
}

void CmManager::expire_st(uint64_t now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const auto [deadline, comm] = *deadlines_.begin();
    deadlines_.erase(deadlines_.begin());
    auto it = by_comm_.find(comm);
    if (it == by_comm_.end() || it->second->deadline_ns != deadline) continue;
    CmId* id = it->second;
    id->deadline_ns = 0;
    if (id->state == CmState::kResolving) {
      id->state = CmState::kBound;
      post_st(id, RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT);
    } else if (id->state == CmState::kConnecting || id->state == CmState::kAccepted) {
      // The IB CM gives up: REJ (timeout) to the peer, UNREACHABLE here.
      proto::CmMad m = mad_from(id, is_ud(id) ? 0 : proto::kCmRej);
      m.status = kCmRejTimeout;
      if (m.type != 0) send_st(id->peer_host, m);
      id->state = CmState::kClosed;
      id->peer_comm = 0;
      post_st(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
    }
  }
}

void CmManager::unlink_request(CmId* id) {
  if (id->listener == nullptr) return;
  std::erase(id->listener->requests, id);
  id->listener = nullptr;
}

// ---- Events ----

proto::CmEventMsg CmManager::event_for(const CmId* id, uint32_t type, int32_t status) const {
  proto::CmEventMsg ev;
  ev.event = type;
  ev.status = status;
  ev.id = id->handle;
  ev.ps = id->ps;
  ev.qp_type = id->qp_type;
  ev.src = id->local.to_wire();
  ev.dst = id->remote.to_wire();
  ev.remote_lid = id->remote_lid;
  ev.remote_gid = id->remote_gid;
  return ev;
}

void CmManager::post_st(CmId* id, uint32_t type, int32_t status) {
  post_st(id, event_for(id, type, status));
}

void CmManager::post_st(CmId* id, const proto::CmEventMsg& ev) {
  changed(id);  // every change another party makes is reported by an event
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
  if (!flush_st(ch)) env_.watch_cm_channel_st(ch);
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
