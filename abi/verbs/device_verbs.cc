// Device discovery, contexts, device/port/GID queries and asynchronous events.
// The device `wharf0` exists when the router socket does; a context is one connection to
// the router, opened lazily by ibv_open_device (never in a constructor).
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "abi/verbs/export.h"
#include "abi/verbs/fork.h"
#include "abi/verbs/import.h"
#include "abi/verbs/provider.h"
#include "abi/verbs/session_resume.h"
#include "proto/datagram.h"
#include "proto/device.h"
#include "proto/multicast.h"
#include "proto/qp_rules.h"

namespace wharf::abi {
namespace {

// Laid out like rdma-core's struct verbs_device: Debian's libmlx5/libefa, loaded under
// LD_PRELOAD, recognise their own devices by reading `ops` after the ibv_device. Ours is
// null, so they correctly answer "not my device".
struct Device {
  ibv_device dev;
  const void* ops;
  std::atomic<int> refcount;
  void* list_next;
  void* list_prev;
  void* sysfs;
  uint64_t core_support;
};

Device* make_device() {
  auto* d = new (std::nothrow) Device{};
  if (d == nullptr) return nullptr;
  d->dev.node_type = IBV_NODE_CA;
  d->dev.transport_type = IBV_TRANSPORT_IB;
  snprintf(d->dev.name, sizeof(d->dev.name), "%s", device::kName);
  snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs0");
  snprintf(d->dev.dev_path, sizeof(d->dev.dev_path), "/sys/class/infiniband_verbs/uverbs0");
  snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "/sys/class/infiniband/%s", device::kName);
  return d;
}

// One process-wide device object: ibv_device pointers stay valid after the list is freed,
// as rdma-core's do.
Device* the_device() {
  static Device* dev = make_device();
  return dev;
}

// Connects and says hello. On success fills ctx->hello and the shared page/doorbell.
int open_session(Context* ctx, UniqueFd* async_mine) {
  const char* path = proto::router_socket_path();
  if (strlen(path) >= ctx->router_socket.size()) return ENAMETOOLONG;
  std::strncpy(ctx->router_socket.data(), path, ctx->router_socket.size() - 1);
  if (int err = ctx->client.connect(ctx->router_socket.data()); err != 0) return err;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0) return errno;
  async_mine->reset(sv[0]);
  UniqueFd theirs(sv[1]);
  int fds[1] = {theirs.get()};
  UniqueFd got[2];
  int err = ctx->client.call(proto::Op::kHello, proto::HelloReq{}, fds, 1, &ctx->hello, got, 2);
  if (err != 0) return err;
  if (!got[0].valid() || !got[1].valid()) return EPROTO;
  if (int e = ctx->page_map.map(got[0].get(), shm::kContextPageSize); e != 0) return e;
  ctx->page = reinterpret_cast<shm::ContextPage*>(ctx->page_map.data);
  ctx->page_fd = std::move(got[0]);
  ctx->doorbell = std::move(got[1]);
  ctx->async_router_end = std::move(theirs);
  return 0;
}

uint64_t cached_node_guid = 0;

}  // namespace

// The router frees its side when the connection closes; this frees ours. Pointers the
// application still holds are dangling afterwards, as with rdma-core.
void init_ibv_context(Context* ctx, ibv_device* device, UniqueFd async_fd, UniqueFd cmd_fd) {
  ibv_context* c = &ctx->vctx.context;
  ctx->vctx.sz = sizeof(verbs_context);
  c->device = device;
  c->async_fd = async_fd.release();
  c->cmd_fd = cmd_fd.release();
  c->num_comp_vectors = 1;
  c->abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&c->mutex, nullptr);
  init_context_ops(ctx);
}

void release_context(Context* ctx) {
  ibv_context* c = &ctx->vctx.context;
  ctx->closing.store(true, std::memory_order_relaxed);
  ctx->watch.stop();
  untrack_context(ctx);
  ctx->free_objects();
  close(c->async_fd);
  close(c->cmd_fd);
  ctx->client.close();
  pthread_mutex_destroy(&c->mutex);
  delete ctx;
}

