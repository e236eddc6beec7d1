// ibv_import_device, ibv_import_pd/mr and their unimports, within one process.
//
// A context's cmd_fd is a file of its own (device_verbs.cc); a descriptor of the same file
// names that context, and importing it makes a second ibv_context that shares the first
// one's router session: every verb on it is served by the original Context (to_ctx), so
// handles of its PDs and MRs are valid through both, as they are for two contexts on one
// uverbs file. The imported context's asynchronous events come on a duplicate of the
// original's event socket: either context may read them. A descriptor from another process
// names no context here (the router session belongs to that process): EOPNOTSUPP.
//
// Imported PDs and MRs are new library objects over the same router objects; they are not
// tracked by the context (so never freed at ibv_close_device, as rdma-core leaves them to the
// application). Unimporting frees the library object only; destroying one (dealloc, dereg)
// destroys the shared router object, as rdma-core's do.
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>
#include <new>
#include <utility>

#include "abi/verbs/export.h"
#include "abi/verbs/fork.h"
#include "abi/verbs/import.h"
#include "abi/verbs/provider.h"

namespace wharf::abi {
namespace {

std::mutex import_mu;  // guards Context::importers and Context::close_pending

// The object tracked under `handle`, or nullptr.
template <class T>
T* tracked(Context* ctx, std::unordered_map<uint32_t, T*>& map, uint32_t handle) {
  std::lock_guard<std::mutex> g(ctx->objects_mu);
  auto it = map.find(handle);
  return it == map.end() ? nullptr : it->second;
}

}  // namespace

void close_imported_context(Context* imported) {
  ibv_context* c = &imported->vctx.context;
  Context* original = imported->imported_from;
  close(c->async_fd);
  close(c->cmd_fd);
  pthread_mutex_destroy(&c->mutex);
  delete imported;
  bool release = false;
  {
    std::lock_guard<std::mutex> g(import_mu);
    release = --original->importers == 0 && original->close_pending;
  }
  if (release) release_context(original);
}

bool defer_close_while_imported(Context* ctx) {
  std::lock_guard<std::mutex> g(import_mu);
  if (ctx->importers == 0) return false;
  ctx->close_pending = true;
  return true;
}

}  // namespace wharf::abi

using namespace wharf;
using namespace wharf::abi;

// Takes ownership of fd on success, as rdma-core's does.
WHARF_EXPORT ibv_context* ibv_import_device(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return nullptr;  // errno: EBADF
  Context* original = context_with_cmd_file(st.st_dev, st.st_ino);
  if (original == nullptr) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  UniqueFd async(fcntl(original->vctx.context.async_fd, F_DUPFD_CLOEXEC, 0));
  if (!async.valid()) return nullptr;
  auto* ctx = new (std::nothrow) Context{};
  if (ctx == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  ctx->imported_from = original;
  ctx->owner_pid = original->owner_pid;
  {
    std::lock_guard<std::mutex> g(import_mu);
    ++original->importers;
  }
  init_ibv_context(ctx, original->vctx.context.device, std::move(async), UniqueFd(fd));
  return &ctx->vctx.context;
}

WHARF_EXPORT ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  if (tracked(to_ctx(context), to_ctx(context)->pds, pd_handle) == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  auto* pd = new (std::nothrow) Pd{};
  if (pd == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  pd->pd.context = context;
  pd->pd.handle = pd_handle;
  pd->handle = pd_handle;
  return &pd->pd;
}

WHARF_EXPORT void ibv_unimport_pd(ibv_pd* pd) {
  if (pd == nullptr || to_pd(pd)->protection != nullptr) return;  // parent domains are not shared
  to_ctx(pd->context)->untrack_if(to_ctx(pd->context)->pds, pd->handle, pd);
  delete to_pd(pd);
}

WHARF_EXPORT ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  Context* ctx = to_ctx(pd->context);
  std::lock_guard<std::mutex> g(ctx->objects_mu);  // the original may be deregistered meanwhile
  auto it = ctx->mrs.find(mr_handle);
  if (it == ctx->mrs.end() || to_pd(it->second->pd)->handle != to_pd(pd)->handle) {
    errno = EINVAL;  // no such registration in that PD
    return nullptr;
  }
  const Mr* original = to_mr(it->second);
  auto* mr = new (std::nothrow) Mr{};
  if (mr == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  // The original keeps what restores the registration in a resumed session.
  mr->mr = original->mr;
  mr->handle = original->handle;
  mr->iova = original->iova;
  mr->access = original->access;
  // The registration's keys, length and access; no address (the kernel reports none, and
  // rdma-core leaves it NULL); device memory stays the original's to account for.
  mr->mr.context = pd->context;
  mr->mr.pd = pd;
  mr->mr.addr = nullptr;
  mr->dm = nullptr;
  return &mr->mr;
}

WHARF_EXPORT void ibv_unimport_mr(ibv_mr* mr) {
  if (mr == nullptr) return;
  // An original MR on device memory keeps the DM busy; it stays tracked until the context
  // goes, so the DM's count of MRs stays true.
  if (to_mr(mr)->dm != nullptr) return;
  to_ctx(mr->context)->untrack_if(to_ctx(mr->context)->mrs, mr->handle, mr);
  delete to_mr(mr);
}
