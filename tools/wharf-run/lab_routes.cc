#include "lab_routes.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "command.h"
#include "options.h"

namespace wharf::run {
namespace {

constexpr const char* kLabCluster = "/run/wharf-lab/cluster";  // tools/wharf-lab
constexpr const char* kLabNsPrefix = "wharf-lab-";

}  // namespace

bool LabGuestRoutes::plan(const std::string& host_netns, uint32_t vip) {
  self_ns_ = host_netns;
  vip_ = format_ipv4(vip) + "/32";
  other_ns_.clear();
  self_address_.clear();
  std::ifstream in(kLabCluster);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string name, address;
    if (!(fields >> name >> address) || name[0] == '#') continue;
    const std::string ns = kLabNsPrefix + name;
    if (ns == host_netns)
      self_address_ = address;
    else
      other_ns_.push_back(ns);
  }
  if (self_address_.empty()) {
    std::fprintf(stderr, "wharf-run: host %s is not in the lab's cluster file %s\n",
                 host_netns.c_str(), kLabCluster);
    return false;
  }
  return true;
}

bool LabGuestRoutes::add(const std::string& bridge, bool verbose) const {
  if (!run_ip({"-n", self_ns_, "route", "replace", vip_, "dev", bridge}, verbose)) return false;
  for (const std::string& ns : other_ns_)
    if (!run_ip({"-n", ns, "route", "replace", vip_, "via", self_address_}, verbose)) return false;
  return true;
}

void LabGuestRoutes::remove(bool verbose) const {
  (void)run_ip({"-n", self_ns_, "route", "del", vip_}, verbose, /*quiet=*/true);
  for (const std::string& ns : other_ns_)
    (void)run_ip({"-n", ns, "route", "del", vip_, "via", self_address_}, verbose, /*quiet=*/true);
}

}  // namespace wharf::run
