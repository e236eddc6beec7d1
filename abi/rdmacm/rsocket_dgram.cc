// Datagram rsockets: a UD QP per socket; datagrams name their sender in a DgramHeader, and a
// first datagram to an address resolves it with rdma_cm's UD service (SIDR). See rsocket.h.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "abi/rdmacm/rsocket.h"

namespace wharf::rdmacm::rs {
namespace {

constexpr int kResolveTimeoutMs = 2000;
constexpr uint32_t kSendDepth = 16;
constexpr uint8_t kHopLimit = 64;

enum WrKind : uint64_t { kRecvWr = 1, kSendWr = 2 };

std::vector<uint8_t> key_of(const sockaddr* a) {
  std::vector<uint8_t> k(reinterpret_cast<const uint8_t*>(a),
                         reinterpret_cast<const uint8_t*>(a) + addr_len(a));
  if (a->sa_family == AF_INET) {  // only family, port and address count
    k.resize(sizeof(sockaddr_in));
    std::memset(k.data() + offsetof(sockaddr_in, sin_zero), 0, sizeof(sockaddr_in::sin_zero));
  }
  return k;
}

int post_recv(Socket* s, uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(s->recv.slot(slot)), s->recv.size, s->recv.mr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = (static_cast<uint64_t>(kRecvWr) << 32) | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(s->qp, &wr, &bad);
}

int to_rts(ibv_qp* qp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qkey = RDMA_UDP_QKEY;
  if (int err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
    return err;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  if (int err = ibv_modify_qp(qp, &a, IBV_QP_STATE)) return err;
  a.qp_state = IBV_QPS_RTS;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

// The UD QP, its CQ and buffers, receives posted.
int make_resources(Socket* s) {
  if (s->qp != nullptr) return 0;
  int n = 0;
  ibv_context** devices = rdma_get_devices(&n);
  if (devices == nullptr || n == 0) {
    if (devices != nullptr) rdma_free_devices(devices);
    return ENODEV;
  }
  s->verbs = devices[0];
  rdma_free_devices(devices);
  ibv_port_attr port{};
  if (ibv_query_port(s->verbs, 1, &port) != 0 || ibv_query_gid(s->verbs, 1, 0, &s->gid) != 0)
    return EIO;
  s->ethernet = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  s->lid = port.lid;
  s->pd = ibv_alloc_pd(s->verbs);
  if (s->pd == nullptr) return errno;
  if (int err = make_cq_and_buffers(s, kGrhSize + kDgramSlotSize, kDgramSlots, kDgramSlotSize,
                                    kSendDepth);
      err != 0)
    return err;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = s->cq;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = kSendDepth;
  init.cap.max_recv_wr = kDgramSlots;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  s->qp = ibv_create_qp(s->pd, &init);
  if (s->qp == nullptr) return errno;
  if (int err = to_rts(s->qp); err != 0) return err;
  for (uint32_t i = 0; i < kDgramSlots; ++i)
    if (int err = post_recv(s, i); err != 0) return err;
  return 0;
}

// Binds to the wildcard address of the socket's family (an ephemeral port) when the
// application did not bind.
int bind_implicitly(Socket* s) {
  if (s->bound) return 0;
  sockaddr_storage any{};
  any.ss_family = static_cast<sa_family_t>(s->domain);
  return dgram_bind(s, reinterpret_cast<sockaddr*>(&any));
}

// Our address as a datagram names it: the bound one, or the device's for a wildcard bind.
void fill_header(Socket* s, DgramHeader* h) {
  *h = DgramHeader{};
  h->magic = kDgramMagic;
  h->qpn = s->qp->qp_num;
  h->lid = s->lid;
  std::memcpy(h->gid, s->gid.raw, 16);
  const sockaddr* local = rdma_get_local_addr(s->cm);
  h->family = local->sa_family;
  if (local->sa_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(local);
    h->port = a->sin6_port;
    std::memcpy(h->addr, &a->sin6_addr, 16);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in*>(local);
    h->port = a->sin_port;
    std::memcpy(h->addr, &a->sin_addr, 4);
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (a->sin_addr.s_addr == 0 && std::memcmp(s->gid.raw, kMapped, 12) == 0)
      std::memcpy(h->addr, s->gid.raw + 12, 4);  // the container's address
  }
}

void header_addr(const DgramHeader& h, sockaddr_storage* out) {
  std::memset(out, 0, sizeof(*out));
  if (h.family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(out);
    a->sin6_family = AF_INET6;
    a->sin6_port = h.port;
    std::memcpy(&a->sin6_addr, h.addr, 16);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(out);
    a->sin_family = AF_INET;
    a->sin_port = h.port;
    std::memcpy(&a->sin_addr, h.addr, 4);
  }
}

// A datagram names who sent it: the way back needs no resolution.
void learn(Socket* s, const DgramHeader& h, const sockaddr_storage& from) {
  std::vector<uint8_t> key = key_of(reinterpret_cast<const sockaddr*>(&from));
  if (s->peers.count(key) != 0) return;
  ibv_ah_attr ah{};
  ah.dlid = h.lid;
  ah.port_num = 1;
  if (s->ethernet) {
    ah.is_global = 1;
    std::memcpy(ah.grh.dgid.raw, h.gid, 16);
    ah.grh.hop_limit = kHopLimit;
  }
  Peer p;
  p.ah = ibv_create_ah(s->pd, &ah);
  if (p.ah == nullptr) return;
  p.qpn = h.qpn;
  p.qkey = RDMA_UDP_QKEY;
  s->peers[key] = p;
}

// The way to `to`: known, learned from its datagrams, or resolved now. 0 or an errno.
int resolve(Socket* s, std::unique_lock<std::mutex>& lock, const sockaddr* to, Peer* out) {
  std::vector<uint8_t> key = key_of(to);
  if (auto it = s->peers.find(key); it != s->peers.end()) {
    *out = it->second;
    return 0;
  }
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(s->channel, &id, s, RDMA_PS_UDP) != 0) return errno;
  s->resolving = id;
  s->resolve_status = 0;
  s->resolved = Peer{};
  int err =
      rdma_resolve_addr(id, nullptr, const_cast<sockaddr*>(to), kResolveTimeoutMs) == 0 ? 0 : errno;
  if (err == 0) {
    const bool old = s->nonblocking;
    s->nonblocking = false;
    err = wait_until(
        s, lock, [&] { return s->resolve_status != 0; }, kResolveTimeoutMs * 2);
    s->nonblocking = old;
    if (err == EAGAIN) err = EHOSTUNREACH;
    if (err == 0 && s->resolve_status < 0) err = -s->resolve_status;
  }
  s->resolving = nullptr;
  rdma_destroy_id(id);
  if (err != 0) return err;
  s->peers[key] = s->resolved;
  *out = s->resolved;
  s->resolved = Peer{};
  return 0;
}

}  // namespace

int dgram_bind(Socket* s, const sockaddr* addr) {
  if (s->bound) return EINVAL;
  if (rdma_bind_addr(s->cm, const_cast<sockaddr*>(addr)) != 0) return errno;
  s->bound = true;
  if (int err = make_resources(s); err != 0) return err;
  // Requests to resolve our address (SIDR) come to this id.
  return rdma_listen(s->cm, 16) == 0 ? 0 : errno;
}

int dgram_connect(Socket* s, std::unique_lock<std::mutex>& lock, const sockaddr* addr) {
  if (int err = bind_implicitly(s); err != 0) return err;
  Peer p;
  if (int err = resolve(s, lock, addr, &p); err != 0) return err;
  std::memcpy(&s->default_dst, addr, addr_len(addr));
  s->has_default = true;
  return 0;
}

void dgram_cm_event(Socket* s, rdma_cm_event* ev) {
  const rdma_cm_event_type type = ev->event;
  rdma_cm_id* id = ev->id;
  if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    // Someone resolves our address: answer with our QP, then the request's id goes.
    rdma_conn_param p{};
    p.qp_num = s->qp != nullptr ? s->qp->qp_num : 0;
    rdma_ack_cm_event(ev);
    if (s->qp != nullptr) (void)rdma_accept(id, &p);
    rdma_destroy_id(id);
    return;
  }
  if (id != s->resolving || s->resolving == nullptr) {
    rdma_ack_cm_event(ev);
    return;
  }
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(id, kResolveTimeoutMs) != 0) s->resolve_status = -errno;
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      rdma_conn_param p{};
      p.qp_num = s->qp->qp_num;
      if (rdma_connect(id, &p) != 0) s->resolve_status = -errno;
      break;
    }
    case RDMA_CM_EVENT_ESTABLISHED: {
      ibv_ah_attr attr = ev->param.ud.ah_attr;
      s->resolved.ah = ibv_create_ah(s->pd, &attr);
      s->resolved.qpn = ev->param.ud.qp_num;
      s->resolved.qkey = ev->param.ud.qkey;
      s->resolve_status = s->resolved.ah != nullptr ? 1 : -EHOSTUNREACH;
      break;
    }
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR: s->resolve_status = -EHOSTUNREACH; break;
    default: break;
  }
  rdma_ack_cm_event(ev);
}

