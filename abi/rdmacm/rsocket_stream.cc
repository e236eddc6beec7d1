// Stream rsockets: connections, the credit-based message protocol, riomap/riowrite. See
// rsocket.h for the protocol.
#include <arpa/inet.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "abi/rdmacm/rsocket.h"

namespace wharf::rdmacm::rs {
namespace {

constexpr int kResolveTimeoutMs = 2000;
constexpr int kCloseTimeoutMs = 2000;
constexpr uint32_t kNoSlot = 0xffffffff;

enum WrKind : uint64_t { kRecvWr = 1, kSendWr = 2, kWriteWr = 3 };
uint64_t wr_id(WrKind k, uint32_t slot) { return (static_cast<uint64_t>(k) << 32) | slot; }
WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(id >> 32); }
uint32_t wr_slot(uint64_t id) { return static_cast<uint32_t>(id); }

int post_recv(Socket* s, uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(s->recv.slot(slot)), s->recv.size, s->recv.mr->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wr_id(kRecvWr, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  return ibv_post_recv(s->qp, &wr, &bad);
}

// A receive slot is free again: post it, and count it for the peer.
void repost(Socket* s, uint32_t slot) {
  if (post_recv(s, slot) != 0) {
    fail_socket(s, ECONNRESET);
    return;
  }
  ++s->to_return;
}

// Sends one message of `type` with `len` bytes gathered from iov (or none), returning the
// receives we posted again since the last message. The caller checked credits and a slot.
int post_message(Socket* s, MsgType type, const iovec* iov, int iovcnt, size_t skip, size_t len) {
  uint32_t slot = kNoSlot;
  ibv_sge sge{};
  ibv_send_wr wr{};
  if (len != 0) {
    slot = s->free_send.back();
    s->free_send.pop_back();
    uint8_t* dst = s->send.slot(slot);
    size_t copied = 0;
    for (int i = 0; i < iovcnt && copied < len; ++i) {
      if (skip >= iov[i].iov_len) {
        skip -= iov[i].iov_len;
        continue;
      }
      const size_t n = std::min(iov[i].iov_len - skip, len - copied);
      std::memcpy(dst + copied, static_cast<const uint8_t*>(iov[i].iov_base) + skip, n);
      copied += n;
      skip = 0;
    }
    sge = ibv_sge{reinterpret_cast<uintptr_t>(dst), static_cast<uint32_t>(len), s->send.mr->lkey};
    wr.sg_list = &sge;
    wr.num_sge = 1;
  }
  wr.wr_id = wr_id(kSendWr, slot);
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(make_imm(type, s->to_return));
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(s->qp, &wr, &bad); err != 0) {
    if (slot != kNoSlot) s->free_send.push_back(slot);
    return err;
  }
  s->granted += s->to_return;
  s->to_return = 0;
  --s->credits;
  return 0;
}

int post_control(Socket* s, MsgType type, const void* payload, size_t len) {
  iovec iov{const_cast<void*>(payload), len};
  return post_message(s, type, &iov, 1, 0, len);
}

// Copies n bytes from src into the iov, starting at byte pos of it.
void scatter(const iovec* iov, int iovcnt, size_t pos, const uint8_t* src, size_t n) {
  for (int i = 0; i < iovcnt && n > 0; ++i) {
    if (pos >= iov[i].iov_len) {
      pos -= iov[i].iov_len;
      continue;
    }
    const size_t m = std::min(iov[i].iov_len - pos, n);
    std::memcpy(static_cast<uint8_t*>(iov[i].iov_base) + pos, src, m);
    src += m;
    n -= m;
    pos = 0;
  }
}

bool connected(const Socket* s) { return s->state == State::kConnected; }

// Gives receives back to the peer when it runs low (it keeps its last credit for this very
// message) or when half of them are waiting to be reported.
void maybe_return_credits(Socket* s) {
  if (!connected(s) || s->to_return == 0 || s->credits == 0 || s->free_send.empty()) return;
  const uint64_t peer_credits = s->granted - s->consumed;
  if (s->to_return >= kRecvSlots / 2 || peer_credits <= 2)
    (void)post_control(s, MsgType::kCredit, nullptr, 0);
}

// Data and mapping messages leave one credit for credit returns.
bool can_send_data(const Socket* s) { return s->credits >= 2 && !s->free_send.empty(); }

// Sends the queued mapping messages that credits allow; true when none is left.
bool flush_control(Socket* s) {
  while (!s->control.empty() && connected(s) && can_send_data(s)) {
    const auto& [type, msg] = s->control.front();
    if (post_control(s, type, &msg, sizeof(msg)) != 0) break;
    s->control.pop_front();
  }
  return s->control.empty();
}

int connect_error(int status) {
  if (status < 0) return -status;
  return ECONNREFUSED;
}

// QP, CQ and buffers for a connection on `id`, receives posted. 0 or an errno.
int setup_connection(Socket* s, rdma_cm_id* id) {
  s->verbs = id->verbs;
  s->pd = id->pd;
  if (int err = make_cq_and_buffers(s, kSlotSize, kRecvSlots, kSlotSize, kSendSlots); err != 0)
    return err;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = s->cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = kSendSlots + 8;
  init.cap.max_recv_wr = kRecvSlots;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  init.sq_sig_all = 0;
  if (rdma_create_qp(id, s->pd, &init) != 0) return errno;
  s->qp = id->qp;
  for (uint32_t i = 0; i < kRecvSlots; ++i)
    if (int err = post_recv(s, i); err != 0) return err;
  s->credits = kRecvSlots;
  s->granted = kRecvSlots;
  return 0;
}

rdma_conn_param conn_param() {
  rdma_conn_param p{};
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.retry_count = 7;
  p.rnr_retry_count = 7;
  return p;
}

void established(Socket* s) {
  s->state = State::kConnected;
  flush_control(s);
  std::memcpy(&s->peer_addr, rdma_get_peer_addr(s->cm), addr_len(rdma_get_peer_addr(s->cm)));
}

}  // namespace

