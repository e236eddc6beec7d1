// IPv4 addresses and CIDR blocks as users write them ("198.18.1.0/24"), for virtual networks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/ipv4.h"

namespace wharf::control {

struct Cidr {
  uint32_t base = 0;  // host order, host bits zero
  int prefix = 0;     // 0..32

  uint32_t size() const { return prefix == 0 ? 0 : (uint32_t{1} << (32 - prefix)); }  // 0: 2^32
  uint32_t mask() const { return prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix); }
  bool contains(uint32_t ip) const { return (ip & mask()) == base; }
};

// Dotted quad, exactly four decimal parts of 0..255 without leading zeros or spaces.
bool parse_ipv4(std::string_view text, uint32_t* out);
using wharf::format_ipv4;
// "A.B.C.D/N": an address and a prefix length; the address must have its host bits zero.
bool parse_cidr(std::string_view text, Cidr* out);
std::string format_cidr(const Cidr& c);
bool overlaps(const Cidr& a, const Cidr& b);

}  // namespace wharf::control
