// Encrypted host links (wharfd --link-security encrypt; links/link_tls.h, links/host_links.h)
// on loopback: after the handshake every byte goes in sealed records, so what a tap on the path
// sees carries none of the packets' bytes, packets of every size still arrive whole and in
// order, and a record changed on the way ends the connection (counted) without handing
// anything changed up. Routers that disagree on encryption cannot link.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "links/host_links.h"
#include "links/link_tls.h"
#include "support/free_ports.h"
#include "support/host_links_ends.h"
#include "support/test_certs.h"

namespace wharf::links {
namespace {

namespace host = proto::host;
using test_support::cluster_text;
using test_support::End;
using test_support::packet;
using test_support::pump;
using test_support::pump_for;
using test_support::TestCerts;

// A relay on 127.0.0.1 between the routers: each connection it accepts goes on to
// 127.0.0.1:to. It keeps a copy of what flowed towards `to` and can flip one byte of that
// direction. A connection one side closes it closes on the other side too, as a path passes
// on a FIN. Single-threaded: move() relays what is ready, called from the test's loop.
class Tap {
 public:
  Tap(int listen_port, int to) : to_(to) {
    listen_.reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    int one = 1;
    setsockopt(listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const sockaddr_in a = loopback(listen_port);
    EXPECT_EQ(bind(listen_.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(listen_.get(), 8), 0);
  }

  // The byte at offset `at` of what flows towards `to` (counted over all connections) is
  // inverted.
  void flip_at(size_t at) { flip_at_ = at; }
  const std::vector<uint8_t>& seen() const { return seen_; }

  void move() {
    for (;;) {
      UniqueFd in(accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!in.valid()) break;
      UniqueFd out(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      const sockaddr_in a = loopback(to_);
      if (connect(out.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) continue;
      fcntl(out.get(), F_SETFL, fcntl(out.get(), F_GETFL) | O_NONBLOCK);
      pairs_.push_back({std::move(in), std::move(out)});
    }
    std::erase_if(pairs_, [this](Pair& p) {
      return !relay(p.in.get(), p.out.get(), &p.towards, true) ||
             !relay(p.out.get(), p.in.get(), &p.back, false);
    });
  }

 private:
  struct Pair {
    UniqueFd in, out;
    std::vector<uint8_t> towards, back;  // read, not yet written on
  };
  static sockaddr_in loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }
  // Writes what waits in *held, then reads more only once that is gone (so a slow reader
  // slows the writer, as a path does). False: `from` closed its side.
  bool relay(int from, int to, std::vector<uint8_t>* held, bool towards) {
    if (held->empty()) {
      uint8_t buf[65536];
      const ssize_t n = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) return false;
      if (n < 0) return true;
      if (towards) {
        const size_t start = seen_.size();
        seen_.insert(seen_.end(), buf, buf + n);
        if (flip_at_ >= start && flip_at_ < seen_.size()) buf[flip_at_ - start] ^= 0xff;
      }
      held->assign(buf, buf + n);
    }
    const ssize_t w = send(to, held->data(), held->size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) held->erase(held->begin(), held->begin() + w);
    return true;
  }

  int to_;
  UniqueFd listen_;
  std::vector<Pair> pairs_;
  std::vector<uint8_t> seen_;
  size_t flip_at_ = SIZE_MAX;
};

class LinkEncryptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int port = test_support::free_ports(3);
    ASSERT_NE(port, 0) << "no three free ports";
    a_port_ = port;
    b_port_ = port + 1;
    tap_port_ = port + 2;
  }

  std::unique_ptr<LinkTls> tls(const std::string& name, bool encrypt) {
    const TestCerts::Host h = certs_.host(name, TestCerts::kClusterCa);
    std::string why;
    auto t = LinkTls::load(certs_.ca(), h.cert, h.key, name, encrypt, &why);
    EXPECT_NE(t, nullptr) << why;
    return t;
  }

  // Router a reaches b through the tap (a's cluster file names the tap's port as b's); b
  // reaches a directly.
  struct Pair {
    std::unique_ptr<LinkTls> tls_a, tls_b;
    std::unique_ptr<End> a, b;
  };
  Pair routers(bool a_encrypts, bool b_encrypts) {
    Pair p;
    p.tls_a = tls("a", a_encrypts);
    p.tls_b = tls("b", b_encrypts);
    const auto ports = [](int x, int y) { return cluster_text(x, y); };
    p.a = std::make_unique<End>(ports(a_port_, tap_port_), "a", HostLinks::kSendBudget,
                                p.tls_a.get());
    p.b =
        std::make_unique<End>(ports(a_port_, b_port_), "b", HostLinks::kSendBudget, p.tls_b.get());
    return p;
  }

  // Sends `count` packets a -> b, each of a size from `sizes` in turn, its bytes a pattern
  // that starts with kSecret; waits until b has them all (false if it did not within 5 s).
  bool send_many(Pair& p, Tap& tap, int count, const std::vector<size_t>& sizes) {
    sent_.clear();
    for (int i = 0; i < count; ++i) {
      std::vector<uint8_t> payload(sizes[static_cast<size_t>(i) % sizes.size()]);
      for (size_t k = 0; k < payload.size(); ++k)
        payload[k] = k < sizeof(kSecret) - 1 ? static_cast<uint8_t>(kSecret[k])
                                             : static_cast<uint8_t>(k * 7 + static_cast<size_t>(i));
      // The queues take a bounded amount: let the link drain when one is full.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!p.a->links->send(1, 0, packet(static_cast<uint32_t>(i), payload))) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        tap.move();
        p.a->links->poll();
        p.b->links->poll();
      }
      sent_.push_back(std::move(payload));
    }
    const size_t want = p.b->rec.payloads.size() + static_cast<size_t>(count);
    return pump({p.a.get(), p.b.get()}, [&] {
      tap.move();
      return p.b->rec.payloads.size() >= want;
    });
  }