void stream_cm_event(Socket* s, rdma_cm_event* ev) {
  const rdma_cm_event_type type = ev->event;
  const int status = ev->status;
  rdma_cm_id* id = ev->id;
  if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    s->pending.push_back(id);
    rdma_ack_cm_event(ev);
    return;
  }
  rdma_ack_cm_event(ev);
  if (id != s->cm) return;  // a request not accepted yet: it goes with the listener
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(s->cm, kResolveTimeoutMs) != 0)
        fail_socket(s, errno);
      else
        s->state = State::kResolvingRoute;
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (int err = setup_connection(s, s->cm); err != 0) {
        fail_socket(s, err);
        break;
      }
      rdma_conn_param p = conn_param();
      if (rdma_connect(s->cm, &p) != 0)
        fail_socket(s, errno);
      else
        s->state = State::kConnecting;
      break;
    }
    case RDMA_CM_EVENT_ESTABLISHED: established(s); break;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR: fail_socket(s, status < 0 ? -status : EHOSTUNREACH); break;
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_REJECTED:
      fail_socket(s, type == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : connect_error(status));
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      s->disconnected = true;
      s->peer_fin = true;
      break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL: fail_socket(s, ENODEV); break;
    default: break;
  }
}

void stream_completion(Socket* s, const ibv_wc& wc) {
  const WrKind kind = wr_kind(wc.wr_id);
  const uint32_t slot = wr_slot(wc.wr_id);
  if (kind != kRecvWr && slot != kNoSlot) s->free_send.push_back(slot);
  if (wc.status != IBV_WC_SUCCESS) {
    // Flushes after the connection went down are expected; anything else breaks it.
    if (wc.status != IBV_WC_WR_FLUSH_ERR || !(s->disconnected || s->fin_sent))
      fail_socket(s, ECONNRESET);
    return;
  }
  if (kind != kRecvWr) {
    maybe_return_credits(s);
    return;
  }
  const uint32_t imm = ntohl(wc.imm_data);
  s->credits += imm_credits(imm);
  ++s->consumed;
  switch (imm_type(imm)) {
    case MsgType::kData:
      if (wc.byte_len != 0) {
        s->ready.push_back(Received{slot, wc.byte_len, 0});
        break;
      }
      repost(s, slot);
      break;
    case MsgType::kFin:
      s->peer_fin = true;
      repost(s, slot);
      break;
    case MsgType::kIoMap:
    case MsgType::kIoUnmap: {
      IoMapMsg m{};
      std::memcpy(&m, s->recv.slot(slot), std::min<size_t>(sizeof(m), wc.byte_len));
      if (imm_type(imm) == MsgType::kIoMap) {
        s->remote_maps.push_back(RemoteMap{m.offset, m.addr, m.len, m.rkey});
      } else {
        std::erase_if(s->remote_maps, [&](const RemoteMap& r) { return r.offset == m.offset; });
      }
      repost(s, slot);
      break;
    }
    default: repost(s, slot); break;
  }
  flush_control(s);
  maybe_return_credits(s);
}

