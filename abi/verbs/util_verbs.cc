// Self-contained exported helpers of libibverbs.so.1: enum-to-string, rate conversions, the
// kernel-struct marshalling kept for librdmacm, sysfs access, fork protection and the obsolete
// driver registration. None of them talks to the router.
//
// Semantics are rdma-core 44's (libibverbs/enum_strs.c, verbs.c, marshall.c, sysfs.c, memory.c,
// compat-1_0.c); tests/abi/util_verbs_probe.cc checks the deterministic ones against Debian's
// library byte for byte. Strings are part of the ABI: tools print them and scripts parse them.

#include <errno.h>
#include <fcntl.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <iterator>

#include "export.h"

namespace {

// Looks `value` up in a table indexed by the enum value; `unknown` outside it or for holes.
template <size_t N>
const char* EnumName(int value, const std::array<const char*, N>& names) {
  if (value < 0 || static_cast<size_t>(value) >= N || names[value] == nullptr) return "unknown";
  return names[value];
}

// IBTA static rate encodings with their link-width multiplier of 2.5 Gb/s (0 when the rate is not
// a multiple of an SDR lane; rdma-core's ibv_rate_to_mult() returns -1 for those) and their
// actual data rate in Mb/s after encoding overhead.
struct RateRow {
  ibv_rate rate;
  int mult;
  int mbps;
};

constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},       {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},       {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},      {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, 0, 14062},
    {IBV_RATE_56_GBPS, 0, 56250},       {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},     {IBV_RATE_25_GBPS, 0, 25781},
    {IBV_RATE_100_GBPS, 0, 103125},     {IBV_RATE_200_GBPS, 0, 206250},
    {IBV_RATE_300_GBPS, 0, 309375},     {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},      {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};

const RateRow* FindRate(ibv_rate rate) {
  for (const RateRow& row : kRates) {
    if (row.rate == rate) return &row;
  }
  return nullptr;
}

// The scalar fields of a path record have the same names in the verbs struct (ibv_sa_path_rec)
// and the kernel one (ib_user_path_rec); only the GIDs differ in type. Byte order is not
// converted: both hold dlid/slid/pkey/flow_label in network order.
template <typename Dst, typename Src>
void CopyPathRecScalars(Dst* dst, const Src* src) {
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = src->raw_traffic;
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = src->reversible;
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

}  // namespace

// ---- Enum names (rdma-core libibverbs/enum_strs.c) ----

WHARF_EXPORT const char* ibv_node_type_str(enum ibv_node_type node_type) {
  static constexpr std::array<const char*, IBV_NODE_UNSPECIFIED + 1> kNames = [] {
    std::array<const char*, IBV_NODE_UNSPECIFIED + 1> n{};
    n[IBV_NODE_CA] = "InfiniBand channel adapter";
    n[IBV_NODE_SWITCH] = "InfiniBand switch";
    n[IBV_NODE_ROUTER] = "InfiniBand router";
    n[IBV_NODE_RNIC] = "iWARP NIC";
    n[IBV_NODE_USNIC] = "usNIC";
    n[IBV_NODE_USNIC_UDP] = "usNIC UDP";
    n[IBV_NODE_UNSPECIFIED] = "unspecified";
    return n;
  }();
  // IBV_NODE_UNKNOWN (-1) and anything else outside the table.
  return EnumName(node_type, kNames);
}

WHARF_EXPORT const char* ibv_port_state_str(enum ibv_port_state port_state) {
  static constexpr std::array<const char*, IBV_PORT_ACTIVE_DEFER + 1> kNames = {
      "no state change (NOP)", "down", "init", "armed", "active", "active defer"};
  static_assert(IBV_PORT_NOP == 0 && IBV_PORT_ACTIVE_DEFER == 5);
  return EnumName(port_state, kNames);
}

