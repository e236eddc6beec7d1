// IBVERBS_PRIVATE_34: the provider-facing ABI of rdma-core 44 (libibverbs/driver.h and
// cmd_ioctl.h, neither installed by Debian), minus ibv_query_gid_type, which is a real verb.
//
// Why it exists: under LD_PRELOAD, or when an application dlopen()s a provider, Debian's
// libmlx5.so.1, libefa.so.1 and the libibverbs/lib*-rdmav34.so providers bind to these symbols of
// whichever libibverbs.so.1 is loaded, which is ours. They must resolve, or the application does
// not start. They are never *driven*: Wharf does not dlopen providers or match kernel devices, so
// no provider ever gets a device, context or object from us.
//
// What they do: fail the way rdma-core fails for an operation the device lacks, in the calling
// convention of each entry point (rdma-core libibverbs/dummy_ops.c is the model):
//   - ibv_cmd_*, execute_ioctl: return EOPNOTSUPP (a positive errno; errno set too).
//   - ibv_cmd_poll_cq: -1 (it returns a completion count); ibv_cmd_post_*: *bad_wr = wr.
//   - pointer returns: NULL with errno = EOPNOTSUPP.
//   - verbs_register_driver_34: ignores the registration (providers call it from a constructor).
//   - void provider helpers (verbs_set_ops, verbs_init_cq, verbs_uninit_context): do nothing;
//     they only touch contexts and CQs a provider allocated through us, which cannot exist.
// Two are real because they are pure: __ioctl_final_num_attrs and __verbs_log.
//
// Argument types follow driver.h v44 exactly; the private structs are only forward-declared
// because only pointers to them cross this boundary.

#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "export.h"

// rdma-core private types (libibverbs/driver.h, cmd_ioctl.h).
struct verbs_device_ops;
struct verbs_context_ops;
struct verbs_sysfs_dev;
struct verbs_xrcd;
struct verbs_srq;
struct verbs_qp;
struct verbs_cq;
struct verbs_mr;
struct verbs_dm;
struct verbs_flow_action;
struct verbs_counters;
struct ibv_command_buffer;

// Legacy write() command structs (rdma-core libibverbs/kern-abi.h). Several share their name with
// a verb, so they are always spelled with `struct`.
struct ibv_get_context;
struct ibv_query_port;
struct ibv_alloc_pd;
struct ibv_open_xrcd;
struct ibv_reg_mr;
struct ibv_rereg_mr;
struct ibv_alloc_mw;
struct ibv_create_cq;
struct ibv_create_cq_ex;
struct ibv_resize_cq;
struct ibv_modify_cq;
struct ibv_create_srq;
struct ibv_create_xsrq;
struct ibv_modify_srq;
struct ibv_query_srq;
struct ibv_create_qp;
struct ibv_create_qp_ex;
struct ibv_open_qp;
struct ibv_query_qp;
struct ibv_modify_qp;
struct ibv_modify_qp_ex;
struct ibv_create_wq;
struct ibv_modify_wq;

// Kernel responses (<rdma/ib_user_verbs.h>).
struct ib_uverbs_get_context_resp;
struct ib_uverbs_ex_query_device_resp;
struct ib_uverbs_alloc_pd_resp;
struct ib_uverbs_open_xrcd_resp;
struct ib_uverbs_reg_mr_resp;
struct ib_uverbs_rereg_mr_resp;
struct ib_uverbs_alloc_mw_resp;
struct ib_uverbs_create_cq_resp;
struct ib_uverbs_ex_create_cq_resp;
struct ib_uverbs_resize_cq_resp;
struct ib_uverbs_create_srq_resp;
struct ib_uverbs_create_qp_resp;
struct ib_uverbs_ex_create_qp_resp;
struct ib_uverbs_ex_modify_qp_resp;
struct ib_uverbs_create_ah_resp;
struct ib_uverbs_ex_create_wq_resp;
struct ib_uverbs_ex_create_rwq_ind_table_resp;

