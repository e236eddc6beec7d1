#include "router/shm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>
#include <utility>

namespace wharf::router {

ShmRegion::ShmRegion(ShmRegion&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      fd_(std::move(o.fd_)) {}

ShmRegion& ShmRegion::operator=(ShmRegion&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) munmap(data_, size_);
    fd_ = std::move(o.fd_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

ShmRegion::~ShmRegion() {
  if (data_ != nullptr) munmap(data_, size_);
}

int ShmRegion::create(const char* name, size_t size) {
  if (size > UINT32_MAX) return ENOMEM;
  UniqueFd fd(memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return errno;
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return errno;
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return errno;
  return map(std::move(fd), size);
}

int ShmRegion::map(UniqueFd fd, size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return errno;
  if (data_ != nullptr) munmap(data_, size_);
  fd_ = std::move(fd);
  data_ = static_cast<uint8_t*>(p);
  size_ = static_cast<uint32_t>(size);
  return 0;
}

int ShmRegion::adopt(UniqueFd fd, size_t size) {
  struct stat st;
  const int seals = fcntl(fd.get(), F_GET_SEALS);
  const int wanted = F_SEAL_SHRINK | F_SEAL_GROW;
  if (seals < 0 || (seals & wanted) != wanted || fstat(fd.get(), &st) != 0 ||
      !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != size || size > UINT32_MAX)
    return EINVAL;
  return map(std::move(fd), size) == 0 ? 0 : EINVAL;
}

ShmRegion ShmRegionPool::take(size_t size) {
  for (size_t i = 0; i < count_; ++i) {
    if (regions_[i].size() != size) continue;
    ShmRegion r = std::move(regions_[i]);
    regions_[i] = std::move(regions_[--count_]);
    std::memset(r.data(), 0, size);
    return r;
  }
  return ShmRegion{};
}

void ShmRegionPool::give(ShmRegion r) {
  if (r.size() == 0 || r.size() > kMaxRegionSize || count_ == kMaxRegions) return;
  regions_[count_++] = std::move(r);
}

}  // namespace wharf::router
