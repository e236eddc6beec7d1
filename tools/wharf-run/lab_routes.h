// A container whose address is not in its wharf-lab host's subnet: the orchestrator moved it
// to this host with the address it had on another (docs/OPERATIONS.md, "wharf-orchestrator").
// The lab routes its hosts' subnets by the cluster file, so the address needs routes of its
// own: the container holds it as a /32 behind the bridge (ContainerNet, `guest`), this host
// sends it onto its bridge, and every other lab host sends it to this host's underlay address.
// Routes are replaced, not added, so an address that moves again simply follows; those a
// SIGKILLed wharf-run leaves are replaced the same way, and `wharf-lab down` removes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wharf::run {

class LabGuestRoutes {
 public:
  // Reads the lab's cluster file for the hosts and this host's (host_netns) underlay address.
  // Prints why and returns false when host_netns is not one of its hosts.
  [[nodiscard]] bool plan(const std::string& host_netns, uint32_t vip);
  // Installs the routes; false (printed) when one could not be.
  [[nodiscard]] bool add(const std::string& bridge, bool verbose) const;
  // Removes the routes that still point at this host. Best effort.
  void remove(bool verbose) const;

 private:
  std::string self_ns_;
  std::string self_address_;  // this host's underlay address, dotted
  std::string vip_;           // "A.B.C.D/32"
  std::vector<std::string> other_ns_;
};

}  // namespace wharf::run
