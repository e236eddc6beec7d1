// Host-side plumbing of a container: the shared bridge, its network namespace and veth pair.
//
// Layout (host namespace on the left):
//   wharfbr0 (bridge, gateway IP) -- wv-NAME  <veth>  eth0 (VIP/prefix) in netns wharf-NAME
// (`--bridge` names another bridge: networks whose addresses overlap each take their own.)
//
// The host namespace is the router's: our own, where wharf-run creates the bridge on first
// use and removes it with the last container, or a wharf-lab host's named namespace, whose
// bridge and container subnet belong to the lab.
#pragma once

#include <cstdint>
#include <string>

#include "common/unique_fd.h"
#include "lab_routes.h"

namespace wharf::run {

constexpr const char* kLockDir = "/run/wharf";
constexpr const char* kLockPath = "/run/wharf/wharf-run.lock";

// Exclusive flock on kLockPath, serialising bridge creation and namespace setup/teardown
// between concurrent wharf-runs. Released on destruction.
class HostLock {
 public:
  HostLock() = default;
  // Waits up to timeout_ms. Prints an error and returns false on failure.
  [[nodiscard]] bool acquire(int timeout_ms);

 private:
  UniqueFd fd_;
};

struct NetConfig {
  std::string name;  // container name (already validated)
  uint32_t vip = 0;  // host order
  int prefix = 0;
  uint32_t bridge_ip = 0;  // host order
  std::string bridge;      // the bridge it joins in our namespace (a lab host's is wharfbr0)
  bool verbose = false;
  std::string host_netns;  // "" = ours; else the router's named namespace (a wharf-lab host)
  // On a lab host: the address is not of the host's subnet (lab_routes.h). The container
  // holds it as a /32 and reaches the bridge's address as an on-link gateway.
  bool guest = false;
};

// The address and prefix of wharf-lab host `host_netns`'s bridge. Prints an error and returns
// false when the host has no such bridge.
[[nodiscard]] bool lab_bridge_address(const std::string& host_netns, uint32_t* ip, int* prefix);

// Deletes bridge `bridge` when no container port is attached any more. Caller holds HostLock.
void remove_bridge_if_unused(const std::string& bridge, bool verbose);

// Creates bridge `bridge` if missing, then makes sure it has bridge_ip/prefix and is up.
// Caller holds HostLock.
[[nodiscard]] bool ensure_bridge(const std::string& bridge, uint32_t bridge_ip, int prefix,
                                 bool verbose);

// The bridge container `name`'s host-side veth is attached to, or "" (no such veth).
std::string bridge_of(const std::string& name);

// Refuses (with a message naming --cleanup where useful) when the container's namespace or
// host-side veth (in host_netns) already exists. Caller holds HostLock.
[[nodiscard]] bool check_name_free(const std::string& name, const std::string& host_netns);

// Removes whatever is left of container `name`: processes in its namespace, the veth pair and
// the namespace. Best effort; safe when nothing exists. Returns true when something was removed.
// Caller holds HostLock.
bool remove_container_net(const std::string& name, bool verbose);

// The namespace and veth of one container. Whatever create() made is removed by teardown() or,
// failing that, by the destructor, so every error path after creation cleans up.
class ContainerNet {
 public:
  explicit ContainerNet(NetConfig cfg) : cfg_(std::move(cfg)) {}
  ~ContainerNet() { teardown(); }
  ContainerNet(const ContainerNet&) = delete;
  ContainerNet& operator=(const ContainerNet&) = delete;

  // Caller holds HostLock and has called check_name_free() and ensure_bridge().
  [[nodiscard]] bool create();
  // Kills leftover processes in the namespace, deletes the veth and the namespace. Idempotent.
  void teardown();

 private:
  NetConfig cfg_;
  bool created_ = false;
  LabGuestRoutes guest_routes_;  // when cfg_.guest
  bool routed_ = false;          // guest_routes_ were added
};

}  // namespace wharf::run