namespace {

// The single place where a provider entry reports "not supported".
int Unsupported() noexcept {
  errno = EOPNOTSUPP;
  return EOPNOTSUPP;
}

template <typename T>
T* UnsupportedNull() noexcept {
  errno = EOPNOTSUPP;
  return nullptr;
}

// The head of rdma-core's struct ibv_command_buffer (cmd_ioctl.h), up to the ioctl header whose
// trailing attrs[] array the buffer's attributes fill. Layout is fixed by IBVERBS_PRIVATE_34.
struct CommandBufferHead {
  const CommandBufferHead* next;
  const ib_uverbs_attr* next_attr;
  const ib_uverbs_attr* last_attr;
  uint8_t uhw_indices_and_headroom[4];
  uint8_t flag_bits;  // buffer_error, fallback_require_ex, fallback_ioctl_only
  ib_uverbs_ioctl_hdr hdr;
};
static_assert(offsetof(CommandBufferHead, hdr) == 32);
static_assert(sizeof(ib_uverbs_ioctl_hdr) == 24 && sizeof(ib_uverbs_attr) == 16);

// VERBS_LOG_LEVEL / VERBS_LOG_FILE, read on first use. As in a release build of rdma-core, logging
// happens only into VERBS_LOG_FILE; without it (or if it cannot be opened) nothing is printed.
struct VerbsLog {
  uint32_t level = 0;  // VERBS_LOG_LEVEL_NONE
  FILE* file = nullptr;
};

const VerbsLog& GetVerbsLog() noexcept {
  static const VerbsLog log = [] {
    VerbsLog l;
    const char* level = getenv("VERBS_LOG_LEVEL");
    const char* path = getenv("VERBS_LOG_FILE");
    if (level == nullptr || path == nullptr) return l;
    l.level = static_cast<uint32_t>(strtol(level, nullptr, 0));
    if (l.level != 0) l.file = fopen(path, "ae");
    if (l.file == nullptr) l.level = 0;
    return l;
  }();
  return log;
}

}  // namespace

// ---- Provider registration and context plumbing ----

// Providers call this from their constructor (PROVIDER_DRIVER). Wharf serves one device of its
// own and never matches kernel devices, so the registration is dropped.
WHARF_EXPORT void verbs_register_driver_34(const struct verbs_device_ops* /*ops*/) noexcept {}

WHARF_EXPORT void* _verbs_init_and_alloc_context(struct ibv_device* /*device*/, int /*cmd_fd*/,
                                                 size_t /*alloc_size*/,
                                                 struct verbs_context* /*context_offset*/,
                                                 uint32_t /*driver_id*/) noexcept {
  return UnsupportedNull<void>();
}

WHARF_EXPORT void verbs_uninit_context(struct verbs_context* /*context*/) noexcept {}

WHARF_EXPORT void verbs_set_ops(struct verbs_context* /*vctx*/,
                                const struct verbs_context_ops* /*ops*/) noexcept {}

WHARF_EXPORT void verbs_init_cq(struct ibv_cq* /*cq*/, struct ibv_context* /*context*/,
                                struct ibv_comp_channel* /*channel*/,
                                void* /*cq_context*/) noexcept {}

// mlx5dv_open_device() reaches this only after checking that the device is an mlx5 one.
WHARF_EXPORT struct ibv_context* verbs_open_device(struct ibv_device* /*device*/,
                                                   void* /*private_data*/) noexcept {
  return UnsupportedNull<ibv_context>();
}

// rdma-core sets this from $RDMAV_ALLOW_DISASSOC_DESTROY; providers read it only when destroying
// objects of a disassociated (hot-unplugged) kernel device, which Wharf never has.
extern "C" {
WHARF_VISIBLE bool verbs_allow_disassociate_destroy = false;
}

// ---- Logging ----

WHARF_EXPORT void __verbs_log(struct verbs_context* /*ctx*/, uint32_t level, const char* fmt,
                              ...) noexcept __attribute__((format(printf, 3, 4)));

WHARF_EXPORT void __verbs_log(struct verbs_context* /*ctx*/, uint32_t level, const char* fmt,
                              ...) noexcept {
  const VerbsLog& log = GetVerbsLog();
  if (log.file == nullptr || level > log.level) return;
  int saved_errno = errno;
  va_list args;
  va_start(args, fmt);
  vfprintf(log.file, fmt, args);
  va_end(args);
  errno = saved_errno;
}

