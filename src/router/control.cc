// Control requests of one session: decode, validate against the session's own objects and
// the device limits, apply, reply. Errors are positive errnos as rdma-core's verbs return.
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <openssl/crypto.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>

#include "common/bits.h"
#include "common/clock.h"
#include "proto/datagram.h"
#include "proto/device.h"
#include "proto/qp_cm_step_log.h"
#include "proto/qp_rules.h"
#include "proto/wire_names.h"
#include "router/executor.h"
#include "router/local_completions.h"
#include "router/memory_window.h"
#include "router/process_caps.h"
#include "router/qp_state.h"
#include "router/remote.h"
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {
namespace {

constexpr uint32_t kValidMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                                    IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                                    IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_ON_DEMAND;
// A QP's access flags: only the remote ones grant anything; the others (as applications pass
// their MRs' flags, ON_DEMAND included) are accepted and ignored, as providers do.
constexpr uint32_t kValidQpAccess = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE |
                                    IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_ON_DEMAND;

// An address vector is usable when it names our single port and a GID entry in use; on an
// Ethernet link layer (RoCE) it must carry a GRH, as the kernel's rdma_check_ah_attr demands.
bool valid_ah_attr(const proto::AhAttr& a, bool ethernet) {
  if (a.port_num != 1) return false;
  if (ethernet && !a.is_global) return false;
  if (a.is_global && a.sgid_index >= device::kGidsInUse) return false;
  return a.sl < 16;
}

int validate_qp_attr_values(const Qp& qp, uint32_t mask, const proto::QpAttr& a, bool ethernet) {
  if ((mask & IBV_QP_PORT) && a.port_num != 1) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index >= device::kPkeyTableLen) return EINVAL;
  if ((mask & IBV_QP_PATH_MTU) && (a.path_mtu < IBV_MTU_256 || a.path_mtu > IBV_MTU_4096))
    return EINVAL;
  if ((mask & IBV_QP_ACCESS_FLAGS) && (a.qp_access_flags & ~kValidQpAccess)) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > device::kMaxQpRdAtom) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > device::kMaxQpRdAtom)
    return EINVAL;
  if ((mask & IBV_QP_AV) && !valid_ah_attr(a.ah_attr, ethernet)) return EINVAL;
  if ((mask & IBV_QP_ALT_PATH) && !valid_ah_attr(a.alt_ah_attr, ethernet)) return EINVAL;
  if ((mask & IBV_QP_DEST_QPN) && a.dest_qp_num > 0xffffff) return EINVAL;
  if ((mask & IBV_QP_CUR_STATE) && a.cur_qp_state != qp.attr.qp_state) return EINVAL;
  if ((mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && a.en_sqd_async_notify > 1) return EINVAL;
  return 0;
}

void apply_qp_attr(Qp* qp, uint32_t mask, const proto::QpAttr& a) {
  proto::QpCoreAttr& q = qp->attr;
  if (mask & IBV_QP_STATE) q.qp_state = a.qp_state;
  if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
    qp->set_extra(&QpExtras::en_sqd_async_notify, a.en_sqd_async_notify);
  if (mask & IBV_QP_ACCESS_FLAGS) q.qp_access_flags = a.qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) qp->set_extra(&QpExtras::pkey_index, a.pkey_index);
  // IBV_QP_PORT: the one port (validated), which every QP reports.
  if (mask & IBV_QP_QKEY) qp->set_extra(&QpExtras::qkey, a.qkey);
  if (mask & IBV_QP_AV) {
    q.ah_attr = a.ah_attr;
    qp->peer_host_epoch = 0;  // its peer host is looked up again
  }
  if (mask & IBV_QP_PATH_MTU) q.path_mtu = a.path_mtu;
  if (mask & IBV_QP_TIMEOUT) q.timeout = a.timeout;
  if (mask & IBV_QP_RETRY_CNT) q.retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) q.rnr_retry = a.rnr_retry;
  if (mask & IBV_QP_RQ_PSN) q.rq_psn = a.rq_psn & 0xffffff;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q.max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_ALT_PATH) {
    QpExtras& x = qp->extras();
    x.alt_ah_attr = a.alt_ah_attr;
    x.alt_port_num = a.alt_port_num;
    x.alt_timeout = a.alt_timeout;
    x.alt_pkey_index = a.alt_pkey_index;
  }
  if (mask & IBV_QP_MIN_RNR_TIMER) q.min_rnr_timer = a.min_rnr_timer;
  if (mask & IBV_QP_SQ_PSN) q.sq_psn = a.sq_psn & 0xffffff;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_PATH_MIG_STATE) qp->set_extra(&QpExtras::path_mig_state, a.path_mig_state);
  if (mask & IBV_QP_DEST_QPN) q.dest_qp_num = a.dest_qp_num;
  if (mask & IBV_QP_RATE_LIMIT) {
    qp->set_extra(&QpExtras::app_rate_kbps, a.rate_limit);
    // As mlx5: set without burst information, the default depth.
    qp->set_extra(&QpExtras::app_burst_bytes, 0u);
  }
}

// Whether fd is an eventfd (a resumed session's doorbell, which the router reads).
bool is_eventfd(int fd) {
  char link[64];
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(path.c_str(), link, sizeof(link));
  static constexpr char kEventfd[] = "anon_inode:[eventfd]";
  return n == static_cast<ssize_t>(sizeof(kEventfd) - 1) && std::memcmp(link, kEventfd, n) == 0;
}

// Zeroes the ring indices of a QP (IBTA: a QP in RESET has empty queues).
void reset_qp_rings(Qp* qp, const HostObjects& objects) {
  const shm::QpLayout l = qp->layout();
  auto* sq_hdr = reinterpret_cast<shm::RingHeader*>(qp->shm.data() + l.sq_ring_off);
  auto* rq_hdr = reinterpret_cast<shm::RingHeader*>(qp->shm.data() + l.rq_ring_off);
  for (auto* h : {sq_hdr, rq_hdr}) {
    h->producer.value.store(0, std::memory_order_relaxed);
    h->consumer.value.store(0, std::memory_order_relaxed);
  }
  qp->direct()->sq_retired.store(0, std::memory_order_relaxed);
  qp->direct()->express_offer.store(0, std::memory_order_relaxed);
  qp->sq_cursor = qp->rq_cursor = shm::RingCursor{};
  forget_local_completions(qp);
  if (HeldRecv* held = qp->held_recv()) let_go_of_held_recv(held, objects);  // completes nothing
  qp->last_wqe_reported = false;
}

}  // namespace

Mr::~Mr() {
  if (mapping != nullptr && mapping_size != 0) munmap(mapping, mapping_size);
}

Session::Session(Router* router, UniqueFd sock, pid_t pid, uid_t uid, Container* container)
    : router_(router), sock_(std::move(sock)), pid_(pid), uid_(uid), container_(container) {}

Session::~Session() {
  destroy_cm_state();
  // Children before parents: QPs hold CQs, SRQs and PDs, opened targets their domains.
  for (uint32_t h : qps_.handles()) destroy_qp(qps_.take(h));
  while (opened_qps_.size() != 0) close_opened_qp(opened_qps_.take(opened_qps_.begin()->first));
  while (mws_.size() != 0) dealloc_mw(mws_.take(mws_.begin()->first));  // before their MRs
  ahs_.clear();
  while (srqs_.size() != 0) destroy_srq(srqs_.take(srqs_.begin()->first));
  for (auto& [h, x] : xrcds_) router_->xrc_domains().drop_open(x->domain);
  xrcds_.clear();
  for (auto& [h, cq] : cqs_) router_->drop_held_cq_st(cq.get());
  cqs_.clear();
  for (auto& [h, mr] : mrs_) router_->objects().remove_key(mr->key);
  if (mrs_.size() != 0) router_->retire_mr_st();
  mrs_.clear();
  channels_.clear();
  pds_.clear();
  // Only a session that said Hello counted itself in its container (and may release it); a
  // registration session may have registered, and so may free, the namespace it runs in.
  if (hello_done_) router_->release_container(container_);
  if (cm_open_) router_->release_container(container_);
  if (!registered_name_.empty())
    router_->unregister_container(registered_tenant_, registered_name_);
}

void Session::raise_cq_event_st(Cq* cq, bool solicited, bool success) {
  router_->raise_cq_event_st(cq, solicited, success);
}

void Session::post_async_event(ibv_event_type type, uint32_t handle) {
  if (!async_sock_.valid()) return;
  proto::AsyncEventMsg ev{static_cast<uint32_t>(type), handle};
  uint8_t buf[proto::kAsyncEventSize];
  size_t n = proto::encode(ev, buf, sizeof(buf));
  int err = proto::send_datagram(async_sock_.get(), buf, n, nullptr, 0, MSG_DONTWAIT);
  if (err != 0)
    spdlog::warn("session pid {}: async event {} dropped: {}", pid_, int(type), strerror(err));
}