void Context::free_objects() {
  // The express helper thread takes objects_mu while it services a line: this context's
  // lines leave its list first, without the mutex.
  forget_express_lines(this);
  std::lock_guard<std::mutex> g(objects_mu);
  for (auto& [h, qp] : qps) delete to_qp(qp);
  for (auto& [h, cq] : cqs) delete to_cq(cq);
  for (auto& [h, srq] : srqs) delete to_srq(srq);
  for (auto& [h, ah] : ahs) delete to_ah(ah);
  for (auto& [h, mr] : mrs) delete to_mr(mr);
  for (auto& [h, mw] : mws) delete mw;
  for (auto& [h, dm] : dms) delete to_dm(dm);
  for (auto& [h, p] : parent_domains) delete to_pd(p);
  for (auto& [h, td] : tds) delete td;
  for (auto& [h, pd] : pds) delete to_pd(pd);
  for (auto& [h, x] : xrcds) delete to_xrcd(x);
  for (auto& [h, ch] : channels) delete to_channel(ch);  // closes its descriptors
  qps.clear(), cqs.clear(), srqs.clear(), ahs.clear(), mrs.clear(), mws.clear(), pds.clear();
  xrcds.clear();
  channels.clear();
  dms.clear(), parent_domains.clear(), tds.clear();
}

}  // namespace wharf::abi

using namespace wharf;
using namespace wharf::abi;

WHARF_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  struct stat st;
  bool present = stat(proto::router_socket_path(), &st) == 0 && S_ISSOCK(st.st_mode);
  // An array of pointers, NULL-terminated, released by the caller with free().
  auto** list = static_cast<ibv_device**>(
      calloc(2, sizeof(ibv_device*)));  // NOLINT(bugprone-sizeof-expression)
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  int n = 0;
  if (present && the_device() != nullptr) list[n++] = &the_device()->dev;
  if (num_devices != nullptr) *num_devices = n;
  return list;
}

WHARF_EXPORT void ibv_free_device_list(ibv_device** list) { free(list); }

WHARF_EXPORT const char* ibv_get_device_name(ibv_device* device) { return device->name; }

WHARF_EXPORT int ibv_get_device_index(ibv_device*) { return 0; }

WHARF_EXPORT __be64 ibv_get_device_guid(ibv_device*) {
  if (cached_node_guid == 0) {
    auto* ctx = new (std::nothrow) Context{};
    if (ctx == nullptr) return 0;
    UniqueFd async;
    if (open_session(ctx, &async) == 0) cached_node_guid = ctx->hello.node_guid;
    delete ctx;
  }
  return htobe64(cached_node_guid);
}

WHARF_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (device == nullptr || device != &the_device()->dev) {
    errno = ENODEV;
    return nullptr;
  }
  auto* ctx = new (std::nothrow) Context{};
  if (ctx == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  UniqueFd async;
  if (int err = open_session(ctx, &async); err != 0) {
    delete ctx;
    errno = err;
    return nullptr;
  }
  // No command device here: cmd_fd is a file of the context's own, so that ibv_import_device
  // can tell which context a descriptor (a dup of it) names.
  UniqueFd cmd(memfd_create("wharf-context", MFD_CLOEXEC));
  if (!cmd.valid()) {
    const int err = errno;
    delete ctx;
    errno = err;
    return nullptr;
  }
  ctx->owner_pid = getpid();
  init_ibv_context(ctx, device, std::move(async), std::move(cmd));
  // Without the watch the session still resumes, at the next control verb.
  ctx->client.set_resumer([ctx](proto::RouterClient* fresh) { return resume_session(ctx, fresh); });
  (void)ctx->watch.start(&ctx->client);
  install_fork_handlers();
  if (!track_context(ctx)) {
    release_context(ctx);
    errno = ENOMEM;
    return nullptr;
  }
  return &ctx->vctx.context;
}

WHARF_EXPORT int ibv_close_device(ibv_context* context) {
  Context* own = own_ctx(context);
  if (own->imported_from != nullptr) {
    close_imported_context(own);
  } else if (!defer_close_while_imported(own)) {
    release_context(own);
  }
  return 0;
}

