// XRC domains as a session opens and closes them (ibv_open_xrcd, ibv_close_xrcd), and targets
// it opens (ibv_open_qp). The rest of XRC lives with the objects it extends: target and
// initiator QPs and XRC SRQs in control.cc, execution in datapath.cc.
#include <errno.h>
#include <sys/stat.h>

#include "proto/device.h"
#include "router/router.h"
#include "router/session.h"

namespace wharf::router {

int Session::on_open_xrcd(const proto::OpenXrcdReq& req, UniqueFd* fds, int nfds,
                          proto::Handle* rep, ReplyFds*) {
  if (nfds > 1) return EINVAL;
  if (xrcds_.size() >= device::kMaxXrcd) return ENOMEM;
  // The file is the application's: the router learns only which one it is.
  struct stat st {};
  const bool has_file = nfds == 1;
  if (has_file && fstat(fds[0].get(), &st) != 0) return EINVAL;
  int err = 0;
  XrcDomain* d =
      router_->xrc_domains().open(container_, has_file, st.st_dev, st.st_ino, req.oflags, &err);
  if (d == nullptr) return err;
  auto x = std::make_unique<Xrcd>();
  x->domain = d;
  rep->handle = xrcds_.add(std::move(x))->handle;
  return 0;
}

int Session::on_close_xrcd(const proto::Handle& req, UniqueFd*, int, proto::Empty*, ReplyFds*) {
  Xrcd* x = xrcds_.find(req.handle);
  if (x == nullptr) return EINVAL;
  if (int err = router_->xrc_domains().close(x->domain); err != 0) return err;
  xrcds_.take(req.handle);
  return 0;
}

XrcDomain* Session::find_xrc_domain(uint32_t h) const {
  Xrcd* x = xrcds_.find(h);
  return x == nullptr ? nullptr : x->domain;
}

int Session::on_open_qp(const proto::OpenQpReq& req, UniqueFd*, int, proto::Handle* rep,
                        ReplyFds*) {
  XrcDomain* d = find_xrc_domain(req.xrcd);
  Qp* qp = router_->objects().qp_by_qpn(req.qpn);
  if (d == nullptr || qp == nullptr || qp->type != IBV_QPT_XRC_RECV || qp->xrc() != d)
    return EINVAL;
  if (opened_qps_.size() >= device::kMaxQp) return ENOMEM;
  auto q = std::make_unique<OpenedQp>();
  q->qpn = req.qpn;
  q->domain = d;
  d->users++;
  rep->handle = opened_qps_.add(std::move(q))->handle;
  return 0;
}

Qp* Session::find_qp(uint32_t h) const {
  if ((h & proto::kOpenedQpBit) == 0) return qps_.find(h);
  const OpenedQp* q = opened_qps_.find(h);
  if (q == nullptr) return nullptr;
  Qp* qp = router_->objects().qp_by_qpn(q->qpn);
  return qp != nullptr && qp->type == IBV_QPT_XRC_RECV && qp->xrc() == q->domain ? qp : nullptr;
}

void Session::close_opened_qp(std::unique_ptr<OpenedQp> q) {
  router_->xrc_domains().release(q->domain);
}

}  // namespace wharf::router
