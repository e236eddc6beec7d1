#include "container/router_session.h"

#include <errno.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "proto/messages.h"
#include "proto/wire_names.h"

namespace wharf::container {
namespace {

constexpr int kRegisterTimeoutMs = 10000;
constexpr int kUnregisterTimeoutMs = 2000;

constexpr size_t kShort = std::tuple_size_v<proto::Name>;
constexpr size_t kLong = std::tuple_size_v<proto::LongName>;
constexpr size_t kSandbox = std::tuple_size_v<proto::SandboxId>;

}  // namespace

int RouterSession::connect_quietly(const std::string& socket_path) {
  path_ = socket_path;
  int err;
  do {
    err = client_.connect(socket_path.c_str());
  } while (err == EINTR);
  return err;
}

bool RouterSession::connect(const std::string& socket_path) {
  if (int err = connect_quietly(socket_path); err != 0) {
    std::fprintf(stderr, "%s: cannot connect to router at %s: %s (is wharfd running?)\n",
                 program_invocation_short_name, socket_path.c_str(), std::strerror(err));
    return false;
  }
  return true;
}

pid_t RouterSession::router_pid() const {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(client_.fd(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return cred.pid;
}

template <class Req, class Rep>
int RouterSession::call(proto::Op op, const Req& req, const int* fds, int nfds, int timeout_ms,
                        bool quiet, Rep* rep) {
  client_.set_reply_timeout_ms(timeout_ms);
  const int status = client_.call(op, req, fds, nfds, rep);
  if (status == 0 || client_.connected()) return status;
  if (!quiet)
    std::fprintf(stderr, "%s: router %s: %s\n", program_invocation_short_name, path_.c_str(),
                 status == ETIMEDOUT ? "no reply within timeout" : std::strerror(status));
  return -1;
}

int RouterSession::router_info_quietly(Info* info, int timeout_ms) {
  proto::RouterInfoRep rep;
  const int status =
      call(proto::Op::kRouterInfo, proto::Empty{}, nullptr, 0, timeout_ms, true, &rep);
  if (status != 0) return status;
  info->host.assign(rep.host.data(), strnlen(rep.host.data(), rep.host.size()));
  info->node_guid = rep.node_guid;
  info->link_layer = rep.link_layer;
  return 0;
}

bool RouterSession::router_info(Info* info) {
  const int status = router_info_quietly(info);
  if (status > 0)
    std::fprintf(stderr, "%s: router %s did not say who it is (%s)\n",
                 program_invocation_short_name, path_.c_str(), std::strerror(status));
  else if (status < 0)
    std::fprintf(stderr, "%s: router %s: no answer\n", program_invocation_short_name,
                 path_.c_str());
  return status == 0;
}

int RouterSession::register_call(const std::string& tenant, const std::string& network,
                                 const std::string& name, uint32_t vip, uint16_t want_lid,
                                 int netns_fd, int timeout_ms, bool quiet, uint16_t* lid) {
  proto::RegisterContainerReq req;
  req.name = proto::to_wire_name<kShort>(name);
  req.tenant = proto::to_wire_name<kShort>(tenant);
  req.network = proto::to_wire_name<kShort>(network);
  req.vip = vip;
  req.lid = want_lid;
  proto::RegisterContainerRep rep;
  const int status =
      call(proto::Op::kRegisterContainer, req, &netns_fd, 1, timeout_ms, quiet, &rep);
  if (status == 0) *lid = rep.lid;
  return status;
}

int RouterSession::register_container_quietly(const std::string& tenant, const std::string& network,
                                              const std::string& name, uint32_t vip,
                                              uint16_t want_lid, int netns_fd, uint16_t* lid,
                                              int timeout_ms) {
  return register_call(tenant, network, name, vip, want_lid, netns_fd, timeout_ms, true, lid);
}

bool RouterSession::register_container(const std::string& tenant, const std::string& network,
                                       const std::string& name, uint32_t vip, uint16_t want_lid,
                                       int netns_fd, uint16_t* lid) {
  const int status =
      register_call(tenant, network, name, vip, want_lid, netns_fd, kRegisterTimeoutMs, false, lid);
  if (status < 0) return false;
  if (status != 0) {
    std::fprintf(stderr, "%s: router refused to register container %s: %s\n",
                 program_invocation_short_name, name.c_str(), std::strerror(status));
    if (want_lid != 0 && (status == ERANGE || status == EADDRINUSE))
      std::fprintf(stderr,
                   "%s: the orchestrator gave it LID %u, which the router %s (see the "
                   "router's log and `wharfctl host show`)\n",
                   program_invocation_short_name, want_lid,
                   status == ERANGE ? "does not hand out" : "has given another container");
    return false;
  }
  return true;
}

void RouterSession::unregister_container(const std::string& name) {
  if (!client_.connected()) return;
  proto::UnregisterContainerReq req;
  req.name = proto::to_wire_name<kShort>(name);
  proto::Empty rep;
  int status =
      call(proto::Op::kUnregisterContainer, req, nullptr, 0, kUnregisterTimeoutMs, true, &rep);
  if (status > 0) {
    std::fprintf(stderr, "%s: router could not unregister container %s: %s\n",
                 program_invocation_short_name, name.c_str(), std::strerror(status));
  }
  client_.close();
}

int RouterSession::hold_container(const HeldContainer& c, int netns_fd, uint16_t* lid) {
  proto::HoldContainerReq req;
  req.sandbox = proto::to_wire_name<kSandbox>(c.sandbox);
  req.tenant = proto::to_wire_name<kLong>(c.tenant);
  req.network = proto::to_wire_name<kLong>(c.network);
  req.name = proto::to_wire_name<kLong>(c.name);
  req.vip = c.vip;
  req.lid = c.lid;
  proto::RegisterContainerRep rep;
  const int status =
      call(proto::Op::kHoldContainer, req, &netns_fd, 1, kRegisterTimeoutMs, true, &rep);
  if (status == 0) *lid = rep.lid;
  return status;
}

int RouterSession::release_held_container(const std::string& sandbox) {
  proto::SandboxRef req;
  req.sandbox = proto::to_wire_name<kSandbox>(sandbox);
  proto::Empty rep;
  return call(proto::Op::kReleaseContainer, req, nullptr, 0, kRegisterTimeoutMs, true, &rep);
}

int RouterSession::held_container(HeldContainer* c) {
  proto::SandboxRef req;
  req.sandbox = proto::to_wire_name<kSandbox>(c->sandbox);
  proto::HeldContainerRep rep;
  const int status =
      call(proto::Op::kHeldContainer, req, nullptr, 0, kRegisterTimeoutMs, true, &rep);
  if (status != 0) return status;
  c->tenant = proto::from_wire_name(rep.tenant);
  c->network = proto::from_wire_name(rep.network);
  c->name = proto::from_wire_name(rep.name);
  c->vip = rep.vip;
  c->lid = rep.lid;
  c->netns_ino = rep.netns_ino;
  return 0;
}

}  // namespace wharf::container