bool stream_readable(Socket* s) {
  if (s->state == State::kListening) return !s->pending.empty();
  return !s->ready.empty() || s->peer_fin || s->rd_shut || s->state == State::kError;
}

bool stream_writable(Socket* s) {
  if (s->state == State::kError) return true;
  return connected(s) && !s->fin_sent && !s->disconnected && can_send_data(s);
}

int stream_connect(Socket* s, std::unique_lock<std::mutex>& lock, const sockaddr* addr) {
  switch (s->state) {
    case State::kIdle: break;
    case State::kConnected: return EISCONN;
    case State::kListening: return EINVAL;
    case State::kError: return s->so_error != 0 ? s->so_error : EINVAL;
    default: return EALREADY;
  }
  if (rdma_resolve_addr(s->cm, nullptr, const_cast<sockaddr*>(addr), kResolveTimeoutMs) != 0)
    return errno;
  s->state = State::kResolvingAddr;
  // Resolution is local (or one question to another router): it is waited for even on a
  // non-blocking socket, so the request reaches the listener without this socket being
  // polled again; only the connection's establishment is left to the application's polls.
  const bool nonblocking = s->nonblocking;
  s->nonblocking = false;
  int err = wait_until(
      s, lock, [&] { return s->state == State::kConnecting || connected(s); },
      kResolveTimeoutMs * 2);
  s->nonblocking = nonblocking;
  if (err == EAGAIN) err = ETIMEDOUT;
  if (err != 0) return err;
  if (nonblocking) return connected(s) ? 0 : EINPROGRESS;
  return wait_until(
      s, lock, [&] { return connected(s); }, -1);
}

int stream_accept(Socket* l, std::unique_lock<std::mutex>& lock, sockaddr* addr, socklen_t* addrlen,
                  int* accepted) {
  if (l->state != State::kListening) return EINVAL;
  if (int err = wait_until(
          l, lock, [&] { return !l->pending.empty(); }, -1);
      err != 0)
    return err;
  rdma_cm_id* id = l->pending.front();
  l->pending.pop_front();
  const int nid = create(l->domain, SOCK_STREAM, 0);
  if (nid < 0) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return errno;
  }
  std::shared_ptr<Socket> ns = find(nid);
  std::unique_lock<std::mutex> nlock(ns->mu);
  // The new socket takes the request's id in place of the one it was made with.
  rdma_destroy_id(ns->cm);
  ns->cm = id;
  int err = rdma_migrate_id(id, ns->channel) == 0 ? 0 : errno;
  id->context = ns.get();
  if (err == 0) err = setup_connection(ns.get(), id);
  rdma_conn_param p = conn_param();
  if (err == 0 && rdma_accept(id, &p) != 0) err = errno;
  if (err != 0) {
    nlock.unlock();
    (void)destroy(nid);
    return err;
  }
  ns->state = State::kAccepting;
  ns->nonblocking = false;
  std::memcpy(&ns->peer_addr, rdma_get_peer_addr(id), addr_len(rdma_get_peer_addr(id)));
  copy_addr_out(reinterpret_cast<sockaddr*>(&ns->peer_addr), addr, addrlen);
  *accepted = nid;
  return 0;
}

