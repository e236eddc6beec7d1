// FNV-1a, 32 bits: a hash that is the same on every host and every run, for names derived
// from other names (a multicast group's LID, a long pod name's short form).
#pragma once

#include <cstdint>

namespace wharf {

template <class Bytes>
uint32_t fnv1a32(const Bytes& bytes) {
  uint32_t h = 2166136261u;
  for (auto b : bytes) h = (h ^ static_cast<uint8_t>(b)) * 16777619u;
  return h;
}

}  // namespace wharf
