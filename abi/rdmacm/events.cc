// rdma_get_cm_event / rdma_ack_cm_event: one CmEventMsg datagram per event on the channel's
// socket, processed as rdma-core's rdma_get_cm_event processes the kernel's events.
#include <rdma/rdma_cma.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "abi/rdmacm/addr.h"
#include "abi/rdmacm/export.h"
#include "abi/rdmacm/ops.h"
#include "abi/rdmacm/registry.h"
#include "abi/rdmacm/router_link.h"

namespace wharf::rdmacm {
namespace {

uint8_t copy_private_data(Event* evt, const proto::CmConnParam& p, const void** dst) {
  uint8_t len =
      static_cast<uint8_t>(std::min<size_t>(p.private_data_len, proto::kCmMaxPrivateData));
  if (len != 0) {
    std::memcpy(evt->private_data, p.private_data.data(), len);
    *dst = evt->private_data;
  }
  return len;
}

void copy_conn_event(Event* evt, const proto::CmConnParam& p) {
  rdma_conn_param& c = evt->event.param.conn;
  c.private_data_len = copy_private_data(evt, p, &c.private_data);
  c.responder_resources = p.responder_resources;
  c.initiator_depth = p.initiator_depth;
  c.flow_control = p.flow_control;
  c.retry_count = p.retry_count;
  c.rnr_retry_count = p.rnr_retry_count;
  c.srq = p.srq;
  c.qp_num = p.qp_num;
}

void copy_ud_event(Event* evt, const proto::CmEventMsg& m) {
  rdma_ud_param& u = evt->event.param.ud;
  u.private_data_len = copy_private_data(evt, m.param, &u.private_data);
  ud_ah_attr(m.remote_lid, m.remote_gid, &u.ah_attr);
  u.qp_num = m.param.qp_num;
  u.qkey = m.param.qkey;
}

void copy_event_param(Event* evt, const Id* id, const proto::CmEventMsg& m) {
  if (is_ud(id->id.qp_type)) {
    copy_ud_event(evt, m);
  } else {
    copy_conn_event(evt, m.param);
  }
}

// The active side could not move its QP after CONNECT_RESPONSE: the peer gets REJECTED.
void reject_router_id(uint32_t handle) {
  if (RouterLink* link = RouterLink::get()) {
    proto::CmRejectReq req;
    req.id = handle;
    proto::Empty rep;
    (void)link->call(proto::Op::kCmReject, req, &rep);
  }
}

void destroy_router_id(uint32_t handle) {
  if (RouterLink* link = RouterLink::get()) {
    proto::Empty rep;
    (void)link->call(proto::Op::kCmDestroyId, proto::Handle{handle}, &rep);
  }
}

// A new id for a connection request on `listener`; nullptr if it could not be set up (the
// router's id is destroyed then, which rejects the request).
Id* accept_request(Id* listener, const proto::CmEventMsg& m) {
  Id* id = id_alloc(listener->id.channel, false, listener->id.context, listener->id.ps,
                    listener->id.qp_type, m.id);
  if (id == nullptr) {
    destroy_router_id(m.id);
    return nullptr;
  }
  id->remote_lid = m.remote_lid;
  set_src(id, m.src);
  set_dst(id, m.dst, m.remote_gid);
  id->peer.known = true;
  id->peer.qp_num = m.param.qp_num;
  id->peer.psn = m.param.psn;
  id->peer.qkey = m.param.qkey;
  id->peer.retry_count = m.param.retry_count;
  id->peer.rnr_retry_count = m.param.rnr_retry_count;
  // Already swapped by the router into this side's view, as the IB CM reports them.
  id->initiator_depth = m.param.initiator_depth;
  id->responder_resources = m.param.responder_resources;
  bool ok = attach_device(id) == 0 && set_path(id) == 0;
  if (ok && listener->sync) ok = id_migrate(id, nullptr) == 0;
  if (!ok) {
    destroy_router_id(m.id);
    id_free(id);
    return nullptr;
  }
  return id;
}

// Builds the application's event for `m`, or returns nullptr to drop it.
Event* process(const proto::CmEventMsg& m) {
  const auto type = static_cast<rdma_cm_event_type>(m.event);
  Id* owner = registry::acquire(type == RDMA_CM_EVENT_CONNECT_REQUEST ? m.listen_id : m.id);
  if (owner == nullptr) {
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) destroy_router_id(m.id);
    return nullptr;
  }
  auto* evt = new (std::nothrow) Event();
  if (evt == nullptr) {
    registry::complete(owner);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) destroy_router_id(m.id);
    return nullptr;
  }
  evt->owner = owner;
  evt->event.id = &owner->id;
  evt->event.event = type;
  evt->event.status = m.status;
  Id* id = owner;
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      id->remote_lid = m.remote_lid;
      set_src(id, m.src);
      set_dst(id, m.dst, m.remote_gid);
      if (attach_device(id) != 0) {
        evt->event.event = RDMA_CM_EVENT_ADDR_ERROR;
        evt->event.status = -errno;
      }
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (set_path(id) != 0) {
        evt->event.event = RDMA_CM_EVENT_ROUTE_ERROR;
        evt->event.status = -errno;
      }
      break;
    case RDMA_CM_EVENT_CONNECT_REQUEST: {
      Id* conn = accept_request(owner, m);
      if (conn == nullptr) {
        registry::complete(owner);
        delete evt;
        return nullptr;
      }
      evt->event.id = &conn->id;
      evt->event.listen_id = &owner->id;
      copy_event_param(evt, owner, m);
      break;
    }
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      copy_conn_event(evt, m.param);
      id->peer.known = true;
      id->peer.qp_num = m.param.qp_num;
      id->peer.psn = m.param.psn;
      id->peer.rnr_retry_count = m.param.rnr_retry_count;
      if (m.remote_lid != 0) id->remote_lid = m.remote_lid;
      if (id->id.route.path_rec == nullptr) (void)set_path(id);
      if (id->id.qp != nullptr) {
        if (process_conn_resp(id) == 0) {
          evt->event.event = RDMA_CM_EVENT_ESTABLISHED;
        } else {
          evt->event.event = RDMA_CM_EVENT_CONNECT_ERROR;
          evt->event.status = -errno;
          id->connect_error = true;
          reject_router_id(id->handle);
        }
      }
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
      if (id->id.route.path_rec == nullptr) (void)set_path(id);
      if (is_ud(id->id.qp_type)) {
        id->peer.known = true;
        id->peer.qp_num = m.param.qp_num;
        id->peer.qkey = m.param.qkey;
      }
      copy_event_param(evt, id, m);
      break;
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_DISCONNECTED:
      // After a failed CONNECT_RESPONSE the application already had its CONNECT_ERROR.
      if (id->connect_error) {
        registry::complete(id);
        delete evt;
        return nullptr;
      }
      copy_event_param(evt, id, m);
      if (type == RDMA_CM_EVENT_REJECTED) (void)modify_qp_err(id);
      break;
    case RDMA_CM_EVENT_MULTICAST_JOIN: {
      rdma_ud_param& u = evt->event.param.ud;
      mcast_ah_attr(m.remote_lid, m.remote_gid, &u.ah_attr);
      u.qp_num = m.param.qp_num;
      u.qkey = m.param.qkey;
      void* context = nullptr;  // rdma-core hands the join's context in private_data
      if (int err = on_multicast_join(id, m, &context); err != 0) {
        evt->event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
        evt->event.status = -err;
      }
      u.private_data = context;
      u.private_data_len = 0;
      break;
    }
    default: copy_event_param(evt, id, m); break;
  }
  return evt;
}

}  // namespace