ssize_t stream_send(Socket* s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                    int flags) {
  const size_t total = iov_total(iov, iovcnt);
  const bool dontwait = s->nonblocking || (flags & MSG_DONTWAIT) != 0;
  size_t sent = 0;
  while (sent < total || total == 0) {
    progress(s);
    if (s->fin_sent || s->disconnected) {
      errno = EPIPE;
      return sent > 0 ? static_cast<ssize_t>(sent) : -1;
    }
    if (s->state == State::kError || s->state == State::kIdle || s->state == State::kListening) {
      errno = s->state == State::kError && s->so_error != 0 ? s->so_error : ENOTCONN;
      return sent > 0 ? static_cast<ssize_t>(sent) : -1;
    }
    if (total == 0) return 0;
    if (connected(s) && flush_control(s) && can_send_data(s)) {
      const size_t n = std::min<size_t>(total - sent, kSlotSize);
      if (int err = post_message(s, MsgType::kData, iov, iovcnt, sent, n); err != 0) {
        errno = err;
        return sent > 0 ? static_cast<ssize_t>(sent) : -1;
      }
      sent += n;
      continue;
    }
    if (dontwait) {
      if (sent > 0) return static_cast<ssize_t>(sent);
      errno = EAGAIN;
      return -1;
    }
    if (int err = sleep_once(s, lock, -1); err != 0 && err != EAGAIN) {
      errno = err;
      return sent > 0 ? static_cast<ssize_t>(sent) : -1;
    }
  }
  return static_cast<ssize_t>(sent);
}

ssize_t stream_recv(Socket* s, std::unique_lock<std::mutex>& lock, const iovec* iov, int iovcnt,
                    int flags) {
  const size_t total = iov_total(iov, iovcnt);
  const bool dontwait = s->nonblocking || (flags & MSG_DONTWAIT) != 0;
  const bool peek = (flags & MSG_PEEK) != 0;
  size_t got = 0;
  for (;;) {
    progress(s);
    // What has arrived, in order; a peek leaves it there.
    size_t copied = 0;
    for (size_t k = 0; k < s->ready.size() && got + copied < total;) {
      Received& r = s->ready[k];
      const size_t n = std::min<size_t>(total - got - copied, r.len - r.off);
      scatter(iov, iovcnt, got + copied, s->recv.slot(r.slot) + r.off, n);
      copied += n;
      if (peek) {
        ++k;
        continue;
      }
      r.off += static_cast<uint32_t>(n);
      if (r.off != r.len) break;
      const uint32_t slot = r.slot;
      s->ready.pop_front();
      repost(s, slot);
    }
    if (peek) return static_cast<ssize_t>(copied);
    got += copied;
    if (copied != 0) maybe_return_credits(s);
    const bool enough = (flags & MSG_WAITALL) == 0 || got == total;
    if ((got > 0 && enough) || total == 0) return static_cast<ssize_t>(got);
    if (s->peer_fin || s->rd_shut) return static_cast<ssize_t>(got);  // end of stream
    if (s->state == State::kError) {
      if (got > 0) return static_cast<ssize_t>(got);
      errno = s->so_error != 0 ? s->so_error : ECONNRESET;
      return -1;
    }
    if (s->state == State::kIdle || s->state == State::kListening) {
      errno = ENOTCONN;
      return -1;
    }
    if (dontwait) {
      if (got > 0) return static_cast<ssize_t>(got);
      errno = EAGAIN;
      return -1;
    }
    if (int err = sleep_once(s, lock, -1); err != 0 && err != EAGAIN) {
      if (got > 0) return static_cast<ssize_t>(got);
      errno = err;
      return -1;
    }
  }
}

int stream_shutdown(Socket* s, std::unique_lock<std::mutex>& lock, int how) {
  if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) return EINVAL;
  if (s->state != State::kConnected && s->state != State::kAccepting && s->state != State::kError)
    return ENOTCONN;
  if (how != SHUT_WR) s->rd_shut = true;
  if (how == SHUT_RD || s->fin_sent || s->disconnected || s->state == State::kError) return 0;
  // The FIN may take the last credit.
  const bool old = s->nonblocking;
  s->nonblocking = false;
  const int err = wait_until(
      s, lock, [&] { return connected(s) && s->credits >= 1 && !s->free_send.empty(); },
      kCloseTimeoutMs);
  s->nonblocking = old;
  if (err == 0 && post_control(s, MsgType::kFin, nullptr, 0) == 0) s->fin_sent = true;
  return 0;
}

