// rdma_get_devices / rdma_free_devices: the one verbs context the process's ids share.
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/router_link.h"

using namespace wharf::rdmacm;

WHARF_EXPORT ibv_context** rdma_get_devices(int* num_devices) {
  try {
    if (num_devices != nullptr) *num_devices = 0;
    RouterLink* link = RouterLink::get();
    ibv_context* ctx = link != nullptr ? link->device() : nullptr;
    if (ctx == nullptr) return nullptr;
    auto** list = static_cast<ibv_context**>(
        std::calloc(2, sizeof(ibv_context*)));  // NOLINT(bugprone-sizeof-expression)
    if (list == nullptr) {
      errno = ENOMEM;
      return nullptr;
    }
    list[0] = ctx;
    if (num_devices != nullptr) *num_devices = 1;
    return list;
  } catch (...) {
    errno = ENOMEM;
    return nullptr;
  }
}

// The contexts stay open for the life of the process, as ids may still use them.
WHARF_EXPORT void rdma_free_devices(ibv_context** list) { std::free(list); }
