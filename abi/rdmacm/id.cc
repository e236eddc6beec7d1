// Lifetime of ids: rdma_create_id, rdma_destroy_id, rdma_migrate_id.
#include <rdma/rdma_cma.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <new>
#include <random>

#include "abi/rdmacm/export.h"
#include "abi/rdmacm/ops.h"
#include "abi/rdmacm/registry.h"
#include "abi/rdmacm/router_link.h"

namespace wharf::rdmacm {

uint32_t random_psn() {
  // A starting PSN must be hard to guess, not secret: a generator per thread, seeded once from
  // the kernel, spares a system call per id.
  thread_local std::mt19937 gen = [] {
    uint32_t seed = 0;
    if (::getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
      seed = static_cast<uint32_t>(std::rand());  // no entropy yet: any PSN is correct
    }
    return std::mt19937(seed);
  }();
  return static_cast<uint32_t>(gen()) & 0xffffff;
}

Id* id_alloc(rdma_event_channel* channel, bool sync, void* context, rdma_port_space ps,
             ibv_qp_type qp_type, uint32_t handle) {
  auto* id = new (std::nothrow) Id();
  if (id == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  id->id.channel = channel;
  id->id.context = context;
  id->id.ps = ps;
  id->id.qp_type = qp_type;
  id->handle = handle;
  id->sync = sync;
  id->local_psn = random_psn();
  if (!registry::insert(id)) {
    delete id;
    errno = ENOMEM;
    return nullptr;
  }
  return id;
}

void id_free(Id* id) {
  registry::erase(id);
  std::free(id->id.route.path_rec);
  if (id->sync) channel_destroy(to_channel(id->id.channel));
  delete id;
}

namespace {

// Sends `request(channel handle)` for an id that is to report to `channel`, or, for a
// synchronous id (channel nullptr), to a private channel made here and destroyed again if the
// request fails. Returns the channel, or nullptr with errno set.
template <class Request>
rdma_event_channel* with_channel(rdma_event_channel* channel, Request&& request) {
  const bool own = channel == nullptr;
  if (own) {
    Channel* ch = channel_create();
    if (ch == nullptr) return nullptr;
    channel = &ch->channel;
  }
  if (int err = request(to_channel(channel)->handle); err != 0) {
    if (own) channel_destroy(to_channel(channel));
    errno = err;
    return nullptr;
  }
  return channel;
}

}  // namespace

int id_migrate(Id* id, rdma_event_channel* channel) {
  RouterLink* link = RouterLink::get();
  if (link == nullptr) return -1;
  const bool sync = channel == nullptr;
  channel = with_channel(channel, [&](uint32_t ch) {
    proto::Empty rep;
    return link->call(proto::Op::kCmMigrateId, proto::CmMigrateIdReq{id->handle, ch}, &rep);
  });
  if (channel == nullptr) return -1;
  if (id->sync) {
    if (id->id.event != nullptr) {
      rdma_ack_cm_event(id->id.event);
      id->id.event = nullptr;
    }
    channel_destroy(to_channel(id->id.channel));
  }
  id->sync = sync;
  id->id.channel = channel;
  // Events of the id already handed out from the old channel must be acked first, so that the
  // application never handles this id's events on two channels at once.
  registry::wait_acked(id);
  return 0;
}

int id_create(rdma_event_channel* channel, rdma_cm_id** out, void* context, rdma_port_space ps,
              ibv_qp_type qp_type) {
  if (out == nullptr) return fail(EINVAL);
  RouterLink* link = RouterLink::get();
  if (link == nullptr) return -1;
  const bool sync = channel == nullptr;
  proto::CmCreateIdReq req;
  req.ps = static_cast<uint16_t>(ps);
  req.qp_type = static_cast<uint8_t>(qp_type);
  proto::Handle rep;
  channel = with_channel(channel, [&](uint32_t ch) {
    req.channel = ch;
    return link->call(proto::Op::kCmCreateId, req, &rep);
  });
  if (channel == nullptr) return -1;
  Id* id = id_alloc(channel, sync, context, ps, qp_type, rep.handle);
  if (id == nullptr) {
    proto::Empty none;
    (void)link->call(proto::Op::kCmDestroyId, proto::Handle{rep.handle}, &none);
    if (sync) channel_destroy(to_channel(channel));
    return fail(ENOMEM);
  }
  *out = &id->id;
  return 0;
}

}  // namespace wharf::rdmacm

using namespace wharf;
using namespace wharf::rdmacm;

WHARF_EXPORT int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                                rdma_port_space ps) {
  try {
    ibv_qp_type qp_type = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP) ? IBV_QPT_UD : IBV_QPT_RC;
    return id_create(channel, id, context, ps, qp_type);
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_destroy_id(rdma_cm_id* cm_id) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    RouterLink* link = RouterLink::get();
    if (link == nullptr) return -1;
    // One-way: nothing the router could answer changes what the library does next (it
    // destroys any id of this process it still holds), and later requests are served after it.
    if (int err = link->post(proto::Op::kCmDestroyId, proto::Handle{id->handle}); err != 0)
      return fail(err);
    registry::erase(id);  // events still unread in the socket are dropped from now on
    if (cm_id->event != nullptr) {
      rdma_ack_cm_event(cm_id->event);
      cm_id->event = nullptr;
    }
    registry::wait_acked(id);
    id_free(id);
    return 0;
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_migrate_id(rdma_cm_id* cm_id, rdma_event_channel* channel) {
  try {
    if (cm_id == nullptr) return fail(EINVAL);
    Id* id = to_id(cm_id);
    if (id->sync && channel == nullptr) return fail(EINVAL);
    return id_migrate(id, channel);
  } catch (...) {
    return fail(ENOMEM);
  }
}
