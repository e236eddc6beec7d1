// Tests for proto/datagram.h over socketpair(AF_UNIX, SOCK_SEQPACKET): payload and descriptor
// passing, descriptor limits, truncation (-EMSGSIZE without leaking descriptors), shutdown.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "proto/datagram.h"
#include "proto/messages.h"

namespace wharf::proto {
namespace {

// Open descriptors of this process (the directory's own descriptor counts in every call).
int open_fd_count() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

class DatagramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    a_.reset(sv[0]);
    b_.reset(sv[1]);
  }

  // A memfd holding `content`, to pass and read back through the received copy.
  static UniqueFd make_memfd(const std::string& content) {
    UniqueFd fd(memfd_create("wharf-datagram-test", MFD_CLOEXEC));
    EXPECT_TRUE(fd.valid());
    EXPECT_EQ(pwrite(fd.get(), content.data(), content.size(), 0),
              static_cast<ssize_t>(content.size()));
    return fd;
  }
  static std::string read_all(int fd, size_t n) {
    std::string s(n, '\0');
    ssize_t got = pread(fd, s.data(), n, 0);
    s.resize(got < 0 ? 0 : static_cast<size_t>(got));
    return s;
  }
  static std::vector<uint8_t> payload(size_t n, uint8_t seed) {
    std::vector<uint8_t> p(n);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
    return p;
  }
  // Receives with the room a peer normally has; returns the byte count or -errno.
  ssize_t receive(std::vector<uint8_t>* buf, UniqueFd* fds, int* nfds, int max_fds = kMaxFds,
                  int flags = 0) {
    return recv_datagram(b_.get(), buf->data(), buf->size(), fds, max_fds, nfds, flags);
  }

  UniqueFd a_, b_;
};

class DatagramFdCountTest : public DatagramTest, public ::testing::WithParamInterface<int> {};

TEST_P(DatagramFdCountTest, DeliversPayloadAndUsableDescriptors) {
  const int n = GetParam();
  std::vector<UniqueFd> originals;
  std::vector<int> raw;
  for (int i = 0; i < n; ++i) {
    originals.push_back(make_memfd("file #" + std::to_string(i)));
    raw.push_back(originals.back().get());
  }
  const std::vector<uint8_t> sent = payload(kHeaderSize + 20, static_cast<uint8_t>(n));
  ASSERT_EQ(send_datagram(a_.get(), sent.data(), sent.size(), raw.data(), n, 0), 0);

  std::vector<uint8_t> buf(kMaxMessage);
  UniqueFd fds[kMaxFds];
  int nfds = -1;
  ASSERT_EQ(receive(&buf, fds, &nfds), static_cast<ssize_t>(sent.size()));
  buf.resize(sent.size());
  EXPECT_EQ(buf, sent);
  ASSERT_EQ(nfds, n);
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(fds[i].valid());
    EXPECT_NE(fds[i].get(), raw[i]);  // a new descriptor for the same open file
    const std::string want = "file #" + std::to_string(i);
    EXPECT_EQ(read_all(fds[i].get(), want.size()), want);
    // Writes through the received descriptor are seen through the original.
    ASSERT_EQ(pwrite(fds[i].get(), "X", 1, 0), 1);
    EXPECT_EQ(read_all(raw[i], 1), "X");
    EXPECT_EQ(fcntl(fds[i].get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  }
  for (int i = n; i < kMaxFds; ++i) EXPECT_FALSE(fds[i].valid());
}

INSTANTIATE_TEST_SUITE_P(ZeroToMax, DatagramFdCountTest, ::testing::Range(0, kMaxFds + 1),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::to_string(p.param) + "fds";
                         });

TEST_F(DatagramTest, LargestMessageWithMostDescriptorsRoundTrips) {
  std::vector<UniqueFd> originals;
  std::vector<int> raw;
  for (int i = 0; i < kMaxFds; ++i) {
    originals.push_back(make_memfd("x"));
    raw.push_back(originals.back().get());
  }
  const std::vector<uint8_t> sent = payload(kMaxMessage, 3);
  ASSERT_EQ(send_datagram(a_.get(), sent.data(), sent.size(), raw.data(), kMaxFds, 0), 0);
  std::vector<uint8_t> buf(kMaxMessage);
  UniqueFd fds[kMaxFds];
  int nfds = 0;
  ASSERT_EQ(receive(&buf, fds, &nfds), static_cast<ssize_t>(kMaxMessage));
  EXPECT_EQ(buf, sent);
  EXPECT_EQ(nfds, kMaxFds);
}

TEST_F(DatagramTest, SendRejectsMoreThanMaxFdsAndSendsNothing) {
  std::vector<UniqueFd> originals;
  std::vector<int> raw;
  for (int i = 0; i < kMaxFds + 1; ++i) {
    originals.push_back(make_memfd("x"));
    raw.push_back(originals.back().get());
  }
  const uint8_t byte = 1;
  EXPECT_EQ(send_datagram(a_.get(), &byte, 1, raw.data(), kMaxFds + 1, 0), EINVAL);
  std::vector<uint8_t> buf(kMaxMessage);
  UniqueFd fds[kMaxFds];
  int nfds = 0;
  EXPECT_EQ(receive(&buf, fds, &nfds, kMaxFds, MSG_DONTWAIT), -EAGAIN);
}