template <class Req, class Rep>
int Session::serve(const proto::Header& h, const uint8_t* body, size_t len, UniqueFd* fds, int nfds,
                   int (Session::*fn)(const Req&, UniqueFd*, int, Rep*, ReplyFds*)) {
  Req req{};
  if (!proto::decode(body, len, &req)) {
    send_reply(h, EINVAL, nullptr, 0, ReplyFds{});
    return EINVAL;
  }
  Rep rep{};
  ReplyFds out;
  int status = (this->*fn)(req, fds, nfds, &rep, &out);
  uint8_t buf[proto::kMaxMessage];
  size_t n = 0;
  if (status == 0) {
    n = proto::encode(rep, buf, sizeof(buf));
    if (n == 0 && sizeof(rep) > 1) status = EMSGSIZE;
  }
  send_reply(h, status, buf, status == 0 ? n : 0, status == 0 ? out : ReplyFds{});
  return status;
}

void Session::send_reply(const proto::Header& req, int status, const uint8_t* body, size_t len,
                         const ReplyFds& fds) {
  if (req.op & proto::kNoReplyBit) {
    if (status != 0)
      spdlog::debug("session pid {}: one-way op {} failed: {}", pid_, req.op & ~proto::kNoReplyBit,
                    strerror(status));
    return;
  }
  uint8_t buf[proto::kMaxMessage];
  proto::Header h;
  h.op = static_cast<uint16_t>(req.op | proto::kReplyBit);
  h.seq = req.seq;
  h.status = static_cast<uint32_t>(status);
  size_t hn = proto::encode(h, buf, sizeof(buf));
  if (len > sizeof(buf) - hn) len = 0;
  if (len != 0) std::memcpy(buf + hn, body, len);
  int err = proto::send_datagram(sock_.get(), buf, hn + len, fds.fds, fds.count, MSG_DONTWAIT);
  if (err != 0)
    spdlog::warn("session pid {}: reply to op {} lost: {}", pid_, req.op, strerror(err));
}

bool Session::handle_request(const uint8_t* buf, size_t len, UniqueFd* fds, int nfds) {
  proto::Header h;
  if (len < proto::kHeaderSize || !proto::decode(buf, proto::kHeaderSize, &h) ||
      h.magic != proto::kMagic || h.version != proto::kVersion || h.status != 0) {
    spdlog::warn("session pid {}: malformed request header ({} bytes); closing", pid_, len);
    return false;
  }
  const uint8_t* body = buf + proto::kHeaderSize;
  size_t blen = len - proto::kHeaderSize;
  using proto::Op;
  const uint16_t op_num = h.op & ~proto::kNoReplyBit;  // send_reply honours the bit
  auto op = static_cast<Op>(op_num);
  // Verbs need Hello first, rdma_cm ops CmOpen; the rest stand alone.
  const bool cm_op = (op_num > static_cast<uint16_t>(Op::kCmOpen) &&
                      op_num <= static_cast<uint16_t>(Op::kCmSetOption)) ||
                     op == Op::kCmJoinMulticast || op == Op::kCmRestoreChannel ||
                     op == Op::kCmResume;
  const bool standalone = op == Op::kHello || op == Op::kRegisterContainer ||
                          op == Op::kUnregisterContainer || op == Op::kRouterInfo ||
                          op == Op::kHoldContainer || op == Op::kReleaseContainer ||
                          op == Op::kHeldContainer || op == Op::kDumpResources || op == Op::kCmOpen;
  if (cm_op ? !cm_open_ : (!hello_done_ && !standalone)) {
    send_reply(h, EPROTO, nullptr, 0, ReplyFds{});
    return true;
  }
  switch (op) {
    case Op::kHello: serve(h, body, blen, fds, nfds, &Session::on_hello); break;
    case Op::kAllocPd: serve(h, body, blen, fds, nfds, &Session::on_alloc_pd); break;
    case Op::kDeallocPd: serve(h, body, blen, fds, nfds, &Session::on_dealloc_pd); break;
    case Op::kRegMr: serve(h, body, blen, fds, nfds, &Session::on_reg_mr); break;
    case Op::kDeregMr: serve(h, body, blen, fds, nfds, &Session::on_dereg_mr); break;
    case Op::kReregMr: serve(h, body, blen, fds, nfds, &Session::on_rereg_mr); break;
    case Op::kAllocMw: serve(h, body, blen, fds, nfds, &Session::on_alloc_mw); break;
    case Op::kDeallocMw: serve(h, body, blen, fds, nfds, &Session::on_dealloc_mw); break;
    case Op::kResizeCq: serve(h, body, blen, fds, nfds, &Session::on_resize_cq); break;
    case Op::kOpenXrcd: serve(h, body, blen, fds, nfds, &Session::on_open_xrcd); break;
    case Op::kCloseXrcd: serve(h, body, blen, fds, nfds, &Session::on_close_xrcd); break;
    case Op::kOpenQp: serve(h, body, blen, fds, nfds, &Session::on_open_qp); break;
    case Op::kAttachMcast: serve(h, body, blen, fds, nfds, &Session::on_attach_mcast); break;
    case Op::kDetachMcast: serve(h, body, blen, fds, nfds, &Session::on_detach_mcast); break;
    case Op::kCreateFlow: serve(h, body, blen, fds, nfds, &Session::on_create_flow); break;
    case Op::kDestroyFlow: serve(h, body, blen, fds, nfds, &Session::on_destroy_flow); break;
    case Op::kModifyWq: serve(h, body, blen, fds, nfds, &Session::on_modify_wq); break;
    case Op::kSetQpRss: serve(h, body, blen, fds, nfds, &Session::on_set_qp_rss); break;
    case Op::kPostSrqOps: serve(h, body, blen, fds, nfds, &Session::on_post_srq_ops); break;
    case Op::kModifyCq: serve(h, body, blen, fds, nfds, &Session::on_modify_cq); break;
    case Op::kCreateChannel: serve(h, body, blen, fds, nfds, &Session::on_create_channel); break;
    case Op::kDestroyChannel: serve(h, body, blen, fds, nfds, &Session::on_destroy_channel); break;
    case Op::kCreateCq: serve(h, body, blen, fds, nfds, &Session::on_create_cq); break;
    case Op::kDestroyCq: serve(h, body, blen, fds, nfds, &Session::on_destroy_cq); break;
    case Op::kCreateQp: serve(h, body, blen, fds, nfds, &Session::on_create_qp); break;
    case Op::kModifyQp: serve(h, body, blen, fds, nfds, &Session::on_modify_qp); break;
    case Op::kQueryQp: serve(h, body, blen, fds, nfds, &Session::on_query_qp); break;
    case Op::kModifyQpRateLimit:
      serve(h, body, blen, fds, nfds, &Session::on_modify_qp_rate_limit);
      break;
    case Op::kDestroyQp: serve(h, body, blen, fds, nfds, &Session::on_destroy_qp); break;
    case Op::kCreateSrq: serve(h, body, blen, fds, nfds, &Session::on_create_srq); break;
    case Op::kModifySrq: serve(h, body, blen, fds, nfds, &Session::on_modify_srq); break;
    case Op::kQuerySrq: serve(h, body, blen, fds, nfds, &Session::on_query_srq); break;
    case Op::kDestroySrq: serve(h, body, blen, fds, nfds, &Session::on_destroy_srq); break;
    case Op::kCreateAh: serve(h, body, blen, fds, nfds, &Session::on_create_ah); break;
    case Op::kDestroyAh: serve(h, body, blen, fds, nfds, &Session::on_destroy_ah); break;
    case Op::kGetDirectPeer: serve(h, body, blen, fds, nfds, &Session::on_get_direct_peer); break;
    case Op::kTakeExpress: serve(h, body, blen, fds, nfds, &Session::on_take_express); break;
    case Op::kGetPeerMr: serve(h, body, blen, fds, nfds, &Session::on_get_peer_mr); break;
    case Op::kRouterInfo: serve(h, body, blen, fds, nfds, &Session::on_router_info); break;
    case Op::kDumpResources: serve(h, body, blen, fds, nfds, &Session::on_dump_resources); break;
    case Op::kRegisterContainer:
      serve(h, body, blen, fds, nfds, &Session::on_register_container);
      break;
    case Op::kUnregisterContainer:
      serve(h, body, blen, fds, nfds, &Session::on_unregister_container);
      break;
    case Op::kHoldContainer: serve(h, body, blen, fds, nfds, &Session::on_hold_container); break;
    case Op::kReleaseContainer:
      serve(h, body, blen, fds, nfds, &Session::on_release_container);
      break;
    case Op::kHeldContainer: serve(h, body, blen, fds, nfds, &Session::on_held_container); break;
    case Op::kRestoreNext: serve(h, body, blen, fds, nfds, &Session::on_restore_next); break;
    case Op::kCmOpen: serve(h, body, blen, fds, nfds, &Session::on_cm_open); break;
    case Op::kCmCreateChannel:
      serve(h, body, blen, fds, nfds, &Session::on_cm_create_channel);
      break;
    case Op::kCmDestroyChannel:
      serve(h, body, blen, fds, nfds, &Session::on_cm_destroy_channel);
      break;
    case Op::kCmCreateId: serve(h, body, blen, fds, nfds, &Session::on_cm_create_id); break;
    case Op::kCmDestroyId: serve(h, body, blen, fds, nfds, &Session::on_cm_destroy_id); break;
    case Op::kCmMigrateId: serve(h, body, blen, fds, nfds, &Session::on_cm_migrate_id); break;
    case Op::kCmRestoreChannel:
      serve(h, body, blen, fds, nfds, &Session::on_cm_restore_channel);
      break;
    case Op::kCmResume: serve(h, body, blen, fds, nfds, &Session::on_cm_resume); break;
    case Op::kCmBind: serve(h, body, blen, fds, nfds, &Session::on_cm_bind); break;
    case Op::kCmResolveAddr: serve(h, body, blen, fds, nfds, &Session::on_cm_resolve_addr); break;
    case Op::kCmResolveRoute: serve(h, body, blen, fds, nfds, &Session::on_cm_resolve_route); break;
    case Op::kCmListen: serve(h, body, blen, fds, nfds, &Session::on_cm_listen); break;
    case Op::kCmConnect: serve(h, body, blen, fds, nfds, &Session::on_cm_connect); break;
    case Op::kCmAccept: serve(h, body, blen, fds, nfds, &Session::on_cm_accept); break;
    case Op::kCmReject: serve(h, body, blen, fds, nfds, &Session::on_cm_reject); break;
    case Op::kCmEstablish: serve(h, body, blen, fds, nfds, &Session::on_cm_establish); break;
    case Op::kCmDisconnect: serve(h, body, blen, fds, nfds, &Session::on_cm_disconnect); break;
    case Op::kCmSetOption: serve(h, body, blen, fds, nfds, &Session::on_cm_set_option); break;
    case Op::kCmJoinMulticast:
      serve(h, body, blen, fds, nfds, &Session::on_cm_join_multicast);
      break;
    default: send_reply(h, EOPNOTSUPP, nullptr, 0, ReplyFds{}); break;
  }
  return true;
}

