// A memfd mapped shared, read-write, as a library maps the regions the router gives it
// (unmapped when it goes).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>

namespace wharf::test_support {

struct SharedMapping {
  SharedMapping(int fd, size_t bytes) : size(bytes) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~SharedMapping() {
    if (data != nullptr) munmap(data, size);
  }
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  uint8_t* data;
  size_t size;
};

}  // namespace wharf::test_support
