#include "abi/verbs/mr_backing.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/bits.h"

namespace wharf::abi {
namespace {

constexpr const char* kMemfdName = "wharf-mr";

struct BackedRange {
  uint64_t start, len;
  int memfd;
  uint64_t ino;
};

std::mutex registry_mu;
std::vector<BackedRange> registry;  // guarded by registry_mu

struct Vma {
  uint64_t start = 0, end = 0, offset = 0, ino = 0;
  char perms[5] = {};
  char path[256] = {};
};

// Finds the mapping containing addr in /proc/self/maps.
bool find_vma(uint64_t addr, Vma* out) {
  FILE* f = fopen("/proc/self/maps", "re");
  if (f == nullptr) return false;
  char line[512];
  bool found = false;
  while (fgets(line, sizeof(line), f) != nullptr) {
    Vma v;
    unsigned long long s, e, off, ino;
    char dev[32];
    int consumed = 0;
    if (sscanf(line, "%llx-%llx %4s %llx %31s %llu %n", &s, &e, v.perms, &off, dev, &ino,
               &consumed) < 6)
      continue;
    if (addr < s || addr >= e) continue;
    v.start = s, v.end = e, v.offset = off, v.ino = ino;
    const char* p = line + consumed;
    size_t n = strcspn(p, "\n");
    if (n >= sizeof(v.path)) n = sizeof(v.path) - 1;
    memcpy(v.path, p, n);
    *out = v;
    found = true;
    break;
  }
  fclose(f);
  return found;
}

int prot_of(const Vma& v) {
  return (v.perms[0] == 'r' ? PROT_READ : 0) | (v.perms[1] == 'w' ? PROT_WRITE : 0) |
         (v.perms[2] == 'x' ? PROT_EXEC : 0);
}

bool is_private_anonymous(const Vma& v) {
  if (v.perms[3] != 'p' || v.ino != 0) return false;
  return v.path[0] == '\0' || strcmp(v.path, "[heap]") == 0;
}

bool is_our_memfd(const Vma& v) {
  return strncmp(v.path, "/memfd:wharf-mr", 15) == 0 && v.perms[3] == 's';
}

}  // namespace

Backing back_buffer(uint64_t addr, uint64_t length) {
  Backing b;
  uint64_t start = align_up(addr, kPageSize);
  uint64_t end = align_down(addr + length, kPageSize);
  if (end <= start) return b;
  std::lock_guard<std::mutex> guard(registry_mu);
  Vma v;
  if (!find_vma(start, &v) || v.end < end) return b;  // must be one mapping throughout

  if (is_our_memfd(v)) {
    for (const BackedRange& r : registry) {
      if (r.ino != v.ino) continue;
      b.memfd = r.memfd;
      b.start = start;
      b.len = end - start;
      b.memfd_offset = v.offset + (start - v.start);
      return b;
    }
    return b;
  }
  if (!is_private_anonymous(v)) return b;

  try {
    registry.reserve(registry.size() + 1);  // push_back below cannot fail then
  } catch (const std::bad_alloc&) {
    return b;  // unbacked, as for memory that cannot be remapped
  }
  uint64_t len = end - start;
  int fd = memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return b;
  void* tmp = MAP_FAILED;
  struct stat st;
  if (ftruncate(fd, static_cast<off_t>(len)) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
      fstat(fd, &st) != 0 ||
      (tmp = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
    close(fd);
    return b;
  }
  // The pages belong to this buffer alone (whole pages inside it), so the copy-then-remap
  // window can only race with writes to the buffer being registered.
  if (v.perms[0] == 'r') memcpy(tmp, reinterpret_cast<void*>(start), len);
  munmap(tmp, len);
  void* p = mmap(reinterpret_cast<void*>(start), len, prot_of(v), MAP_SHARED | MAP_FIXED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return b;
  }
  registry.push_back(BackedRange{start, len, fd, static_cast<uint64_t>(st.st_ino)});
  b.memfd = fd;
  b.start = start;
  b.len = len;
  b.memfd_offset = 0;
  return b;
}

void unshare_backings_after_fork() {
  // Single-threaded here (the child of fork); no lock may be held by a vanished thread
  // except registry_mu itself, which the fork handlers take around fork().
  for (const BackedRange& r : registry) {
    Vma v;
    if (!find_vma(r.start, &v) || v.ino != r.ino || !is_our_memfd(v)) continue;
    uint64_t len = (v.end < r.start + r.len ? v.end : r.start + r.len) - r.start;
    void* tmp = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tmp == MAP_FAILED) continue;
    memcpy(tmp, reinterpret_cast<void*>(r.start), len);
    void* p = mmap(reinterpret_cast<void*>(r.start), len, prot_of(v) | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (p != MAP_FAILED) {
      memcpy(p, tmp, len);
      if (!(prot_of(v) & PROT_WRITE)) mprotect(p, len, prot_of(v));
    }
    munmap(tmp, len);
  }
  for (const BackedRange& r : registry) close(r.memfd);
  registry.clear();
}

void lock_registry_for_fork() { registry_mu.lock(); }
void unlock_registry_after_fork() { registry_mu.unlock(); }

}  // namespace wharf::abi