// ---- sysfs ----

// Only providers hold a verbs_sysfs_dev, handed to them while matching kernel devices.
WHARF_EXPORT int ibv_read_ibdev_sysfs_file(char* /*buf*/, size_t /*size*/,
                                           struct verbs_sysfs_dev* sysfs_dev, const char* /*fnfmt*/,
                                           ...) noexcept {
  errno = sysfs_dev == nullptr ? EINVAL : EOPNOTSUPP;
  return -1;
}

// ---- ioctl() command buffers ----

// The attribute count of a command after its linked driver buffers are appended; providers size
// the stack array of the final command with it. Pure arithmetic, hence real.
WHARF_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
                                                  struct ibv_command_buffer* link) noexcept {
  for (auto* buf = reinterpret_cast<const CommandBufferHead*>(link); buf != nullptr;
       buf = buf->next) {
    num_attrs += static_cast<unsigned int>(buf->next_attr - buf->hdr.attrs);
  }
  return num_attrs;
}

WHARF_EXPORT int execute_ioctl(struct ibv_context* /*context*/,
                               struct ibv_command_buffer* /*cmd*/) noexcept {
  return Unsupported();
}

// ---- Context and device ----

WHARF_EXPORT int ibv_cmd_get_context(struct verbs_context* /*context*/,
                                     struct ibv_get_context* /*cmd*/, size_t /*cmd_size*/,
                                     struct ib_uverbs_get_context_resp* /*resp*/,
                                     size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_query_context(struct ibv_context* /*ctx*/,
                                       struct ibv_command_buffer* /*driver*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_query_device_any(struct ibv_context* /*context*/,
                                          const struct ibv_query_device_ex_input* /*input*/,
                                          struct ibv_device_attr_ex* /*attr*/, size_t /*attr_size*/,
                                          struct ib_uverbs_ex_query_device_resp* /*resp*/,
                                          size_t* /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_query_port(struct ibv_context* /*context*/, uint8_t /*port_num*/,
                                    struct ibv_port_attr* /*port_attr*/,
                                    struct ibv_query_port* /*cmd*/, size_t /*cmd_size*/) noexcept {
  return Unsupported();
}

// ---- PD, XRCD ----

WHARF_EXPORT int ibv_cmd_alloc_pd(struct ibv_context* /*context*/, struct ibv_pd* /*pd*/,
                                  struct ibv_alloc_pd* /*cmd*/, size_t /*cmd_size*/,
                                  struct ib_uverbs_alloc_pd_resp* /*resp*/,
                                  size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_dealloc_pd(struct ibv_pd* /*pd*/) noexcept { return Unsupported(); }

WHARF_EXPORT int ibv_cmd_open_xrcd(struct ibv_context* /*context*/, struct verbs_xrcd* /*xrcd*/,
                                   int /*vxrcd_size*/, struct ibv_xrcd_init_attr* /*attr*/,
                                   struct ibv_open_xrcd* /*cmd*/, size_t /*cmd_size*/,
                                   struct ib_uverbs_open_xrcd_resp* /*resp*/,
                                   size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_close_xrcd(struct verbs_xrcd* /*xrcd*/) noexcept { return Unsupported(); }

// ---- MR, MW, DM ----

WHARF_EXPORT int ibv_cmd_reg_mr(struct ibv_pd* /*pd*/, void* /*addr*/, size_t /*length*/,
                                uint64_t /*hca_va*/, int /*access*/, struct verbs_mr* /*vmr*/,
                                struct ibv_reg_mr* /*cmd*/, size_t /*cmd_size*/,
                                struct ib_uverbs_reg_mr_resp* /*resp*/,
                                size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_rereg_mr(struct verbs_mr* /*vmr*/, uint32_t /*flags*/, void* /*addr*/,
                                  size_t /*length*/, uint64_t /*hca_va*/, int /*access*/,
                                  struct ibv_pd* /*pd*/, struct ibv_rereg_mr* /*cmd*/,
                                  size_t /*cmd_sz*/, struct ib_uverbs_rereg_mr_resp* /*resp*/,
                                  size_t /*resp_sz*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_dereg_mr(struct verbs_mr* /*vmr*/) noexcept { return Unsupported(); }

WHARF_EXPORT int ibv_cmd_query_mr(struct ibv_pd* /*pd*/, struct verbs_mr* /*vmr*/,
                                  uint32_t /*mr_handle*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_advise_mr(struct ibv_pd* /*pd*/, enum ibv_advise_mr_advice /*advice*/,
                                   uint32_t /*flags*/, struct ibv_sge* /*sg_list*/,
                                   uint32_t /*num_sge*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_reg_dmabuf_mr(struct ibv_pd* /*pd*/, uint64_t /*offset*/,
                                       size_t /*length*/, uint64_t /*iova*/, int /*fd*/,
                                       int /*access*/, struct verbs_mr* /*vmr*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_alloc_mw(struct ibv_pd* /*pd*/, enum ibv_mw_type /*type*/,
                                  struct ibv_mw* /*mw*/, struct ibv_alloc_mw* /*cmd*/,
                                  size_t /*cmd_size*/, struct ib_uverbs_alloc_mw_resp* /*resp*/,
                                  size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_dealloc_mw(struct ibv_mw* /*mw*/) noexcept { return Unsupported(); }

WHARF_EXPORT int ibv_cmd_alloc_dm(struct ibv_context* /*ctx*/,
                                  const struct ibv_alloc_dm_attr* /*dm_attr*/,
                                  struct verbs_dm* /*dm*/,
                                  struct ibv_command_buffer* /*link*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_free_dm(struct verbs_dm* /*dm*/) noexcept { return Unsupported(); }

WHARF_EXPORT int ibv_cmd_reg_dm_mr(struct ibv_pd* /*pd*/, struct verbs_dm* /*dm*/,
                                   uint64_t /*offset*/, size_t /*length*/, unsigned int /*access*/,
                                   struct verbs_mr* /*vmr*/,
                                   struct ibv_command_buffer* /*link*/) noexcept {
  return Unsupported();
}

// ---- CQ ----

WHARF_EXPORT int ibv_cmd_create_cq(struct ibv_context* /*context*/, int /*cqe*/,
                                   struct ibv_comp_channel* /*channel*/, int /*comp_vector*/,
                                   struct ibv_cq* /*cq*/, struct ibv_create_cq* /*cmd*/,
                                   size_t /*cmd_size*/, struct ib_uverbs_create_cq_resp* /*resp*/,
                                   size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_create_cq_ex(struct ibv_context* /*context*/,
                                      const struct ibv_cq_init_attr_ex* /*cq_attr*/,
                                      struct verbs_cq* /*cq*/, struct ibv_create_cq_ex* /*cmd*/,
                                      size_t /*cmd_size*/,
                                      struct ib_uverbs_ex_create_cq_resp* /*resp*/,
                                      size_t /*resp_size*/, uint32_t /*cmd_flags*/) noexcept {
  return Unsupported();
}

// Returns a completion count, so failure is negative.
WHARF_EXPORT int ibv_cmd_poll_cq(struct ibv_cq* /*cq*/, int /*ne*/,
                                 struct ibv_wc* /*wc*/) noexcept {
  errno = EOPNOTSUPP;
  return -1;
}

WHARF_EXPORT int ibv_cmd_req_notify_cq(struct ibv_cq* /*cq*/, int /*solicited_only*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_resize_cq(struct ibv_cq* /*cq*/, int /*cqe*/,
                                   struct ibv_resize_cq* /*cmd*/, size_t /*cmd_size*/,
                                   struct ib_uverbs_resize_cq_resp* /*resp*/,
                                   size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_destroy_cq(struct ibv_cq* /*cq*/) noexcept { return Unsupported(); }

WHARF_EXPORT int ibv_cmd_modify_cq(struct ibv_cq* /*cq*/, struct ibv_modify_cq_attr* /*attr*/,
                                   struct ibv_modify_cq* /*cmd*/, size_t /*cmd_size*/) noexcept {
  return Unsupported();
}

// ---- SRQ ----

WHARF_EXPORT int ibv_cmd_create_srq(struct ibv_pd* /*pd*/, struct ibv_srq* /*srq*/,
                                    struct ibv_srq_init_attr* /*attr*/,
                                    struct ibv_create_srq* /*cmd*/, size_t /*cmd_size*/,
                                    struct ib_uverbs_create_srq_resp* /*resp*/,
                                    size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_create_srq_ex(struct ibv_context* /*context*/, struct verbs_srq* /*srq*/,
                                       struct ibv_srq_init_attr_ex* /*attr_ex*/,
                                       struct ibv_create_xsrq* /*cmd*/, size_t /*cmd_size*/,
                                       struct ib_uverbs_create_srq_resp* /*resp*/,
                                       size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_modify_srq(struct ibv_srq* /*srq*/, struct ibv_srq_attr* /*srq_attr*/,
                                    int /*srq_attr_mask*/, struct ibv_modify_srq* /*cmd*/,
                                    size_t /*cmd_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_query_srq(struct ibv_srq* /*srq*/, struct ibv_srq_attr* /*srq_attr*/,
                                   struct ibv_query_srq* /*cmd*/, size_t /*cmd_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_destroy_srq(struct ibv_srq* /*srq*/) noexcept { return Unsupported(); }

// ---- QP ----

WHARF_EXPORT int ibv_cmd_create_qp(struct ibv_pd* /*pd*/, struct ibv_qp* /*qp*/,
                                   struct ibv_qp_init_attr* /*attr*/, struct ibv_create_qp* /*cmd*/,
                                   size_t /*cmd_size*/, struct ib_uverbs_create_qp_resp* /*resp*/,
                                   size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_create_qp_ex(struct ibv_context* /*context*/, struct verbs_qp* /*qp*/,
                                      struct ibv_qp_init_attr_ex* /*attr_ex*/,
                                      struct ibv_create_qp* /*cmd*/, size_t /*cmd_size*/,
                                      struct ib_uverbs_create_qp_resp* /*resp*/,
                                      size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_create_qp_ex2(struct ibv_context* /*context*/, struct verbs_qp* /*qp*/,
                                       struct ibv_qp_init_attr_ex* /*qp_attr*/,
                                       struct ibv_create_qp_ex* /*cmd*/, size_t /*cmd_size*/,
                                       struct ib_uverbs_ex_create_qp_resp* /*resp*/,
                                       size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_open_qp(struct ibv_context* /*context*/, struct verbs_qp* /*qp*/,
                                 int /*vqp_sz*/, struct ibv_qp_open_attr* /*attr*/,
                                 struct ibv_open_qp* /*cmd*/, size_t /*cmd_size*/,
                                 struct ib_uverbs_create_qp_resp* /*resp*/,
                                 size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_query_qp(struct ibv_qp* /*qp*/, struct ibv_qp_attr* /*qp_attr*/,
                                  int /*attr_mask*/, struct ibv_qp_init_attr* /*qp_init_attr*/,
                                  struct ibv_query_qp* /*cmd*/, size_t /*cmd_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_modify_qp(struct ibv_qp* /*qp*/, struct ibv_qp_attr* /*attr*/,
                                   int /*attr_mask*/, struct ibv_modify_qp* /*cmd*/,
                                   size_t /*cmd_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_modify_qp_ex(struct ibv_qp* /*qp*/, struct ibv_qp_attr* /*attr*/,
                                      int /*attr_mask*/, struct ibv_modify_qp_ex* /*cmd*/,
                                      size_t /*cmd_size*/,
                                      struct ib_uverbs_ex_modify_qp_resp* /*resp*/,
                                      size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_destroy_qp(struct ibv_qp* /*qp*/) noexcept { return Unsupported(); }

WHARF_EXPORT int ibv_cmd_post_send(struct ibv_qp* /*ibqp*/, struct ibv_send_wr* wr,
                                   struct ibv_send_wr** bad_wr) noexcept {
  *bad_wr = wr;
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_post_recv(struct ibv_qp* /*ibqp*/, struct ibv_recv_wr* wr,
                                   struct ibv_recv_wr** bad_wr) noexcept {
  *bad_wr = wr;
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_post_srq_recv(struct ibv_srq* /*srq*/, struct ibv_recv_wr* wr,
                                       struct ibv_recv_wr** bad_wr) noexcept {
  *bad_wr = wr;
  return Unsupported();
}

// ---- AH, multicast ----

WHARF_EXPORT int ibv_cmd_create_ah(struct ibv_pd* /*pd*/, struct ibv_ah* /*ah*/,
                                   struct ibv_ah_attr* /*attr*/,
                                   struct ib_uverbs_create_ah_resp* /*resp*/,
                                   size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_destroy_ah(struct ibv_ah* /*ah*/) noexcept { return Unsupported(); }

WHARF_EXPORT int ibv_cmd_attach_mcast(struct ibv_qp* /*qp*/, const union ibv_gid* /*gid*/,
                                      uint16_t /*lid*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_detach_mcast(struct ibv_qp* /*qp*/, const union ibv_gid* /*gid*/,
                                      uint16_t /*lid*/) noexcept {
  return Unsupported();
}

// ---- Flows, flow actions ----

WHARF_EXPORT int ibv_cmd_create_flow(struct ibv_qp* /*qp*/, struct ibv_flow* /*flow_id*/,
                                     struct ibv_flow_attr* /*flow_attr*/, void* /*ucmd*/,
                                     size_t /*ucmd_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_destroy_flow(struct ibv_flow* /*flow_id*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_create_flow_action_esp(struct ibv_context* /*ctx*/,
                                                struct ibv_flow_action_esp_attr* /*attr*/,
                                                struct verbs_flow_action* /*flow_action*/,
                                                struct ibv_command_buffer* /*driver*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_modify_flow_action_esp(struct verbs_flow_action* /*flow_action*/,
                                                struct ibv_flow_action_esp_attr* /*attr*/,
                                                struct ibv_command_buffer* /*driver*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_destroy_flow_action(struct verbs_flow_action* /*action*/) noexcept {
  return Unsupported();
}

// ---- WQ, RWQ indirection table ----

WHARF_EXPORT int ibv_cmd_create_wq(struct ibv_context* /*context*/,
                                   struct ibv_wq_init_attr* /*wq_init_attr*/, struct ibv_wq* /*wq*/,
                                   struct ibv_create_wq* /*cmd*/, size_t /*cmd_size*/,
                                   struct ib_uverbs_ex_create_wq_resp* /*resp*/,
                                   size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_modify_wq(struct ibv_wq* /*wq*/, struct ibv_wq_attr* /*attr*/,
                                   struct ibv_modify_wq* /*cmd*/, size_t /*cmd_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_destroy_wq(struct ibv_wq* /*wq*/) noexcept { return Unsupported(); }

WHARF_EXPORT int ibv_cmd_create_rwq_ind_table(
    struct ibv_context* /*context*/, struct ibv_rwq_ind_table_init_attr* /*init_attr*/,
    struct ibv_rwq_ind_table* /*rwq_ind_table*/,
    struct ib_uverbs_ex_create_rwq_ind_table_resp* /*resp*/, size_t /*resp_size*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_destroy_rwq_ind_table(
    struct ibv_rwq_ind_table* /*rwq_ind_table*/) noexcept {
  return Unsupported();
}

// ---- Counters ----

WHARF_EXPORT int ibv_cmd_create_counters(struct ibv_context* /*context*/,
                                         struct ibv_counters_init_attr* /*init_attr*/,
                                         struct verbs_counters* /*vcounters*/,
                                         struct ibv_command_buffer* /*link*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_destroy_counters(struct verbs_counters* /*vcounters*/) noexcept {
  return Unsupported();
}

WHARF_EXPORT int ibv_cmd_read_counters(struct verbs_counters* /*vcounters*/,
                                       uint64_t* /*counters_value*/, uint32_t /*ncounters*/,
                                       uint32_t /*flags*/,
                                       struct ibv_command_buffer* /*link*/) noexcept {
  return Unsupported();
}
