// The tenant networks a sweep point puts on a Wharf router besides the engine's own (the
// `networks` dimension): containers registered with the router as wharf-run registers them,
// each with a network namespace of its own and in a network of its own of tenant
// "wharf-scala". They stay idle: what they add is the per-network state the router and its
// peers keep (network numbers, address and isolation rules, what the other hosts learn),
// which is what the dimension scales; the engine's traffic runs in the host's network.
// Registering needs root (the router refuses anyone else).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "container/router_session.h"

namespace wharf::scala {

// Network namespaces made on demand and kept for the process's life (one per network, shared
// by both routers: the same namespace may be a container on each).
class NamespacePool {
 public:
  // The fd of namespace i, making namespaces up to i; -1 and *error if that fails.
  int get(size_t i, std::string* error);

 private:
  std::vector<UniqueFd> fds_;
};

class TenantNetworks {
 public:
  // side: 0 for the local router, 1 for the remote; it keeps the two's container names and
  // addresses apart (networks themselves are shared: each spans both hosts).
  TenantNetworks(std::string socket, uint32_t side, NamespacePool* pool)
      : socket_(std::move(socket)), side_(side), pool_(pool) {}

  // Makes exactly `count` extra networks registered (registering or unregistering the
  // difference). "" or why not.
  std::string hold(size_t count);

 private:
  std::string socket_;
  uint32_t side_;
  NamespacePool* pool_;
  std::vector<std::unique_ptr<container::RouterSession>> sessions_;  // one per network
};

// Makes this process a container of its own on Wharf routers: moves it into a new network
// namespace and registers that with each router, at the vIP given for it, in the router's
// default network. On Ethernet routers across hosts the engine needs it: an unregistered
// process's GID is link-local there, and other hosts do not route it. Needs root; call it
// before any device is opened and before threads start (the whole process moves).
class OwnContainer {
 public:
  // sockets[i] at vips[i] (host order); one router given twice is registered once. "" or why
  // not.
  std::string join(const std::vector<std::string>& sockets, const std::vector<uint32_t>& vips);

 private:
  UniqueFd netns_;
  std::vector<std::unique_ptr<container::RouterSession>> sessions_;
};

// The most extra networks a side can hold: their addresses come from a /18 of 198.19.0.0/16.
inline constexpr size_t kMaxTenantNetworks = (1u << 14) - 2;

}  // namespace wharf::scala