int Session::on_hello(const proto::HelloReq& req, UniqueFd* fds, int nfds, proto::HelloRep* rep,
                      ReplyFds* out) {
  if (hello_done_) return EALREADY;
  if (req.abi_version != proto::kVersion) return EPROTO;
  if (nfds != (req.resume != 0 ? 3 : 1)) return EINVAL;
  int fl = fcntl(fds[0].get(), F_GETFL);
  if (fl < 0 || fcntl(fds[0].get(), F_SETFL, fl | O_NONBLOCK) != 0) return EINVAL;
  if (req.resume != 0) {
    // The page and doorbell the library had: its threads go on using them meanwhile.
    if (!router_->resume_key().valid()) return EOPNOTSUPP;
    if (!is_eventfd(fds[2].get())) return EINVAL;
    if (int err = page_.adopt(std::move(fds[1]), shm::kContextPageSize); err != 0) return err;
    if (int err = router_->keep_lid_st(container_, req.resume_lid); err != 0) return err;
    doorbell_ = std::move(fds[2]);
    resumed_ = true;
  } else {
    if (int err = page_.create("wharf-context", shm::kContextPageSize); err != 0) return err;
    doorbell_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!doorbell_.valid()) return errno;
  }
  async_sock_ = std::move(fds[0]);
  hello_done_ = true;
  router_->watch_context_page_st(this);
  container_->sessions++;

  rep->node_guid = router_->config().node_guid;
  rep->vip = container_->vip;
  rep->link_layer = router_->config().link_layer;
  rep->lid = rep->link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : container_->lid;
  rep->gid = container_->gid;
  std::strncpy(rep->container.data(), container_->name.c_str(), rep->container.size() - 1);
  if (!resumed_) {
    out->add(page_.fd());
    out->add(doorbell_.get());
  }
  return 0;
}

int Session::on_restore_next(const proto::RestoreNextReq& req, UniqueFd* fds, int nfds,
                             proto::Empty*, ReplyFds*) {
  if (!resumed_) return EPERM;
  if (nfds > 1 || req.handle == 0) return EINVAL;
  restore_ = PendingRestore{req.handle, req.number, req.proof, {}, true};
  if (nfds == 1) restore_.fd = std::move(fds[0]);
  return 0;
}

bool Session::take_restore(PendingRestore* out) {
  if (!restore_.set) return false;
  *out = std::move(restore_);
  restore_ = PendingRestore{};
  return true;
}

bool Session::proves(ProofKind kind, uint32_t number, uint64_t proof) const {
  const uint64_t expected = proof_of(kind, number);
  return expected != 0 && CRYPTO_memcmp(&expected, &proof, sizeof(proof)) == 0;
}

uint64_t Session::proof_of(ProofKind kind, uint32_t number) const {
  return router_->resume_key().proof(kind, number, container_->netns_ino);
}

int Session::on_alloc_pd(const proto::Empty&, UniqueFd*, int, proto::Handle* rep, ReplyFds*) {
  PendingRestore restore;
  const bool restoring = take_restore(&restore);
  if (pds_.size() >= device::kMaxPd) return ENOMEM;
  if (int err = router_->check_quota_st(container_, QuotaKind::kPd, 1); err != 0) return err;
  Pd* pd = restoring ? pds_.add_at(restore.handle, std::make_unique<Pd>())
                     : pds_.add(std::make_unique<Pd>());
  if (pd == nullptr) return EEXIST;
  rep->handle = pd->handle;
  return 0;
}

int Session::on_dealloc_pd(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Pd* pd = pds_.find(req.handle);
  if (pd == nullptr) return EINVAL;
  if (pd->users != 0) return EBUSY;
  pds_.take(req.handle);
  return 0;
}

int Session::make_mr(const proto::RegMrReq& req, UniqueFd* fds, int nfds, const Mr* replacing,
                     std::unique_ptr<Mr>* out) {
  Pd* pd = pds_.find(req.pd);
  if (pd == nullptr) return EINVAL;
  const bool device_memory = (req.access & proto::kMrDeviceMemory) != 0;
  const uint32_t access = req.access & ~proto::kMrDeviceMemory;
  if (access & ~kValidMrAccess) return EINVAL;
  // C10-... IBTA 10.6.3.1: remote write or atomic access requires local write.
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;
  // An implicit on-demand MR (address 0, length SIZE_MAX) covers the process's whole address
  // space and pins nothing: it is reached with process_vm_* only, and uses no MR bytes.
  const bool implicit =
      (access & IBV_ACCESS_ON_DEMAND) && req.addr == 0 && req.length == UINT64_MAX;
  if (implicit && (req.mapped_len != 0 || req.iova != 0)) return EINVAL;
  if (!implicit) {
    // Device memory may be registered empty (as mlx5's DM MRs); other memory may not.
    if ((req.length == 0 && !device_memory) || req.length > device::kMaxMrSize) return EINVAL;
    if (req.addr + req.length < req.addr || req.iova + req.length < req.iova) return EINVAL;
  }
  if (replacing == nullptr) {
    if (mrs_.size() >= device::kMaxMr) return ENOMEM;
    if (int err = router_->check_quota_st(container_, QuotaKind::kMr, 1); err != 0) return err;
  }
  if (int err = router_->check_quota_st(container_, QuotaKind::kMrBytes, implicit ? 0 : req.length,
                                        replacing != nullptr ? replacing->charged_bytes() : 0);
      err != 0)
    return err;

  auto mr = std::make_unique<Mr>();
  mr->owner = this;
  mr->pd = pd;
  mr->addr = req.addr;
  mr->length = req.length;
  mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : req.iova;
  mr->access = access;
  mr->implicit = implicit;
  mr->pid = pid_;
  if (req.mapped_len != 0) {
    if (nfds != 1) return EINVAL;
    const uint64_t end = req.addr + req.length;
    if (req.mapped_start % kPageSize || req.mapped_len % kPageSize ||
        req.memfd_offset % kPageSize || req.mapped_start < req.addr ||
        req.mapped_start + req.mapped_len < req.mapped_start ||
        req.mapped_start + req.mapped_len > end)
      return EINVAL;
    // The container must not be able to shrink the file under our mapping (SIGBUS).
    int seals = fcntl(fds[0].get(), F_GET_SEALS);
    struct stat st;
    if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fds[0].get(), &st) != 0 ||
        !S_ISREG(st.st_mode) ||
        !range_within(req.memfd_offset, req.mapped_len, static_cast<uint64_t>(st.st_size)))
      return EINVAL;
    void* p = mmap(nullptr, req.mapped_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0].get(),
                   static_cast<off_t>(req.memfd_offset));
    if (p == MAP_FAILED) return EINVAL;
    mr->mapping = static_cast<uint8_t*>(p);
    mr->mapping_size = req.mapped_len;
    mr->mapped_start = req.mapped_start;
    mr->mapped_len = req.mapped_len;
    mr->memfd = std::move(fds[0]);
    mr->memfd_offset = req.memfd_offset;
  } else if (nfds != 0) {
    return EINVAL;
  }
  *out = std::move(mr);
  return 0;
}

