// Sessions that outlive their router process (issue #23): a library that kept its regions and
// requests restores its objects in a new router under their old handles and numbers, and the
// router refuses what the library could not have had (a forged proof, a number another holds,
// a region that is not a sealed memfd of the right size, a restore in a fresh session).
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "proto/router_client.h"
#include "router/resume_key.h"
#include "router/router.h"
#include "shm/layout.h"
#include "support/temp_socket.h"

namespace wharf::router {
namespace {

// What one library session holds, as the library keeps it to resume.
struct Held {
  UniqueFd async_theirs, page, doorbell;
  uint32_t pd = 0, cq = 0, qp = 0, qpn = 0, mr = 0, key = 0;
  uint64_t qp_proof = 0, mr_proof = 0;
  UniqueFd cq_region, qp_region, memfd;
  proto::CreateQpReq qp_req;
  proto::RegMrReq mr_req;
};

class RouterResumeTest : public ::testing::Test {
 protected:
  void SetUp() override { start_router(); }
  void TearDown() override { stop_router(); }

  void start_router() {
    RouterConfig cfg;
    cfg.socket_path = sock_.path();
    cfg.resume_key_path = sock_.key_path();
    cfg.direct_path = false;
    router_ = std::make_unique<Router>(cfg);
    ASSERT_EQ(router_->start(), 0);
    thread_ = std::thread([this] { router_->run(false); });
  }
  void stop_router() {
    if (router_ == nullptr) return;
    router_->stop();
    thread_.join();
    router_.reset();
  }
  // The router process dies and another starts on the same socket and key.
  void restart_router() {
    stop_router();
    ::unlink(sock_.path().c_str());
    start_router();
  }

