// rsockets: the socket table, verbs resources, and making progress (rdma_cm events and
// completions) with or without sleeping. See rsocket.h.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "abi/rdmacm/rsocket.h"

namespace wharf::rdmacm::rs {
namespace {

std::mutex table_mu;
std::unordered_map<int, std::shared_ptr<Socket>>& table() {
  static auto* t = new std::unordered_map<int, std::shared_ptr<Socket>>();  // outlives exit
  return *t;
}

int set_nonblocking(int fd) {
  const int fl = fcntl(fd, F_GETFL);
  return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ? errno : 0;
}

int register_slots(Socket* s, SlotBuffer* b, uint32_t size, uint32_t count) {
  b->size = size;
  b->mem.assign(static_cast<size_t>(size) * count, 0);
  b->mr = ibv_reg_mr(s->pd, b->mem.data(), b->mem.size(), IBV_ACCESS_LOCAL_WRITE);
  return b->mr != nullptr ? 0 : errno;
}

void dispatch_completion(Socket* s, const ibv_wc& wc) {
  if (s->kind == Kind::kStream)
    stream_completion(s, wc);
  else
    dgram_completion(s, wc);
}

}  // namespace

std::shared_ptr<Socket> find(int id) {
  std::lock_guard<std::mutex> g(table_mu);
  auto it = table().find(id);
  return it == table().end() ? nullptr : it->second;
}

int create(int domain, int type, int protocol) {
  if (domain != AF_INET && domain != AF_INET6) {
    errno = EAFNOSUPPORT;
    return -1;
  }
  const int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  Kind kind;
  if (base == SOCK_STREAM && (protocol == 0 || protocol == IPPROTO_TCP)) {
    kind = Kind::kStream;
  } else if (base == SOCK_DGRAM && (protocol == 0 || protocol == IPPROTO_UDP)) {
    kind = Kind::kDgram;
  } else {
    errno = EPROTONOSUPPORT;
    return -1;
  }
  auto s = std::make_shared<Socket>();
  s->kind = kind;
  s->domain = domain;
  s->nonblocking = (type & SOCK_NONBLOCK) != 0;
  s->channel = rdma_create_event_channel();
  if (s->channel == nullptr) return -1;
  if (int err = set_nonblocking(s->channel->fd); err != 0) {
    rdma_destroy_event_channel(s->channel);
    errno = err;
    return -1;
  }
  if (rdma_create_id(s->channel, &s->cm, s.get(),
                     kind == Kind::kStream ? RDMA_PS_TCP : RDMA_PS_UDP) != 0) {
    const int err = errno;
    rdma_destroy_event_channel(s->channel);
    errno = err;
    return -1;
  }
  s->id = s->channel->fd;
  std::lock_guard<std::mutex> g(table_mu);
  table()[s->id] = s;
  return s->id;
}

int destroy(int id) {
  std::shared_ptr<Socket> s;
  {
    std::lock_guard<std::mutex> g(table_mu);
    auto it = table().find(id);
    if (it == table().end()) {
      errno = EBADF;
      return -1;
    }
    s = it->second;
    table().erase(it);
  }
  std::unique_lock<std::mutex> lock(s->mu);
  if (s->kind == Kind::kStream) stream_close(s.get(), lock);
  free_resources(s.get());
  for (rdma_cm_id* p : s->pending) rdma_destroy_id(p);
  s->pending.clear();
  if (s->resolving != nullptr) rdma_destroy_id(s->resolving);
  if (s->cm != nullptr) rdma_destroy_id(s->cm);
  s->cm = nullptr;
  rdma_destroy_event_channel(s->channel);
  s->channel = nullptr;
  s->state = State::kClosed;
  return 0;
}

int make_cq_and_buffers(Socket* s, uint32_t recv_size, uint32_t recv_count, uint32_t send_size,
                        uint32_t send_count) {
  s->comp = ibv_create_comp_channel(s->verbs);
  if (s->comp == nullptr) return errno;
  if (int err = set_nonblocking(s->comp->fd); err != 0) return err;
  s->cq = ibv_create_cq(s->verbs, static_cast<int>(recv_count + send_count + 8), s, s->comp, 0);
  if (s->cq == nullptr) return errno;
  if (int err = register_slots(s, &s->recv, recv_size, recv_count); err != 0) return err;
  if (int err = register_slots(s, &s->send, send_size, send_count); err != 0) return err;
  s->free_send.clear();
  for (uint32_t i = 0; i < send_count; ++i) s->free_send.push_back(send_count - 1 - i);
  return 0;
}

void free_resources(Socket* s) {
  if (s->qp != nullptr) {
    if (s->kind == Kind::kStream && s->cm != nullptr && s->cm->qp == s->qp)
      rdma_destroy_qp(s->cm);
    else
      ibv_destroy_qp(s->qp);
    s->qp = nullptr;
  }
  for (auto& [key, peer] : s->peers)
    if (peer.ah != nullptr) ibv_destroy_ah(peer.ah);
  s->peers.clear();
  if (s->resolved.ah != nullptr) ibv_destroy_ah(s->resolved.ah);
  s->resolved = Peer{};
  for (LocalMap& m : s->local_maps) ibv_dereg_mr(m.mr);
  s->local_maps.clear();
  if (s->cq != nullptr) {
    if (s->unacked_events != 0) ibv_ack_cq_events(s->cq, s->unacked_events);
    s->unacked_events = 0;
    ibv_destroy_cq(s->cq);
    s->cq = nullptr;
  }
  if (s->comp != nullptr) ibv_destroy_comp_channel(s->comp);
  s->comp = nullptr;
  for (SlotBuffer* b : {&s->recv, &s->send}) {
    if (b->mr != nullptr) ibv_dereg_mr(b->mr);
    b->mr = nullptr;
  }
  // A datagram socket's PD is its own; a stream socket uses its rdma_cm id's.
  if (s->kind == Kind::kDgram && s->pd != nullptr) ibv_dealloc_pd(s->pd);
  s->pd = nullptr;
}

void fail_socket(Socket* s, int err) {
  if (s->state == State::kClosed) return;
  s->state = State::kError;
  if (s->so_error == 0) s->so_error = err;
}

void progress(Socket* s) {
  if (s->channel != nullptr) {
    rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(s->channel, &ev) == 0) {
      if (s->kind == Kind::kStream)
        stream_cm_event(s, ev);
      else
        dgram_cm_event(s, ev);
    }
    // The router is gone (its channel ended): as after the kernel's DEVICE_REMOVAL, the socket
    // fails, rather than its waiters waking for ever on the ended channel.
    if (errno == ENODEV) fail_socket(s, ENODEV);
  }
  if (s->cq == nullptr) return;
  ibv_cq* ecq = nullptr;
  void* ectx = nullptr;
  while (ibv_get_cq_event(s->comp, &ecq, &ectx) == 0) ++s->unacked_events;
  if (s->unacked_events >= 64) {
    ibv_ack_cq_events(s->cq, s->unacked_events);
    s->unacked_events = 0;
  }
  ibv_wc wc[16];
  int n;
  while ((n = ibv_poll_cq(s->cq, 16, wc)) > 0)
    for (int i = 0; i < n; ++i) dispatch_completion(s, wc[i]);
}