WHARF_EXPORT const char* ibv_event_type_str(enum ibv_event_type event) {
  static constexpr std::array<const char*, IBV_EVENT_WQ_FATAL + 1> kNames = [] {
    std::array<const char*, IBV_EVENT_WQ_FATAL + 1> n{};
    n[IBV_EVENT_CQ_ERR] = "CQ error";
    n[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error";
    n[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error";
    n[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error";
    n[IBV_EVENT_COMM_EST] = "communication established";
    n[IBV_EVENT_SQ_DRAINED] = "send queue drained";
    n[IBV_EVENT_PATH_MIG] = "path migrated";
    n[IBV_EVENT_PATH_MIG_ERR] = "path migration request error";
    n[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error";
    n[IBV_EVENT_PORT_ACTIVE] = "port active";
    n[IBV_EVENT_PORT_ERR] = "port error";
    n[IBV_EVENT_LID_CHANGE] = "LID change";
    n[IBV_EVENT_PKEY_CHANGE] = "P_Key change";
    n[IBV_EVENT_SM_CHANGE] = "SM change";
    n[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error";
    n[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached";
    n[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached";
    n[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration";
    n[IBV_EVENT_GID_CHANGE] = "GID table change";
    n[IBV_EVENT_WQ_FATAL] = "WQ fatal";
    return n;
  }();
  return EnumName(event, kNames);
}

WHARF_EXPORT const char* ibv_wc_status_str(enum ibv_wc_status status) {
  static constexpr std::array<const char*, IBV_WC_TM_RNDV_INCOMPLETE + 1> kNames = [] {
    std::array<const char*, IBV_WC_TM_RNDV_INCOMPLETE + 1> n{};
    n[IBV_WC_SUCCESS] = "success";
    n[IBV_WC_LOC_LEN_ERR] = "local length error";
    n[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error";
    n[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error";
    n[IBV_WC_LOC_PROT_ERR] = "local protection error";
    n[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error";
    n[IBV_WC_MW_BIND_ERR] = "memory management operation error";
    n[IBV_WC_BAD_RESP_ERR] = "bad response error";
    n[IBV_WC_LOC_ACCESS_ERR] = "local access error";
    n[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error";
    n[IBV_WC_REM_ACCESS_ERR] = "remote access error";
    n[IBV_WC_REM_OP_ERR] = "remote operation error";
    n[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded";
    n[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded";
    n[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error";
    n[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request";
    n[IBV_WC_REM_ABORT_ERR] = "aborted error";
    n[IBV_WC_INV_EECN_ERR] = "invalid EE context number";
    n[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state";
    n[IBV_WC_FATAL_ERR] = "fatal error";
    n[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error";
    n[IBV_WC_GENERAL_ERR] = "general error";
    n[IBV_WC_TM_ERR] = "TM error";
    n[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous";
    return n;
  }();
  return EnumName(status, kNames);
}

// ---- Static rate conversions (rdma-core libibverbs/verbs.c) ----

// -1 for IBV_RATE_MAX, the non-multiple rates (14, 56, 25, 100 Gb/s, ...) and unknown values.
WHARF_EXPORT int ibv_rate_to_mult(enum ibv_rate rate) {
  const RateRow* row = FindRate(rate);
  return row != nullptr && row->mult != 0 ? row->mult : -1;
}

// IBV_RATE_MAX (0) when no rate has that multiplier.
WHARF_EXPORT enum ibv_rate mult_to_ibv_rate(int mult) {
  if (mult == 0) return IBV_RATE_MAX;
  for (const RateRow& row : kRates) {
    if (row.mult == mult) return row.rate;
  }
  return IBV_RATE_MAX;
}

WHARF_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate) {
  const RateRow* row = FindRate(rate);
  return row != nullptr ? row->mbps : -1;
}

// Exact match only, as rdma-core: 100 Gb/s is 103125, not 100000.
WHARF_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow& row : kRates) {
    if (row.mbps == mbps) return row.rate;
  }
  return IBV_RATE_MAX;
}

// ---- Kernel struct marshalling (rdma-core libibverbs/marshall.c) ----
// The kernel structs come from the uapi headers <rdma/ib_user_verbs.h> and <rdma/ib_user_sa.h>,
// which rdma-core's kern-abi.h and sa-kern-abi.h wrap.

WHARF_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst,
                                             struct ib_uverbs_ah_attr* src) {
  static_assert(sizeof(dst->grh.dgid.raw) == sizeof(src->grh.dgid));
  memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

// Leaves dst->qp_state (and the fields the kernel struct lacks, e.g. rate_limit) untouched, as
// rdma-core does: librdmacm's rdma_init_qp_attr() sets qp_state from the response itself.
WHARF_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst,
                                             struct ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = static_cast<enum ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<enum ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<enum ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;

  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;

  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);

  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

WHARF_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst,
                                              struct ib_user_path_rec* src) {
  static_assert(sizeof(dst->dgid.raw) == sizeof(src->dgid));
  memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
  memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
  CopyPathRecScalars(dst, src);
}

WHARF_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst,
                                            struct ibv_sa_path_rec* src) {
  memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
  memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
  CopyPathRecScalars(dst, src);
}

// ---- sysfs (rdma-core libibverbs/sysfs.c) ----

// "/sys", or $SYSFS_PATH without trailing slashes and cut to IBV_SYSFS_PATH_MAX characters.
// Decided on the first call and cached for the life of the process, as rdma-core.
// secure_getenv ignores the variable in setuid/setgid/capability-raised processes; rdma-core
// checks only getuid() == geteuid(), so we are slightly stricter.
WHARF_EXPORT const char* ibv_get_sysfs_path(void) {
  static const char* const path = [] {
    static char buf[IBV_SYSFS_PATH_MAX + 1];
    const char* env = secure_getenv("SYSFS_PATH");
    if (env == nullptr) return "/sys";
    size_t len = strnlen(env, IBV_SYSFS_PATH_MAX);
    memcpy(buf, env, len);
    while (len > 0 && buf[len - 1] == '/') --len;
    buf[len] = '\0';
    return static_cast<const char*>(buf);
  }();
  return path;
}

// Reads at most `size` bytes of dir/file into buf and NUL-terminates it, dropping one trailing
// newline. Returns the length of the string (0 for an empty file, buf untouched), or -1 with errno
// set. Contents that fill buf without a trailing newline fail with -1 rather than truncate.
WHARF_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  std::array<char, PATH_MAX> path;
  int n = snprintf(path.data(), path.size(), "%s/%s", dir, file);
  if (n < 0) return -1;
  if (static_cast<size_t>(n) >= path.size()) {
    errno = ENAMETOOLONG;
    return -1;
  }
  int fd = open(path.data(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t len = read(fd, buf, size);
  int read_errno = errno;
  close(fd);
  if (len < 0) {
    errno = read_errno;
    return -1;
  }
  if (len > 0) {
    if (buf[len - 1] == '\n') {
      buf[--len] = '\0';
    } else if (static_cast<size_t>(len) < size) {
      buf[len] = '\0';
    } else {
      return -1;  // No room for the terminator; rdma-core fails here without setting errno.
    }
  }
  return static_cast<int>(len);
}

// ---- Fork protection (rdma-core libibverbs/memory.c) ----
// rdma-core marks registered ranges MADV_DONTFORK (refcounted) once ibv_fork_init() ran, so that a
// fork cannot copy-on-write a page the HCA is DMA-ing into; before that these calls are no-ops
// returning 0. Wharf never pins pages for a DMA engine: the router reaches registered memory
// through shared mappings or process_vm_readv/writev, so a fork cannot detach it from the
// router's view, and MADV_DONTFORK would only make children fault on buffers they own. Both are
// therefore always the no-op. Debian's libmlx5 calls them on its queue buffers under LD_PRELOAD.

WHARF_EXPORT int ibv_dontfork_range(void* /*base*/, size_t /*size*/) { return 0; }

WHARF_EXPORT int ibv_dofork_range(void* /*base*/, size_t /*size*/) { return 0; }

// ---- RoCE L2 resolution (rdma-core libibverbs/verbs.c) ----
// rdma-core resolves the destination MAC and VLAN of a RoCE GID through the kernel neighbour
// table; only RoCE providers call it, from their create_ah. Wharf's device has no Ethernet link
// layer beneath it, so there is nothing to resolve. rdma-core returns negative errno values from
// this function (-EINVAL, -EHOSTUNREACH, ...) and callers test for non-zero; we keep that
// convention: -EOPNOTSUPP, with errno set too.
WHARF_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context* /*context*/,
                                             struct ibv_ah_attr* /*attr*/,
                                             uint8_t /*eth_mac*/[ETHERNET_LL_SIZE],
                                             uint16_t* /*vid*/) {
  errno = EOPNOTSUPP;
  return -EOPNOTSUPP;
}

// ---- Obsolete driver registration (rdma-core libibverbs/compat-1_0.c) ----
// The pre-rdma-core-13 provider interface. rdma-core keeps it, as a no-op, only so that old
// libfabric usnic providers still link; Debian exports it solely as the compat (non-default)
// version ibv_register_driver@IBVERBS_1.1, so new links cannot use it. We do the same.

using ibv_driver_init_func_1_1 = struct ibv_device* (*)(const char* uverbs_sys_path,
                                                        int abi_version);

WHARF_EXPORT void wharf_ibv_register_driver_1_1(const char* /*name*/,
                                                ibv_driver_init_func_1_1 /*init_func*/) {}
WHARF_SYMVER(wharf_ibv_register_driver_1_1, "ibv_register_driver@IBVERBS_1.1");