void dgram_completion(Socket* s, const ibv_wc& wc) {
  const uint32_t slot = static_cast<uint32_t>(wc.wr_id);
  if ((wc.wr_id >> 32) != kRecvWr) {
    s->free_send.push_back(slot);
    return;
  }
  if (wc.status != IBV_WC_SUCCESS) return;  // a flush at close
  // A UD receive's first 40 bytes are the GRH's, present or not, and byte_len counts them.
  const uint32_t skip = kGrhSize;
  DgramHeader h{};
  if (wc.byte_len < skip + sizeof(h)) {
    (void)post_recv(s, slot);
    return;
  }
  std::memcpy(&h, s->recv.slot(slot) + skip, sizeof(h));
  if (h.magic != kDgramMagic) {
    (void)post_recv(s, slot);
    return;
  }
  Datagram d{slot,
             static_cast<uint32_t>(skip + sizeof(h)),
             static_cast<uint32_t>(wc.byte_len - skip - sizeof(h)),
             {}};
  header_addr(h, &d.from);
  learn(s, h, d.from);
  s->datagrams.push_back(d);
}

ssize_t dgram_send(Socket* s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                   int flags, const sockaddr* to) {
  if (to == nullptr) {
    if (!s->has_default) {
      errno = EDESTADDRREQ;
      return -1;
    }
    to = reinterpret_cast<const sockaddr*>(&s->default_dst);
  }
  const size_t len = iov_total(iov, iovcnt);
  if (len > kDgramMax) {
    errno = EMSGSIZE;
    return -1;
  }
  if (int err = bind_implicitly(s); err != 0) {
    errno = err;
    return -1;
  }
  Peer p;
  if (int err = resolve(s, lock, to, &p); err != 0) {
    errno = err;
    return -1;
  }
  const bool dontwait = s->nonblocking || (flags & MSG_DONTWAIT) != 0;
  if (dontwait) progress(s);
  if (int err = wait_until(
          s, lock, [&] { return !s->free_send.empty(); }, dontwait ? 0 : -1);
      err != 0) {
    errno = err;
    return -1;
  }
  const uint32_t slot = s->free_send.back();
  s->free_send.pop_back();
  uint8_t* buf = s->send.slot(slot);
  DgramHeader h;
  fill_header(s, &h);
  std::memcpy(buf, &h, sizeof(h));
  size_t at = sizeof(h);
  for (int i = 0; i < iovcnt; ++i) {
    std::memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
    at += iov[i].iov_len;
  }
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), static_cast<uint32_t>(at), s->send.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = (static_cast<uint64_t>(kSendWr) << 32) | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = p.ah;
  wr.wr.ud.remote_qpn = p.qpn;
  wr.wr.ud.remote_qkey = p.qkey;
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(s->qp, &wr, &bad); err != 0) {
    s->free_send.push_back(slot);
    errno = err;
    return -1;
  }
  return static_cast<ssize_t>(len);
}