int Session::on_reg_mr(const proto::RegMrReq& req, UniqueFd* fds, int nfds, proto::RegMrRep* rep,
                       ReplyFds*) {
  PendingRestore restore;
  const bool restoring = take_restore(&restore);
  if (restoring && !proves(ProofKind::kMrKey, restore.number, restore.proof)) return EACCES;
  std::unique_ptr<Mr> mr;
  if (int err = make_mr(req, fds, nfds, nullptr, &mr); err != 0) return err;
  Mr* raw = nullptr;
  if (restoring) {
    if ((raw = mrs_.add_at(restore.handle, std::move(mr))) == nullptr) return EEXIST;
    if (!router_->objects().claim_key(restore.number, raw)) {
      mrs_.take(raw->handle);
      return EADDRINUSE;
    }
    raw->key = restore.number;
  } else {
    raw = mrs_.add(std::move(mr));
    raw->key = router_->objects().add_key(raw);
  }
  raw->pd->users++;
  rep->handle = raw->handle;
  rep->lkey = rep->rkey = raw->key;
  rep->proof = proof_of(ProofKind::kMrKey, raw->key);
  return 0;
}

// The new registration is made (and checked) before the old one goes, so a failure leaves
// it as it was. The key stays; caches of the old one are dropped as for a deregistration.
int Session::on_rereg_mr(const proto::ReregMrReq& req, UniqueFd* fds, int nfds,
                         proto::RegMrRep* rep, ReplyFds*) {
  Mr* old = mrs_.find(req.mr);
  if (old == nullptr) return EINVAL;
  if (old->windows != 0) return EBUSY;  // windows are bound to its translation
  std::unique_ptr<Mr> mr;
  if (int err = make_mr(req.reg, fds, nfds, old, &mr); err != 0) return err;
  mr->key = old->key;
  mr->pd->users++;
  std::unique_ptr<Mr> gone = mrs_.replace(req.mr, std::move(mr));
  Mr* raw = mrs_.find(req.mr);
  router_->objects().rebind_key(raw->key, raw);
  router_->retire_mr_st();  // waits out direct-path users of the old mapping
  gone->pd->users--;
  rep->handle = raw->handle;
  rep->lkey = rep->rkey = raw->key;
  return 0;
}

int Session::on_dereg_mr(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Mr* bound = mrs_.find(req.handle);
  if (bound == nullptr) return EINVAL;
  if (bound->windows != 0) return EBUSY;  // as ibv_dereg_mr(3): windows are bound to it
  auto mr = mrs_.take(req.handle);
  router_->objects().remove_key(mr->key);
  router_->retire_mr_st();
  mr->pd->users--;
  return 0;
}

int Session::on_alloc_mw(const proto::AllocMwReq& req, UniqueFd*, int, proto::AllocMwRep* rep,
                         ReplyFds*) {
  Pd* pd = pds_.find(req.pd);
  if (pd == nullptr || (req.type != IBV_MW_TYPE_1 && req.type != IBV_MW_TYPE_2)) return EINVAL;
  if (mws_.size() >= device::kMaxMw) return ENOMEM;
  auto mw = std::make_unique<Mw>();
  mw->owner = this;
  mw->pd = pd;
  mw->type = req.type;
  mw->key = router_->objects().add_key(nullptr);
  Mw* raw = mws_.add(std::move(mw));
  pd->users++;
  rep->handle = raw->handle;
  rep->rkey = raw->key;
  return 0;
}

int Session::on_dealloc_mw(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  auto mw = mws_.take(req.handle);
  if (!mw) return EINVAL;
  dealloc_mw(std::move(mw));
  return 0;
}

// A window goes with its binding (IBTA: deallocation invalidates it) and its key.
void Session::dealloc_mw(std::unique_ptr<Mw> mw) {
  unbind_window(router_->objects(), mw.get());
  router_->objects().remove_key(mw->key);
  mw->pd->users--;
}

int Session::on_attach_mcast(const proto::McastReq& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Qp* qp = qps_.find(req.qp);
  return qp == nullptr ? EINVAL : router_->multicast().attach(qp, req.gid, req.lid);
}

int Session::on_detach_mcast(const proto::McastReq& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Qp* qp = qps_.find(req.qp);
  return qp == nullptr ? EINVAL : router_->multicast().detach(qp, req.gid, req.lid);
}

int Session::on_create_flow(const proto::CreateFlowReq& req, UniqueFd*, int, proto::Handle* rep,
                            ReplyFds*) {
  Qp* qp = qps_.find(req.qp);
  if (qp == nullptr) return EINVAL;
  const int err = router_->flows().create(qp, req.type, req.match, &rep->handle);
  router_->match_rules_changed_st();
  return err;
}

int Session::on_destroy_flow(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  const int err = router_->flows().destroy(this, req.handle);
  router_->match_rules_changed_st();
  return err;
}

int Session::on_create_channel(const proto::Empty&, UniqueFd* fds, int nfds, proto::Handle* rep,
                               ReplyFds*) {
  PendingRestore restore;
  const bool restoring = take_restore(&restore);
  if (nfds != 1) return EINVAL;
  int fl = fcntl(fds[0].get(), F_GETFL);
  if (fl < 0 || fcntl(fds[0].get(), F_SETFL, fl | O_NONBLOCK) != 0) return EINVAL;
  auto ch = std::make_unique<CompChannel>();
  ch->sock = std::move(fds[0]);
  CompChannel* raw =
      restoring ? channels_.add_at(restore.handle, std::move(ch)) : channels_.add(std::move(ch));
  if (raw == nullptr) return EEXIST;
  rep->handle = raw->handle;
  return 0;
}

int Session::on_destroy_channel(const proto::Handle& req, UniqueFd*, int, proto::Empty*,
                                ReplyFds*) {
  CompChannel* ch = channels_.find(req.handle);
  if (ch == nullptr) return EINVAL;
  if (ch->users != 0) return EBUSY;
  channels_.take(req.handle);
  return 0;
}

int Session::on_create_cq(const proto::CreateCqReq& req, UniqueFd*, int, proto::CreateCqRep* rep,
                          ReplyFds* out) {
  PendingRestore restore;
  const bool restoring = take_restore(&restore);
  if (req.cqe == 0 || req.cqe > device::kMaxCqe) return EINVAL;
  if (cqs_.size() >= device::kMaxCq) return ENOMEM;
  if (int err = router_->check_quota_st(container_, QuotaKind::kCq, 1); err != 0) return err;
  CompChannel* ch = nullptr;
  if (req.channel != 0 && (ch = channels_.find(req.channel)) == nullptr) return EINVAL;
  auto cq = std::make_unique<Cq>();
  cq->owner = this;
  const shm::CqLayout layout = shm::cq_layout(static_cast<uint32_t>(round_up_pow2(req.cqe)));
  ShmRegion region;
  // A restored CQ keeps its region: its entries, and the arm word a waiter relies on.
  if (int err = restoring ? region.adopt(std::move(restore.fd), layout.total)
                          : region.create("wharf-cq", layout.total);
      err != 0)
    return err;
  cq->use_region(std::move(region), layout);
  Cq* raw = restoring ? cqs_.add_at(restore.handle, std::move(cq)) : cqs_.add(std::move(cq));
  if (raw == nullptr) return EEXIST;
  raw->channel = ch;
  if (ch != nullptr) ch->users++;
  rep->cq = raw->handle;
  rep->entries = raw->layout.entries;
  if (!restoring) out->add(raw->shm.fd());
  return 0;
}

int Session::on_destroy_cq(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Cq* cq = cqs_.find(req.handle);
  if (cq == nullptr) return EINVAL;
  if (cq->users != 0) return EBUSY;
  if (cq->channel != nullptr) cq->channel->users--;
  router_->drop_held_cq_st(cq);
  cqs_.take(req.handle);
  return 0;
}

int Session::on_modify_cq(const proto::ModifyCqReq& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Cq* cq = cqs_.find(req.cq);
  // As the kernel's uverbs: nothing to modify is EINVAL, an unknown attribute EOPNOTSUPP.
  if (cq == nullptr || req.attr_mask == 0) return EINVAL;
  if ((req.attr_mask & ~static_cast<uint32_t>(IBV_CQ_ATTR_MODERATE)) != 0) return EOPNOTSUPP;
  if (req.cq_period > device::kMaxCqModerationPeriodUs) return EINVAL;
  // An event held under the old limits is raised now rather than judged by the new ones.
  if (cq->moderation.held() != 0) router_->raise_held_cq_event_st(cq);
  cq->moderation.set(req.cq_count, req.cq_period);
  // A moderated CQ is the router's alone to write: the direct lines that write it go Off.
  for (Qp* qp : router_->cq_writers_st(cq)) router_->direct().refresh(qp);
  return 0;
}

