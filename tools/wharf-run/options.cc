#include "options.h"

#include <arpa/inet.h>

namespace wharf::run {

namespace {

// 1..max_len bytes of [A-Za-z0-9_.-].
bool valid_ifname_part(std::string_view name, size_t max_len) {
  if (name.empty() || name.size() > max_len) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool valid_container_name(std::string_view name) { return valid_ifname_part(name, kMaxNameLen); }

bool valid_bridge_name(std::string_view name) { return valid_ifname_part(name, 15); }

std::optional<uint32_t> parse_ipv4(std::string_view text) {
  std::string s(text);
  in_addr a{};
  // inet_pton accepts only the strict dotted-quad form, unlike inet_aton.
  if (::inet_pton(AF_INET, s.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

std::string check_addresses(uint32_t vip, uint32_t bridge_ip, int prefix) {
  if (prefix < 1 || prefix > 30) return "prefix must be between 1 and 30";
  uint32_t mask = ~uint32_t{0} << (32 - prefix);
  auto is_host = [&](uint32_t a) { return (a & ~mask) != 0 && (a & ~mask) != ~mask; };
  std::string p = "/" + std::to_string(prefix);
  if (!is_host(vip)) return "VIP " + format_ipv4(vip) + " is not a host address in its " + p;
  if (!is_host(bridge_ip)) {
    return "bridge IP " + format_ipv4(bridge_ip) + " is not a host address in its " + p;
  }
  if ((vip & mask) != (bridge_ip & mask)) {
    return "VIP " + format_ipv4(vip) + p + " is not in the bridge's subnet " +
           format_ipv4(bridge_ip & mask) + p + "; see --bridge-ip";
  }
  if (vip == bridge_ip) return "VIP " + format_ipv4(vip) + " is the bridge's own address";
  return {};
}

}  // namespace wharf::run