int wait_fds(Socket* s, pollfd fds[2]) {
  int n = 0;
  if (s->channel != nullptr) fds[n++] = pollfd{s->channel->fd, POLLIN, 0};
  if (s->comp != nullptr) fds[n++] = pollfd{s->comp->fd, POLLIN, 0};
  return n;
}

int sleep_once(Socket* s, std::unique_lock<std::mutex>& lock, int timeout_ms) {
  if (s->cq != nullptr) {
    ibv_req_notify_cq(s->cq, 0);
    // A completion that came before the CQ was armed raises no event: take it now.
    ibv_wc wc[16];
    const int n = ibv_poll_cq(s->cq, 16, wc);
    if (n > 0) {
      for (int i = 0; i < n; ++i) dispatch_completion(s, wc[i]);
      return 0;
    }
  }
  pollfd fds[2];
  const int nfds = wait_fds(s, fds);
  lock.unlock();
  const int r = ::poll(fds, static_cast<nfds_t>(nfds), timeout_ms);
  const int err = errno;
  lock.lock();
  if (r < 0) return err == EINTR ? EINTR : err;
  return r == 0 ? EAGAIN : 0;
}

size_t iov_total(const iovec* iov, int iovcnt) {
  size_t n = 0;
  for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
  return n;
}

socklen_t addr_len(const sockaddr* a) {
  return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

void copy_addr_out(const sockaddr* a, sockaddr* out, socklen_t* len) {
  if (len == nullptr) return;
  const socklen_t full = addr_len(a);
  if (out != nullptr) std::memcpy(out, a, *len < full ? *len : full);
  *len = full;
}

int check_name_buffer(const sockaddr* out, const socklen_t* len) {
  if (len == nullptr) return EFAULT;
  if (static_cast<int>(*len) < 0) return EINVAL;
  return out == nullptr && *len != 0 ? EFAULT : 0;
}

}  // namespace wharf::rdmacm::rs