  // A fresh session with a PD, a CQ, an RC QP moved to INIT and a registration.
  void open_session(proto::RouterClient* c, Held* h) {
    ASSERT_EQ(c->connect(sock_.path().c_str()), 0);
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
    UniqueFd mine(sv[0]);
    h->async_theirs.reset(sv[1]);
    const int theirs = sv[1];
    proto::HelloRep hello;
    UniqueFd got[2];
    ASSERT_EQ(c->call(proto::Op::kHello, proto::HelloReq{}, &theirs, 1, &hello, got, 2), 0);
    h->page = std::move(got[0]);
    h->doorbell = std::move(got[1]);
    proto::Handle pd;
    ASSERT_EQ(c->call(proto::Op::kAllocPd, proto::Empty{}, nullptr, 0, &pd), 0);
    h->pd = pd.handle;
    proto::CreateCqRep cq;
    ASSERT_EQ(
        c->call(proto::Op::kCreateCq, proto::CreateCqReq{8, 0}, nullptr, 0, &cq, &h->cq_region, 1),
        0);
    h->cq = cq.cq;
    h->qp_req.pd = h->pd;
    h->qp_req.send_cq = h->qp_req.recv_cq = h->cq;
    h->qp_req.qp_type = IBV_QPT_RC;
    h->qp_req.caps = {4, 4, 1, 1, 0};
    proto::CreateQpRep qp;
    ASSERT_EQ(c->call(proto::Op::kCreateQp, h->qp_req, nullptr, 0, &qp, &h->qp_region, 1), 0);
    h->qp = qp.qp;
    h->qpn = qp.qpn;
    h->qp_proof = qp.proof;
    EXPECT_NE(qp.proof, 0u);
    ASSERT_EQ(modify_to_init(c, h->qp), 0);

    h->memfd.reset(memfd_create("resume-test", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    ASSERT_EQ(ftruncate(h->memfd.get(), 4096), 0);
    ASSERT_EQ(fcntl(h->memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK), 0);
    h->mr_req.pd = h->pd;
    h->mr_req.access = IBV_ACCESS_LOCAL_WRITE;
    h->mr_req.addr = h->mr_req.iova = h->mr_req.mapped_start = 0x100000;
    h->mr_req.length = h->mr_req.mapped_len = 4096;
    const int fd = h->memfd.get();
    proto::RegMrRep mr;
    ASSERT_EQ(c->call(proto::Op::kRegMr, h->mr_req, &fd, 1, &mr), 0);
    h->mr = mr.handle;
    h->key = mr.lkey;
    h->mr_proof = mr.proof;
  }

  static int modify_to_init(proto::RouterClient* c, uint32_t qp) {
    proto::ModifyQpReq m;
    m.qp = qp;
    m.attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    m.attr.qp_state = IBV_QPS_INIT;
    m.attr.port_num = 1;
    proto::Empty none;
    return c->call(proto::Op::kModifyQp, m, nullptr, 0, &none);
  }

  // Opens a session (open_session), restarts the router under it, and says Hello on c as
  // that session resumed.
  void resume_after_restart(Held* h, proto::RouterClient* c) {
    proto::RouterClient old;
    open_session(&old, h);
    restart_router();
    ASSERT_EQ(resume_hello(c, *h), 0);
  }
  static void restore_pd(proto::RouterClient* c, const Held& h) {
    proto::Handle pd;
    ASSERT_EQ(restore_next(c, h.pd, 0, 0), 0);
    ASSERT_EQ(c->call(proto::Op::kAllocPd, proto::Empty{}, nullptr, 0, &pd), 0);
    EXPECT_EQ(pd.handle, h.pd);
  }

  // Connects c and says Hello as h's session resumed.
  int resume_hello(proto::RouterClient* c, const Held& h) {
    if (int err = c->connect(sock_.path().c_str()); err != 0) return err;
    proto::HelloReq req;
    req.resume = 1;
    const int fds[3] = {h.async_theirs.get(), h.page.get(), h.doorbell.get()};
    proto::HelloRep rep;
    return c->call(proto::Op::kHello, req, fds, 3, &rep);
  }
  static int restore_next(proto::RouterClient* c, uint32_t handle, uint32_t number, uint64_t proof,
                          int fd = -1) {
    proto::Empty none;
    return c->call(proto::Op::kRestoreNext, proto::RestoreNextReq{handle, number, proof}, &fd,
                   fd >= 0 ? 1 : 0, &none);
  }
  // Restores h's PD, CQ and registration; 0 or the first errno.
  static int restore_pd_cq_mr(proto::RouterClient* c, const Held& h) {
    proto::Handle pd;
    proto::CreateCqRep cq;
    proto::RegMrRep mr;
    const int memfd = h.memfd.get();
    int err = restore_next(c, h.pd, 0, 0);
    if (err == 0) err = c->call(proto::Op::kAllocPd, proto::Empty{}, nullptr, 0, &pd);
    if (err == 0 && pd.handle != h.pd) err = EPROTO;
    if (err == 0) err = restore_next(c, h.cq, 0, 0, h.cq_region.get());
    if (err == 0) err = c->call(proto::Op::kCreateCq, proto::CreateCqReq{8, 0}, nullptr, 0, &cq);
    if (err == 0 && cq.cq != h.cq) err = EPROTO;
    if (err == 0) err = restore_next(c, h.mr, h.key, h.mr_proof);
    if (err == 0) err = c->call(proto::Op::kRegMr, h.mr_req, &memfd, 1, &mr);
    if (err == 0 && (mr.handle != h.mr || mr.lkey != h.key)) err = EPROTO;
    return err;
  }
  static int restore_qp(proto::RouterClient* c, const Held& h, uint64_t proof) {
    proto::CreateQpRep rep;
    int err = restore_next(c, h.qp, h.qpn, proof, h.qp_region.get());
    if (err == 0) err = c->call(proto::Op::kCreateQp, h.qp_req, nullptr, 0, &rep);
    if (err == 0 && (rep.qp != h.qp || rep.qpn != h.qpn)) err = EPROTO;
    return err;
  }
  static uint32_t qp_state(proto::RouterClient* c, uint32_t qp) {
    proto::QueryQpRep rep;
    EXPECT_EQ(c->call(proto::Op::kQueryQp, proto::Handle{qp}, nullptr, 0, &rep), 0);
    return rep.attr.qp_state;
  }

  test_support::TempSocket sock_;
  std::unique_ptr<Router> router_;
  std::thread thread_;
};

TEST_F(RouterResumeTest, ARestartedRouterTakesBackTheSessionsObjectsUnderTheirNumbers) {
  proto::RouterClient old;
  Held h;
  open_session(&old, &h);
  // What the library had written into its QP's send ring stays there.
  auto* ring = static_cast<uint8_t*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, h.qp_region.get(), 0));
  ASSERT_NE(ring, MAP_FAILED);
  ring[100] = 0x5a;
  restart_router();
  proto::Handle none;
  EXPECT_EQ(old.call(proto::Op::kAllocPd, proto::Empty{}, nullptr, 0, &none), ENODEV);

