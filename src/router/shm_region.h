// A memfd-backed shared mapping the router creates and hands to a library (rings, pages).
// Sealed against shrinking and growing so a container cannot make router accesses fault.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/unique_fd.h"

namespace wharf::router {

class ShmRegion {
 public:
  ShmRegion() = default;
  ShmRegion(ShmRegion&& o) noexcept;
  ShmRegion& operator=(ShmRegion&& o) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;
  ~ShmRegion();

  // Creates a zeroed, sealed region of `size` bytes. Returns 0 or an errno.
  int create(const char* name, size_t size);

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace wharf::router
