// A read-write shared mapping of a memfd: a router-created queue or CQ region, or (on the
// direct path) a peer's queues and registrations.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace wharf::abi {

struct Mapping {
  uint8_t* data = nullptr;
  size_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  int map(int fd, size_t len, off_t offset = 0);  // 0 or errno; replaces any earlier mapping
  void reset();
  void swap(Mapping& other) noexcept;
  ~Mapping();
};

}  // namespace wharf::abi