  proto::RouterClient c;
  ASSERT_EQ(resume_hello(&c, h), 0);
  ASSERT_EQ(restore_pd_cq_mr(&c, h), 0);
  ASSERT_EQ(restore_qp(&c, h, h.qp_proof), 0);
  EXPECT_EQ(qp_state(&c, h.qp), IBV_QPS_RESET);  // until the library replays its modifies
  ASSERT_EQ(modify_to_init(&c, h.qp), 0);
  EXPECT_EQ(qp_state(&c, h.qp), IBV_QPS_INIT);
  EXPECT_EQ(ring[100], 0x5a);
  munmap(ring, 4096);
  // An address handle comes back under its handle too.
  proto::CreateAhReq ah;
  ah.pd = h.pd;
  ah.attr.dlid = 1;
  ah.attr.port_num = 1;
  proto::Handle ah_rep;
  ASSERT_EQ(restore_next(&c, 7, 0, 0), 0);
  ASSERT_EQ(c.call(proto::Op::kCreateAh, ah, nullptr, 0, &ah_rep), 0);
  EXPECT_EQ(ah_rep.handle, 7u);
  // New objects go on above the restored handles.
  proto::Handle pd;
  ASSERT_EQ(c.call(proto::Op::kAllocPd, proto::Empty{}, nullptr, 0, &pd), 0);
  EXPECT_GT(pd.handle, h.pd);
}

TEST_F(RouterResumeTest, AForgedProofOrATakenNumberIsRefusedAndTheSessionGoesOn) {
  Held h;
  proto::RouterClient c;
  resume_after_restart(&h, &c);
  ASSERT_EQ(restore_pd_cq_mr(&c, h), 0);
  EXPECT_EQ(restore_qp(&c, h, h.qp_proof ^ 1), EACCES);
  // A number proven but held already (here: restored once) is not given twice.
  ASSERT_EQ(restore_qp(&c, h, h.qp_proof), 0);
  Held twin = {};
  twin.qp = h.qp + 1;
  twin.qpn = h.qpn;
  twin.qp_req = h.qp_req;
  twin.qp_region.reset(fcntl(h.qp_region.get(), F_DUPFD_CLOEXEC, 0));
  EXPECT_EQ(restore_qp(&c, twin, h.qp_proof), EADDRINUSE);
  // A registration's key likewise.
  const int memfd = h.memfd.get();
  proto::RegMrRep mr;
  ASSERT_EQ(restore_next(&c, h.mr + 1, h.key, h.mr_proof ^ 1), 0);
  EXPECT_EQ(c.call(proto::Op::kRegMr, h.mr_req, &memfd, 1, &mr), EACCES);
  ASSERT_EQ(restore_next(&c, h.mr + 1, h.key, h.mr_proof), 0);
  EXPECT_EQ(c.call(proto::Op::kRegMr, h.mr_req, &memfd, 1, &mr), EADDRINUSE);
  EXPECT_EQ(qp_state(&c, h.qp), IBV_QPS_RESET);
}

TEST_F(RouterResumeTest, AProofIsNoGoodForAnotherNumberOrFromAFreshSession) {
  proto::RouterClient old;
  Held h;
  open_session(&old, &h);
  restart_router();
  // Restoring is for resumed sessions only.
  proto::RouterClient fresh;
  Held other;
  open_session(&fresh, &other);
  EXPECT_EQ(restore_next(&fresh, h.qp, h.qpn, h.qp_proof, h.qp_region.get()), EPERM);
  // The QPN's proof does not prove the key, nor another QPN.
  proto::RouterClient c;
  ASSERT_EQ(resume_hello(&c, h), 0);
  Held moved = {};
  moved.qp = h.qp;
  moved.qpn = h.qpn ^ 0x10000;
  moved.qp_req = h.qp_req;
  moved.qp_region.reset(fcntl(h.qp_region.get(), F_DUPFD_CLOEXEC, 0));
  restore_pd(&c, h);
  EXPECT_EQ(restore_qp(&c, moved, h.qp_proof), EACCES);
}

TEST_F(RouterResumeTest, ARegionThatIsNotTheSealedMemfdItWasIsRefused) {
  Held h;
  proto::RouterClient c;
  resume_after_restart(&h, &c);
  restore_pd(&c, h);
  // Unsealed: the container could shrink it under the router.
  UniqueFd plain(memfd_create("resume-test", MFD_CLOEXEC));
  ASSERT_EQ(ftruncate(plain.get(), static_cast<off_t>(shm::cq_layout(8).total)), 0);
  proto::CreateCqRep cq;
  ASSERT_EQ(restore_next(&c, h.cq, 0, 0, plain.get()), 0);
  EXPECT_EQ(c.call(proto::Op::kCreateCq, proto::CreateCqReq{8, 0}, nullptr, 0, &cq), EINVAL);
  // The right region for another size.
  ASSERT_EQ(restore_next(&c, h.cq, 0, 0, h.cq_region.get()), 0);
  EXPECT_EQ(c.call(proto::Op::kCreateCq, proto::CreateCqReq{64, 0}, nullptr, 0, &cq), EINVAL);
  ASSERT_EQ(restore_next(&c, h.cq, 0, 0, h.cq_region.get()), 0);
  EXPECT_EQ(c.call(proto::Op::kCreateCq, proto::CreateCqReq{8, 0}, nullptr, 0, &cq), 0);
  // A doorbell that is not an eventfd, in another resumed Hello.
  proto::RouterClient d;
  ASSERT_EQ(d.connect(sock_.path().c_str()), 0);
  proto::HelloReq req;
  req.resume = 1;
  const int fds[3] = {h.async_theirs.get(), h.page.get(), h.page.get()};
  proto::HelloRep rep;
  EXPECT_EQ(d.call(proto::Op::kHello, req, fds, 3, &rep), EINVAL);
}

// A shared receive queue comes back under its handle with its region (the receives posted
// and not yet taken) and its limit, armed still if it was, and not armed again if it fired
// (the region says disarmed); a tag-matching one is not restored.
TEST_F(RouterResumeTest, AnSrqComesBackWithItsReceivesAndItsLimitAsItWas) {
  proto::RouterClient old;
  Held h;
  open_session(&old, &h);
  proto::CreateSrqReq req;
  req.pd = h.pd;
  req.max_wr = 8;
  req.max_sge = 1;
  proto::CreateSrqRep armed, fired;
  UniqueFd armed_region, fired_region;
  ASSERT_EQ(old.call(proto::Op::kCreateSrq, req, nullptr, 0, &armed, &armed_region, 1), 0);
  ASSERT_EQ(old.call(proto::Op::kCreateSrq, req, nullptr, 0, &fired, &fired_region, 1), 0);
  const shm::SrqLayout layout = shm::srq_layout(armed.entries, armed.slot);
  auto* base = static_cast<uint8_t*>(
      mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, armed_region.get(), 0));
  ASSERT_NE(base, MAP_FAILED);
  base[layout.slots_off] = 0x77;  // a receive the library wrote
  proto::CreateSrqRep rep;
  ASSERT_EQ(old.call(proto::Op::kModifySrq, proto::ModifySrqReq{armed.srq, IBV_SRQ_LIMIT, 0, 3},
                     nullptr, 0, &rep),
            0);
  restart_router();

