// Authenticated host links (links/link_tls.h, links/host_links.h) on loopback, with
// certificates made for each test (support/test_certs.h): routers of one cluster CA talk; a
// peer that cannot prove, with a certificate of that CA, that it is the host its Hello names
// is disconnected (so is one that does not finish its handshake in time), and none of these
// refusals changes what the router knows of its peers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
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
using std::chrono::steady_clock;
using test_support::cluster_text;
using test_support::End;
using test_support::packet;
using test_support::pump;
using test_support::TestCerts;

// A LinkTls for host `name` with a certificate CA `ca` signed, trusting the cluster CA.
std::unique_ptr<LinkTls> tls_of(TestCerts& certs, const std::string& name,
                                const std::string& ca = TestCerts::kClusterCa) {
  const TestCerts::Host h = certs.host(name, ca);
  std::string why;
  auto tls = LinkTls::load(certs.ca(), h.cert, h.key, name, false, &why);
  EXPECT_NE(tls, nullptr) << why;
  return tls;
}

// A router end whose links authenticate with `tls` (kept here: it outlives the links).
struct TlsEnd {
  std::unique_ptr<LinkTls> tls;
  End end;
  TlsEnd(const std::string& text, const char* name, std::unique_ptr<LinkTls> t)
      : tls(std::move(t)), end(text, name, HostLinks::kSendBudget, tls.get()) {}
  HostLinks& links() { return *end.links; }
  test_support::Recorder& rec() { return end.rec; }
};

// A TCP connection to 127.0.0.1:port, nonblocking once established (invalid if refused).
UniqueFd dial(int port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return {};
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  return fd;
}

// Writes all of `bytes` (a few KiB at most: the socket buffer takes them at once).
bool send_all(int fd, const std::vector<uint8_t>& bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// The plaintext Hello of a router of host `name` in its incarnation `incarnation`.
std::vector<uint8_t> hello_from(const char* name, uint32_t incarnation) {
  host::Hello h;
  h.incarnation = incarnation;
  std::strncpy(h.host.data(), name, h.host.size() - 1);
  std::vector<uint8_t> out(host::kHelloSize);
  EXPECT_EQ(proto::encode(h, out.data(), out.size()), host::kHelloSize);
  return out;
}

// Polls `ends` and reads fd (what arrives is counted in *received, if given, and dropped)
// until the other end closes it (end of file or reset): true; false if fd is still open
// after `limit`.
bool closed_while_polling(std::vector<End*> ends, int fd,
                          std::chrono::milliseconds limit = std::chrono::seconds(5),
                          size_t* received = nullptr) {
  const auto deadline = steady_clock::now() + limit;
  uint8_t buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return true;
    if (n > 0 && received != nullptr) *received += static_cast<size_t>(n);
    if (steady_clock::now() > deadline) return false;
    for (End* e : ends) e->links->poll();
    // Wait a little for the socket or an end to have something to do, rather than spin.
    std::vector<pollfd> fds{{fd, POLLIN, 0}};
    for (End* e : ends) fds.push_back({e->links->epoll_fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 1);
  }
}

// Moves the client handshake `s` on while `server` is polled, until it succeeds or fails
// (or 5 s passed: kWantRead or kWantWrite).
LinkTls::Step client_handshake(SSL* s, End* server, std::string* why) {
  const auto deadline = steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    const LinkTls::Step step = LinkTls::handshake(s, why);
    if (step == LinkTls::Step::kDone || step == LinkTls::Step::kFailed) return step;
    if (steady_clock::now() > deadline) return step;
    server->links->poll();
  }
}

// What an end knows of its peer `peer`: none of it may change when a stranger is refused.
struct Knowledge {
  size_t packets;
  int lost, restarted, gone;
  uint32_t incarnation;
};
Knowledge knowledge(End& e, int peer) {
  return {e.rec.psns.size(), e.rec.link_lost, e.rec.restarted, e.rec.gone,
          e.links->incarnation(peer)};
}
void expect_unchanged(const Knowledge& before, End& e, int peer) {
  const Knowledge now = knowledge(e, peer);
  EXPECT_EQ(now.packets, before.packets) << "packets";
  EXPECT_EQ(now.lost, before.lost) << "on_link_lost";
  EXPECT_EQ(now.restarted, before.restarted) << "on_peer_restarted";
  EXPECT_EQ(now.gone, before.gone) << "on_peer_gone";
  EXPECT_EQ(now.incarnation, before.incarnation) << "incarnation";
}

