// Command-line configuration of wharf-run and the naming rules derived from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ipv4.h"

namespace wharf::run {

// Interface names are limited to IFNAMSIZ - 1 = 15 bytes; the host end of the veth pair is
// kVethPrefix + NAME, so NAME may have at most 15 - 3 bytes.
constexpr size_t kMaxNameLen = 12;
constexpr std::string_view kNetnsPrefix = "wharf-";
constexpr std::string_view kVethPrefix = "wv-";
constexpr std::string_view kBridgeName = "wharfbr0";
constexpr std::string_view kContainerIfName = "eth0";
constexpr std::string_view kDefaultBridgeIp = "198.18.0.1";
constexpr int kDefaultPrefix = 16;

// Exit status when wharf-run itself fails (setup, registration); CMD's statuses are passed on.
constexpr int kExitSetupFailed = 125;
constexpr int kExitExecFailed = 127;

struct Options {
  std::string router;  // router socket path as given
  std::string name;    // container name
  uint32_t vip = 0;    // host byte order; 0 with a tenant: the orchestrator picks
  // With an orchestrator (tenant not empty): where the container's record is kept.
  std::string orchestrator;
  std::string tls_ca;      // with an https:// orchestrator: the CA to verify it against
  std::string token_file;  // "" : $WHARF_TOKEN or $WHARF_TOKEN_FILE (control/credentials.h)
  std::string tenant;
  std::string network;
  int prefix = kDefaultPrefix;
  uint32_t bridge_ip = 0;  // host byte order
  std::string bridge{kBridgeName};
  bool dropin = false;
  std::string lib_dir;  // empty: <dir of wharf-run>/../lib
  bool verbose = false;
  int reconnect_s = 60;  // how long to re-register after the router went away; 0: not at all
  std::vector<std::string> command;
};

// True when `name` is 1..kMaxNameLen bytes of [A-Za-z0-9_.-].
bool valid_container_name(std::string_view name);
// True when `name` may name a bridge: 1..15 bytes (IFNAMSIZ - 1) of [A-Za-z0-9_.-].
bool valid_bridge_name(std::string_view name);

// Parses dotted-quad IPv4 into host byte order.
std::optional<uint32_t> parse_ipv4(std::string_view text);
using wharf::format_ipv4;

// Checks that vip and bridge_ip are distinct host addresses of the same /prefix subnet, so the
// bridge can be the container's default gateway. Returns an error message, empty when valid.
std::string check_addresses(uint32_t vip, uint32_t bridge_ip, int prefix);

inline std::string netns_name(std::string_view name) {
  return std::string(kNetnsPrefix) + std::string(name);
}
inline std::string netns_path(std::string_view name) { return "/run/netns/" + netns_name(name); }
inline std::string veth_name(std::string_view name) {
  return std::string(kVethPrefix) + std::string(name);
}

}  // namespace wharf::run
