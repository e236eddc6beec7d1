#include "abi/rdmacm/router_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "abi/rdmacm/ops.h"
#include "common/interface_holding.h"
#include "proto/resume_retry.h"

namespace wharf::rdmacm {
namespace {

// The MTU of the interface holding `vip` (host order), or 1500 when none does.
int netdev_mtu(uint32_t vip) {
  constexpr int kEthernetMtu = 1500;
  const std::string name = interface_holding(vip);
  if (name.empty()) return kEthernetMtu;
  ifreq req{};
  std::snprintf(req.ifr_name, sizeof(req.ifr_name), "%s", name.c_str());
  int mtu = kEthernetMtu;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &req) == 0) mtu = req.ifr_mtu;
  if (fd >= 0) close(fd);
  return mtu;
}

// The kernel's iboe_get_mtu: the largest IB MTU that fits an Ethernet MTU after RoCE's
// headers (GRH 40, UDP 8, BTH 12, XRC ETH 4, AtomicETH 28, ICRC 4).
ibv_mtu roce_mtu(int netdev_mtu) {
  const int room = netdev_mtu - (40 + 8 + 12 + 4 + 28 + 4);
  if (room >= 4096) return IBV_MTU_4096;
  if (room >= 2048) return IBV_MTU_2048;
  if (room >= 1024) return IBV_MTU_1024;
  if (room >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

}  // namespace

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
  try {
    l->socket_ = proto::router_socket_path();
  } catch (...) {
    delete l;
    errno = ENOMEM;
    return nullptr;
  }
  int err = l->client_.connect(l->socket_.c_str());
  if (err == 0)
    err = l->client_.call(proto::Op::kCmOpen, proto::CmOpenReq{}, nullptr, 0, &l->info_);
  if (err != 0) {
    delete l;
    // As librdmacm without the rdma_cm kernel module: no device to manage connections on.
    errno = (err == ENOENT || err == ECONNREFUSED) ? ENODEV : err;
    return nullptr;
  }
  l->client_.set_resumer([l](proto::RouterClient* fresh) { return l->resume(fresh); });
  // Without the watch, the link resumes at its next call instead (the ids' peers' events,
  // such as a DISCONNECTED, wait in the router until then).
  (void)l->watch_.start(&l->client_);
  link = l;
  return link;
}

int RouterLink::resume(proto::RouterClient* fresh) {
  auto greet = [&] {
    proto::CmOpenReq req;
    req.resume = 1;
    req.resume_lid = info_.lid;  // the container keeps its LID, as a verbs session asks
    proto::CmOpenRep info;
    return fresh->call(proto::Op::kCmOpen, req, nullptr, 0, &info);
  };
  auto restore = [&] {
    if (int err = restore_channels(fresh); err != 0) return err;
    proto::CmResumeRep rep;
    return fresh->call(proto::Op::kCmResume, proto::Empty{}, nullptr, 0, &rep);
  };
  const int err =
      proto::resume_with_retries(fresh, socket_.c_str(), greet, restore, [] { return false; });
  if (err != 0) release_channels();
  return err;
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
  path_mtu_ = port.active_mtu;
  if (ethernet()) path_mtu_ = std::min(path_mtu_, roce_mtu(netdev_mtu(info_.vip)));
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

ibv_xrcd* RouterLink::xrcd() {
  std::lock_guard<std::mutex> g(device_mu_);
  int err = open_device_locked();
  if (err != 0) {
    errno = err;
    return nullptr;
  }
  if (xrcd_ == nullptr) {
    ibv_xrcd_init_attr attr{};
    attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    attr.fd = -1;  // a domain of this process's own
    attr.oflags = O_CREAT;
    xrcd_ = ibv_open_xrcd(context_, &attr);
  }
  return xrcd_;
}

}  // namespace wharf::rdmacm