WHARF_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* a) {
  Context* ctx = to_ctx(context);
  std::memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", device::kFwVer);
  a->node_guid = htobe64(ctx->hello.node_guid);
  a->sys_image_guid = htobe64(ctx->hello.node_guid);
  a->max_mr_size = device::kMaxMrSize;
  a->page_size_cap = 0xfffff000;
  a->vendor_id = device::kVendorId;
  a->vendor_part_id = device::kVendorPartId;
  a->hw_ver = device::kHwVer;
  a->max_qp = device::kMaxQp;
  a->max_qp_wr = device::kMaxQpWr;
  // Memory windows: type 1, and type 2 bound to one QP (2B).
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID |
                        IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_MEM_WINDOW |
                        IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
  a->max_sge = device::kMaxSge;
  a->max_sge_rd = device::kMaxSge;
  a->max_cq = device::kMaxCq;
  a->max_cqe = device::kMaxCqe;
  a->max_mr = device::kMaxMr;
  a->max_pd = device::kMaxPd;
  a->max_mw = device::kMaxMw;
  a->max_mcast_grp = static_cast<int>(proto::kMaxMcastAttachments);
  a->max_mcast_qp_attach = static_cast<int>(proto::kMaxMcastQpAttach);
  a->max_total_mcast_qp_attach = static_cast<int>(proto::kMaxMcastAttachments);
  a->max_qp_rd_atom = device::kMaxQpRdAtom;
  a->max_ee_rd_atom = 0;
  a->max_res_rd_atom = device::kMaxQpRdAtom * device::kMaxQp;
  a->max_qp_init_rd_atom = device::kMaxQpRdAtom;
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_ah = device::kMaxAh;
  a->max_srq = device::kMaxSrq;
  a->max_srq_wr = device::kMaxSrqWr;
  a->max_srq_sge = device::kMaxSrqSge;
  a->max_pkeys = device::kPkeyTableLen;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
  return 0;
}

namespace wharf::abi {

int query_device_ex(ibv_context* context, const ibv_query_device_ex_input*,
                    ibv_device_attr_ex* attr, size_t attr_size) {
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  std::memset(attr, 0, attr_size);
  if (int err = ibv_query_device(context, &attr->orig_attr); err != 0) return err;
  // Per-QP rate limits (ibv_modify_qp IBV_QP_RATE_LIMIT, ibv_modify_qp_rate_limit), paced
  // by the router: any rate rdma-core's 32-bit kbps can name. Callers built against an
  // older struct get what fits.
  // On-demand paging (ibv_reg_mr with IBV_ACCESS_ON_DEMAND, implicit MRs, ibv_advise_mr):
  // every operation of each transport, as the router reaches such memory with process_vm_*.
  if (attr_size >= offsetof(ibv_device_attr_ex, odp_caps) + sizeof(attr->odp_caps)) {
    constexpr uint32_t kAll = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                              IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
                              IBV_ODP_SUPPORT_SRQ_RECV;
    attr->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
    attr->odp_caps.per_transport_caps.rc_odp_caps = kAll;
    attr->odp_caps.per_transport_caps.uc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                                    IBV_ODP_SUPPORT_WRITE |
                                                    IBV_ODP_SUPPORT_SRQ_RECV;
    attr->odp_caps.per_transport_caps.ud_odp_caps =
        IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
  }
  if (attr_size >= offsetof(ibv_device_attr_ex, xrc_odp_caps) + sizeof(attr->xrc_odp_caps))
    attr->xrc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                         IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  if (attr_size >= offsetof(ibv_device_attr_ex, max_dm_size) + sizeof(attr->max_dm_size))
    attr->max_dm_size = device::kMaxDmSize;
  // The device's clock (ibv_query_rt_values_ex) counts nanoseconds: 1 GHz.
  if (attr_size >= offsetof(ibv_device_attr_ex, hca_core_clock) + sizeof(attr->hca_core_clock))
    attr->hca_core_clock = 1000000;
  // CQ event moderation (ibv_modify_cq), applied by the router.
  if (attr_size >= offsetof(ibv_device_attr_ex, cq_mod_caps) + sizeof(attr->cq_mod_caps)) {
    attr->cq_mod_caps.max_cq_count = device::kMaxCqModerationCount;
    attr->cq_mod_caps.max_cq_period = device::kMaxCqModerationPeriodUs;
  }
  // Tag matching on RC (router/tag_matching.cc), between QPs of this host.
  if (attr_size >= offsetof(ibv_device_attr_ex, tm_caps) + sizeof(attr->tm_caps)) {
    attr->tm_caps.max_rndv_hdr_size = device::kTmMaxRndvHdrSize;
    attr->tm_caps.max_num_tags = device::kTmMaxNumTags;
    attr->tm_caps.flags = IBV_TM_CAP_RC;
    attr->tm_caps.max_ops = device::kTmMaxOps;
    attr->tm_caps.max_sge = device::kTmMaxSge;
  }
  if (attr_size >= offsetof(ibv_device_attr_ex, phys_port_cnt_ex) + sizeof(attr->phys_port_cnt_ex))
    attr->phys_port_cnt_ex = attr->orig_attr.phys_port_cnt;
  if (attr_size >=
      offsetof(ibv_device_attr_ex, packet_pacing_caps) + sizeof(attr->packet_pacing_caps)) {
    attr->packet_pacing_caps.qp_rate_limit_min = 1;
    attr->packet_pacing_caps.qp_rate_limit_max = UINT32_MAX;
    attr->packet_pacing_caps.supported_qpts =
        (1u << IBV_QPT_RC) | (1u << IBV_QPT_UC) | (1u << IBV_QPT_UD);
  }
  // Receive-side scaling of RAW_PACKET QPs, which exist on an Ethernet port only
  // (abi/verbs/wq_verbs.cc): Toeplitz over addresses and ports, tables of up to 64 WQs.
  if (to_ctx(context)->hello.link_layer == IBV_LINK_LAYER_ETHERNET) {
    if (attr_size >= offsetof(ibv_device_attr_ex, rss_caps) + sizeof(attr->rss_caps)) {
      attr->rss_caps.supported_qpts = 1u << IBV_QPT_RAW_PACKET;
      attr->rss_caps.max_rwq_indirection_tables = device::kMaxSrq;
      attr->rss_caps.max_rwq_indirection_table_size = 1u << proto::kMaxRssTableLog;
      attr->rss_caps.rx_hash_fields_mask = proto::kRssHashFields;
      attr->rss_caps.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
    }
    if (attr_size >= offsetof(ibv_device_attr_ex, max_wq_type_rq) + sizeof(attr->max_wq_type_rq))
      attr->max_wq_type_rq = device::kMaxSrq;
  }
  return 0;
}

// The device's free-running clock: CLOCK_MONOTONIC_RAW, in nanoseconds (hca_core_clock).
int query_rt_values(ibv_context*, ibv_values_ex* values) {
  if (values == nullptr || (values->comp_mask & ~IBV_VALUES_MASK_RAW_CLOCK) != 0) return EINVAL;
  if ((values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) != 0 &&
      clock_gettime(CLOCK_MONOTONIC_RAW, &values->raw_clock) != 0)
    return errno;
  return 0;
}

int query_port(ibv_context* context, uint8_t port, ibv_port_attr* a, size_t len) {
  if (port != 1) return EINVAL;
  Context* ctx = to_ctx(context);
  ibv_port_attr p{};
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = IBV_MTU_4096;
  p.gid_tbl_len = device::kGidTableLen;
  p.port_cap_flags = device::kPortCapFlags;
  p.max_msg_sz = device::kMaxMsgSize;
  p.pkey_tbl_len = device::kPkeyTableLen;
  p.lid = ctx->hello.lid;
  p.sm_lid = ctx->hello.link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : 1;
  p.max_vl_num = 1;
  p.subnet_timeout = device::kSubnetTimeout;
  p.active_width = device::kActiveWidth;
  p.active_speed = device::kActiveSpeed;
  p.phys_state = device::kPhysStateLinkUp;
  p.link_layer = ctx->hello.link_layer;
  std::memcpy(a, &p, len < sizeof(p) ? len : sizeof(p));
  return 0;
}

}  // namespace wharf::abi

