// Names in fixed-size message fields (proto::Name, LongName, SandboxId): NUL-padded, at most
// N - 1 bytes of text, so that a field always ends in a NUL.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <string>

namespace wharf::proto {

// The first N - 1 bytes of s; callers check lengths first where a cut name would be wrong.
template <size_t N>
std::array<char, N> to_wire_name(const std::string& s) {
  std::array<char, N> wire{};
  std::copy_n(s.begin(), std::min(s.size(), N - 1), wire.begin());
  return wire;
}

// The text up to the first NUL, or all N bytes of a field that has none (from a peer).
template <size_t N>
std::string from_wire_name(const std::array<char, N>& wire) {
  return std::string(wire.data(), strnlen(wire.data(), wire.size()));
}

}  // namespace wharf::proto
