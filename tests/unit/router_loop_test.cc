// The router's event loop: stopping, and hostile control input on a real socket.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "proto/datagram.h"
#include "proto/messages.h"
#include "router/router.h"

namespace wharf::router {
namespace {

// A socket path in a fresh directory, removed (with the socket) when the test ends.
class TempSocket {
 public:
  TempSocket() {
    char tmpl[] = "/tmp/wharf-unit.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~TempSocket() {
    unlink(path().c_str());
    rmdir(dir_.c_str());
  }
  std::string path() const { return dir_ + "/r.sock"; }

 private:
  std::string dir_;
};

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
    r.poll_control(0);  // consumes the wake-up, as the loop's periodic poll does
    r.sleep_until_work();
  }));
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
  }
  TempSocket sock_;
  RouterConfig cfg_;
  std::unique_ptr<Router> router_;
  std::thread thread_;
  UniqueFd async_;
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

}  // namespace
}  // namespace wharf::router