// The CQ moves to a new region: its waiting entries first, its arm state kept. Nothing else
// writes it meanwhile: this is the router thread, and the direct lines of the QPs whose
// libraries write it (their own send completions, or their peer's receive completions) are
// Off until it is done, so they find the new region when they next describe their peer. The
// library does not poll the CQ while it waits for this reply.
int Session::on_resize_cq(const proto::ResizeCqReq& req, UniqueFd*, int, proto::CreateCqRep* rep,
                          ReplyFds* out) {
  Cq* cq = cqs_.find(req.cq);
  if (cq == nullptr || req.cqe == 0 || req.cqe > device::kMaxCqe) return EINVAL;
  // Work requests posted before this call complete first, as a NIC would have completed them
  // by now: a request served before the data path's next pass (a sleeping router woken by it)
  // would count too few entries and could shrink the CQ under them.
  router_->poll_datapath_st(/*with_links=*/false);
  const shm::CqLayout layout = shm::cq_layout(static_cast<uint32_t>(round_up_pow2(req.cqe)));
  const std::vector<Qp*> writers = router_->cq_writers_st(cq);
  for (Qp* qp : writers) router_->direct().disable(qp);
  auto* old_hdr = reinterpret_cast<shm::RingHeader*>(cq->shm.data() + cq->layout.ring_off);
  const uint32_t cons = old_hdr->consumer.value.load(std::memory_order_acquire);
  const uint32_t waiting = old_hdr->producer.value.load(std::memory_order_acquire) - cons;
  int err = waiting > cq->layout.entries ? EIO : waiting > layout.entries ? EINVAL : 0;
  ShmRegion fresh;
  if (err == 0) err = fresh.create("wharf-cq", layout.total);
  if (err == 0) {
    const auto* old_slots =
        reinterpret_cast<const shm::Cqe*>(cq->shm.data() + cq->layout.slots_off);
    auto* slots = reinterpret_cast<shm::Cqe*>(fresh.data() + layout.slots_off);
    for (uint32_t i = 0; i < waiting; ++i) {
      slots[i] = old_slots[(cons + i) & (cq->layout.entries - 1)];
      slots[i].seq = i + 1;
    }
    auto* hdr = reinterpret_cast<shm::RingHeader*>(fresh.data() + layout.ring_off);
    hdr->producer.value.store(waiting, std::memory_order_relaxed);
    auto* notify = reinterpret_cast<shm::CqNotify*>(fresh.data() + layout.notify_off);
    notify->arm.store(cq->notify->arm.load(std::memory_order_acquire), std::memory_order_release);
    cq->use_region(std::move(fresh), layout);
    rep->cq = cq->handle;
    rep->entries = layout.entries;
    out->add(cq->shm.fd());
  }
  for (Qp* qp : writers) router_->direct().refresh(qp);
  return err;
}

int Session::on_create_qp(const proto::CreateQpReq& req, UniqueFd*, int, proto::CreateQpRep* rep,
                          ReplyFds* out) {
  PendingRestore restore;
  const bool restoring = take_restore(&restore);
  if (restoring && !proves(ProofKind::kQpn, restore.number, restore.proof)) return EACCES;
  if (req.qp_type != IBV_QPT_RC && req.qp_type != IBV_QPT_UC && req.qp_type != IBV_QPT_UD &&
      req.qp_type != IBV_QPT_XRC_SEND && req.qp_type != IBV_QPT_XRC_RECV &&
      req.qp_type != IBV_QPT_RAW_PACKET)
    return EOPNOTSUPP;
  const auto type = static_cast<ibv_qp_type>(req.qp_type);  // validated above
  // Raw Ethernet frames: on an Ethernet port only, and, as the kernel demands, for a process
  // with CAP_NET_RAW.
  if (type == IBV_QPT_RAW_PACKET) {
    if (!ethernet()) return EOPNOTSUPP;
    if (!process_has_capability(pid_, CAP_NET_RAW)) return EPERM;
  }
  const bool target = type == IBV_QPT_XRC_RECV;
  const bool initiator = type == IBV_QPT_XRC_SEND;
  const bool rss = type == IBV_QPT_RAW_PACKET && req.send_cq == 0 && req.recv_cq == 0 &&
                   req.srq == 0 && req.caps.max_send_wr == 0 && req.caps.max_recv_wr == 0;
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Srq* srq = nullptr;
  XrcDomain* xrc = nullptr;
  if (target) {
    // A target has its domain only: what arrives goes to the XRC SRQ each message names.
    if ((xrc = find_xrc_domain(req.xrcd)) == nullptr) return EINVAL;
  } else if (rss) {
    // An RSS QP to be: receives only, into the WQs SetQpRss gives it.
    if ((pd = pds_.find(req.pd)) == nullptr) return EINVAL;
  } else {
    pd = pds_.find(req.pd);
    scq = cqs_.find(req.send_cq);
    rcq = initiator ? nullptr : cqs_.find(req.recv_cq);
    srq = initiator || req.srq == 0 ? nullptr : srqs_.find(req.srq);
    if (pd == nullptr || scq == nullptr || (!initiator && rcq == nullptr) ||
        (!initiator && req.srq != 0 && srq == nullptr))
      return EINVAL;
    // An XRC SRQ is served through targets only, a WQ through RSS QPs; tag matching is
    // defined for RC only.
    if (srq != nullptr && (srq->xrc != nullptr || srq->wq)) return EINVAL;
    if (srq != nullptr && srq->tm != nullptr && type != IBV_QPT_RC) return EINVAL;
  }
  // Targets send nothing but acknowledgements and initiators receive nothing.
  const proto::QpCaps c = target || rss ? proto::QpCaps{} : req.caps;
  const bool has_rq = srq == nullptr && !target && !initiator && !rss;
  if (c.max_send_wr > device::kMaxQpWr || c.max_send_sge > shm::kMaxSendSge ||
      c.max_inline_data > shm::kMaxInline)
    return EINVAL;
  if (has_rq && (c.max_recv_wr > device::kMaxQpWr || c.max_recv_sge > shm::kMaxRecvSge))
    return EINVAL;
  if (qps_.size() >= device::kMaxQp) return ENOMEM;
  if (int err = router_->check_quota_st(container_, QuotaKind::kQp, 1); err != 0) return err;

  auto qp = std::make_unique<Qp>();
  qp->owner = this;
  qp->pd = pd;
  qp->send_cq = scq;
  qp->recv_cq = rcq;
  qp->srq = srq;
  if (xrc != nullptr) qp->extras().xrc = xrc;
  qp->type = type;
  qp->sq_sig_all = req.sq_sig_all != 0;
  uint32_t send_sge = c.max_send_sge == 0 ? 1 : c.max_send_sge;
  uint32_t sq_slot = shm::send_slot_size(send_sge, c.max_inline_data);
  uint32_t sq_entries =
      static_cast<uint32_t>(round_up_pow2(c.max_send_wr == 0 ? 1 : c.max_send_wr));
  uint32_t recv_sge = c.max_recv_sge == 0 ? 1 : c.max_recv_sge;
  uint32_t rq_entries = 0, rq_slot = 0;
  if (has_rq) {
    rq_entries = static_cast<uint32_t>(round_up_pow2(c.max_recv_wr == 0 ? 1 : c.max_recv_wr));
    rq_slot = shm::recv_slot_size(recv_sge);
  }
  qp->sq_entries = sq_entries;
  qp->sq_slot = sq_slot;
  qp->rq_entries = rq_entries;
  qp->rq_slot = rq_slot;
  const shm::QpLayout layout = qp->layout();
  qp->attr.qp_state = IBV_QPS_RESET;
  qp->attr.path_mtu = IBV_MTU_4096;
  if (restoring) {
    // Its rings as the library left them: the router goes on from the consumer indices, so
    // work it had taken but not completed is executed again (its replayed ModifyQp requests
    // bring it back to its state).
    if (int err = qp->shm.adopt(std::move(restore.fd), layout.total); err != 0) return err;
    qp->sq().resync();
    qp->rq().resync();
  } else {
    qp->shm = spare_qp_regions_.take(layout.total);
    if (qp->shm.size() == 0) {
      if (int err = qp->shm.create("wharf-qp", layout.total); err != 0) return err;
    }
    reset_qp_rings(qp.get(), router_->objects());
  }

  Qp* raw = nullptr;
  if (restoring) {
    if (!router_->objects().add_qp_numbered(qp.get(), restore.number)) return EADDRINUSE;
    const uint32_t qpn = restore.number;
    if ((raw = qps_.add_at(restore.handle, std::move(qp))) == nullptr) {
      router_->objects().remove_qp(qpn);
      return EEXIST;
    }
    // The receive it held for a message in parts, which the message sent again takes.
    if (srq != nullptr) take_orphaned_recv(srq, raw);
    // What the previous process left half completed between it and a QP of this host.
    finish_local_completions_st(raw, router_->objects());
    // Its connection to another host goes on where the previous process left it.
    if (router_->remote() != nullptr) router_->remote()->restore_st(raw);
  } else {
    if (!router_->objects().add_qp(qp.get())) return ENOMEM;  // the host's QPs: every number
    raw = qps_.add(std::move(qp));                            // not full: checked above
  }
  router_->configure_qp_rate_st(raw, now_ns());
  if (pd != nullptr) pd->users++;
  if (scq != nullptr) scq->users++;
  if (rcq != nullptr) rcq->users++;
  if (srq != nullptr) srq->users++;
  if (xrc != nullptr) xrc->users++;
  rep->qp = raw->handle;
  rep->qpn = raw->qpn;
  rep->sq_entries = sq_entries;
  rep->sq_slot = sq_slot;
  rep->rq_entries = rq_entries;
  rep->rq_slot = rq_slot;
  rep->caps = raw->caps();  // what the slots hold: >= what was asked, as providers report
  rep->posted_mark = SessionQps::posted_mark(*raw);
  rep->proof = proof_of(ProofKind::kQpn, raw->qpn);
  if (!restoring) out->add(raw->shm.fd());
  return 0;
}

