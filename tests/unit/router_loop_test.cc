// The router's event loop: stopping, hostile control input on a real socket, and what
// control requests change in the QPs the data path then serves (application rate limits).
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "proto/datagram.h"
#include "proto/messages.h"
#include "router/router.h"
#include "shm/posted_marks.h"
#include "support/shared_mapping.h"
#include "support/temp_socket.h"

namespace wharf::router {
namespace {

using test_support::TempSocket;

// Runs fn in a child process; true if it exited 0 within `seconds`.
template <class F>
bool finishes_within(int seconds, F fn) {
  pid_t pid = fork();
  if (pid == 0) {
    fn();
    _exit(0);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

// Regression: a stop request consumed by the periodic control poll used to be followed by
// an unbounded epoll_wait, so wharfd ignored SIGTERM now and then.
TEST(RouterLoopTest, StopConsumedByControlPollNeverLetsTheLoopSleep) {
  TempSocket sock;
  RouterConfig cfg;
  cfg.socket_path = sock.path();
  EXPECT_TRUE(finishes_within(5, [&] {
    Router r(cfg);
    if (r.start() != 0) _exit(2);
    r.stop();
    r.poll_control(0);       // consumes the wake-up, as the loop's periodic poll does
    r.sleep_until_work(-1);  // no deadline: only the stop may end it
  }));
}

// The socket admits its owner and one group only (issue #19, docs/SECURITY.md): mode 0660,
// the router's group unless one is configured.
TEST(RouterLoopTest, TheSocketIsForItsOwnerAndItsGroupOnly) {
  for (const int64_t gid : {int64_t{-1}, int64_t{12345}}) {
    TempSocket sock;
    RouterConfig cfg;
    cfg.socket_path = sock.path();
    cfg.socket_gid = gid;
    Router r(cfg);
    ASSERT_EQ(r.start(), 0);
    struct stat st {};
    ASSERT_EQ(stat(sock.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0660u);
    EXPECT_EQ(st.st_gid, gid < 0 ? getegid() : static_cast<gid_t>(gid));
  }
}

TEST(RouterLoopTest, StopFromAnotherThreadEndsAnIdleRouter) {
  TempSocket sock;
  RouterConfig cfg;
  cfg.socket_path = sock.path();
  cfg.spin_ns = 0;
  EXPECT_TRUE(finishes_within(5, [&] {
    Router r(cfg);
    if (r.start() != 0) _exit(2);
    std::thread t([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      r.stop();
    });
    r.run(false);
    t.join();
  }));
}

class RawClient {
 public:
  explicit RawClient(const std::string& path) {
    fd_.reset(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, path.c_str());
    for (int i = 0; i < 200; ++i) {
      if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "cannot connect";
  }
  void send_raw(const uint8_t* p, size_t n, const int* fds = nullptr, int nfds = 0) {
    ASSERT_EQ(proto::send_datagram(fd_.get(), p, n, fds, nfds, 0), 0);
  }
  template <class Req>
  void send(proto::Op op, const Req& req, uint32_t seq = 1, const int* fds = nullptr,
            int nfds = 0) {
    uint8_t buf[proto::kMaxMessage];
    proto::Header h;
    h.op = static_cast<uint16_t>(op);
    h.seq = seq;
    size_t n = proto::encode(h, buf, sizeof(buf));
    n += proto::encode(req, buf + n, sizeof(buf) - n);
    send_raw(buf, n, fds, nfds);
  }
  // Reply status, or -1 if the connection closed, -2 on timeout.
  int status(UniqueFd* fds = nullptr, int max_fds = 0) {
    proto::Empty none;
    return reply(&none, /*check_body=*/false, fds, max_fds);
  }
  // As status(), and a successful reply's body decoded into *rep (-4 if it does not decode).
  template <class Rep>
  int reply(Rep* rep, bool check_body = true, UniqueFd* fds = nullptr, int max_fds = 0) {
    timeval tv{5, 0};
    setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    uint8_t buf[proto::kMaxMessage];
    UniqueFd got[proto::kMaxFds];
    int n = 0;
    ssize_t len = proto::recv_datagram(fd_.get(), buf, sizeof(buf), got, proto::kMaxFds, &n, 0);
    if (len == 0) return -1;
    if (len < 0) return -2;
    proto::Header h;
    if (!proto::decode(buf, proto::kHeaderSize, &h)) return -3;
    for (int i = 0; i < n && i < max_fds; ++i) fds[i] = std::move(got[i]);
    if (h.status == 0 && check_body &&
        !proto::decode(buf + proto::kHeaderSize, static_cast<size_t>(len) - proto::kHeaderSize,
                       rep))
      return -4;
    return static_cast<int>(h.status);
  }
  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
};

class RouterControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.socket_path = sock_.path();
    router_ = std::make_unique<Router>(cfg_);
    ASSERT_EQ(router_->start(), 0);
    thread_ = std::thread([this] { router_->run(false); });
  }
  void TearDown() override {
    router_->stop();
    thread_.join();
    router_.reset();
  }
  void hello(RawClient& c) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
    async_.reset(sv[0]);
    c.send(proto::Op::kHello, proto::HelloReq{}, 1, &sv[1], 1);
    close(sv[1]);
    UniqueFd fds[2];
    ASSERT_EQ(c.status(fds, 2), 0);
    page_fd_ = std::move(fds[0]);
    doorbell_ = std::move(fds[1]);
  }
  // A PD, a CQ and an RC QP in session c (after hello), the QP taken to RTR; its QPN.
  // Its peer QPN 0x123 is nobody's: nothing here sends.
  // rep and memfd, when given, receive the reply and the QP's memfd.
  uint32_t make_rtr_qp(RawClient& c, proto::CreateQpRep* rep_out = nullptr,
                       UniqueFd* memfd = nullptr) {
    c.send(proto::Op::kAllocPd, proto::Empty{});
    EXPECT_EQ(c.status(), 0);
    c.send(proto::Op::kCreateCq, proto::CreateCqReq{16, 0});
    EXPECT_EQ(c.status(), 0);
    proto::CreateQpReq q;
    q.pd = q.send_cq = q.recv_cq = 1;
    q.qp_type = IBV_QPT_RC;
    q.caps.max_send_wr = q.caps.max_recv_wr = 4;
    q.caps.max_send_sge = q.caps.max_recv_sge = 1;
    c.send(proto::Op::kCreateQp, q);
    proto::CreateQpRep rep;
    EXPECT_EQ(c.reply(&rep, true, memfd, memfd != nullptr ? 1 : 0), 0);
    qp_ = rep.qp;
    if (rep_out != nullptr) *rep_out = rep;
    proto::ModifyQpReq m;
    m.qp = rep.qp;
    m.attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    m.attr.qp_state = IBV_QPS_INIT;
    m.attr.port_num = 1;
    c.send(proto::Op::kModifyQp, m);
    EXPECT_EQ(c.status(), 0);
    m.attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    m.attr.qp_state = IBV_QPS_RTR;
    m.attr.ah_attr.port_num = 1;
    m.attr.path_mtu = IBV_MTU_4096;
    m.attr.dest_qp_num = 0x123;
    c.send(proto::Op::kModifyQp, m);
    EXPECT_EQ(c.status(), 0);
    return rep.qpn;
  }
  // RTR -> RTS of the QP make_rtr_qp made, with `rate_limit_kbps` unless it is unset.
  int to_rts(RawClient& c, std::optional<uint32_t> rate_limit_kbps) {
    proto::ModifyQpReq m;
    m.qp = qp_;
    m.attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    m.attr.qp_state = IBV_QPS_RTS;
    m.attr.timeout = 14;
    m.attr.retry_cnt = m.attr.rnr_retry = 7;
    if (rate_limit_kbps) {
      m.attr_mask |= IBV_QP_RATE_LIMIT;
      m.attr.rate_limit = *rate_limit_kbps;
    }
    c.send(proto::Op::kModifyQp, m);
    return c.status();
  }
  // Runs fn(qp) on the router thread for the QP numbered qpn, and waits for it.
  template <class F>
  void with_qp(uint32_t qpn, F fn) {
    std::promise<void> done;
    router_->post([&] {
      Qp* qp = router_->objects().qp_by_qpn(qpn);
      EXPECT_NE(qp, nullptr);
      if (qp != nullptr) fn(qp);
      done.set_value();
    });
    done.get_future().wait();
  }
  // When qp, with a full bucket of `depth` bytes and nothing else in its way, may send again
  // after one message of depth + `debt` bytes at now, relative to now (ns).
  uint64_t pace_after_debt(Qp* qp, uint64_t depth, uint64_t debt) {
    const uint64_t now = now_ns();
    EXPECT_TRUE(router_->scheduler().admit(qp, depth + debt, now));
    EXPECT_FALSE(router_->scheduler().admit(qp, 1, now));
    return qp->work().paced_until_ns - now;
  }

  // Whether pred(), run on the router thread, holds within 5 s.
  template <class F>
  bool eventually(F pred) {
    for (int i = 0; i < 500; ++i) {
      std::promise<bool> held;
      router_->post([&] { held.set_value(pred()); });
      if (held.get_future().get()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  TempSocket sock_;
  RouterConfig cfg_;
  std::unique_ptr<Router> router_;
  std::thread thread_;
  UniqueFd async_;
  UniqueFd page_fd_;   // the session's context page (after hello)
  UniqueFd doorbell_;  // and its doorbell
  uint32_t qp_ = 0;    // the handle of the QP make_rtr_qp made
};

TEST_F(RouterControlTest, RequestsBeforeHelloAreRefused) {
  RawClient c(cfg_.socket_path);
  c.send(proto::Op::kAllocPd, proto::Empty{});
  EXPECT_EQ(c.status(), EPROTO);
}

TEST_F(RouterControlTest, TruncatedAndOversizedBodiesAreInvalid) {
  RawClient c(cfg_.socket_path);
  hello(c);
  proto::CreateQpReq req;
  uint8_t buf[proto::kMaxMessage];
  proto::Header h;
  h.op = static_cast<uint16_t>(proto::Op::kCreateQp);
  size_t hn = proto::encode(h, buf, sizeof(buf));
  size_t bn = proto::encode(req, buf + hn, sizeof(buf) - hn);
  for (size_t cut = 0; cut < bn; cut += 7) {
    c.send_raw(buf, hn + cut);
    EXPECT_EQ(c.status(), EINVAL) << "body cut at " << cut;
  }
  buf[hn + bn] = 0;
  c.send_raw(buf, hn + bn + 1);  // one trailing byte
  EXPECT_EQ(c.status(), EINVAL);
}

TEST_F(RouterControlTest, UnknownOpcodeIsNotSupported) {
  RawClient c(cfg_.socket_path);
  hello(c);
  c.send(static_cast<proto::Op>(999), proto::Empty{});
  EXPECT_EQ(c.status(), EOPNOTSUPP);
}

TEST_F(RouterControlTest, HandlesThatDoNotExistAreInvalid) {
  RawClient c(cfg_.socket_path);
  hello(c);
  c.send(proto::Op::kDeallocPd, proto::Handle{12345});
  EXPECT_EQ(c.status(), EINVAL);
  proto::CreateQpReq q;
  q.pd = 1;
  q.send_cq = 7;
  q.recv_cq = 7;
  q.qp_type = IBV_QPT_RC;
  c.send(proto::Op::kCreateQp, q);
  EXPECT_EQ(c.status(), EINVAL);
  c.send(proto::Op::kDestroyCq, proto::Handle{0});
  EXPECT_EQ(c.status(), EINVAL);
}

TEST_F(RouterControlTest, AnotherSessionsHandlesAreNotVisible) {
  RawClient a(cfg_.socket_path);
  hello(a);
  a.send(proto::Op::kAllocPd, proto::Empty{});
  ASSERT_EQ(a.status(), 0);  // handle 1 in session a
  RawClient b(cfg_.socket_path);
  hello(b);
  b.send(proto::Op::kDeallocPd, proto::Handle{1});
  EXPECT_EQ(b.status(), EINVAL);
  a.send(proto::Op::kDeallocPd, proto::Handle{1});
  EXPECT_EQ(a.status(), 0);
}

TEST_F(RouterControlTest, BadMagicClosesOnlyThatSession) {
  RawClient bad(cfg_.socket_path);
  uint8_t junk[32] = {1, 2, 3};
  bad.send_raw(junk, sizeof(junk));
  EXPECT_EQ(bad.status(), -1);
  RawClient good(cfg_.socket_path);
  hello(good);
  good.send(proto::Op::kAllocPd, proto::Empty{});
  EXPECT_EQ(good.status(), 0);
}

TEST_F(RouterControlTest, MemoryRegionWithUnsealedOrShortMemfdIsRejected) {
  RawClient c(cfg_.socket_path);
  hello(c);
  c.send(proto::Op::kAllocPd, proto::Empty{});
  ASSERT_EQ(c.status(), 0);
  UniqueFd memfd(memfd_create("t", MFD_ALLOW_SEALING));
  ASSERT_EQ(ftruncate(memfd.get(), 4096), 0);
  proto::RegMrReq r;
  r.pd = 1;
  r.access = IBV_ACCESS_LOCAL_WRITE;
  r.addr = 0x10000;
  r.length = 8192;
  r.iova = r.addr;
  r.mapped_start = 0x10000;
  r.mapped_len = 4096;
  int fd = memfd.get();
  c.send(proto::Op::kRegMr, r, 1, &fd, 1);
  EXPECT_EQ(c.status(), EINVAL);  // not sealed against shrinking
  ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  r.mapped_len = 8192;  // longer than the file
  c.send(proto::Op::kRegMr, r, 1, &fd, 1);
  EXPECT_EQ(c.status(), EINVAL);
  r.mapped_len = 4096;
  r.mapped_start = 0x10001;  // not page aligned
  c.send(proto::Op::kRegMr, r, 1, &fd, 1);
  EXPECT_EQ(c.status(), EINVAL);
  r.mapped_start = 0x10000;
  c.send(proto::Op::kRegMr, r, 1, &fd, 1);
  EXPECT_EQ(c.status(), 0);
}

TEST_F(RouterControlTest, RegisteringAContainerNeedsANetnsDescriptor) {
  RawClient c(cfg_.socket_path);
  proto::RegisterContainerReq r;
  std::strcpy(r.name.data(), "c1");
  r.vip = 0xc6120005;
  c.send(proto::Op::kRegisterContainer, r);
  EXPECT_EQ(c.status(), EINVAL);
}

// Regression: a registration session whose own namespace is the one it registered used to
// free that container twice on disconnect (use-after-free, caught by the ASan run).
TEST_F(RouterControlTest, RegisteringTheCallersOwnNamespaceThenLeavingIsSafe) {
  if (geteuid() != 0) GTEST_SKIP() << "registration needs root";
  {
    RawClient reg(cfg_.socket_path);
    UniqueFd ns(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(ns.valid());
    proto::RegisterContainerReq r;
    std::strcpy(r.name.data(), "self");
    r.vip = 0xc6120063;
    int fd = ns.get();
    reg.send(proto::Op::kRegisterContainer, r, 1, &fd, 1);
    ASSERT_EQ(reg.status(), 0);
  }  // disconnect without Hello
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  RawClient c(cfg_.socket_path);
  hello(c);
  c.send(proto::Op::kAllocPd, proto::Empty{});
  EXPECT_EQ(c.status(), 0);
}

constexpr uint64_t kNsPerS = 1'000'000'000;

TEST_F(RouterControlTest, AppRateLimitFromModifyQpPacesTheQpAndIsQueried) {
  RawClient c(cfg_.socket_path);
  hello(c);
  const uint32_t qpn = make_rtr_qp(c);
  proto::ModifyQpReq m;
  m.qp = qp_;
  m.attr_mask = IBV_QP_RATE_LIMIT;  // RTR -> RTR: not a state a limit is set in
  m.attr.rate_limit = 8000;
  c.send(proto::Op::kModifyQp, m);
  EXPECT_EQ(c.status(), EINVAL);
  // 8000 kbit/s = 1 MB/s, default depth (64 KiB, the minimum): a 1 MB debt takes 1 s.
  ASSERT_EQ(to_rts(c, 8000), 0);
  with_qp(qpn, [&](Qp* qp) {
    ASSERT_TRUE(qp->rate_limited());
    EXPECT_EQ(pace_after_debt(qp, TokenBucket::kMinDepthBytes, 1'000'000), kNsPerS);
  });
  c.send(proto::Op::kQueryQp, proto::Handle{qp_});
  proto::QueryQpRep q;
  ASSERT_EQ(c.reply(&q), 0);
  EXPECT_EQ(q.attr.rate_limit, 8000u);
  // RTS -> RTS: 0 lifts it.
  m.attr.rate_limit = 0;
  c.send(proto::Op::kModifyQp, m);
  EXPECT_EQ(c.status(), 0);
  with_qp(qpn, [](Qp* qp) { EXPECT_FALSE(qp->rate_limited()); });
}

// A QP keeps what few QPs use (an alternate path, a rate limit, ...) apart, made at first use
// (Qp::extras()): an idle QP that uses none of it costs the router no more.
TEST_F(RouterControlTest, AnAlternatePathIsKeptApartAndReportedAsSet) {
  RawClient c(cfg_.socket_path);
  hello(c);
  const uint32_t qpn = make_rtr_qp(c);
  ASSERT_EQ(to_rts(c, std::nullopt), 0);
  with_qp(qpn, [](Qp* qp) { EXPECT_EQ(qp->extras_if_any(), nullptr); });
  c.send(proto::Op::kQueryQp, proto::Handle{qp_});
  proto::QueryQpRep q;
  ASSERT_EQ(c.reply(&q), 0);
  EXPECT_EQ(q.attr.alt_timeout, 0);
  EXPECT_EQ(q.attr.alt_ah_attr.dlid, 0);

  proto::ModifyQpReq m;
  m.qp = qp_;
  m.attr_mask = IBV_QP_ALT_PATH;  // RTS -> RTS
  m.attr.alt_ah_attr.dlid = 0x42;
  m.attr.alt_ah_attr.sl = 3;
  m.attr.alt_ah_attr.port_num = 1;
  m.attr.alt_port_num = 1;
  m.attr.alt_timeout = 17;
  m.attr.alt_pkey_index = 0;
  c.send(proto::Op::kModifyQp, m);
  ASSERT_EQ(c.status(), 0);
  with_qp(qpn, [](Qp* qp) { EXPECT_NE(qp->extras_if_any(), nullptr); });
  c.send(proto::Op::kQueryQp, proto::Handle{qp_});
  ASSERT_EQ(c.reply(&q), 0);
  EXPECT_EQ(q.attr.alt_ah_attr.dlid, 0x42);
  EXPECT_EQ(q.attr.alt_ah_attr.sl, 3);
  EXPECT_EQ(q.attr.alt_port_num, 1);
  EXPECT_EQ(q.attr.alt_timeout, 17);
  EXPECT_EQ(q.attr.timeout, 14);  // the primary path's, as to_rts set it
  EXPECT_EQ(q.attr.qp_state, IBV_QPS_RTS);
}

// The attributes few QPs set (Q_Key, P_Key index, migration state, SQD notification, the
// application's rate limit) are kept in the extras, made only for a value other than 0, and
// reported as set; the port and the current state are reported without being kept.
TEST_F(RouterControlTest, AttributesFewQpsSetAreKeptApartAndReportedAsSet) {
  RawClient c(cfg_.socket_path);
  hello(c);
  const uint32_t qpn = make_rtr_qp(c);  // INIT with P_Key index 0 and port 1
  ASSERT_EQ(to_rts(c, 0), 0);           // a rate limit of 0: none
  with_qp(qpn, [](Qp* qp) { EXPECT_EQ(qp->extras_if_any(), nullptr); });
  c.send(proto::Op::kQueryQp, proto::Handle{qp_});
  proto::QueryQpRep q;
  ASSERT_EQ(c.reply(&q), 0);
  EXPECT_EQ(q.attr.port_num, 1);
  EXPECT_EQ(q.attr.cur_qp_state, IBV_QPS_RTS);
  EXPECT_EQ(q.attr.pkey_index, 0);
  EXPECT_EQ(q.attr.rate_limit, 0u);

  proto::ModifyQpReq m;
  m.qp = qp_;
  m.attr_mask = IBV_QP_PATH_MIG_STATE | IBV_QP_RATE_LIMIT;  // RTS -> RTS
  m.attr.path_mig_state = IBV_MIG_REARM;
  m.attr.rate_limit = 8000;
  c.send(proto::Op::kModifyQp, m);
  ASSERT_EQ(c.status(), 0);
  m.attr_mask = IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY;
  m.attr.qp_state = IBV_QPS_SQD;
  m.attr.en_sqd_async_notify = 1;
  c.send(proto::Op::kModifyQp, m);
  ASSERT_EQ(c.status(), 0);
  with_qp(qpn, [](Qp* qp) { EXPECT_NE(qp->extras_if_any(), nullptr); });
  c.send(proto::Op::kQueryQp, proto::Handle{qp_});
  ASSERT_EQ(c.reply(&q), 0);
  EXPECT_EQ(q.attr.qp_state, IBV_QPS_SQD);
  EXPECT_EQ(q.attr.cur_qp_state, IBV_QPS_SQD);
  EXPECT_EQ(q.attr.path_mig_state, IBV_MIG_REARM);
  EXPECT_EQ(q.attr.en_sqd_async_notify, 1);
  EXPECT_EQ(q.attr.rate_limit, 8000u);
  EXPECT_EQ(q.attr.port_num, 1);
  EXPECT_EQ(q.attr.timeout, 14);  // kept in the record, as to_rts set it
}

TEST_F(RouterControlTest, ModifyQpRateLimitTakesABurstAsDepthAndRefusesWhatMlx5Refuses) {
  RawClient c(cfg_.socket_path);
  hello(c);
  const uint32_t qpn = make_rtr_qp(c);
  c.send(proto::Op::kModifyQpRateLimit, proto::ModifyQpRateLimitReq{qp_, 16000, 1000, 0, 0});
  EXPECT_EQ(c.status(), EINVAL);  // RTR
  ASSERT_EQ(to_rts(c, std::nullopt), 0);
  c.send(proto::Op::kModifyQpRateLimit, proto::ModifyQpRateLimitReq{qp_, 0, 1000, 0, 0});
  EXPECT_EQ(c.status(), EINVAL);  // a burst without a rate
  c.send(proto::Op::kModifyQpRateLimit, proto::ModifyQpRateLimitReq{qp_, 0, 0, 1024, 0});
  EXPECT_EQ(c.status(), EINVAL);  // a packet size without a rate
  c.send(proto::Op::kModifyQpRateLimit, proto::ModifyQpRateLimitReq{qp_ + 1, 16000, 0, 0, 0});
  EXPECT_EQ(c.status(), EINVAL);  // no such QP
  with_qp(qpn, [](Qp* qp) { EXPECT_FALSE(qp->rate_limited()); });
  // 16000 kbit/s = 2 MB/s with a 1000-byte depth: a 2 MB debt takes 1 s.
  c.send(proto::Op::kModifyQpRateLimit, proto::ModifyQpRateLimitReq{qp_, 16000, 1000, 1024, 0});
  ASSERT_EQ(c.status(), 0);
  with_qp(qpn, [&](Qp* qp) { EXPECT_EQ(pace_after_debt(qp, 1000, 2'000'000), kNsPerS); });
  // Changing the limit again does not refill the bucket: the debt stays.
  c.send(proto::Op::kModifyQpRateLimit, proto::ModifyQpRateLimitReq{qp_, 32000, 0, 0, 0});
  ASSERT_EQ(c.status(), 0);
  with_qp(qpn, [&](Qp* qp) {
    uint64_t unused = 0;
    EXPECT_FALSE(qp->rate()->ready(now_ns(), &unused));
  });
  c.send(proto::Op::kQueryQp, proto::Handle{qp_});
  proto::QueryQpRep q;
  ASSERT_EQ(c.reply(&q), 0);
  EXPECT_EQ(q.attr.rate_limit, 32000u);
}

TEST_F(RouterControlTest, AQpIsPacedByTheTighterOfItsAppLimitAndItsPolicy) {
  RawClient c(cfg_.socket_path);
  hello(c);
  const uint32_t qpn = make_rtr_qp(c);
  ASSERT_EQ(to_rts(c, std::nullopt), 0);
  ContainerPolicy policy;
  policy.qp_rate_bps = 4'000'000;  // 0.5 MB/s
  with_qp(qpn, [&](Qp* qp) { router_->apply_policy_st(qp->owner->container(), policy); });
  // The application asks for more than the operator allows: the policy holds.
  c.send(proto::Op::kModifyQpRateLimit, proto::ModifyQpRateLimitReq{qp_, 8000, 0, 0, 0});
  ASSERT_EQ(c.status(), 0);
  with_qp(qpn, [&](Qp* qp) {
    EXPECT_EQ(pace_after_debt(qp, TokenBucket::kMinDepthBytes, 500'000), kNsPerS);
  });
  // The operator lifts its limit: the application's 1 MB/s remains.
  with_qp(qpn, [&](Qp* qp) {
    router_->apply_policy_st(qp->owner->container(), ContainerPolicy{});
    EXPECT_TRUE(qp->rate_limited());
  });
  // Back to a policy of 0.5 MB/s and a 1000-byte burst; the application lifts its own limit
  // (the bucket, emptied by now, starts full under the new policy).
  policy.burst_bytes = 1000;
  c.send(proto::Op::kModifyQpRateLimit, proto::ModifyQpRateLimitReq{qp_, 0, 0, 0, 0});
  ASSERT_EQ(c.status(), 0);
  with_qp(qpn, [&](Qp* qp) {
    EXPECT_FALSE(qp->rate_limited());
    router_->apply_policy_st(qp->owner->container(), policy);
    EXPECT_EQ(pace_after_debt(qp, 1000, 500'000), kNsPerS);
  });
  // The application asks for less, 2000 kbit/s = 250 kB/s, with a deeper burst than the
  // operator's: its rate, the operator's depth. Reset first, as the debt would carry over.
  proto::ModifyQpReq m;
  m.qp = qp_;
  m.attr_mask = IBV_QP_STATE;
  m.attr.qp_state = IBV_QPS_RESET;
  c.send(proto::Op::kModifyQp, m);
  ASSERT_EQ(c.status(), 0);
  with_qp(qpn, [&](Qp* qp) {
    EXPECT_EQ(qp->app_rate_kbps(), 0u);  // RESET drops the application's limit
    router_->apply_policy_st(qp->owner->container(), ContainerPolicy{});
    router_->apply_policy_st(qp->owner->container(), policy);
  });
  m.attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  m.attr.qp_state = IBV_QPS_INIT;
  m.attr.port_num = 1;
  c.send(proto::Op::kModifyQp, m);
  ASSERT_EQ(c.status(), 0);
  m.attr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  m.attr.qp_state = IBV_QPS_RTR;
  m.attr.ah_attr.port_num = 1;
  m.attr.path_mtu = IBV_MTU_4096;
  m.attr.dest_qp_num = 0x123;
  c.send(proto::Op::kModifyQp, m);
  ASSERT_EQ(c.status(), 0);
  ASSERT_EQ(to_rts(c, std::nullopt), 0);
  c.send(proto::Op::kModifyQpRateLimit, proto::ModifyQpRateLimitReq{qp_, 2000, 100'000, 0, 0});
  ASSERT_EQ(c.status(), 0);
  with_qp(qpn, [&](Qp* qp) { EXPECT_EQ(pace_after_debt(qp, 1000, 250'000), kNsPerS); });
}

}  // namespace
}  // namespace wharf::router

namespace wharf::router {
namespace {

// The data path looks at a QP when its library marks it posted, not on every pass: an idle
// QP costs a pass nothing, and work put in its ring waits for its mark.
// Regression (found by wharf-scala, issue #21): every data-path pass walked every connection,
// so 1,000 containers' registration sessions, which never post, slowed all traffic by a
// third. A pass looks at the context pages of Hello'd sessions only, while they are open.
TEST_F(RouterControlTest, APassWatchesTheContextPagesOfHelloedSessionsOnly) {
  auto watched = [&] {
    std::promise<size_t> n;
    router_->post([&] { n.set_value(router_->watched_context_pages_st()); });
    return n.get_future().get();
  };
  std::vector<std::unique_ptr<RawClient>> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(std::make_unique<RawClient>(cfg_.socket_path));
  auto a = std::make_unique<RawClient>(cfg_.socket_path);
  hello(*a);
  RawClient b(cfg_.socket_path);
  hello(b);
  EXPECT_EQ(watched(), 2u);
  a.reset();
  EXPECT_TRUE(eventually([&] { return router_->watched_context_pages_st() == 1; }));
  idle.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(watched(), 1u);
  b.send(proto::Op::kAllocPd, proto::Empty{});  // the survivor is still served
  EXPECT_EQ(b.status(), 0);
}

TEST_F(RouterControlTest, TheDataPathLooksAtAQpWhenItsLibraryMarksItPosted) {
  RawClient c(cfg_.socket_path);
  hello(c);
  proto::CreateQpRep rep;
  UniqueFd qp_fd;
  const uint32_t qpn = make_rtr_qp(c, &rep, &qp_fd);
  ASSERT_TRUE(qp_fd.valid());
  ASSERT_EQ(to_rts(c, std::nullopt), 0);  // activated: looked at once, then left
  EXPECT_TRUE(eventually([&] { return router_->scheduler().size() == 0; }));

  test_support::SharedMapping page(page_fd_.get(), shm::kContextPageSize);
  const shm::QpLayout l = shm::qp_layout(rep.sq_entries, rep.sq_slot, rep.rq_entries, rep.rq_slot);
  test_support::SharedMapping region(qp_fd.get(), l.total);
  ASSERT_NE(page.data, nullptr);
  ASSERT_NE(region.data, nullptr);
  shm::RingProducer sq(reinterpret_cast<shm::RingHeader*>(region.data + l.sq_ring_off),
                       region.data + l.sq_slots_off, l.sq_entries, l.sq_slot);
  shm::RingStatus st;
  uint8_t* slot = sq.reserve(&st);
  ASSERT_NE(slot, nullptr);
  shm::SendWqe w{};
  w.wr_id = 7;
  w.opcode = IBV_WR_SEND;
  w.flags = shm::kWqeSignaled;
  std::memcpy(slot, &w, sizeof(w));
  sq.commit();
  // Published but not marked: no pass takes it.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  with_qp(qpn, [&](Qp* qp) {
    EXPECT_FALSE(qp->busy);
    EXPECT_EQ(qp->sq().available(), 1u);
    EXPECT_EQ(qp->work_under_way, nullptr);
    EXPECT_EQ(router_->scheduler().qps_with_work(), 0u);
  });
  // Marked (and the doorbell rung, as the library does): the router executes it. Its peer
  // QP is nobody's, so the SEND waits for its retry timer, and the QP stays looked at.
  auto* ctx = reinterpret_cast<shm::ContextPage*>(page.data);
  if (shm::mark_posted_and_check_sleep(ctx, rep.posted_mark)) {
    const uint64_t one = 1;
    ASSERT_EQ(write(doorbell_.get(), &one, sizeof(one)), 8);
  }
  EXPECT_TRUE(eventually([&] {
    Qp* qp = router_->objects().qp_by_qpn(qpn);
    return qp->work().wait_until_ns != 0 && qp->busy;
  }));
  // Its wait is kept in a record from the router's pool, which idle QPs do not hold; when
  // its retries run out (7 x 67 ms) it fails, flushes, leaves the busy list and gives the
  // record back.
  with_qp(qpn, [&](Qp* qp) {
    EXPECT_NE(qp->work_under_way, nullptr);
    EXPECT_EQ(router_->scheduler().qps_with_work(), 1u);
  });
  EXPECT_TRUE(eventually([&] {
    Qp* qp = router_->objects().qp_by_qpn(qpn);
    return qp->state() == IBV_QPS_ERR && !qp->busy && qp->work_under_way == nullptr &&
           router_->scheduler().qps_with_work() == 0;
  }));
}

// Regression: ibv_resize_cq was served before the data path ran the work requests already
// posted to the CQ's QPs (a sleeping router woken by the request serves it first), so it
// counted too few completions and shrank the CQ under them: rdma-core's test_resize_cq saw
// the resize succeed, and the router then overran the CQ.
TEST_F(RouterControlTest, ResizingACqCountsTheCompletionsOfWorkAlreadyPosted) {
  RawClient c(cfg_.socket_path);
  hello(c);
  test_support::SharedMapping page(page_fd_.get(), shm::kContextPageSize);
  ASSERT_NE(page.data, nullptr);
  auto* ctx = reinterpret_cast<shm::ContextPage*>(page.data);
  // Two QPs completing on CQ 1.
  std::vector<proto::CreateQpRep> reps(2);
  std::vector<std::unique_ptr<test_support::SharedMapping>> regions;
  for (proto::CreateQpRep& rep : reps) {
    UniqueFd qp_fd;
    make_rtr_qp(c, &rep, &qp_fd);
    ASSERT_EQ(to_rts(c, std::nullopt), 0);
    const shm::QpLayout l =
        shm::qp_layout(rep.sq_entries, rep.sq_slot, rep.rq_entries, rep.rq_slot);
    regions.push_back(std::make_unique<test_support::SharedMapping>(qp_fd.get(), l.total));
    ASSERT_NE(regions.back()->data, nullptr);
  }
  // Once the router sleeps (it said so, and its loop stopped turning), each QP gets a work
  // request of an opcode no QP has, which completes in error in the next pass, and is marked
  // posted without the doorbell: two completions due, where the CQ is resized to one, and
  // only the resize request wakes the router.
  ASSERT_TRUE(eventually([&] {
    const uint64_t turns = router_->loop_turns();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return ctx->router_sleeping.load() != 0 && router_->loop_turns() == turns;
  }));
  for (size_t i = 0; i < reps.size(); ++i) {
    const proto::CreateQpRep& rep = reps[i];
    const shm::QpLayout l =
        shm::qp_layout(rep.sq_entries, rep.sq_slot, rep.rq_entries, rep.rq_slot);
    uint8_t* region = regions[i]->data;
    shm::RingProducer sq(reinterpret_cast<shm::RingHeader*>(region + l.sq_ring_off),
                         region + l.sq_slots_off, l.sq_entries, l.sq_slot);
    shm::RingStatus st;
    uint8_t* slot = sq.reserve(&st);
    ASSERT_NE(slot, nullptr);
    shm::SendWqe w{};
    w.wr_id = 1;
    w.opcode = 0xff;
    w.flags = shm::kWqeSignaled;
    std::memcpy(slot, &w, sizeof(w));
    sq.commit();
    shm::mark_posted_and_check_sleep(ctx, rep.posted_mark);
  }
  c.send(proto::Op::kResizeCq, proto::ResizeCqReq{1, 1});
  EXPECT_EQ(c.status(), EINVAL);
}

// A pacing time is a deadline while it is ahead: the loop spins for one within 2 ms (a
// sleep lasts whole milliseconds and may wake far later: CI saw a 1 Gbit/s limit give
// 0.044 Gbit/s), sleeps until a later one, and ignores one that passed (regression: a QP
// paced once kept a pacing time that had passed, counted as due now: the router never
// slept again).
TEST_F(RouterControlTest, APacingTimeIsADeadlineWhileItIsAhead) {
  RawClient c(cfg_.socket_path);
  hello(c);
  const uint32_t qpn = make_rtr_qp(c);
  ASSERT_EQ(to_rts(c, 8000), 0);
  with_qp(qpn, [&](Qp* qp) {
    const uint64_t now = now_ns();
    router_->scheduler().work(qp).paced_until_ns = now + 5'000'000;
    router_->scheduler().activate(qp);  // looked at in the next pass, as after a post
    EXPECT_EQ(router_->next_wake_st(now).timeout_ms, 6);
    EXPECT_FALSE(router_->next_wake_st(now).pacing_soon);
    EXPECT_EQ(router_->next_wake_st(now + 4'000'000).timeout_ms, 2);
    EXPECT_TRUE(router_->next_wake_st(now + 3'500'000).pacing_soon);
    EXPECT_EQ(router_->next_wake_st(now + 5'000'000).timeout_ms, -1);
    EXPECT_FALSE(router_->next_wake_st(now + 5'000'000).pacing_soon);
  });
}

}  // namespace
}  // namespace wharf::router