// The exported symbol takes rdma-core's compat struct; its layout is ibv_port_attr's prefix.
// verbs.h defines ibv_query_port as a macro over an inline wrapper; we export the symbol.
#undef ibv_query_port
WHARF_EXPORT int ibv_query_port(ibv_context* context, uint8_t port_num,
                                _compat_ibv_port_attr* attr) {
  return query_port(context, port_num, reinterpret_cast<ibv_port_attr*>(attr),
                    sizeof(ibv_port_attr));
}

WHARF_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (port_num != 1 || index < 0 || static_cast<uint32_t>(index) >= device::kGidTableLen) return -1;
  // An empty entry is the zero GID, as the kernel's sysfs file shows it.
  if (static_cast<uint32_t>(index) < device::kGidsInUse)
    std::memcpy(gid->raw, to_ctx(context)->hello.gid.data(), 16);
  else
    std::memset(gid->raw, 0, 16);
  return 0;
}

namespace {
uint32_t gid_type_of(Context* ctx) {
  return ctx->hello.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
}
}  // namespace

WHARF_EXPORT int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                                   ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  if (flags != 0) return EINVAL;
  if (port_num != 1 || gid_index >= device::kGidsInUse) return ENODATA;  // none, or empty
  if (entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  Context* ctx = to_ctx(context);
  ibv_gid_entry e{};
  std::memcpy(e.gid.raw, ctx->hello.gid.data(), 16);
  e.gid_index = gid_index;
  e.port_num = port_num;
  e.gid_type = gid_type_of(ctx);
  std::memcpy(entry, &e, sizeof(e));
  return 0;
}