int Session::on_modify_qp(const proto::ModifyQpReq& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Qp* qp = find_qp(req.qp);
  if (qp == nullptr) return EINVAL;
  if (int err = modify_qp(qp, req.attr_mask, req.attr); err != 0) return err;
  const bool reset = (req.attr_mask & IBV_QP_STATE) && req.attr.qp_state == IBV_QPS_RESET;
  proto::note_owner_modification(qp->cm_steps(), reset);
  return 0;
}

int Session::modify_qp(Qp* qp, uint32_t attr_mask, const proto::QpAttr& attr) {
  // An RSS QP (a RAW_PACKET QP without CQs) has no queues to move through states.
  if (qp->type == IBV_QPT_RAW_PACKET && qp->send_cq == nullptr) return EINVAL;
  const uint32_t cur = qp->attr.qp_state;
  const uint32_t wanted = (attr_mask & IBV_QP_STATE) ? attr.qp_state : cur;
  if (int err = check_qp_transition(qp->type, cur, wanted, attr_mask); err != 0) return err;
  const auto next = static_cast<ibv_qp_state>(wanted);  // validated above
  if (int err = validate_qp_attr_values(*qp, attr_mask, attr, ethernet()); err != 0) return err;
  // Tag matching runs between QPs of one host only: the host-to-host responder places a
  // message packet by packet, where a tagged message is matched (and a rendezvous read) as a
  // whole.
  const bool one_host_only = qp->srq != nullptr && qp->srq->tm != nullptr;
  if (one_host_only && (attr_mask & IBV_QP_AV) && router_->remote() != nullptr &&
      router_->remote()->host_for(attr.ah_attr, container_) >= 0)
    return EOPNOTSUPP;
  apply_qp_attr(qp, attr_mask, attr);
  if (attr_mask & IBV_QP_RATE_LIMIT) router_->configure_qp_rate_st(qp, now_ns());
  // Before the switch below touches any ring: no library may be executing into this QP.
  // A QP that became rate limited also leaves the direct path here.
  router_->direct().refresh(qp);
  if (wanted == cur) return 0;
  switch (next) {
    case IBV_QPS_RESET:
      router_->scheduler().deactivate(qp);
      reset_qp_rings(qp, router_->objects());
      // The application's rate limit belongs to the connection it made; a reused QP starts
      // without one (its policy limit stays).
      qp->set_extra(&QpExtras::app_rate_kbps, 0u);
      qp->set_extra(&QpExtras::app_burst_bytes, 0u);
      router_->configure_qp_rate_st(qp, now_ns());
      if (router_->remote() != nullptr) router_->remote()->forget_st(qp);
      break;
    case IBV_QPS_RTS:
    case IBV_QPS_ERR:
      qp->clear_work(&QpWork::wait_until_ns);
      router_->scheduler().activate(qp);
      if (next == IBV_QPS_RTS && router_->remote() != nullptr) {
        if (const int host = router_->remote()->peer_host(qp); host >= 0)
          router_->remote()->express().qp_ready_st(qp, host);
      }
      break;
    case IBV_QPS_SQD:
      // Work is executed as it is taken from the ring, so the send queue is drained now.
      router_->scheduler().deactivate(qp);
      if (const QpExtras* x = qp->extras_if_any(); x != nullptr && x->en_sqd_async_notify)
        qp->owner->post_async_event(IBV_EVENT_SQ_DRAINED, qp->handle);
      break;
    default: break;
  }
  return 0;
}

int Session::on_modify_qp_rate_limit(const proto::ModifyQpRateLimitReq& req, UniqueFd*, int,
                                     proto::Empty*, ReplyFds*) {
  Qp* qp = qps_.find(req.qp);
  if (qp == nullptr) return EINVAL;
  // As mlx5: burst information qualifies a limit, and is meaningless without one.
  if ((req.max_burst_sz != 0 || req.typical_pkt_sz != 0) && req.rate_limit == 0) return EINVAL;
  // The states and types ibv_modify_qp accepts IBV_QP_RATE_LIMIT in, without a transition.
  const uint32_t cur = qp->attr.qp_state;
  if (int err = check_qp_transition(qp->type, cur, cur, IBV_QP_RATE_LIMIT); err != 0) return err;
  qp->set_extra(&QpExtras::app_rate_kbps, req.rate_limit);
  qp->set_extra(&QpExtras::app_burst_bytes, req.max_burst_sz);
  router_->configure_qp_rate_st(qp, now_ns());
  router_->direct().refresh(qp);
  return 0;
}

int Session::on_query_qp(const proto::Handle& req, UniqueFd*, int, proto::QueryQpRep* rep,
                         ReplyFds*) {
  Qp* qp = find_qp(req.handle);
  if (qp == nullptr) return EINVAL;
  proto::QpAttr& a = rep->attr;
  static_cast<proto::QpCoreAttr&>(a) = qp->attr;
  a.cur_qp_state = qp->attr.qp_state;
  a.port_num = 1;
  a.sq_draining = 0;  // work leaves the send queue as it is taken: SQD is drained at once
  if (const QpExtras* x = qp->extras_if_any()) {
    a.alt_ah_attr = x->alt_ah_attr;
    a.alt_port_num = x->alt_port_num;
    a.alt_timeout = x->alt_timeout;
    a.alt_pkey_index = x->alt_pkey_index;
    a.qkey = x->qkey;
    a.rate_limit = x->app_rate_kbps;
    a.pkey_index = x->pkey_index;
    a.path_mig_state = x->path_mig_state;
    a.en_sqd_async_notify = x->en_sqd_async_notify;
  }
  rep->caps = qp->caps();
  rep->sq_sig_all = qp->sq_sig_all;
  return 0;
}

void Session::destroy_qp(std::unique_ptr<Qp> qp) {
  router_->scheduler().deactivate(qp.get());
  if (router_->remote() != nullptr) router_->remote()->forget_st(qp.get());
  if (HeldRecv* held = qp->held_recv()) let_go_of_held_recv(held, router_->objects());
  // Its own library no longer posts to it (or is gone): no need to wait for it.
  router_->direct().disable(qp.get(), /*wait_for_library=*/false);
  router_->objects().remove_qp(qp->qpn);
  router_->multicast().forget(qp.get());
  router_->flows().forget(qp.get());
  router_->match_rules_changed_st();
  // Type 2 windows bound to it are reached through it only: they go with it, so a later QP
  // given the same number cannot reach them.
  for (auto& [h, mw] : mws_)
    if (mw->binding != nullptr && mw->binding->bound_qpn == qp->qpn)
      unbind_window(router_->objects(), mw.get());
  // The QP it was connected to can no longer execute into it.
  if (Qp* peer = router_->objects().qp_by_qpn(qp->attr.dest_qp_num))
    router_->direct().refresh(peer);
  container_->retired.add(*qp->counters());
  router_->keep_accounting_st(container_);
  if (qp->pd != nullptr) qp->pd->users--;
  if (qp->send_cq != nullptr) qp->send_cq->users--;
  if (qp->recv_cq != nullptr) qp->recv_cq->users--;
  if (qp->srq != nullptr) qp->srq->users--;
  if (const QpRss* rss = qp->rss())
    for (Srq* wq : rss->wqs) wq->users--;
  if (qp->xrc() != nullptr) router_->xrc_domains().release(qp->xrc());
  if (!qp->shm_shared) spare_qp_regions_.give(std::move(qp->shm));
}

int Session::on_destroy_qp(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  if ((req.handle & proto::kOpenedQpBit) != 0) {
    auto q = opened_qps_.take(req.handle);
    if (!q) return EINVAL;
    close_opened_qp(std::move(q));
    return 0;
  }
  Qp* qp = qps_.find(req.handle);
  if (qp == nullptr) return EINVAL;
  if (router_->flows().has_rules(qp)) return EBUSY;  // its flows first, as the kernel demands
  destroy_qp(qps_.take(req.handle));
  return 0;
}

