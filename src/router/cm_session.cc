// rdma_cm requests of one session (proto/cm_messages.h): decode, find the session's own
// channel or id, hand the rest to the router's CmManager.
#include <errno.h>
#include <fcntl.h>
#include <rdma/rdma_cma.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cstring>

#include "proto/qp_cm_step_log.h"
#include "router/cm_manager.h"
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {
namespace {

// Connected ids may carry XRC QPs: an initiator connects to a target, as rdma-core's
// rdma_xclient / rdma_xserver do.
bool valid_port_space(uint16_t ps, uint8_t qp_type) {
  const bool connected = qp_type == IBV_QPT_RC || qp_type == IBV_QPT_UC ||
                         qp_type == IBV_QPT_XRC_SEND || qp_type == IBV_QPT_XRC_RECV;
  switch (ps) {
    case RDMA_PS_TCP: return connected;
    case RDMA_PS_UDP:
    case RDMA_PS_IPOIB: return qp_type == IBV_QPT_UD;
    case RDMA_PS_IB: return connected || qp_type == IBV_QPT_UD;
    default: return false;
  }
}

}  // namespace

CmId* Session::adopt_cm_id(std::unique_ptr<CmId> id) {
  id->owner = this;
  return cm_ids_.add(std::move(id));
}

void Session::destroy_cm_state() {
  CmManager& cm = router_->cm();
  for (auto& [h, id] : cm_ids_) cm.destroy_st(id.get());
  cm_ids_.clear();
  for (auto& [h, ch] : cm_channels_) router_->unwatch_cm_channel_st(ch.get());
  cm_channels_.clear();
}

int Session::on_cm_open(const proto::CmOpenReq& req, UniqueFd*, int, proto::CmOpenRep* rep,
                        ReplyFds*) {
  if (req.resume != 0) {
    if (!router_->resume_key().valid()) return EOPNOTSUPP;
    if (int err = router_->keep_lid_st(container_, req.resume_lid); err != 0) return err;
  }
  if (!cm_open_) {
    cm_open_ = true;
    container_->sessions++;
  }
  rep->vip = container_->vip;
  rep->link_layer = router_->config().link_layer;
  rep->lid = rep->link_layer == IBV_LINK_LAYER_ETHERNET ? 0 : container_->lid;
  rep->gid = container_->gid;
  return 0;
}

// The channel whose router end a library passed (nfds 1), or nullptr: not a SOCK_SEQPACKET
// socket.
std::unique_ptr<CmChannel> Session::cm_channel_of(UniqueFd* fds, int nfds) {
  if (nfds != 1) return nullptr;
  int type = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(fds[0].get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET)
    return nullptr;
  int fl = fcntl(fds[0].get(), F_GETFL);
  if (fl < 0 || fcntl(fds[0].get(), F_SETFL, fl | O_NONBLOCK) != 0) return nullptr;
  auto ch = std::make_unique<CmChannel>();
  ch->owner = this;
  ch->sock = std::move(fds[0]);
  return ch;
}

int Session::on_cm_create_channel(const proto::Empty&, UniqueFd* fds, int nfds, proto::Handle* rep,
                                  ReplyFds*) {
  auto ch = cm_channel_of(fds, nfds);
  if (ch == nullptr) return EINVAL;
  rep->handle = cm_channels_.add(std::move(ch))->handle;
  return 0;
}

int Session::on_cm_restore_channel(const proto::Handle& req, UniqueFd* fds, int nfds, proto::Empty*,
                                   ReplyFds*) {
  auto ch = cm_channel_of(fds, nfds);
  if (ch == nullptr) return EINVAL;
  return cm_channels_.add_at(req.handle, std::move(ch)) != nullptr ? 0 : EEXIST;
}

// The ids the previous router process kept for this process, each on the channel it reported
// to (restored first); one whose channel or handle is not there, or whose record cannot be
// continued, is forgotten (its library reports nothing more for it).
int Session::on_cm_resume(const proto::Empty&, UniqueFd*, int, proto::CmResumeRep* rep, ReplyFds*) {
  CmManager& cm = router_->cm();
  for (const KeptCmIds::Left& l : cm.kept().claim(container_->netns_ino, pid_)) {
    CmChannel* ch = cm_channels_.find(l.id.channel);
    auto fresh = std::make_unique<CmId>();
    fresh->owner = this;
    fresh->channel = ch;
    CmId* id = ch != nullptr ? cm_ids_.add_at(l.id.handle, std::move(fresh)) : nullptr;
    if (id == nullptr) {
      cm.kept().release(l.slot);
      continue;
    }
    ch->users++;
    if (int err = cm.restore_st(id, l.id, l.slot); err != 0) {
      spdlog::warn("pid {}: rdma_cm id {} of the previous process not continued: {}", pid_,
                   l.id.handle, strerror(err));
      cm.destroy_st(id);
      cm_ids_.take(id->handle);
      continue;
    }
    rep->ids++;
  }
  spdlog::info("pid {}: {} rdma_cm id(s) of the previous process continued", pid_, rep->ids);
  return 0;
}

int Session::on_cm_destroy_channel(const proto::Handle& req, UniqueFd*, int, proto::Empty*,
                                   ReplyFds*) {
  CmChannel* ch = cm_channels_.find(req.handle);
  if (ch == nullptr) return EINVAL;
  if (ch->users != 0) return EBUSY;
  router_->unwatch_cm_channel_st(ch);
  cm_channels_.take(req.handle);
  return 0;
}

int Session::on_cm_create_id(const proto::CmCreateIdReq& req, UniqueFd*, int, proto::Handle* rep,
                             ReplyFds*) {
  CmChannel* ch = cm_channels_.find(req.channel);
  if (ch == nullptr || !valid_port_space(req.ps, req.qp_type)) return EINVAL;
  auto id = std::make_unique<CmId>();
  id->channel = ch;
  id->ps = req.ps;
  id->qp_type = req.qp_type;
  ch->users++;
  CmId* made = adopt_cm_id(std::move(id));
  router_->cm().add_st(made);
  rep->handle = made->handle;
  return 0;
}

int Session::on_cm_destroy_id(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  CmId* id = cm_ids_.find(req.handle);
  if (id == nullptr) return EINVAL;
  router_->cm().destroy_st(id);
  cm_ids_.take(req.handle);
  return 0;
}

int Session::on_cm_migrate_id(const proto::CmMigrateIdReq& req, UniqueFd*, int, proto::Empty*,
                              ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  CmChannel* ch = cm_channels_.find(req.channel);
  if (id == nullptr || ch == nullptr) return EINVAL;
  if (id->channel != nullptr) id->channel->users--;
  id->channel = ch;
  ch->users++;
  return 0;
}

int Session::on_cm_bind(const proto::CmBindReq& req, UniqueFd*, int, proto::CmAddrRep* rep,
                        ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  if (id == nullptr) return EINVAL;
  auto addr = CmAddress::from_wire(req.addr);
  if (!addr) return EAFNOSUPPORT;
  if (int err = router_->cm().bind_st(id, *addr); err != 0) return err;
  rep->addr = id->local.to_wire();
  return 0;
}

int Session::on_cm_resolve_addr(const proto::CmResolveAddrReq& req, UniqueFd*, int,
                                proto::CmAddrRep* rep, ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  if (id == nullptr) return EINVAL;
  auto dst = CmAddress::from_wire(req.dst);
  if (!dst) return EAFNOSUPPORT;
  std::optional<CmAddress> src;
  if (req.src.family != proto::kCmAfNone) {
    src = CmAddress::from_wire(req.src);
    if (!src) return EAFNOSUPPORT;
  }
  if (int err = router_->cm().resolve_addr_st(id, src ? &*src : nullptr, *dst, req.timeout_ms);
      err != 0)
    return err;
  rep->addr = id->local.to_wire();
  return 0;
}

int Session::on_cm_join_multicast(const proto::CmBindReq& req, UniqueFd*, int, proto::Empty*,
                                  ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  if (id == nullptr) return EINVAL;
  auto group = CmAddress::from_wire(req.addr);
  if (!group) return EAFNOSUPPORT;
  return router_->cm().join_multicast_st(id, *group);
}

int Session::on_cm_resolve_route(const proto::Handle& req, UniqueFd*, int, proto::Empty*,
                                 ReplyFds*) {
  CmId* id = cm_ids_.find(req.handle);
  return id == nullptr ? EINVAL : router_->cm().resolve_route_st(id);
}

int Session::on_cm_listen(const proto::CmListenReq& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  return id == nullptr ? EINVAL : router_->cm().listen_st(id, req.backlog);
}

int Session::on_cm_connect(const proto::CmConnectReq& req, UniqueFd*, int, proto::Empty*,
                           ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  if (id == nullptr) return EINVAL;
  if (int err = apply_qp_steps(req.qp); err != 0) return err;
  return router_->cm().connect_st(id, req.param);
}

int Session::on_cm_accept(const proto::CmConnectReq& req, UniqueFd*, int, proto::Empty*,
                          ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  if (id == nullptr) return EINVAL;
  if (int err = apply_qp_steps(req.qp); err != 0) return err;
  return router_->cm().accept_st(id, req.param);
}

int Session::on_cm_reject(const proto::CmRejectReq& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  if (id == nullptr) return EINVAL;
  return router_->cm().reject_st(id, req.private_data.data(), req.private_data_len);
}

int Session::on_cm_establish(const proto::CmStepReq& req, UniqueFd*, int, proto::Empty*,
                             ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  if (id == nullptr) return EINVAL;
  if (int err = apply_qp_steps(req.qp); err != 0) return err;
  return router_->cm().establish_st(id);
}

int Session::on_cm_disconnect(const proto::CmStepReq& req, UniqueFd*, int, proto::Empty*,
                              ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  if (id == nullptr) return EINVAL;
  if (int err = apply_qp_steps(req.qp); err != 0) return err;
  return router_->cm().disconnect_st(id);
}

int Session::apply_qp_steps(const proto::CmQpSteps& steps) {
  if (steps.count == 0) return 0;
  if (steps.count > proto::kCmMaxQpSteps) return EINVAL;
  // The QP belongs to the library's verbs connection, another session of this process.
  Qp* qp = router_->objects().qp_by_qpn(steps.qpn);
  if (qp == nullptr || qp->owner->pid() != pid_ || qp->owner->container() != container_)
    return EINVAL;
  for (uint32_t i = 0; i < steps.count; ++i) {
    const proto::QpStep& s = steps.steps[i];
    if (int err = qp->owner->modify_qp(qp, s.attr_mask, s.attr); err != 0) return err;
    proto::note_cm_step(qp->cm_steps(), s);
  }
  return 0;
}

int Session::on_cm_set_option(const proto::CmSetOptionReq& req, UniqueFd*, int, proto::Empty*,
                              ReplyFds*) {
  CmId* id = cm_ids_.find(req.id);
  return id == nullptr ? EINVAL : router_->cm().set_option_st(id, req.option, req.value);
}

}  // namespace wharf::router