WHARF_EXPORT ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries,
                                          size_t max_entries, uint32_t flags, size_t entry_size) {
  if (flags != 0 || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  // The entries in use, densely, as the kernel's GID table query returns them.
  if (max_entries < device::kGidsInUse) return -EINVAL;
  for (uint32_t i = 0; i < device::kGidsInUse; ++i) {
    auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + i * entry_size);
    if (int err = _ibv_query_gid_ex(context, 1, i, e, 0, entry_size); err != 0) return -err;
  }
  return device::kGidsInUse;
}

// rdma-core's private enum ibv_gid_type_sysfs: 0 = IB/RoCE v1, 1 = RoCE v2.
WHARF_EXPORT int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                    int* type) {
  if (port_num != 1 || index >= device::kGidTableLen) return EINVAL;
  // An empty entry has no type file; rdma-core then answers IB/RoCE v1 (0), as here.
  const bool v2 =
      index < device::kGidsInUse && to_ctx(context)->hello.link_layer == IBV_LINK_LAYER_ETHERNET;
  *type = v2 ? 1 : 0;
  return 0;
}

WHARF_EXPORT int ibv_query_pkey(ibv_context*, uint8_t port_num, int index, __be16* pkey) {
  if (port_num != 1 || index < 0 || static_cast<uint32_t>(index) >= device::kPkeyTableLen) {
    errno = ENOENT;  // rdma-core: no such sysfs file
    return -1;
  }
  *pkey = htobe16(device::kDefaultPkey);
  return 0;
}

// rdma-core searches the table with ibv_query_pkey and returns -1 (errno from the failed
// sysfs read) when the port has no such table or the P_Key is not in it.
WHARF_EXPORT int ibv_get_pkey_index(ibv_context*, uint8_t port_num, __be16 pkey) {
  if (port_num != 1 || be16toh(pkey) != device::kDefaultPkey) {
    errno = ENOENT;
    return -1;
  }
  return 0;
}

namespace {

// Fills event's element from the object handle the router named. False when the event is
// about a QP, CQ or SRQ this context has destroyed since: the kernel drops such events with
// the object, and an application would otherwise get a NULL element (UCX dereferences it).
bool resolve_event_element(Context* ctx, uint32_t handle, ibv_async_event* event) {
  std::lock_guard<std::mutex> g(ctx->objects_mu);
  auto find = [handle](auto& map) {
    auto it = map.find(handle);
    return it == map.end() ? nullptr : it->second;
  };
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: return (event->element.cq = find(ctx->cqs)) != nullptr;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: return (event->element.srq = find(ctx->srqs)) != nullptr;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE: event->element.port_num = static_cast<int>(handle); return true;
    case IBV_EVENT_DEVICE_FATAL: return true;
    default: return (event->element.qp = find(ctx->qps)) != nullptr;
  }
}

}  // namespace

WHARF_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  for (;;) {
    uint8_t buf[proto::kAsyncEventSize];
    ssize_t n;
    do {
      n = read(context->async_fd, buf, sizeof(buf));
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof(buf))) return -1;
    proto::AsyncEventMsg m;
    if (!proto::decode(buf, sizeof(buf), &m)) {
      errno = EPROTO;
      return -1;
    }
    event->event_type = static_cast<ibv_event_type>(m.event_type);
    if (resolve_event_element(to_ctx(context), m.handle, event)) return 0;
  }
}

WHARF_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
      if (ibv_cq* cq = event->element.cq) {
        pthread_mutex_lock(&cq->mutex);
        ++cq->async_events_completed;
        pthread_cond_signal(&cq->cond);
        pthread_mutex_unlock(&cq->mutex);
      }
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      if (ibv_srq* srq = event->element.srq) {
        pthread_mutex_lock(&srq->mutex);
        ++srq->events_completed;
        pthread_cond_signal(&srq->cond);
        pthread_mutex_unlock(&srq->mutex);
      }
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      if (ibv_qp* qp = event->element.qp) {
        pthread_mutex_lock(&qp->mutex);
        ++qp->events_completed;
        pthread_cond_signal(&qp->cond);
        pthread_mutex_unlock(&qp->mutex);
      }
      break;
    default: break;
  }
}