  proto::RouterClient c;
  ASSERT_EQ(resume_hello(&c, h), 0);
  ASSERT_EQ(restore_pd_cq_mr(&c, h), 0);
  // A tag-matching SRQ's list was the router's alone: not restored.
  proto::CreateSrqReq tm = req;
  tm.srq_type = IBV_SRQT_TM;
  tm.cq = h.cq;
  tm.max_num_tags = tm.max_ops = 4;
  ASSERT_EQ(restore_next(&c, armed.srq, 0, 0, armed_region.get()), 0);
  EXPECT_EQ(c.call(proto::Op::kCreateSrq, tm, nullptr, 0, &rep), EOPNOTSUPP);
  req.srq_limit = 3;  // the limit the library last armed, on both
  for (const auto* srq : {&armed, &fired}) {
    const UniqueFd& region = srq == &armed ? armed_region : fired_region;
    ASSERT_EQ(restore_next(&c, srq->srq, 0, 0, region.get()), 0);
    ASSERT_EQ(c.call(proto::Op::kCreateSrq, req, nullptr, 0, &rep), 0);
    EXPECT_EQ(rep.srq, srq->srq);
    proto::QuerySrqRep q;
    ASSERT_EQ(c.call(proto::Op::kQuerySrq, proto::Handle{srq->srq}, nullptr, 0, &q), 0);
    EXPECT_EQ(q.srq_limit, srq == &armed ? 3u : 0u);
  }
  EXPECT_EQ(base[layout.slots_off], 0x77);
  munmap(base, layout.total);
}

// A bug this suite found: the router's destructor cleared its sessions in place, and a session
// ending with registrations wrote to the pages of sessions already freed (ASan: heap use after
// free; here, at times, a crash).
TEST_F(RouterResumeTest, ARouterStoppedWhileSessionsHoldRegistrationsEndsCleanly) {
  proto::RouterClient c[4];
  Held h[4];
  for (int i = 0; i < 4; ++i) open_session(&c[i], &h[i]);
  stop_router();
}

// After a restart, connections are accepted in any order, each given a LID at once; the LID a
// resuming session (or wharf-run) claims back may be one such: its holder, which no session
// said Hello in, takes another (a bug this found: two resuming processes refused each other's
// LID for good).
TEST(RouterResumeLidTest, AClaimedLidIsTakenFromAContainerNobodyWasToldOf) {
  RouterConfig cfg;
  cfg.lid_base = 10;
  cfg.lid_count = 4;
  Router router(cfg);
  Container* a = router.container_for_netns(1001);
  Container* b = router.container_for_netns(1002);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const uint16_t a_lid = a->lid;
  const uint16_t b_lid = b->lid;
  ASSERT_EQ(router.keep_lid_st(a, b_lid), 0);
  ASSERT_EQ(router.keep_lid_st(b, a_lid), 0);
  EXPECT_EQ(a->lid, b_lid);
  EXPECT_EQ(b->lid, a_lid);
  // Once a session said Hello in a container, its LID is known and stays.
  b->sessions = 1;
  EXPECT_EQ(router.keep_lid_st(a, a_lid), EADDRINUSE);
  EXPECT_EQ(b->lid, a_lid);
  // Outside the router's range: refused.
  Container* c = router.container_for_netns(1003);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(router.keep_lid_st(c, 99), EADDRINUSE);
  b->sessions = 0;
}

TEST(ResumeKeyTest, IsMadeOnceKeptPrivateAndRefusedWhenOthersCanReadIt) {
  test_support::TempSocket dir;
  const std::string path = dir.key_path();
  ResumeKey a, b;
  ASSERT_EQ(a.load_or_create(path), 0);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(b.load_or_create(path), 0);
  EXPECT_EQ(a.proof(ProofKind::kQpn, 0x10005, 42), b.proof(ProofKind::kQpn, 0x10005, 42));
  EXPECT_NE(a.proof(ProofKind::kQpn, 0x10005, 42), a.proof(ProofKind::kMrKey, 0x10005, 42));
  EXPECT_NE(a.proof(ProofKind::kQpn, 0x10005, 42), a.proof(ProofKind::kQpn, 0x10005, 43));
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  ResumeKey c;
  EXPECT_EQ(c.load_or_create(path), EINVAL);
  EXPECT_EQ(c.proof(ProofKind::kQpn, 0x10005, 42), 0u);
}

}  // namespace
}  // namespace wharf::router