void stream_close(Socket* s, std::unique_lock<std::mutex>& lock) {
  if (s->state == State::kConnected || s->state == State::kAccepting) {
    (void)stream_shutdown(s, lock, SHUT_RDWR);
    // What was sent reaches the peer before the connection goes.
    s->nonblocking = false;
    (void)wait_until(
        s, lock, [&] { return s->free_send.size() == kSendSlots || s->disconnected; },
        kCloseTimeoutMs);
    rdma_disconnect(s->cm);
  }
  s->state = State::kClosed;
}

off_t stream_iomap(Socket* s, std::unique_lock<std::mutex>&, void* buf, size_t len, int prot,
                   off_t offset) {
  if (buf == nullptr || len == 0 || (prot & ~(PROT_READ | PROT_WRITE)) != 0 ||
      (prot & PROT_WRITE) == 0) {
    errno = EINVAL;
    return -1;
  }
  if (s->state == State::kError || s->state == State::kIdle || s->state == State::kListening) {
    errno = s->state == State::kError ? ECONNRESET : ENOTCONN;
    return -1;
  }
  if (offset == -1) offset = static_cast<off_t>(reinterpret_cast<uintptr_t>(buf));
  ibv_mr* mr = ibv_reg_mr(s->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) return -1;
  s->local_maps.push_back(LocalMap{static_cast<uint64_t>(offset), buf, len, mr});
  // The peer learns of it before anything sent after this call.
  s->control.emplace_back(
      MsgType::kIoMap,
      IoMapMsg{static_cast<uint64_t>(offset), reinterpret_cast<uintptr_t>(buf), len, mr->rkey, 0});
  flush_control(s);
  return offset;
}

int stream_iounmap(Socket* s, std::unique_lock<std::mutex>&, void* buf, size_t len) {
  auto it = std::find_if(s->local_maps.begin(), s->local_maps.end(),
                         [&](const LocalMap& m) { return m.buf == buf && m.len == len; });
  if (it == s->local_maps.end()) return EINVAL;
  s->control.emplace_back(MsgType::kIoUnmap, IoMapMsg{it->offset, 0, 0, 0, 0});
  flush_control(s);
  ibv_dereg_mr(it->mr);
  s->local_maps.erase(it);
  return 0;
}

ssize_t stream_iowrite(Socket* s, std::unique_lock<std::mutex>& lock, const void* buf, size_t count,
                       off_t offset, int flags) {
  const bool dontwait = s->nonblocking || (flags & MSG_DONTWAIT) != 0;
  if (count == 0) return 0;
  for (;;) {
    progress(s);
    if (s->state == State::kError) {
      errno = s->so_error != 0 ? s->so_error : ECONNRESET;
      return -1;
    }
    if (!connected(s) || s->fin_sent) {
      errno = s->fin_sent ? EPIPE : ENOTCONN;
      return -1;
    }
    const auto off = static_cast<uint64_t>(offset);
    auto it = std::find_if(s->remote_maps.begin(), s->remote_maps.end(), [&](const RemoteMap& m) {
      return off >= m.offset && off - m.offset < m.len;
    });
    if (it == s->remote_maps.end()) {
      errno = EINVAL;
      return -1;
    }
    if (!s->free_send.empty()) {
      const size_t n = std::min<size_t>({count, kSlotSize, it->len - (off - it->offset)});
      const uint32_t slot = s->free_send.back();
      s->free_send.pop_back();
      std::memcpy(s->send.slot(slot), buf, n);
      ibv_sge sge{reinterpret_cast<uintptr_t>(s->send.slot(slot)), static_cast<uint32_t>(n),
                  s->send.mr->lkey};
      ibv_send_wr wr{};
      wr.wr_id = wr_id(kWriteWr, slot);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = it->addr + (off - it->offset);
      wr.wr.rdma.rkey = it->rkey;
      ibv_send_wr* bad = nullptr;
      if (int err = ibv_post_send(s->qp, &wr, &bad); err != 0) {
        s->free_send.push_back(slot);
        errno = err;
        return -1;
      }
      return static_cast<ssize_t>(n);
    }
    if (dontwait) {
      errno = EAGAIN;
      return -1;
    }
    if (int err = sleep_once(s, lock, -1); err != 0 && err != EAGAIN) {
      errno = err;
      return -1;
    }
  }
}

}  // namespace wharf::rdmacm::rs