int Session::on_create_srq(const proto::CreateSrqReq& req, UniqueFd*, int, proto::CreateSrqRep* rep,
                           ReplyFds* out) {
  PendingRestore restore;
  const bool restoring = take_restore(&restore);
  const bool wq = req.srq_type == proto::kSrqTypeWq;
  const bool tm = req.srq_type == IBV_SRQT_TM;
  if (req.srq_type != IBV_SRQT_BASIC && req.srq_type != IBV_SRQT_XRC && !wq && !tm)
    return EOPNOTSUPP;
  // Only a basic SRQ is restored: an XRC one's domain, a WQ's RSS tables and a tag list are
  // not (docs/OPERATIONS.md).
  if (restoring && req.srq_type != IBV_SRQT_BASIC) return EOPNOTSUPP;
  Pd* pd = pds_.find(req.pd);
  if (pd == nullptr) return EINVAL;
  if (tm && (req.max_num_tags == 0 || req.max_num_tags > device::kTmMaxNumTags ||
             req.max_ops == 0 || req.max_ops > device::kTmMaxOps))
    return EINVAL;
  XrcDomain* xrc = nullptr;
  Cq* cq = nullptr;
  if (req.srq_type == IBV_SRQT_XRC || wq || tm) {
    cq = cqs_.find(req.cq);
    if (cq == nullptr) return EINVAL;
  }
  if (req.srq_type == IBV_SRQT_XRC && (xrc = find_xrc_domain(req.xrcd)) == nullptr) return EINVAL;
  if (req.max_wr == 0 || req.max_wr > device::kMaxSrqWr || req.max_sge == 0 ||
      req.max_sge > device::kMaxSrqSge)
    return EINVAL;
  if (srqs_.size() >= device::kMaxSrq) return ENOMEM;
  if (int err = router_->check_quota_st(container_, QuotaKind::kSrq, 1); err != 0) return err;
  auto srq = std::make_unique<Srq>();
  srq->owner = this;
  srq->pd = pd;
  srq->xrc = xrc;
  srq->cq = cq;
  srq->wq = wq;
  if (tm) srq->tm = std::make_unique<TagList>(req.max_num_tags);
  uint32_t entries = static_cast<uint32_t>(round_up_pow2(req.max_wr));
  srq->layout = shm::srq_layout(entries, shm::recv_slot_size(req.max_sge));
  // A restored SRQ keeps its region: the receives posted and not yet taken, and whether its
  // limit is still armed. The router goes on from the ring's consumer index.
  if (int err = restoring ? srq->shm.adopt(std::move(restore.fd), srq->layout.total)
                          : srq->shm.create("wharf-srq", srq->layout.total);
      err != 0)
    return err;
  attach_srq_region(srq.get());
  srq->max_sge = req.max_sge;
  if (restoring) {
    srq->ring().resync();
    if (srq->region_limit_armed() && req.srq_limit <= srq->max_wr) srq->set_limit(req.srq_limit);
    adopt_srq_records(srq.get());
  } else {
    srq->records.attach_fresh(srq->shm.data(), srq->layout);
  }
  Srq* raw = restoring ? srqs_.add_at(restore.handle, std::move(srq)) : srqs_.add(std::move(srq));
  if (raw == nullptr) return EEXIST;
  raw->srqn = router_->objects().add_srq(raw);
  pd->users++;
  if (cq != nullptr) cq->users++;
  if (xrc != nullptr) xrc->users++;
  describe_srq(*raw, rep);
  if (!restoring) out->add(raw->shm.fd());
  return 0;
}

// The router's position at the start of the SRQ's ring, and its size, for its region
// (srq->shm, laid out as srq->layout).
void Session::attach_srq_region(Srq* srq) {
  const shm::SrqLayout& l = srq->layout;
  srq->ring_cursor = shm::RingCursor{};
  srq->max_wr = l.entries;
}

void Session::describe_srq(const Srq& srq, proto::CreateSrqRep* rep) {
  rep->srq = srq.handle;
  rep->srqn = srq.srqn;
  rep->entries = srq.layout.entries;
  rep->slot = srq.layout.slot;
  rep->max_wr = srq.max_wr;
  rep->max_sge = srq.max_sge;
}

int Session::on_post_srq_ops(const proto::PostSrqOpsReq& req, UniqueFd*, int,
                             proto::PostSrqOpsRep* rep, ReplyFds*) {
  Srq* srq = srqs_.find(req.srq);
  if (srq == nullptr || srq->tm == nullptr || req.count > proto::kMaxSrqOpsPerCall) return EINVAL;
  TagList& tags = *srq->tm;
  for (; rep->done < req.count; ++rep->done) {
    const proto::SrqOp& op = req.ops[rep->done];
    ibv_wc_opcode wc_op = IBV_WC_TM_SYNC;
    bool ok = true;
    switch (op.opcode) {
      case IBV_WR_TAG_ADD: {
        if (op.num_sge > device::kTmMaxSge) {
          rep->error = EINVAL;
          return 0;
        }
        TaggedBuffer b{op.tag, op.mask, op.recv_wr_id, {}};
        if (op.num_sge != 0) b.sges.push_back(shm::Sge{op.addr, op.length, op.lkey});
        std::optional<uint32_t> handle = tags.add(std::move(b), op.unexpected_cnt);
        if (!handle) {
          rep->error = ENOMEM;
          return 0;
        }
        rep->handles[rep->done] = *handle;
        wc_op = IBV_WC_TM_ADD;
        break;
      }
      case IBV_WR_TAG_DEL:
        ok = tags.remove(op.handle, op.unexpected_cnt);
        wc_op = IBV_WC_TM_DEL;
        break;
      case IBV_WR_TAG_SYNC: tags.sync(op.unexpected_cnt); break;
      default: rep->error = EINVAL; return 0;
    }
    if (!ok || (op.flags & IBV_OPS_SIGNALED) != 0) {
      shm::Cqe c = make_cqe(op.wr_id, ok ? IBV_WC_SUCCESS : IBV_WC_TM_ERR, wc_op, 0);
      if (tags.sync_required(op.unexpected_cnt)) c.wc_flags = IBV_WC_TM_SYNC_REQ;
      post_cqe_st(srq->cq, c, false);
    }
  }
  return 0;
}

int Session::on_modify_wq(const proto::ModifyWqReq& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Srq* wq = srqs_.find(req.wq);
  if (wq == nullptr || !wq->wq ||
      (req.state != IBV_WQS_RESET && req.state != IBV_WQS_RDY && req.state != IBV_WQS_ERR))
    return EINVAL;
  wq->wq_state = req.state;
  return 0;
}

int Session::on_set_qp_rss(const proto::SetQpRssReq& req, UniqueFd*, int, proto::Empty*,
                           ReplyFds*) {
  Qp* qp = qps_.find(req.qp);
  if (qp == nullptr || qp->type != IBV_QPT_RAW_PACKET || qp->send_cq != nullptr ||
      qp->rss() != nullptr || req.log_table_size > proto::kMaxRssTableLog ||
      (req.hash_fields & ~proto::kRssHashFields) != 0)
    return EINVAL;
  auto rss = std::make_unique<QpRss>();
  for (uint32_t i = 0; i < (1u << req.log_table_size); ++i) {
    Srq* wq = srqs_.find(req.wqs[i]);
    if (wq == nullptr || !wq->wq) return EINVAL;
    rss->wqs.push_back(wq);
  }
  rss->hash_fields = req.hash_fields;
  rss->hash_key = req.hash_key;
  for (Srq* wq : rss->wqs) wq->users++;
  qp->extras().rss = std::move(rss);
  return 0;
}