ssize_t dgram_recv(Socket* s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                   int flags, sockaddr* from, socklen_t* fromlen) {
  if (!s->bound) {  // nothing can arrive before an address exists
    if (int err = bind_implicitly(s); err != 0) {
      errno = err;
      return -1;
    }
  }
  const bool dontwait = s->nonblocking || (flags & MSG_DONTWAIT) != 0;
  if (int err = wait_until(
          s, lock, [&] { return !s->datagrams.empty(); }, dontwait ? 0 : -1);
      err != 0) {
    errno = err;
    return -1;
  }
  const Datagram d = s->datagrams.front();
  const uint8_t* payload = s->recv.slot(d.slot) + d.offset;
  size_t copied = 0;
  for (int i = 0; i < iovcnt && copied < d.len; ++i) {
    const size_t n = std::min<size_t>(iov[i].iov_len, d.len - copied);
    std::memcpy(iov[i].iov_base, payload + copied, n);
    copied += n;
  }
  copy_addr_out(reinterpret_cast<const sockaddr*>(&d.from), from, fromlen);
  if ((flags & MSG_PEEK) == 0) {
    s->datagrams.pop_front();
    (void)post_recv(s, d.slot);
  }
  return static_cast<ssize_t>(copied);
}

}  // namespace wharf::rdmacm::rs