// Records what an SSL's socket BIO writes (the callback's argument: a std::vector<uint8_t>).
long record_writes(BIO* bio, int oper, const char* argp, size_t, int, long, int ret,
                   size_t* processed) {
  if (oper == (BIO_CB_WRITE | BIO_CB_RETURN) && ret > 0 && processed != nullptr) {
    auto* out = reinterpret_cast<std::vector<uint8_t>*>(BIO_get_callback_arg(bio));
    out->insert(out->end(), argp, argp + *processed);
  }
  return ret;
}

class LinkTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int port = test_support::free_ports(2);
    ASSERT_NE(port, 0) << "no free pair of ports";
    b_port_ = port + 1;
    text_ = cluster_text(port, port + 1);
  }

  // One packet from a to b and one back, each waited for.
  static void exchange(TlsEnd& a, TlsEnd& b, uint32_t psn) {
    const std::vector<uint8_t> payload(100, static_cast<uint8_t>(psn));
    const size_t at_a = a.rec().psns.size(), at_b = b.rec().psns.size();
    ASSERT_TRUE(a.links().send(1, 0, packet(psn, payload)));
    ASSERT_TRUE(b.links().send(0, 0, packet(psn, payload)));
    ASSERT_TRUE(pump({&a.end, &b.end}, [&] {
      return a.rec().psns.size() == at_a + 1 && b.rec().psns.size() == at_b + 1;
    }));
    EXPECT_EQ(a.rec().psns.back(), psn);
    EXPECT_EQ(b.rec().psns.back(), psn);
    EXPECT_EQ(b.rec().payloads.back(), payload);
  }

  // A connection to b's port by a router holding `holder`'s certificate (of the cluster CA),
  // its handshake done while b's end was polled. With `record`, what the router wrote on it
  // (the whole client side of the handshake) is appended there.
  struct Client {
    std::unique_ptr<LinkTls> tls;
    UniqueFd fd;
    LinkTls::Session session;
  };
  void connect_as(const char* holder, End* b, Client* c, std::vector<uint8_t>* record = nullptr) {
    c->tls = tls_of(certs_, holder);
    ASSERT_NE(c->tls, nullptr);
    c->fd = dial(b_port_);
    ASSERT_TRUE(c->fd.valid());
    c->session = c->tls->start(c->fd.get(), true);
    ASSERT_NE(c->session, nullptr);
    if (record != nullptr) {
      BIO_set_callback_ex(SSL_get_wbio(c->session.get()), record_writes);
      BIO_set_callback_arg(SSL_get_wbio(c->session.get()), reinterpret_cast<char*>(record));
    }
    std::string why;
    ASSERT_EQ(client_handshake(c->session.get(), b, &why), LinkTls::Step::kDone) << why;
  }

  TestCerts certs_;
  std::string text_;
  int b_port_ = 0;
};

TEST_F(LinkTlsTest, RoutersOfOneClusterCaExchangePacketsBothWays) {
  TlsEnd a(text_, "a", tls_of(certs_, "a")), b(text_, "b", tls_of(certs_, "b"));
  ASSERT_NO_FATAL_FAILURE(exchange(a, b, 1));
  ASSERT_NO_FATAL_FAILURE(exchange(a, b, 2));
  EXPECT_EQ(b.links().incarnation(0), a.links().own_incarnation());
  EXPECT_EQ(a.links().incarnation(1), b.links().own_incarnation());
  EXPECT_EQ(a.links().refused_peers() + b.links().refused_peers(), 0u);
  EXPECT_EQ(a.rec().link_lost + b.rec().link_lost + a.rec().restarted + b.rec().restarted, 0);
}

