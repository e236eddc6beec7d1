#include "router/memory_window.h"

#include "proto/qp_rules.h"
#include "router/host_objects.h"
#include "router/mr_access.h"
#include "router/session.h"

namespace wharf::router {
namespace {

constexpr uint32_t kRemoteAccess =
    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

// The window a key names through its binding, or nullptr (no binding, or a registration).
Mw* bound_window(HostObjects& objects, uint32_t key) {
  Mr* binding = objects.mr_by_key(key);
  return binding != nullptr && binding->parent != nullptr ? binding->window : nullptr;
}

// A bind of window mw by qp to [addr, addr + length) of the registration `lkey`, with
// `access` (IBTA 10.6.7.2.1: the window, the QP and the registration in one PD; the
// registration allows binds; remote write or atomic access only on locally writable memory;
// the key keeps the window's index; a type 2 window must be free).
ibv_wc_status bind(HostObjects& objects, Qp* qp, Mw* mw, const shm::SendWqe& w) {
  const uint32_t new_key = w.rkey;
  const uint64_t addr = w.remote_addr, length = w.compare_add;
  const uint32_t access = static_cast<uint32_t>(w.swap);
  Mr* mr = objects.mr_by_key(w.remote_qpn);
  if (mw->pd != qp->pd || mr == nullptr || mr->parent != nullptr || mr->owner != qp->owner ||
      mr->pd != qp->pd || !(mr->access & IBV_ACCESS_MW_BIND) || !mr_contains(*mr, addr, length) ||
      (access & ~(kRemoteAccess | IBV_ACCESS_LOCAL_WRITE)) != 0 ||
      ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
       !(mr->access & IBV_ACCESS_LOCAL_WRITE)) ||
      (new_key >> 8) != (mw->key >> 8) || (mw->type == IBV_MW_TYPE_2 && mw->binding != nullptr))
    return IBV_WC_MW_BIND_ERR;
  unbind_window(objects, mw);
  // Type 1: a zero-length bind only invalidates.
  if (mw->type == IBV_MW_TYPE_1 && length == 0) return IBV_WC_SUCCESS;
  auto b = std::make_unique<Mr>();
  b->owner = qp->owner;
  b->pd = mw->pd;
  b->iova = addr;
  b->addr = mr->addr + (addr - mr->iova);
  b->length = length;
  b->access = access & kRemoteAccess;
  b->mapping = mr->mapping;  // borrowed: mapping_size stays 0
  b->mapped_start = mr->mapped_start;
  b->mapped_len = mr->mapped_len;
  b->pid = mr->pid;
  b->parent = mr;
  b->window = mw;
  b->bound_qpn = mw->type == IBV_MW_TYPE_2 ? qp->qpn : 0;
  b->key = new_key;
  objects.remove_key(mw->key);
  mw->key = new_key;
  mw->binding = std::move(b);
  objects.rebind_key(new_key, mw->binding.get());
  mr->windows++;
  return IBV_WC_SUCCESS;
}

}  // namespace

ibv_wc_status execute_window_op(HostObjects& objects, Qp* qp, const shm::SendWqe& w) {
  if (w.opcode == IBV_WR_BIND_MW) {
    Mw* mw = qp->owner->find_mw(w.ah_handle);
    if (mw == nullptr) return IBV_WC_MW_BIND_ERR;
    // The new key must not be another object's (a key index is reused only after 2^24).
    if (w.rkey != mw->key && objects.key_in_use(w.rkey)) return IBV_WC_MW_BIND_ERR;
    return bind(objects, qp, mw, w);
  }
  // LOCAL_INV: a type 2 window of this QP's PD (IBTA 10.6.7.2.2).
  Mw* mw = bound_window(objects, w.rkey);
  if (mw == nullptr || mw->owner != qp->owner || mw->type != IBV_MW_TYPE_2 || mw->pd != qp->pd)
    return IBV_WC_MW_BIND_ERR;
  unbind_window(objects, mw);
  return IBV_WC_SUCCESS;
}

bool invalidate_remotely(HostObjects& objects, Qp* dst, uint32_t key) {
  Mw* mw = bound_window(objects, key);
  if (mw == nullptr || mw->owner != dst->owner || mw->type != IBV_MW_TYPE_2 || mw->pd != dst->pd ||
      mw->binding->bound_qpn != dst->qpn)
    return false;
  unbind_window(objects, mw);
  return true;
}

void unbind_window(HostObjects& objects, Mw* mw) {
  if (mw->binding == nullptr) return;
  mw->binding->parent->windows--;
  mw->binding.reset();
  objects.rebind_key(mw->key, nullptr);
}

}  // namespace wharf::router
