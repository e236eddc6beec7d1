#include "abi/verbs/mapping.h"

#include <errno.h>
#include <sys/mman.h>

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

Mapping::~Mapping() { reset(); }

}  // namespace wharf::abi
