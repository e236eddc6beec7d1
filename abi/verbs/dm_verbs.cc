// Device memory (ibv_alloc_dm, ibv_memcpy_to/from_dm, ibv_reg_dm_mr, ibv_free_dm). The "device"
// is the router's host: a DM is a sealed memfd the library maps, so registering it hands the
// router the pages directly, as for any memfd-backed MR. As on mlx5, copies use 4-byte aligned
// offsets and lengths, and DM MRs are zero based. ibv_import_dm (within the process, see
// import_verbs.cc) maps the same memfd again.
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <new>

#include "abi/verbs/export.h"
#include "abi/verbs/mr_backing.h"
#include "abi/verbs/provider.h"
#include "common/bits.h"
#include "proto/device.h"
#include "proto/messages.h"

namespace wharf::abi {
namespace {

constexpr uint64_t kDmAlignment = 4;
constexpr unsigned int kDmMrAccess = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
                                     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                     IBV_ACCESS_REMOTE_ATOMIC;

bool copy_ok(const Dm* dm, uint64_t offset, size_t length) {
  return offset % kDmAlignment == 0 && length % kDmAlignment == 0 &&
         range_within(offset, length, dm->length);
}

int memcpy_to_dm(ibv_dm* ibdm, uint64_t offset, const void* host, size_t length) {
  Dm* dm = to_dm(ibdm);
  if (!copy_ok(dm, offset, length)) return EINVAL;
  std::memcpy(dm->map.data + offset, host, length);
  return 0;
}

int memcpy_from_dm(void* host, ibv_dm* ibdm, uint64_t offset, size_t length) {
  Dm* dm = to_dm(ibdm);
  if (!copy_ok(dm, offset, length)) return EINVAL;
  std::memcpy(host, dm->map.data + offset, length);
  return 0;
}

}  // namespace

ibv_dm* alloc_dm(ibv_context* context, ibv_alloc_dm_attr* attr) {
  if (attr == nullptr || attr->comp_mask != 0 || attr->length == 0 ||
      attr->length > device::kMaxDmSize || attr->log_align_req > 12) {
    errno = attr != nullptr && attr->length > device::kMaxDmSize ? ENOMEM : EINVAL;
    return nullptr;
  }
  auto* dm = new (std::nothrow) Dm{};
  if (dm == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  const size_t size = align_up(attr->length, kPageSize);
  dm->memfd.reset(memfd_create("wharf-dm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  int err = dm->memfd.valid() ? 0 : errno;
  if (err == 0 && (ftruncate(dm->memfd.get(), static_cast<off_t>(size)) != 0 ||
                   fcntl(dm->memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0))
    err = errno;
  if (err == 0) err = dm->map.map(dm->memfd.get(), size);
  if (err != 0) {
    delete dm;
    errno = err;
    return nullptr;
  }
  dm->length = attr->length;
  dm->dm.context = context;
  dm->dm.memcpy_to_dm = memcpy_to_dm;
  dm->dm.memcpy_from_dm = memcpy_from_dm;
  dm->dm.comp_mask = 0;
  Context* ctx = to_ctx(context);
  dm->dm.handle = ctx->track_local(ctx->dms, &dm->dm);
  if (dm->dm.handle == 0) {
    delete dm;
    errno = ENOMEM;
    return nullptr;
  }
  return &dm->dm;
}

int free_dm(ibv_dm* ibdm) {
  Dm* dm = to_dm(ibdm);
  if (dm->mrs.load(std::memory_order_relaxed) != 0) return EBUSY;
  to_ctx(ibdm->context)->untrack(to_ctx(ibdm->context)->dms, ibdm->handle);
  delete dm;
  return 0;
}

ibv_mr* reg_dm_mr(ibv_pd* pd, ibv_dm* ibdm, uint64_t offset, size_t length, unsigned int access) {
  Dm* dm = to_dm(ibdm);
  if ((access & IBV_ACCESS_ZERO_BASED) == 0 || (access & ~kDmMrAccess) != 0 ||
      !range_within(offset, length, dm->length) || pd->context != ibdm->context) {
    errno = EINVAL;
    return nullptr;
  }
  // The DM's whole pages inside the range go to the router through its memfd.
  const uint64_t start = reinterpret_cast<uint64_t>(dm->map.data) + offset;
  Backing b;
  const uint64_t first = align_up(start, kPageSize), end = align_down(start + length, kPageSize);
  if (first < end) {
    b.memfd = dm->memfd.get();
    b.start = first;
    b.len = end - first;
    b.memfd_offset = first - reinterpret_cast<uint64_t>(dm->map.data);
  }
  Mr* mr = register_mr(pd, dm->map.data + offset, length, 0, access | proto::kMrDeviceMemory, b);
  if (mr == nullptr) return nullptr;
  mr->access = access;
  mr->dm = dm;
  dm->mrs.fetch_add(1, std::memory_order_relaxed);
  return &mr->mr;
}

}  // namespace wharf::abi

using namespace wharf::abi;

WHARF_EXPORT ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) {
  Context* ctx = to_ctx(context);
  std::lock_guard<std::mutex> g(ctx->objects_mu);  // the original may be freed meanwhile
  auto it = ctx->dms.find(dm_handle);
  if (it == ctx->dms.end()) {
    errno = EINVAL;
    return nullptr;
  }
  const Dm* original = to_dm(it->second);
  auto* dm = new (std::nothrow) Dm{};
  if (dm == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  dm->memfd.reset(fcntl(original->memfd.get(), F_DUPFD_CLOEXEC, 0));
  int err = dm->memfd.valid() ? dm->map.map(dm->memfd.get(), original->map.size) : errno;
  if (err != 0) {
    delete dm;
    errno = err;
    return nullptr;
  }
  dm->length = original->length;
  dm->dm = original->dm;
  dm->dm.context = context;
  return &dm->dm;
}

// Frees the library object; an original with MRs registered on it stays until the context
// goes (they count on it).
WHARF_EXPORT void ibv_unimport_dm(ibv_dm* ibdm) {
  if (ibdm == nullptr || to_dm(ibdm)->mrs.load(std::memory_order_relaxed) != 0) return;
  to_ctx(ibdm->context)->untrack_if(to_ctx(ibdm->context)->dms, ibdm->handle, ibdm);
  delete to_dm(ibdm);
}
