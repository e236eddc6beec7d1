// IPv4 addresses as text, for everything that prints one (host byte order in, dotted quad out).
#pragma once

#include <cstdint>
#include <string>

namespace wharf {

inline std::string format_ipv4(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." +
         std::to_string((ip >> 8) & 255) + "." + std::to_string(ip & 255);
}

}  // namespace wharf