// A stranger reaches b's port and sends the Hello of a new incarnation of a, in plaintext, as
// a router without authentication would. Had b believed it, a would have restarted.
TEST_F(LinkTlsTest, AStrangerSpeakingPlaintextIsDisconnectedAndChangesNothing) {
  TlsEnd a(text_, "a", tls_of(certs_, "a")), b(text_, "b", tls_of(certs_, "b"));
  ASSERT_NO_FATAL_FAILURE(exchange(a, b, 1));
  const Knowledge b_before = knowledge(b.end, 0), a_before = knowledge(a.end, 1);

  UniqueFd stranger = dial(b_port_);
  ASSERT_TRUE(stranger.valid());
  ASSERT_TRUE(send_all(stranger.get(), hello_from("a", a.links().own_incarnation() + 2)));
  ASSERT_TRUE(closed_while_polling({&a.end, &b.end}, stranger.get()))
      << "b kept the stranger's connection open";
  EXPECT_EQ(b.links().refused_peers(), 1u);
  expect_unchanged(b_before, b.end, 0);
  expect_unchanged(a_before, a.end, 1);

  // The link between the routers did not notice.
  ASSERT_NO_FATAL_FAILURE(exchange(a, b, 2));
  EXPECT_EQ(b.links().incarnation(0), a.links().own_incarnation());
  EXPECT_EQ(a.rec().link_lost + b.rec().link_lost + a.rec().restarted + b.rec().restarted, 0);
  EXPECT_EQ(a.links().refused_peers(), 0u);
}

// a holds a certificate naming it, but signed by a CA of its own (with the cluster CA's
// name): b refuses it at every attempt, and a's link never comes up.
TEST_F(LinkTlsTest, APeerWhoseCertificateAnotherCaSignedCannotConnect) {
  TlsEnd a(text_, "a", tls_of(certs_, "a", "other")), b(text_, "b", tls_of(certs_, "b"));
  const std::vector<uint8_t> one(10, 1);
  ASSERT_TRUE(a.links().send(1, 0, packet(1, one)));
  ASSERT_TRUE(pump({&a.end, &b.end},
                   [&] { return b.links().refused_peers() >= 1 && a.rec().link_lost >= 1; }))
      << "b refused " << b.links().refused_peers() << ", a lost " << a.rec().link_lost;
  // a tries again (after its backoff), with the same outcome.
  ASSERT_TRUE(a.links().send(1, 0, packet(2, one)));
  ASSERT_TRUE(pump({&a.end, &b.end}, [&] { return b.links().refused_peers() >= 2; }));
  EXPECT_EQ(a.links().incarnation(1), 0u) << "a heard b's Hello";
  EXPECT_EQ(b.links().incarnation(0), 0u) << "b heard a's Hello";
  EXPECT_TRUE(b.rec().psns.empty());
  EXPECT_EQ(b.rec().link_lost + b.rec().restarted + b.rec().gone, 0);
  EXPECT_EQ(a.rec().restarted, 0);
}

// A TLS 1.3 client with no certificate at all completes its side of the handshake (in TLS 1.3
// the client finishes first) and sends a Hello: b refuses it.
TEST_F(LinkTlsTest, APeerWithoutACertificateIsDisconnected) {
  TlsEnd b(text_, "b", tls_of(certs_, "b"));
  struct CtxFree {
    void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
  };
  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  ASSERT_NE(ctx, nullptr);
  ASSERT_EQ(SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION), 1);
  UniqueFd fd = dial(b_port_);
  ASSERT_TRUE(fd.valid());
  LinkTls::Session s(SSL_new(ctx.get()));
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(SSL_set_fd(s.get(), fd.get()), 1);
  SSL_set_connect_state(s.get());
  std::string why;
  const LinkTls::Step step = client_handshake(s.get(), &b.end, &why);
  ASSERT_TRUE(step == LinkTls::Step::kDone || step == LinkTls::Step::kFailed) << "timed out";
  send_all(fd.get(), hello_from("a", 5));  // may find the connection reset already
  ASSERT_TRUE(closed_while_polling({&b.end}, fd.get()));
  EXPECT_EQ(b.links().refused_peers(), 1u);
  expect_unchanged(Knowledge{}, b.end, 0);
}

