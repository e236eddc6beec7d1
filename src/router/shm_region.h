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

  // Creates a zeroed, sealed region of `size` bytes. Returns 0 or an errno (ENOMEM for 4 GiB
  // or more: no ring the router makes is near that, and a QP keeps one of these).
  int create(const char* name, size_t size);

  // Takes a region a library had from an earlier router process (a resumed session): it
  // must be a memfd sealed against shrinking and growing, of exactly `size` bytes. Its
  // contents are as hostile as ever. Returns 0 or EINVAL.
  int adopt(UniqueFd fd, size_t size);

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_.get(); }

 private:
  // Maps all `size` bytes of fd, which becomes the region's. 0 or an errno.
  int map(UniqueFd fd, size_t size);

  uint8_t* data_ = nullptr;
  uint32_t size_ = 0;
  UniqueFd fd_;
};
static_assert(sizeof(ShmRegion) == 16, "a pointer, a size and a descriptor, no padding");

// Regions of one session's destroyed objects, kept for its next objects of the same size:
// creating a region costs the router five system calls, reusing one a memset. Only regions
// that no other process ever mapped may be given back (the session's own process may still
// map one; that is its own business), and only small ones (zeroing a large region costs more
// than a fresh one, whose pages the kernel zeroes as they are first touched).
class ShmRegionPool {
 public:
  static constexpr size_t kMaxRegionSize = 64 * 1024;
  static constexpr size_t kMaxRegions = 8;

  // A zeroed region of exactly `size` bytes, or an empty one (size() 0) if none is kept.
  ShmRegion take(size_t size);
  // Keeps `r` if it is small enough and there is room; else it is released.
  void give(ShmRegion r);

 private:
  ShmRegion regions_[kMaxRegions];
  size_t count_ = 0;
};

}  // namespace wharf::router