TEST_F(DatagramTest, PreservesDatagramBoundaries) {
  const std::vector<uint8_t> first = payload(5, 1), second = payload(kHeaderSize, 2),
                             third = payload(300, 3);
  for (const auto* p : {&first, &second, &third}) {
    ASSERT_EQ(send_datagram(a_.get(), p->data(), p->size(), nullptr, 0, 0), 0);
  }
  for (const auto* p : {&first, &second, &third}) {
    std::vector<uint8_t> buf(kMaxMessage);
    UniqueFd fds[kMaxFds];
    int nfds = -1;
    ASSERT_EQ(receive(&buf, fds, &nfds), static_cast<ssize_t>(p->size()));
    buf.resize(p->size());
    EXPECT_EQ(buf, *p);
    EXPECT_EQ(nfds, 0);
  }
}

TEST_F(DatagramTest, TruncatedPayloadIsEmsgsizeAndClosesItsDescriptors) {
  std::vector<UniqueFd> originals;
  std::vector<int> raw;
  for (int i = 0; i < 3; ++i) {
    originals.push_back(make_memfd("x"));
    raw.push_back(originals.back().get());
  }
  const std::vector<uint8_t> sent = payload(100, 9);
  ASSERT_EQ(send_datagram(a_.get(), sent.data(), sent.size(), raw.data(), 3, 0), 0);
  const int before = open_fd_count();
  std::vector<uint8_t> small(10);
  UniqueFd fds[kMaxFds];
  int nfds = -1;
  EXPECT_EQ(receive(&small, fds, &nfds), -EMSGSIZE);
  EXPECT_EQ(nfds, 0);
  for (const UniqueFd& fd : fds) EXPECT_FALSE(fd.valid());
  EXPECT_EQ(open_fd_count(), before);

  // The rest of the truncated datagram is gone; the next one arrives whole.
  const std::vector<uint8_t> next = payload(7, 4);
  ASSERT_EQ(send_datagram(a_.get(), next.data(), next.size(), nullptr, 0, 0), 0);
  std::vector<uint8_t> buf(kMaxMessage);
  ASSERT_EQ(receive(&buf, fds, &nfds), 7);
  buf.resize(7);
  EXPECT_EQ(buf, next);
}

TEST_F(DatagramTest, MoreDescriptorsThanTheCallerAcceptsIsEmsgsizeWithoutLeak) {
  std::vector<UniqueFd> originals;
  std::vector<int> raw;
  for (int i = 0; i < 3; ++i) {
    originals.push_back(make_memfd("x"));
    raw.push_back(originals.back().get());
  }
  const std::vector<uint8_t> sent = payload(kHeaderSize, 1);
  ASSERT_EQ(send_datagram(a_.get(), sent.data(), sent.size(), raw.data(), 3, 0), 0);
  const int before = open_fd_count();
  std::vector<uint8_t> buf(kMaxMessage);
  UniqueFd fds[kMaxFds];
  int nfds = -1;
  EXPECT_EQ(receive(&buf, fds, &nfds, /*max_fds=*/1), -EMSGSIZE);
  EXPECT_EQ(nfds, 0);
  for (const UniqueFd& fd : fds) EXPECT_FALSE(fd.valid());
  EXPECT_EQ(open_fd_count(), before);
}

TEST_F(DatagramTest, DescriptorsBeyondMaxFdsFromARawSenderAreEmsgsizeWithoutLeak) {
  // A hostile peer is not limited by send_datagram: it can attach more than kMaxFds.
  constexpr int kSent = 2 * kMaxFds;
  std::vector<UniqueFd> originals;
  std::vector<int> raw;
  for (int i = 0; i < kSent; ++i) {
    originals.push_back(make_memfd("x"));
    raw.push_back(originals.back().get());
  }
  uint8_t byte = 42;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kSent)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * kSent);
  std::memcpy(CMSG_DATA(c), raw.data(), sizeof(int) * kSent);
  ASSERT_EQ(sendmsg(a_.get(), &msg, 0), 1);

  const int before = open_fd_count();
  std::vector<uint8_t> buf(kMaxMessage);
  UniqueFd fds[kMaxFds];
  int nfds = -1;
  EXPECT_EQ(receive(&buf, fds, &nfds), -EMSGSIZE);
  EXPECT_EQ(nfds, 0);
  EXPECT_EQ(open_fd_count(), before);
}

TEST_F(DatagramTest, EmptyNonBlockingSocketIsMinusEagain) {
  std::vector<uint8_t> buf(kMaxMessage);
  UniqueFd fds[kMaxFds];
  int nfds = -1;
  EXPECT_EQ(receive(&buf, fds, &nfds, kMaxFds, MSG_DONTWAIT), -EAGAIN);
  EXPECT_EQ(nfds, 0);
}

TEST_F(DatagramTest, OrderlyShutdownReturnsZero) {
  a_.reset();
  std::vector<uint8_t> buf(kMaxMessage);
  UniqueFd fds[kMaxFds];
  int nfds = -1;
  EXPECT_EQ(receive(&buf, fds, &nfds), 0);
  EXPECT_EQ(nfds, 0);
}

TEST_F(DatagramTest, SendToClosedPeerIsEpipeWithoutSignal) {
  b_.reset();
  const uint8_t byte = 1;
  EXPECT_EQ(send_datagram(a_.get(), &byte, 1, nullptr, 0, 0), EPIPE);  // and no SIGPIPE
}

TEST_F(DatagramTest, SendOnNonSocketReportsErrno) {
  UniqueFd fd = make_memfd("x");
  const uint8_t byte = 1;
  EXPECT_EQ(send_datagram(fd.get(), &byte, 1, nullptr, 0, 0), ENOTSOCK);
}

}  // namespace
}  // namespace wharf::proto