int complete(Id* id) {
  if (!id->sync) return 0;
  if (id->id.event != nullptr) {
    rdma_ack_cm_event(id->id.event);
    id->id.event = nullptr;
  }
  if (rdma_get_cm_event(id->id.channel, &id->id.event) != 0) return -1;
  const rdma_cm_event* e = id->id.event;
  if (e->status == 0) return 0;
  if (e->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
  return fail(e->status < 0 ? -e->status : e->status);
}

}  // namespace wharf::rdmacm

using namespace wharf;
using namespace wharf::rdmacm;

WHARF_EXPORT int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  try {
    if (channel == nullptr || event == nullptr) return fail(EINVAL);
    for (;;) {
      uint8_t buf[proto::kCmEventSize + 1];
      ssize_t n = ::recv(channel->fd, buf, sizeof(buf), 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        return -1;  // EAGAIN on a non-blocking channel, as rdma-core
      }
      if (n == 0) {
        if (channel_live(to_channel(channel))) return fail(ENODEV);  // the router is gone
        // The channel was destroyed under this call: the kernel's read would sleep until the
        // process exits, and applications (rping's CM thread) rely on that.
        for (;;) ::pause();
      }
      proto::CmEventMsg m;
      if (static_cast<size_t>(n) != proto::kCmEventSize ||
          !proto::decode(buf, static_cast<size_t>(n), &m)) {
        continue;  // not an event of this protocol: nothing to report it against
      }
      Event* evt = process(m);
      if (evt == nullptr) continue;
      *event = &evt->event;
      return 0;
    }
  } catch (...) {
    return fail(ENOMEM);
  }
}

WHARF_EXPORT int rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) return fail(EINVAL);
  Event* evt = to_event(event);
  registry::complete(evt->owner);
  delete evt;
  return 0;
}

WHARF_EXPORT const char* rdma_event_str(rdma_cm_event_type event) {
  switch (event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
    case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
    case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
    case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
    case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
    case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
    case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
    case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
    case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
    case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
    case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
    case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
    case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
    case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
    case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
    case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
    default: return "UNKNOWN EVENT";
  }
}