// c's router (same CA) authenticates as c, then claims to be a: b disconnects it without
// believing it, and its link with the real a goes on.
TEST_F(LinkTlsTest, APeerWhoseCertificateNamesAnotherHostCannotClaimToBeIt) {
  TlsEnd a(text_, "a", tls_of(certs_, "a")), b(text_, "b", tls_of(certs_, "b"));
  ASSERT_NO_FATAL_FAILURE(exchange(a, b, 1));
  const Knowledge before = knowledge(b.end, 0);

  Client c;
  ASSERT_NO_FATAL_FAILURE(connect_as("c", &b.end, &c));
  ASSERT_TRUE(send_all(c.fd.get(), hello_from("a", a.links().own_incarnation() + 2)));
  size_t received = 0;
  ASSERT_TRUE(
      closed_while_polling({&a.end, &b.end}, c.fd.get(), std::chrono::seconds(5), &received))
      << "b kept c's connection open";
  // b's own Hello, if it wrote it before it read c's (it may not have).
  EXPECT_LE(received, host::kHelloSize) << "b sent more than its Hello";
  EXPECT_EQ(b.links().refused_peers(), 1u);
  expect_unchanged(before, b.end, 0);
  ASSERT_NO_FATAL_FAILURE(exchange(a, b, 2));
  EXPECT_EQ(b.rec().link_lost + b.rec().restarted, 0);
}

// The end that dials checks that the router answering at the peer's address is that peer: b's
// router here holds c's certificate (of the cluster CA).
TEST_F(LinkTlsTest, TheDiallingEndRefusesARouterWhoseCertificateNamesAnotherHost) {
  TlsEnd a(text_, "a", tls_of(certs_, "a")), b(text_, "b", tls_of(certs_, "c"));
  ASSERT_TRUE(a.links().send(1, 0, packet(1, std::vector<uint8_t>(10, 1))));
  ASSERT_TRUE(pump({&a.end, &b.end},
                   [&] { return a.links().refused_peers() >= 1 && a.rec().link_lost >= 1; }))
      << "a refused " << a.links().refused_peers() << ", a lost " << a.rec().link_lost;
  EXPECT_EQ(b.links().incarnation(0), 0u) << "a sent its Hello to an impostor";
  EXPECT_EQ(a.links().incarnation(1), 0u);
  EXPECT_TRUE(b.rec().psns.empty());
  EXPECT_EQ(b.rec().link_lost + b.rec().restarted + a.rec().restarted, 0);
}

TEST_F(LinkTlsTest, AConnectionThatSendsNothingIsClosedAfterTheHandshakeTimeout) {
  TlsEnd b(text_, "b", tls_of(certs_, "b"));
  const auto start = steady_clock::now();
  UniqueFd fd = dial(b_port_);
  ASSERT_TRUE(fd.valid());
  size_t received = 0;
  ASSERT_TRUE(closed_while_polling({&b.end}, fd.get(), std::chrono::seconds(6), &received))
      << "still open after 6 s";
  const auto took = steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::nanoseconds(HostLinks::kHandshakeNs));
  EXPECT_EQ(received, 0u) << "b wrote to a peer that never spoke";
  EXPECT_EQ(b.links().refused_peers(), 1u);
  expect_unchanged(Knowledge{}, b.end, 0);
}

// Everything a's router sent on a connection b accepted (its whole side of the handshake,
// then its Hello) is sent again on a new connection. In TLS 1.3 b answers with fresh
// ephemeral keys, so the recorded client Certificate, CertificateVerify and Finished do not
// decrypt, let alone verify: b refuses the replay, and the real connection is untouched.
TEST_F(LinkTlsTest, AReplayedHandshakeIsRefused) {
  TlsEnd b(text_, "b", tls_of(certs_, "b"));
  Client a;
  std::vector<uint8_t> recorded;
  ASSERT_NO_FATAL_FAILURE(connect_as("a", &b.end, &a, &recorded));
  const int fd = a.fd.get();
  ASSERT_GT(recorded.size(), 0u) << "nothing recorded";
  EXPECT_EQ(recorded[0], 0x16) << "not a TLS handshake record";
  const std::vector<uint8_t> hello = hello_from("a", 77);
  recorded.insert(recorded.end(), hello.begin(), hello.end());
  ASSERT_TRUE(send_all(fd, hello));
  ASSERT_TRUE(pump({&b.end}, [&] { return b.links().incarnation(0) == 77; }))
      << "b did not accept the recorded connection";
  const Knowledge before = knowledge(b.end, 0);

  UniqueFd replay = dial(b_port_);
  ASSERT_TRUE(replay.valid());
  ASSERT_TRUE(send_all(replay.get(), recorded));
  ASSERT_TRUE(closed_while_polling({&b.end}, replay.get())) << "b kept the replay open";
  EXPECT_EQ(b.links().refused_peers(), 1u);
  expect_unchanged(before, b.end, 0);
  // The recorded connection is still b's link from a.
  size_t received = 0;
  EXPECT_FALSE(closed_while_polling({&b.end}, fd, std::chrono::milliseconds(50), &received));
  EXPECT_EQ(received, host::kHelloSize) << "b's Hello";
}

