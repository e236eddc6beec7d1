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

#include <sys/types.h>

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

// Exclusive flock on /run/wharf/locks/NAME, held by the wharf-run of container NAME from before
// its namespace exists until after it is gone; the kernel releases it when that wharf-run dies,
// however it dies. So a namespace whose lock is free was left by a dead wharf-run and may be
// reclaimed, and one whose lock is held belongs to a live one (perhaps still tearing down).
class ContainerLock {
 public:
  // Waits up to timeout_ms for the lock, but returns false at once (after printing why) when
  // the container's namespace has processes: it is running, not shutting down.
  [[nodiscard]] bool acquire(const std::string& name, int timeout_ms);

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

// Makes the name free for a new container: what a dead wharf-run left of it (a namespace no
// process uses, a host-side veth in host_netns) is removed, saying so. Refuses when processes
// use the namespace. Caller holds HostLock and the name's ContainerLock.
[[nodiscard]] bool reclaim_name(const std::string& name, const std::string& host_netns,
                                bool verbose);

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

  // Caller holds HostLock and has called reclaim_name() and ensure_bridge().
  [[nodiscard]] bool create();
  // Kills leftover processes in the namespace, deletes the veth and the namespace. Idempotent.
  void teardown();

 private:
  NetConfig cfg_;
  bool created_ = false;
  dev_t netns_dev_ = 0;  // the namespace create() made: teardown removes that one only
  ino_t netns_ino_ = 0;
  LabGuestRoutes guest_routes_;  // when cfg_.guest
  bool routed_ = false;          // guest_routes_ were added
};

}  // namespace wharf::run
