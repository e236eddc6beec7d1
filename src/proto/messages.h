// Control-channel messages between the verbs library and the router, and the event
// datagrams the router sends on async and completion-channel sockets.
// Byte layout: docs/wire-protocol.md, "Control channel". Field order below IS the layout.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "proto/codec.h"

namespace wharf::proto {

constexpr uint32_t kMagic = 0x46524857;  // "WHRF" when read as little-endian bytes
// 13: a QP's region keeps its rdma_cm transitions and its local completions, so its send
// slots start at 1984 (docs/shm-rings.md); 12: resumed sessions (Hello, RestoreNext, proofs);
// 11: HoldContainer, ReleaseContainer, HeldContainer (registrations a CNI plugin leaves);
// 10: QP counters by opcode and status, so a QP's send slots start at 704 (docs/shm-rings.md);
// 8: tag-matching SRQs (CreateSrqReq's tm fields, PostSrqOps), ModifyCq; 5: RegisterContainerReq
// carries the orchestrator's LID; 4: connection steps carry QP
// transitions; 3: rdma_cm ops; 2: RegisterContainerReq names tenant and network.
constexpr uint16_t kVersion = 13;
constexpr size_t kMaxMessage = 1024;
constexpr int kMaxFds = 4;
constexpr uint16_t kReplyBit = 0x8000;
// In a request's op: the sender waits for no reply, and the router sends none (a failure is
// only logged). For requests whose outcome the sender cannot act on (proto::RouterClient::post).
constexpr uint16_t kNoReplyBit = 0x4000;

enum class Op : uint16_t {
  kHello = 1,
  kAllocPd = 2,
  kDeallocPd = 3,
  kRegMr = 4,
  kDeregMr = 5,
  kCreateChannel = 6,
  kDestroyChannel = 7,
  kCreateCq = 8,
  kDestroyCq = 9,
  kCreateQp = 10,
  kModifyQp = 11,
  kQueryQp = 12,
  kDestroyQp = 13,
  kCreateSrq = 14,
  kModifySrq = 15,
  kQuerySrq = 16,
  kDestroySrq = 17,
  kCreateAh = 18,
  kDestroyAh = 19,
  kRegisterContainer = 20,
  kUnregisterContainer = 21,
  kGetDirectPeer = 22,
  kGetPeerMr = 23,
  kRouterInfo = 24,
  kDumpResources = 25,
  // rdma_cm (proto/cm_messages.h)
  kCmOpen = 26,
  kCmCreateChannel = 27,
  kCmDestroyChannel = 28,
  kCmCreateId = 29,
  kCmDestroyId = 30,
  kCmMigrateId = 31,
  kCmBind = 32,
  kCmResolveAddr = 33,
  kCmResolveRoute = 34,
  kCmListen = 35,
  kCmConnect = 36,
  kCmAccept = 37,
  kCmReject = 38,
  kCmEstablish = 39,
  kCmDisconnect = 40,
  kCmSetOption = 41,
  kModifyQpRateLimit = 42,
  kReregMr = 43,
  kAllocMw = 44,
  kDeallocMw = 45,
  kAttachMcast = 46,
  kDetachMcast = 47,
  kCmJoinMulticast = 48,
  kResizeCq = 49,
  kOpenXrcd = 50,
  kCloseXrcd = 51,
  kOpenQp = 52,
  kCreateFlow = 53,
  kDestroyFlow = 54,
  kModifyWq = 55,
  kSetQpRss = 56,
  kPostSrqOps = 57,
  kModifyCq = 58,
  kTakeExpress = 59,
  kHoldContainer = 60,
  kReleaseContainer = 61,
  kHeldContainer = 62,
  kRestoreNext = 63,
  kCmRestoreChannel = 64,
  kCmResume = 65,
};

// Every datagram starts with this. `status` is 0 in requests; in replies it is 0 or a
// positive errno, and a non-zero status carries no body.
struct Header {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t op = 0;
  uint32_t seq = 0;
  uint32_t status = 0;
  template <class V>
  void visit(V&& v) {
    v(magic), v(version), v(op), v(seq), v(status);
  }
};
constexpr size_t kHeaderSize = 16;

struct Empty {
  template <class V>
  void visit(V&&) {}
};

using Gid = std::array<uint8_t, 16>;
using Name = std::array<char, 32>;
// Kubernetes' names (a namespace, a pod): up to 63 bytes and a terminating NUL.
using LongName = std::array<char, 64>;
// A runtime's sandbox ID (CNI_CONTAINERID; containerd and podman use 64 hex digits).
using SandboxId = std::array<char, 128>;

// ---- Session ----
// Request fds: [async-event socket]. Reply fds: [context page memfd, doorbell eventfd].
// A fresh session passes its async-event socket. A resumed one (resume = 1: the library's
// session with an earlier router process of this socket, which died or was replaced) passes
// [async-event socket, context page memfd, doorbell eventfd], the ones that session had, and
// the LID its container had (0: none to keep, as on Ethernet); it then restores its objects
// (RestoreNextReq) before it uses them.
struct HelloReq {
  uint32_t abi_version = kVersion;
  uint16_t resume_lid = 0;
  uint8_t resume = 0;
  uint8_t reserved = 0;
  template <class V>
  void visit(V&& v) {
    v(abi_version), v(resume_lid), v(resume), v(reserved);
  }
};
struct HelloRep {
  uint64_t node_guid = 0;
  uint32_t vip = 0;  // host order
  uint16_t lid = 0;
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_*
  uint8_t reserved = 0;
  Gid gid{};
  Name container{};
  template <class V>
  void visit(V&& v) {
    v(node_guid), v(vip), v(lid), v(link_layer), v(reserved), v(gid), v(container);
  }
};

struct Handle {
  uint32_t handle = 0;
  template <class V>
  void visit(V&& v) {
    v(handle);
  }
};

// ---- Memory regions ----
// The pages [mapped_start, mapped_start + mapped_len) of the registration are backed by the
// memfd passed with the request, at memfd_offset; the rest is reached with
// process_vm_readv/writev. mapped_len == 0 means no memfd. `access` is ibv_access_flags, plus
// kMrDeviceMemory for a registration of device memory (ibv_reg_dm_mr), which may be empty.
constexpr uint32_t kMrDeviceMemory = 1u << 31;
struct RegMrReq {
  uint32_t pd = 0;
  uint32_t access = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
  uint64_t iova = 0;
  uint64_t mapped_start = 0;
  uint64_t mapped_len = 0;
  uint64_t memfd_offset = 0;
  template <class V>
  void visit(V&& v) {
    v(pd), v(access), v(addr), v(length), v(iova), v(mapped_start), v(mapped_len), v(memfd_offset);
  }
};
// ibv_rereg_mr: registration `mr` is replaced by `reg` in place, keeping its handle and keys.
struct ReregMrReq {
  uint32_t mr = 0;
  RegMrReq reg;
  template <class V>
  void visit(V&& v) {
    v(mr), v(reg);
  }
};
struct RegMrRep {
  uint32_t handle = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
  uint64_t proof = 0;  // of the key, for a resumed session (RestoreNextReq)
  template <class V>
  void visit(V&& v) {
    v(handle), v(lkey), v(rkey), v(reserved), v(proof);
  }
};

// ---- Memory windows ----
// ibv_alloc_mw: a window of `type` (IBV_MW_TYPE_1 or _2) in PD `pd`, unbound. Its rkey's
// upper 24 bits are the window's for good; binds change the low 8 (type 1: the library's
// ibv_inc_rkey; type 2: the application's choice). DeallocMw takes a Handle.
struct AllocMwReq {
  uint32_t pd = 0;
  uint32_t type = 0;
  template <class V>
  void visit(V&& v) {
    v(pd), v(type);
  }
};
struct AllocMwRep {
  uint32_t handle = 0;
  uint32_t rkey = 0;
  template <class V>
  void visit(V&& v) {
    v(handle), v(rkey);
  }
};

// ---- XRC domains ----
// ibv_open_xrcd. Request fds: [the file the domain is named by], or none for a domain of this
// context alone. `oflags` as open(2)'s: O_CREAT makes the domain if the file names none yet,
// O_EXCL (with O_CREAT) fails if it does. Reply: Handle. CloseXrcd takes a Handle.
struct OpenXrcdReq {
  uint32_t oflags = 0;
  template <class V>
  void visit(V&& v) {
    v(oflags);
  }
};

// ibv_open_qp: a handle of this session to XRC target QP `qpn` of the domain its XRC domain
// handle `xrcd` names. Reply: Handle (one with kOpenedQpBit set); ModifyQp, QueryQp and
// DestroyQp take it like any QP handle (DestroyQp drops only the handle).
struct OpenQpReq {
  uint32_t xrcd = 0;
  uint32_t qpn = 0;
  template <class V>
  void visit(V&& v) {
    v(xrcd), v(qpn);
  }
};
constexpr uint32_t kOpenedQpBit = 1u << 31;

// ---- UD multicast (proto/multicast.h) ----
// ibv_attach_mcast / ibv_detach_mcast of QP `qp` to group gid/lid.
struct McastReq {
  uint32_t qp = 0;
  Gid gid{};
  uint16_t lid = 0;
  template <class V>
  void visit(V&& v) {
    v(qp), v(gid), v(lid);
  }
};

// ---- Flow steering (router/flow_match.h) ----
// What a flow rule of a RAW_PACKET QP matches, from ibv_flow_attr's specs: a frame matches when
// every field, under its mask, equals the value under the same mask. `ip_version` (4, 6; 0:
// any frame) and `l4_proto` (IPPROTO_TCP, IPPROTO_UDP; 0: any) must match exactly when set,
// as a spec of that layer demands the layer. Addresses and ports in network order as bytes.
constexpr uint32_t kMacLen = 6;
struct FlowMatch {
  std::array<uint8_t, kMacLen> dst_mac{};
  std::array<uint8_t, kMacLen> dst_mac_mask{};
  std::array<uint8_t, kMacLen> src_mac{};
  std::array<uint8_t, kMacLen> src_mac_mask{};
  uint16_t ether_type = 0;  // host order
  uint16_t ether_type_mask = 0;
  uint16_t vlan_tag = 0;  // host order: PCP, DEI, VID
  uint16_t vlan_tag_mask = 0;
  uint8_t ip_version = 0;
  Gid src_ip{};  // IPv4 in the first 4 bytes
  Gid src_ip_mask{};
  Gid dst_ip{};
  Gid dst_ip_mask{};
  uint8_t ip_proto = 0;  // IPv4 protocol, IPv6 next header
  uint8_t ip_proto_mask = 0;
  uint8_t tclass = 0;  // IPv4 TOS, IPv6 traffic class
  uint8_t tclass_mask = 0;
  uint8_t hop_limit = 0;  // IPv4 TTL, IPv6 hop limit
  uint8_t hop_limit_mask = 0;
  uint32_t flow_label = 0;  // IPv6, host order
  uint32_t flow_label_mask = 0;
  uint8_t l4_proto = 0;
  uint16_t src_port = 0;  // host order
  uint16_t src_port_mask = 0;
  uint16_t dst_port = 0;
  uint16_t dst_port_mask = 0;
  template <class V>
  void visit(V&& v) {
    v(dst_mac), v(dst_mac_mask), v(src_mac), v(src_mac_mask), v(ether_type), v(ether_type_mask),
        v(vlan_tag), v(vlan_tag_mask), v(ip_version), v(src_ip), v(src_ip_mask), v(dst_ip),
        v(dst_ip_mask), v(ip_proto), v(ip_proto_mask), v(tclass), v(tclass_mask), v(hop_limit),
        v(hop_limit_mask), v(flow_label), v(flow_label_mask), v(l4_proto), v(src_port),
        v(src_port_mask), v(dst_port), v(dst_port_mask);
  }
};
// CreateFlow: ibv_create_flow on RAW_PACKET QP `qp`; `type` IBV_FLOW_ATTR_NORMAL (match) or
// IBV_FLOW_ATTR_SNIFFER (every frame). Reply: Handle (the flow). DestroyFlow: Handle.
struct CreateFlowReq {
  uint32_t qp = 0;
  uint32_t type = 0;
  uint16_t priority = 0;
  FlowMatch match;
  template <class V>
  void visit(V&& v) {
    v(qp), v(type), v(priority), v(match);
  }
};

// ---- Receive work queues and RSS (ibv_create_wq, ibv_create_rwq_ind_table) ----
// A WQ is an SRQ (CreateSrq with this srq_type and a cq) that only RSS QPs' indirection tables
// take receives from; it receives while its state is IBV_WQS_RDY (ModifyWq).
constexpr uint32_t kSrqTypeWq = 0x100;
struct ModifyWqReq {
  uint32_t wq = 0;     // the SRQ handle
  uint32_t state = 0;  // enum ibv_wq_state: RESET, RDY or ERR
  template <class V>
  void visit(V&& v) {
    v(wq), v(state);
  }
};
// SetQpRss: makes RAW_PACKET QP `qp` (created with no CQs and no queues) an RSS QP: a frame a
// flow rule gives it goes to wqs[toeplitz(hash_key, fields) % table_size].
constexpr uint32_t kMaxRssTableLog = 6;
constexpr uint32_t kMaxRssTableSize = 64;
static_assert(kMaxRssTableSize == 1u << kMaxRssTableLog);
constexpr uint32_t kRssKeyLen = 40;

struct SetQpRssReq {
  uint32_t qp = 0;
  uint32_t log_table_size = 0;
  std::array<uint32_t, kMaxRssTableSize> wqs{};
  uint64_t hash_fields = 0;  // within kRssHashFields (proto/qp_rules.h)
  std::array<uint8_t, kRssKeyLen> hash_key{};
  template <class V>
  void visit(V&& v) {
    v(qp), v(log_table_size), v(wqs), v(hash_fields), v(hash_key);
  }
};

// ---- Completion queues and channels ----
// CreateChannel request fds: [datagram socket the router writes CqEvent to].
struct CreateCqReq {
  uint32_t cqe = 0;
  uint32_t channel = 0;  // 0: none
  template <class V>
  void visit(V&& v) {
    v(cqe), v(channel);
  }
};
// Reply fds: [cq memfd, laid out by shm::cq_layout(entries)].
struct CreateCqRep {
  uint32_t cq = 0;
  uint32_t entries = 0;
  template <class V>
  void visit(V&& v) {
    v(cq), v(entries);
  }
};

// ibv_resize_cq: CQ `cq` gets room for at least `cqe` entries; the reply is a CreateCqRep and
// the CQ's new memfd, holding the entries not yet polled, oldest first.
struct ResizeCqReq {
  uint32_t cq = 0;
  uint32_t cqe = 0;
  template <class V>
  void visit(V&& v) {
    v(cq), v(cqe);
  }
};

// ModifyCq: ibv_modify_cq. attr_mask IBV_CQ_ATTR_MODERATE: CQ `cq` raises an event once
// `cq_count` completions it is armed for arrived or `cq_period` us after the first (0: that
// limit not applied; both 0: no moderation).
struct ModifyCqReq {
  uint32_t cq = 0;
  uint32_t attr_mask = 0;
  uint16_t cq_count = 0;
  uint16_t cq_period = 0;
  template <class V>
  void visit(V&& v) {
    v(cq), v(attr_mask), v(cq_count), v(cq_period);
  }
};

// ---- Address vectors ----
struct AhAttr {
  uint16_t dlid = 0;
  uint8_t sl = 0;
  uint8_t src_path_bits = 0;
  uint8_t static_rate = 0;
  uint8_t is_global = 0;
  uint8_t port_num = 0;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 0;
  uint8_t traffic_class = 0;
  uint32_t flow_label = 0;
  Gid dgid{};
  template <class V>
  void visit(V&& v) {
    v(dlid), v(sl), v(src_path_bits), v(static_rate), v(is_global), v(port_num), v(sgid_index),
        v(hop_limit), v(traffic_class), v(flow_label), v(dgid);
  }
};
struct CreateAhReq {
  uint32_t pd = 0;
  AhAttr attr;
  template <class V>
  void visit(V&& v) {
    v(pd), v(attr);
  }
};

// ---- Queue pairs ----
struct QpCaps {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 0;
  uint32_t max_recv_sge = 0;
  uint32_t max_inline_data = 0;
  template <class V>
  void visit(V&& v) {
    v(max_send_wr), v(max_recv_wr), v(max_send_sge), v(max_recv_sge), v(max_inline_data);
  }
};
// An XRC target QP (qp_type IBV_QPT_XRC_RECV) names its domain `xrcd` and nothing else; an
// XRC initiator (IBV_QPT_XRC_SEND) has a PD and a send CQ only (recv_cq, srq 0).
struct CreateQpReq {
  uint32_t pd = 0;
  uint32_t send_cq = 0;
  uint32_t recv_cq = 0;
  uint32_t srq = 0;  // 0: none
  uint8_t qp_type = 0;
  uint8_t sq_sig_all = 0;
  QpCaps caps;
  uint32_t xrcd = 0;  // 0: none
  template <class V>
  void visit(V&& v) {
    v(pd), v(send_cq), v(recv_cq), v(srq), v(qp_type), v(sq_sig_all), v(caps), v(xrcd);
  }
};
// Reply fds: [qp memfd, laid out by shm::qp_layout(sq_entries, sq_slot, rq_entries, rq_slot)].
struct CreateQpRep {
  uint32_t qp = 0;
  uint32_t qpn = 0;
  uint32_t sq_entries = 0;
  uint32_t sq_slot = 0;
  uint32_t rq_entries = 0;
  uint32_t rq_slot = 0;
  QpCaps caps;  // what was granted
  // The QP's bit in the context page's posted marks (< shm::kPostedMarks), which the library
  // sets when it gives the router work in the QP's rings (shm/posted_marks.h).
  uint32_t posted_mark = 0;
  uint64_t proof = 0;  // of the QPN, for a resumed session (RestoreNextReq)
  template <class V>
  void visit(V&& v) {
    v(qp), v(qpn), v(sq_entries), v(sq_slot), v(rq_entries), v(rq_slot), v(caps), v(posted_mark),
        v(proof);
  }
};

// Only in a resumed session (HelloReq::resume): the next AllocPd, RegMr, CreateAh,
// CreateChannel, CreateCq or CreateQp restores the object the session had as `handle`, instead of
// making a new one. For an MR `number` is its key, for a QP its QPN, each with the proof the router
// gave with it (the router's keyed hash of the number and the container: numbers are host-wide); 0
// for the others. The request's one descriptor: a CQ's or QP's region, a completion channel's
// router-side socket; none for the others.
struct RestoreNextReq {
  uint32_t handle = 0;
  uint32_t number = 0;
  uint64_t proof = 0;
  template <class V>
  void visit(V&& v) {
    v(handle), v(number), v(proof);
  }
};
// The attributes of a QP its work needs (what the router keeps in each QP's record); the
// others, set rarely or never read by the data path, are QpAttr's own.
struct QpCoreAttr {
  uint8_t qp_state = 0;
  uint8_t path_mtu = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  AhAttr ah_attr;
};
// The attributes of ibv_modify_qp and ibv_query_qp.
struct QpAttr : QpCoreAttr {
  uint8_t cur_qp_state = 0;
  uint8_t path_mig_state = 0;
  uint8_t en_sqd_async_notify = 0;
  uint8_t sq_draining = 0;
  uint32_t qkey = 0;
  uint16_t pkey_index = 0;
  uint8_t port_num = 0;
  uint8_t reserved = 0;
  uint32_t rate_limit = 0;
  uint16_t alt_pkey_index = 0;
  uint8_t alt_port_num = 0;
  uint8_t alt_timeout = 0;
  AhAttr alt_ah_attr;
  template <class V>
  void visit(V&& v) {
    v(qp_state), v(cur_qp_state), v(path_mtu), v(path_mig_state), v(qkey), v(rq_psn), v(sq_psn),
        v(dest_qp_num), v(qp_access_flags), v(pkey_index), v(alt_pkey_index),
        v(en_sqd_async_notify), v(sq_draining), v(max_rd_atomic), v(max_dest_rd_atomic),
        v(min_rnr_timer), v(port_num), v(timeout), v(retry_cnt), v(rnr_retry), v(alt_port_num),
        v(alt_timeout), v(reserved), v(rate_limit), v(ah_attr), v(alt_ah_attr);
  }
};
struct ModifyQpReq {
  uint32_t qp = 0;
  uint32_t attr_mask = 0;  // enum ibv_qp_attr_mask
  QpAttr attr;
  template <class V>
  void visit(V&& v) {
    v(qp), v(attr_mask), v(attr);
  }
};
// ibv_modify_qp_rate_limit. The same change as kModifyQp with IBV_QP_RATE_LIMIT alone, plus
// the bucket depth; typical_pkt_sz is carried but unused (the router paces bytes).
struct ModifyQpRateLimitReq {
  uint32_t qp = 0;
  uint32_t rate_limit = 0;    // kbit/s; 0: no limit of the application's
  uint32_t max_burst_sz = 0;  // bytes; 0: the router's default depth for the rate
  uint16_t typical_pkt_sz = 0;
  uint16_t reserved = 0;
  template <class V>
  void visit(V&& v) {
    v(qp), v(rate_limit), v(max_burst_sz), v(typical_pkt_sz), v(reserved);
  }
};
struct QueryQpRep {
  QpAttr attr;
  QpCaps caps;
  uint8_t sq_sig_all = 0;
  template <class V>
  void visit(V&& v) {
    v(attr), v(caps), v(sq_sig_all);
  }
};

// ---- Shared receive queues ----
// srq_type IBV_SRQT_XRC: an XRC SRQ of domain `xrcd`, completing receives on `cq`.
// srq_type IBV_SRQT_TM: a tag-matching SRQ completing receives and operations on `cq`, with a
// matching list of `max_num_tags` tagged buffers.
struct CreateSrqReq {
  uint32_t pd = 0;
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  // Ignored at creation (as ibv_create_srq's); restoring (RestoreNext, basic SRQs only), the
  // limit last armed, kept armed if the region says it still is.
  uint32_t srq_limit = 0;
  uint32_t srq_type = 0;  // enum ibv_srq_type: BASIC, XRC or TM, or kSrqTypeWq
  uint32_t xrcd = 0;
  uint32_t cq = 0;
  uint32_t max_num_tags = 0;  // TM only
  uint32_t max_ops = 0;       // TM only
  template <class V>
  void visit(V&& v) {
    v(pd), v(max_wr), v(max_sge), v(srq_limit), v(srq_type), v(xrcd), v(cq), v(max_num_tags),
        v(max_ops);
  }
};

// PostSrqOps: ibv_post_srq_ops on a tag-matching SRQ, up to kMaxSrqOpsPerCall operations,
// applied in order until one cannot be posted. Each completes on the SRQ's CQ when
// IBV_OPS_SIGNALED or when it fails (IBV_WC_TM_ERR: a DEL of a buffer no longer posted).
constexpr uint32_t kMaxSrqOpsPerCall = 8;
struct SrqOp {
  uint64_t wr_id = 0;
  uint32_t opcode = 0;  // enum ibv_ops_wr_opcode
  uint32_t flags = 0;   // enum ibv_ops_flags
  uint32_t unexpected_cnt = 0;
  uint32_t handle = 0;  // DEL
  // ADD: the tagged buffer, with num_sge (0 or 1) scatter entries.
  uint64_t recv_wr_id = 0;
  uint64_t tag = 0;
  uint64_t mask = 0;
  uint32_t num_sge = 0;
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
  template <class V>
  void visit(V&& v) {
    v(wr_id), v(opcode), v(flags), v(unexpected_cnt), v(handle), v(recv_wr_id), v(tag), v(mask),
        v(num_sge), v(addr), v(length), v(lkey);
  }
};
struct PostSrqOpsReq {
  uint32_t srq = 0;
  uint32_t count = 0;  // ops[0, count)
  std::array<SrqOp, kMaxSrqOpsPerCall> ops{};
  template <class V>
  void visit(V&& v) {
    v(srq), v(count), v(ops);
  }
};
// `done` operations were posted; if below count, ops[done] was not, for `error` (EINVAL: a
// malformed operation; ENOMEM: an ADD to a full list). handles[i]: what ADD ops[i] returned.
struct PostSrqOpsRep {
  uint32_t done = 0;
  uint32_t error = 0;
  std::array<uint32_t, kMaxSrqOpsPerCall> handles{};
  template <class V>
  void visit(V&& v) {
    v(done), v(error), v(handles);
  }
};
// Reply fds: [srq memfd, laid out by shm::srq_layout(entries, slot)].
struct CreateSrqRep {
  uint32_t srq = 0;
  uint32_t srqn = 0;
  uint32_t entries = 0;
  uint32_t slot = 0;
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  template <class V>
  void visit(V&& v) {
    v(srq), v(srqn), v(entries), v(slot), v(max_wr), v(max_sge);
  }
};
struct ModifySrqReq {
  uint32_t srq = 0;
  uint32_t attr_mask = 0;  // enum ibv_srq_attr_mask
  uint32_t max_wr = 0;
  uint32_t srq_limit = 0;
  template <class V>
  void visit(V&& v) {
    v(srq), v(attr_mask), v(max_wr), v(srq_limit);
  }
};
struct QuerySrqRep {
  uint32_t max_wr = 0;
  uint32_t max_sge = 0;
  uint32_t srq_limit = 0;
  template <class V>
  void visit(V&& v) {
    v(max_wr), v(max_sge), v(srq_limit);
  }
};

// ---- Containers (from wharf-run; peer must be root). Request fds: [netns fd]. ----
struct RegisterContainerReq {
  Name name{};
  uint32_t vip = 0;  // host order
  Name tenant{};     // at the orchestrator; empty without one
  Name network{};    // the tenant's virtual network; empty without an orchestrator
  uint16_t lid = 0;  // the orchestrator's LID for it, within the router's range; 0: any
  template <class V>
  void visit(V&& v) {
    v(name), v(vip), v(tenant), v(network), v(lid);
  }
};
struct RegisterContainerRep {
  uint16_t lid = 0;
  template <class V>
  void visit(V&& v) {
    v(lid);
  }
};
// Who the router is, for wharf-run: its host's name (empty without --host), and what a
// container's device shows of it (the device view under /sys/class/infiniband).
struct RouterInfoRep {
  Name host{};
  uint64_t node_guid = 0;
  uint8_t link_layer = 0;  // IBV_LINK_LAYER_*
  template <class V>
  void visit(V&& v) {
    v(host), v(node_guid), v(link_layer);
  }
};
// Every verbs object the router holds, for `wharfctl resource show` (peer must be root):
// JSON of `bytes` bytes in the memfd the reply carries (src/router/resources.cc).
struct DumpResourcesRep {
  uint64_t bytes = 0;
  template <class V>
  void visit(V&& v) {
    v(bytes);
  }
};
struct UnregisterContainerReq {
  Name name{};
  template <class V>
  void visit(V&& v) {
    v(name);
  }
};
// A registration that outlives the session which made it (wharf-cni's ADD): the router keeps
// the container's netns fd until ReleaseContainer names the same sandbox. Fields as in
// RegisterContainerReq, with Kubernetes-length names.
struct HoldContainerReq {
  SandboxId sandbox{};
  LongName tenant{};
  LongName network{};
  LongName name{};
  uint32_t vip = 0;  // host order
  uint16_t lid = 0;  // the orchestrator's, within the router's range; 0: any
  template <class V>
  void visit(V&& v) {
    v(sandbox), v(tenant), v(network), v(name), v(vip), v(lid);
  }
};
// ReleaseContainer's and HeldContainer's request.
struct SandboxRef {
  SandboxId sandbox{};
  template <class V>
  void visit(V&& v) {
    v(sandbox);
  }
};
// What the router holds for a sandbox (wharf-cni's CHECK).
struct HeldContainerRep {
  LongName tenant{};
  LongName network{};
  LongName name{};
  uint32_t vip = 0;  // host order
  uint16_t lid = 0;
  uint64_t netns_ino = 0;  // the inode of the namespace it holds
  template <class V>
  void visit(V&& v) {
    v(tenant), v(network), v(name), v(vip), v(lid), v(netns_ino);
  }
};

// ---- Direct intra-host path (docs/ARCHITECTURE.md, "The direct path") ----
// GetDirectPeer: request Handle{qp}; answered while the QP's direct line is On (else EAGAIN).
// Reply fds: [peer QP memfd (qp_layout of the peer_* sizes), peer receive CQ memfd
// (cq_layout(peer_cq_entries))], then the router's end of the peer CQ's completion channel
// if kPeerCqChannel, then that of this QP's send CQ if kSendCqChannel. kPeerUsesSrq: the peer
// receives into a shared receive queue, which only the router consumes (its peer_rq_entries is 0).
enum DirectPeerFlags : uint8_t { kPeerCqChannel = 1, kSendCqChannel = 2, kPeerUsesSrq = 4 };
// TakeExpress (Handle: the QP): the QP's express line (router/express.h). Descriptors: the
// connection, then the router's end of the receive CQ's completion channel if
// kExpressRecvChannel, then that of the send CQ's if kExpressSendChannel. The library may
// send on the line while the QP line's express_may_send says so.
enum ExpressFlags : uint32_t { kExpressRecvChannel = 1, kExpressSendChannel = 2 };
struct ExpressRep {
  uint32_t peer_qpn = 0;
  uint32_t flags = 0;
  template <class V>
  void visit(V&& v) {
    v(peer_qpn), v(flags);
  }
};
struct DirectPeerRep {
  uint32_t generation = 0;  // of the direct line this describes
  uint32_t peer_qpn = 0;
  uint32_t peer_sq_entries = 0;
  uint32_t peer_sq_slot = 0;
  uint32_t peer_rq_entries = 0;
  uint32_t peer_rq_slot = 0;
  uint32_t peer_max_recv_sge = 0;
  uint32_t peer_access = 0;  // the peer QP's qp_access_flags
  uint32_t peer_cq = 0;      // the peer's receive CQ, as its CqEventMsg names it
  uint32_t peer_cq_entries = 0;
  uint16_t slid = 0;  // what the peer's completions report as this QP's source LID
  uint8_t sl = 0;
  uint8_t flags = 0;  // DirectPeerFlags
  template <class V>
  void visit(V&& v) {
    v(generation), v(peer_qpn), v(peer_sq_entries), v(peer_sq_slot), v(peer_rq_entries),
        v(peer_rq_slot), v(peer_max_recv_sge), v(peer_access), v(peer_cq), v(peer_cq_entries),
        v(slid), v(sl), v(flags);
  }
};
// GetPeerMr: a registration of the QP's direct peer (its owner and PD), by key.
struct PeerMrReq {
  uint32_t qp = 0;
  uint32_t key = 0;
  template <class V>
  void visit(V&& v) {
    v(qp), v(key);
  }
};
// Reply fds: [the registration's memfd] when mapped_len != 0.
struct PeerMrRep {
  uint64_t mapped_iova = 0;  // key-space address of the first memfd-backed byte
  uint64_t mapped_len = 0;   // 0: nothing of it is reachable without the router
  uint64_t memfd_offset = 0;
  uint32_t access = 0;  // enum ibv_access_flags
  template <class V>
  void visit(V&& v) {
    v(mapped_iova), v(mapped_len), v(memfd_offset), v(access);
  }
};

// ---- Router -> library event datagrams (no Header) ----
// On the async socket: one per ibv_async_event. `handle` names the QP, CQ or SRQ by its
// control handle, or the port number for port events.
struct AsyncEventMsg {
  uint32_t event_type = 0;  // enum ibv_event_type
  uint32_t handle = 0;
  template <class V>
  void visit(V&& v) {
    v(event_type), v(handle);
  }
};
constexpr size_t kAsyncEventSize = 8;
// On a completion channel socket: one per completion event.
struct CqEventMsg {
  uint32_t cq = 0;
  template <class V>
  void visit(V&& v) {
    v(cq);
  }
};
constexpr size_t kCqEventSize = 4;

}  // namespace wharf::proto
