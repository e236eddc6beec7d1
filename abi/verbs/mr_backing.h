// Making application memory reachable by the router without a syscall per access.
//
// At registration, the whole pages inside a buffer that is private anonymous memory are
// replaced, in place, by a shared memfd mapping holding the same bytes (FreeFlow's trick);
// the router maps the same memfd. Partial pages at the buffer's ends are never remapped, so
// concurrent writes by other threads to neighbouring heap objects cannot be lost; the router
// reaches those bytes (and buffers that cannot be backed: file mappings, hugetlb) with
// process_vm_readv/writev. Pages already backed by an earlier registration are reused.
#pragma once

#include <cstdint>

namespace wharf::abi {

struct Backing {
  int memfd = -1;  // owned by the backing registry; do not close
  uint64_t start = 0;
  uint64_t len = 0;  // 0: nothing could be backed
  uint64_t memfd_offset = 0;
};

// Backs the whole pages of [addr, addr+length). Never fails: on any obstacle returns an
// empty backing and the router falls back to process_vm_* for the whole buffer.
Backing back_buffer(uint64_t addr, uint64_t length);

// Called in the child after fork(): turns backed ranges back into private memory so parent
// and child do not share registered buffers (fork must copy, as it does without Wharf).
void unshare_backings_after_fork();

}  // namespace wharf::abi

namespace wharf::abi {
// fork() handlers: the registry lock is held across fork so the child sees a consistent list.
void lock_registry_for_fork();
void unlock_registry_after_fork();
}  // namespace wharf::abi