// IBV_SRQ_MAX_WR moves the SRQ to a new region with the receives not yet taken, oldest first
// (EINVAL when more wait than the new size holds, or it is below the limit), as rxe resizes;
// the library posts nothing to it meanwhile. Nothing points into the old region: a receive a
// QP took for a message in parts was copied out (QpExtras::held_recv), a tag-matching SRQ's tagged
// buffers are in its TagList, and this is the router thread.
int Session::on_modify_srq(const proto::ModifySrqReq& req, UniqueFd*, int, proto::CreateSrqRep* rep,
                           ReplyFds* out) {
  Srq* srq = srqs_.find(req.srq);
  if (srq == nullptr || srq->wq) return EINVAL;
  if (req.attr_mask & ~static_cast<uint32_t>(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  const bool resize = (req.attr_mask & IBV_SRQ_MAX_WR) != 0;
  const uint32_t max_wr = resize ? req.max_wr : srq->max_wr;
  const uint32_t limit = (req.attr_mask & IBV_SRQ_LIMIT) ? req.srq_limit : srq->limit;
  if (max_wr == 0 || max_wr > device::kMaxSrqWr || limit > max_wr) return EINVAL;
  if (resize) {
    if (srq->corrupt) return EINVAL;
    if (int err = move_srq_st(srq, static_cast<uint32_t>(round_up_pow2(max_wr))); err != 0)
      return err;
    out->add(srq->shm.fd());
  }
  srq->set_limit(limit);
  describe_srq(*srq, rep);
  return 0;
}

int Session::move_srq_st(Srq* srq, uint32_t entries) {
  srq->ring().resync();  // the receives the express lines claimed are gone from it
  const uint32_t waiting = srq->ring().available();
  if (waiting > srq->layout.entries) return EIO;  // the library broke the ring
  if (waiting > entries) return EINVAL;
  const shm::SrqLayout layout = shm::srq_layout(entries, srq->layout.slot);
  ShmRegion fresh;
  if (int err = fresh.create("wharf-srq", layout.total); err != 0) return err;
  const uint8_t* old_slots = srq->shm.data() + srq->layout.slots_off;
  uint8_t* slots = fresh.data() + layout.slots_off;
  for (uint32_t i = 0; i < waiting; ++i) {
    const uint32_t from = (srq->ring().tail() + i) & (srq->layout.entries - 1);
    memcpy(slots + size_t{i} * layout.slot, old_slots + size_t{from} * layout.slot, layout.slot);
  }
  auto* hdr = reinterpret_cast<shm::RingHeader*>(fresh.data() + layout.ring_off);
  hdr->producer.value.store(waiting, std::memory_order_relaxed);
  srq->records.move_to(fresh.data(), layout);  // the receives claimed and held go along
  srq->shm = std::move(fresh);
  srq->layout = layout;
  attach_srq_region(srq);
  return 0;
}

// The receives a previous router process had claimed from a restored SRQ (its next) and held
// for its QPs' messages, from the records in its region (router/srq_records.h).
void Session::adopt_srq_records(Srq* srq) {
  SrqRecords::Left left = srq->records.adopt(srq->shm.data(), srq->layout);
  if (left.claimed != SrqRecords::kNone) {
    srq->records.read(left.claimed, srq->max_sge, &srq->claimed);
    srq->has_claimed = true;
    srq->claimed_record = left.claimed;
  }
  srq->orphans = std::move(left.held);
}

// Restored QP qp of srq takes back the receive it held, if srq's previous process left one.
void Session::take_orphaned_recv(Srq* srq, Qp* qp) {
  auto it = std::find_if(srq->orphans.begin(), srq->orphans.end(),
                         [qp](const auto& o) { return o.first == qp->qpn; });
  if (it == srq->orphans.end()) return;
  auto held = std::make_unique<HeldRecv>();
  srq->records.read(it->second, srq->max_sge, &held->rw);
  held->srq = srq;
  held->srqn = srq->srqn;
  held->held = true;
  held->record = it->second;
  qp->extras().held_recv = std::move(held);
  srq->orphans.erase(it);
}

int Session::on_query_srq(const proto::Handle& req, UniqueFd*, int, proto::QuerySrqRep* rep,
                          ReplyFds*) {
  Srq* srq = srqs_.find(req.handle);
  if (srq == nullptr) return EINVAL;
  rep->max_wr = srq->max_wr;
  rep->max_sge = srq->max_sge;
  rep->srq_limit = srq->limit;
  return 0;
}

int Session::on_destroy_srq(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Srq* srq = srqs_.find(req.handle);
  if (srq == nullptr) return EINVAL;
  if (srq->users != 0) return EBUSY;
  destroy_srq(srqs_.take(req.handle));
  return 0;
}

void Session::destroy_srq(std::unique_ptr<Srq> srq) {
  router_->objects().remove_srq(srq->srqn);
  srq->pd->users--;
  if (srq->cq != nullptr) srq->cq->users--;
  if (srq->xrc != nullptr) router_->xrc_domains().release(srq->xrc);
}

int Session::on_create_ah(const proto::CreateAhReq& req, UniqueFd*, int, proto::Handle* rep,
                          ReplyFds*) {
  PendingRestore restore;
  const bool restoring = take_restore(&restore);
  Pd* pd = pds_.find(req.pd);
  if (pd == nullptr || !valid_ah_attr(req.attr, ethernet())) return EINVAL;
  if (ahs_.size() >= device::kMaxAh) return ENOMEM;
  auto ah = std::make_unique<Ah>();
  ah->pd = pd;
  ah->attr = req.attr;
  Ah* raw = adopt_ah(std::move(ah), restoring ? std::optional(restore.handle) : std::nullopt);
  if (raw == nullptr) return EEXIST;
  rep->handle = raw->handle;
  return 0;
}

Ah* Session::adopt_ah(std::unique_ptr<Ah> ah, std::optional<uint32_t> at) {
  Pd* pd = ah->pd;
  Ah* raw = at ? ahs_.add_at(*at, std::move(ah)) : ahs_.add(std::move(ah));
  if (raw != nullptr) pd->users++;
  return raw;
}

int Session::on_destroy_ah(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  auto ah = ahs_.take(req.handle);
  if (!ah) return EINVAL;
  ah->pd->users--;
  return 0;
}

int Session::on_register_container(const proto::RegisterContainerReq& req, UniqueFd* fds, int nfds,
                                   proto::RegisterContainerRep* rep, ReplyFds*) {
  if (!may_manage_containers()) return EPERM;
  if (nfds != 1 || !registered_name_.empty()) return EINVAL;
  std::string name = proto::from_wire_name(req.name);
  if (name.empty() || req.vip == 0) return EINVAL;
  struct stat st;
  if (fstat(fds[0].get(), &st) != 0) return EINVAL;
  const std::string tenant = proto::from_wire_name(req.tenant);
  int err = router_->register_container(tenant, proto::from_wire_name(req.network), name, st.st_ino,
                                        req.vip, req.lid, &rep->lid);
  if (err == 0) {
    registered_tenant_ = tenant;
    registered_name_ = name;
  }
  return err;
}

bool Session::ethernet() const { return router_->config().link_layer == IBV_LINK_LAYER_ETHERNET; }

int Session::on_router_info(const proto::Empty&, UniqueFd*, int, proto::RouterInfoRep* rep,
                            ReplyFds*) {
  const std::string& host = router_->config().host_name;
  std::strncpy(rep->host.data(), host.c_str(), rep->host.size() - 1);
  rep->node_guid = router_->config().node_guid;
  rep->link_layer = router_->config().link_layer;
  return 0;
}

int Session::on_unregister_container(const proto::UnregisterContainerReq& req, UniqueFd*, int,
                                     proto::Empty*, ReplyFds*) {
  if (uid_ != 0) return EPERM;
  std::string name = proto::from_wire_name(req.name);
  if (name != registered_name_) return ENOENT;
  router_->unregister_container(registered_tenant_, name);
  registered_name_.clear();
  registered_tenant_.clear();
  return 0;
}

int Session::on_hold_container(const proto::HoldContainerReq& req, UniqueFd* fds, int nfds,
                               proto::RegisterContainerRep* rep, ReplyFds*) {
  if (!may_manage_containers()) return EPERM;
  const std::string sandbox = proto::from_wire_name(req.sandbox);
  const std::string name = proto::from_wire_name(req.name);
  if (nfds != 1 || sandbox.empty() || name.empty() || req.vip == 0) return EINVAL;
  struct stat st;
  // Only a network namespace: the fd stays with the router for the registration's life.
  if (fstat(fds[0].get(), &st) != 0 || ::ioctl(fds[0].get(), NS_GET_NSTYPE) != CLONE_NEWNET)
    return EINVAL;
  return router_->hold_container(sandbox, proto::from_wire_name(req.tenant),
                                 proto::from_wire_name(req.network), name, std::move(fds[0]),
                                 st.st_ino, req.vip, req.lid, &rep->lid);
}

int Session::on_release_container(const proto::SandboxRef& req, UniqueFd*, int, proto::Empty*,
                                  ReplyFds*) {
  if (!may_manage_containers()) return EPERM;
  const std::string sandbox = proto::from_wire_name(req.sandbox);
  if (sandbox.empty()) return EINVAL;
  return router_->release_held_container(sandbox);
}

int Session::on_held_container(const proto::SandboxRef& req, UniqueFd*, int,
                               proto::HeldContainerRep* rep, ReplyFds*) {
  if (!may_manage_containers()) return EPERM;
  const Container* c = router_->held_container(proto::from_wire_name(req.sandbox));
  if (c == nullptr) return ENOENT;
  rep->tenant = proto::to_wire_name<std::tuple_size_v<proto::LongName>>(c->tenant);
  rep->network = proto::to_wire_name<std::tuple_size_v<proto::LongName>>(c->network);
  rep->name = proto::to_wire_name<std::tuple_size_v<proto::LongName>>(c->name);
  rep->vip = c->vip;
  rep->lid = c->lid;
  rep->netns_ino = c->netns_ino;
  return 0;
}

}  // namespace wharf::router