  static bool contains(const std::vector<uint8_t>& bytes, const char* what) {
    const std::string w(what);
    return std::search(bytes.begin(), bytes.end(), w.begin(), w.end()) != bytes.end();
  }

  static constexpr char kSecret[] = "tenant-memory-0123456789";
  TestCerts certs_;
  int a_port_ = 0, b_port_ = 0, tap_port_ = 0;
  std::vector<std::vector<uint8_t>> sent_;
};

TEST_F(LinkEncryptTest, PacketsOfEverySizeArriveWholeAndInOrderAndTheWireCarriesNoneOfTheirBytes) {
  Pair p = routers(true, true);
  Tap tap(tap_port_, b_port_);
  // Sizes around 16 KiB and the 64 KiB record up to the largest packet, so that packets, records
  // and the routers' 256 KiB read chunks split each other everywhere.
  const std::vector<size_t> sizes{0, 1, 100, 16383, 16384, 16385, 65535, host::kMaxSegment, 4096};
  ASSERT_TRUE(send_many(p, tap, 200, sizes)) << "arrived: " << p.b->rec.payloads.size();
  ASSERT_EQ(p.b->rec.payloads.size(), sent_.size());
  for (size_t i = 0; i < sent_.size(); ++i) {
    EXPECT_EQ(p.b->rec.psns[i], i);
    EXPECT_EQ(p.b->rec.payloads[i], sent_[i]) << "packet " << i;
  }
  EXPECT_FALSE(contains(tap.seen(), kSecret)) << "the payload went in clear";
  EXPECT_GT(tap.seen().size(), 200u * 16384u);
  EXPECT_EQ(p.a->links->refused_records() + p.b->links->refused_records(), 0u);
}

// The control: with `auth` the same tap does see the payload, so the test above can fail.
TEST_F(LinkEncryptTest, WithAuthOnlyTheTapSeesThePayload) {
  Pair p = routers(false, false);
  Tap tap(tap_port_, b_port_);
  ASSERT_TRUE(send_many(p, tap, 5, {100}));
  EXPECT_TRUE(contains(tap.seen(), kSecret));
}

TEST_F(LinkEncryptTest, ARecordChangedOnThePathEndsTheConnectionAndNothingChangedArrives) {
  Pair p = routers(true, true);
  Tap tap(tap_port_, b_port_);
  ASSERT_TRUE(send_many(p, tap, 3, {1000}));  // linked, the handshake behind
  const size_t before = p.b->rec.payloads.size();
  const size_t handshake_and_three = tap.seen().size();
  tap.flip_at(handshake_and_three + 500);  // inside the next packet's record
  std::vector<uint8_t> payload(1000, 0x5a);
  ASSERT_TRUE(p.a->links->send(1, 0, packet(99, payload)));
  ASSERT_TRUE(pump({p.a.get(), p.b.get()}, [&] {
    tap.move();
    return p.b->links->refused_records() > 0;
  })) << "b kept a connection whose record was changed";
  EXPECT_EQ(p.b->links->refused_records(), 1u);
  EXPECT_EQ(p.b->rec.payloads.size(), before) << "a changed record was handed up";
  // The link comes back (a new connection); the packet was lost with the old one, as on a
  // cut, and the QPs above resend it.
  EXPECT_TRUE(pump({p.a.get(), p.b.get()}, [&] {
    tap.move();
    return p.a->rec.link_lost > 0;
  }));
  ASSERT_TRUE(p.a->links->send(1, 0, packet(100, payload)));
  ASSERT_TRUE(pump({p.a.get(), p.b.get()}, [&] {
    tap.move();
    return !p.b->rec.psns.empty() && p.b->rec.psns.back() == 100;
  }));
  EXPECT_EQ(p.b->rec.payloads.back(), payload);
  EXPECT_EQ(p.a->rec.restarted + p.b->rec.restarted, 0);
}

TEST_F(LinkEncryptTest, RoutersThatDisagreeOnEncryptionDoNotLink) {
  Pair p = routers(true, false);
  Tap tap(tap_port_, b_port_);
  std::vector<uint8_t> payload(100, 1);
  ASSERT_TRUE(p.a->links->send(1, 0, packet(1, payload)));
  ASSERT_TRUE(p.b->links->send(0, 0, packet(2, payload)));
  pump_for({p.a.get(), p.b.get()}, std::chrono::milliseconds(300));
  for (int i = 0; i < 100; ++i) {
    tap.move();
    pump_for({p.a.get(), p.b.get()}, std::chrono::milliseconds(3));
  }
  EXPECT_TRUE(p.a->rec.payloads.empty());
  EXPECT_TRUE(p.b->rec.payloads.empty());
  EXPECT_EQ(p.a->links->incarnation(1), 0u) << "a took b's Hello";
  EXPECT_EQ(p.b->links->incarnation(0), 0u) << "b took a's Hello";
}

}  // namespace
}  // namespace wharf::links