TEST_F(LinkTlsTest, LoadRefusesACertificateThatDoesNotNameThisHost) {
  const TestCerts::Host a = certs_.host("a");
  std::string why;
  EXPECT_NE(LinkTls::load(certs_.ca(), a.cert, a.key, "a", false, &why), nullptr) << why;
  EXPECT_EQ(LinkTls::load(certs_.ca(), a.cert, a.key, "b", false, &why), nullptr);
  EXPECT_NE(why.find("does not name this host, b"), std::string::npos) << why;
}

TEST_F(LinkTlsTest, LoadRefusesAKeyThatDoesNotMatchTheCertificate) {
  const TestCerts::Host a = certs_.host("a"), b = certs_.host("b");
  std::string why;
  EXPECT_EQ(LinkTls::load(certs_.ca(), a.cert, b.key, "a", false, &why), nullptr);
  EXPECT_NE(why.find(b.key), std::string::npos) << why;
  EXPECT_NE(why.find("key values mismatch"), std::string::npos) << why;
}

TEST_F(LinkTlsTest, LoadRefusesMissingFiles) {
  const TestCerts::Host a = certs_.host("a");
  const std::string ca = certs_.ca(), missing = certs_.path("missing.pem");
  const std::vector<std::vector<std::string>> cases = {
      {missing, a.cert, a.key}, {ca, missing, a.key}, {ca, a.cert, missing}};
  for (const auto& files : cases) {
    std::string why;
    EXPECT_EQ(LinkTls::load(files[0], files[1], files[2], "a", false, &why), nullptr);
    EXPECT_NE(why.find(missing), std::string::npos) << why;
    EXPECT_NE(why.find("No such file"), std::string::npos) << why;
  }
}

// A handshake that waits for the peer leaves the loop idle: the connection is watched for
// output only while TLS must write. It used to stay watched for output (it is registered so
// when accepted or dialled), so every poll() handled it again and epoll_fd() was always
// readable: one silent connection every kHandshakeNs kept a router's loop spinning.
TEST_F(LinkTlsTest, AHandshakeThatWaitsForThePeerLeavesTheRouterIdle) {
  TlsEnd b(text_, "b", tls_of(certs_, "b"));
  UniqueFd silent = dial(b_port_);
  ASSERT_TRUE(silent.valid());
  for (int i = 0; i < 10; ++i) b.links().poll();  // accepts it, and its handshake starts
  int busy = 0, passes = 0;
  const auto end = steady_clock::now() + std::chrono::milliseconds(100);
  while (steady_clock::now() < end && ++passes < 100000) busy += b.links().poll() ? 1 : 0;
  EXPECT_LT(busy, 3) << "of " << passes << " passes, " << busy << " had something to do";
  pollfd p{b.links().epoll_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "the router's epoll_fd stays readable";
  EXPECT_EQ(b.links().refused_peers(), 0u);
}

// The probe that replaces a stalled connection (HostLinksTest.AStalledConnectionIsReplaced...)
// is already connected when it takes over, so no event would start its handshake, in which
// the dialling end speaks first: it must be started at once, or the replacement expires
// kHandshakeNs later, is reported lost a second time and drops what was queued on it.
TEST_F(LinkTlsTest, AStalledConnectionIsReplacedByAnAuthenticatedOne) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (a network namespace and nftables)";
  ASSERT_NO_FATAL_FAILURE(test_support::enter_own_network());
  const int port = test_support::free_ports(2);  // in the new namespace
  ASSERT_NE(port, 0);
  const std::string text = cluster_text(port, port + 1);
  TlsEnd a(text, "a", tls_of(certs_, "a")), b(text, "b", tls_of(certs_, "b"));
  ASSERT_NO_FATAL_FAILURE(test_support::cut_the_path_and_let_it_return(&a.end, &b.end, port));
  EXPECT_EQ(a.links().refused_peers() + b.links().refused_peers(), 0u);
}

}  // namespace
}  // namespace wharf::links
