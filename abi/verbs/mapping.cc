#include "abi/verbs/mapping.h"

#include <errno.h>
#include <sys/mman.h>

#include <utility>

namespace wharf::abi {

int Mapping::map(int fd, size_t len, off_t offset) {
  reset();
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
  if (p == MAP_FAILED) return errno;
  data = static_cast<uint8_t*>(p);
  size = len;
  return 0;
}

void Mapping::reset() {
  if (data != nullptr) munmap(data, size);
  data = nullptr;
  size = 0;
}

void Mapping::swap(Mapping& other) noexcept {
  std::swap(data, other.data);
  std::swap(size, other.size);
}

Mapping::~Mapping() { reset(); }

}  // namespace wharf::abi
