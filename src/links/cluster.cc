#include "links/cluster.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cstdlib>
#include <sstream>

#include "proto/vip_gid.h"

namespace wharf::links {
namespace {

bool parse_ipv4(const std::string& s, uint32_t* out) {
  in_addr a{};
  if (inet_pton(AF_INET, s.c_str(), &a) != 1) return false;
  *out = ntohl(a.s_addr);
  return true;
}

bool parse_uint(const std::string& s, unsigned long max, unsigned long* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 10)
    return false;
  *out = std::strtoul(s.c_str(), nullptr, 10);
  return *out <= max;
}

uint32_t mask_of(uint8_t prefix) { return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix); }

bool parse_host(const std::string& line, ClusterHost* h, std::string* err) {
  std::istringstream in(line);
  std::string name, addr, subnet, lids, port, socket, extra;
  if (!(in >> name >> addr >> subnet >> lids >> port)) {
    *err = "expected NAME ADDRESS SUBNET/PREFIX LID_FIRST-LID_LAST PORT";
    return false;
  }
  in >> socket;
  if (in >> extra) {
    *err = "unexpected '" + extra + "'";
    return false;
  }
  h->name = name;
  if (!parse_ipv4(addr, &h->address)) {
    *err = "bad address '" + addr + "'";
    return false;
  }
  size_t slash = subnet.find('/');
  unsigned long prefix = 0, first = 0, last = 0, p = 0;
  if (slash == std::string::npos || !parse_ipv4(subnet.substr(0, slash), &h->subnet) ||
      !parse_uint(subnet.substr(slash + 1), 30, &prefix) || prefix < 8 ||
      (h->subnet & ~mask_of(static_cast<uint8_t>(prefix))) != 0) {
    *err = "bad subnet '" + subnet + "' (A.B.C.D/P with host bits 0, P from 8 to 30)";
    return false;
  }
  h->prefix = static_cast<uint8_t>(prefix);
  size_t dash = lids.find('-');
  if (dash == std::string::npos || !parse_uint(lids.substr(0, dash), 0xbfff, &first) ||
      !parse_uint(lids.substr(dash + 1), 0xbfff, &last) || first == 0 || first > last) {
    *err = "bad LID range '" + lids + "' (FIRST-LAST within 1-49151)";
    return false;
  }
  h->lid_first = static_cast<uint16_t>(first);
  h->lid_last = static_cast<uint16_t>(last);
  if (!parse_uint(port, 65535, &p) || p == 0) {
    *err = "bad port '" + port + "'";
    return false;
  }
  h->port = static_cast<uint16_t>(p);
  return true;
}

std::string overlap(const ClusterHost& a, const ClusterHost& b) {
  if (a.name == b.name) return "host " + a.name + " is listed twice";
  uint32_t m = mask_of(std::min(a.prefix, b.prefix));
  if ((a.subnet & m) == (b.subnet & m))
    return "subnets of " + a.name + " and " + b.name + " overlap";
  if (a.lid_first <= b.lid_last && b.lid_first <= a.lid_last)
    return "LID ranges of " + a.name + " and " + b.name + " overlap";
  return {};
}

}  // namespace

std::string StaticCluster::load(const std::string& text, const std::string& self_name) {
  hosts_.clear();
  self_ = -1;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ClusterHost h;
    std::string err;
    if (!parse_host(line, &h, &err)) return "line " + std::to_string(n) + ": " + err;
    if (hosts_.size() == kMaxHosts)
      return "line " + std::to_string(n) + ": more than " + std::to_string(kMaxHosts) + " hosts";
    for (const ClusterHost& other : hosts_)
      if (std::string why = overlap(h, other); !why.empty())
        return "line " + std::to_string(n) + ": " + why;
    if (h.name == self_name) self_ = static_cast<int>(hosts_.size());
    hosts_.push_back(h);
  }
  if (self_ < 0) return "host '" + self_name + "' is not in the cluster file";
  return {};
}

// A GID names its container's IPv4 address (::ffff:a.b.c.d); a LID names a router's range.
int StaticCluster::host_for(const proto::AhAttr& ah, uint8_t link_layer) const {
  if (ah.is_global) {
    uint32_t ip = 0;
    if (!proto::vip_of_gid(ah.dgid, &ip)) return -1;
    for (size_t i = 0; i < hosts_.size(); ++i)
      if ((ip & mask_of(hosts_[i].prefix)) == hosts_[i].subnet) return static_cast<int>(i);
    return -1;
  }
  if (link_layer != IBV_LINK_LAYER_INFINIBAND) return -1;
  for (size_t i = 0; i < hosts_.size(); ++i)
    if (ah.dlid >= hosts_[i].lid_first && ah.dlid <= hosts_[i].lid_last) return static_cast<int>(i);
  return -1;
}

}  // namespace wharf::links
