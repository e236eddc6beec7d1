#include "abi/rdmacm/router_link.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace wharf::rdmacm {

RouterLink* RouterLink::get() {
  static std::mutex mu;
  // Never destroyed: ids and channels may still be used by other threads during exit.
  static RouterLink* link = nullptr;
  std::lock_guard<std::mutex> g(mu);
  if (link != nullptr) return link;
  auto* l = new (std::nothrow) RouterLink();
  if (l == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  int err = l->client_.connect(proto::router_socket_path());
  if (err == 0) err = l->client_.call(proto::Op::kCmOpen, proto::Empty{}, nullptr, 0, &l->info_);
  if (err != 0) {
    delete l;
    // As librdmacm without the rdma_cm kernel module: no device to manage connections on.
    errno = (err == ENOENT || err == ECONNREFUSED) ? ENODEV : err;
    return nullptr;
  }
  link = l;
  return link;
}

int RouterLink::open_device_locked() {
  if (context_ != nullptr) return 0;
  int num = 0;
  if (devices_ == nullptr) devices_ = ibv_get_device_list(&num);
  if (devices_ == nullptr) return errno != 0 ? errno : ENODEV;
  ibv_device* dev = nullptr;
  for (int i = 0; devices_[i] != nullptr; ++i) {
    if (std::strcmp(ibv_get_device_name(devices_[i]), "wharf0") == 0) dev = devices_[i];
  }
  if (dev == nullptr) dev = devices_[0];
  if (dev == nullptr) return ENODEV;
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr) return errno != 0 ? errno : ENODEV;
  ibv_device_attr attr{};
  ibv_port_attr port{};
  int err = ibv_query_device(ctx, &attr);
  if (err == 0) err = ibv_query_port(ctx, 1, &port);
  if (err != 0) {
    ibv_close_device(ctx);
    return err;
  }
  max_initiator_depth_ = static_cast<uint8_t>(std::min(attr.max_qp_init_rd_atom, 255));
  max_responder_resources_ = static_cast<uint8_t>(std::min(attr.max_qp_rd_atom, 255));
  active_mtu_ = port.active_mtu;
  context_ = ctx;
  return 0;
}

ibv_context* RouterLink::device() {
  std::lock_guard<std::mutex> g(device_mu_);
  int err = open_device_locked();
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  return context_;
}

ibv_pd* RouterLink::pd() {
  std::lock_guard<std::mutex> g(device_mu_);
  int err = open_device_locked();
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  if (pd_ == nullptr) pd_ = ibv_alloc_pd(context_);
  return pd_;
}

}  // namespace wharf::rdmacm
