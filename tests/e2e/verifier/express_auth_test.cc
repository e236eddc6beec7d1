// Express lines between routers with authenticated links (router/express.h): a line is
// offered to a QP only after a TLS handshake with a certificate of the cluster's CA that
// names the host the line's Hello claims. Here this process plays the connecting router
// towards router b (the second host), for a QP on b whose peer is a QP on a: a plaintext
// Hello and a handshake with b's own certificate claiming to be a get no line, while a
// handshake with a's certificate does (so the forger is one the router would accept), and
// the same plaintext Hello gets one from routers whose links are not authenticated.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

#include "cluster.h"
#include "common/unique_fd.h"
#include "links/link_tls.h"
#include "proto/express_wire.h"
#include "verbs_fixture.h"

namespace wharf::verify {
namespace {

// Routers a and b with express lines, their links plain or authenticated.
template <Cluster::Links kLinks>
class ExpressForgeryTest : public TwoHostSides<VerbsTest> {
 protected:
  static void SetUpTestSuite() { cluster_ = new Cluster(2, {"--express", "on"}, -1, kLinks); }

  // The router's answer to a Hello: what it wrote before it closed the connection or 3 s
  // passed. kAccepted alone is a line.
  struct Answer {
    std::string bytes;
    bool closed = false;
    bool line() const {
      return bytes == std::string(1, static_cast<char>(proto::express::kAccepted));
    }
  };

  // Offers b a line as a's router would for a QP on b in RTS towards a QP on a (one never
  // connected, so a's router never dials): after a handshake with host `holder`'s
  // certificate (-1: none), a Hello claiming to come from a.
  Answer offer_line(int holder) {
    uint8_t *ra = nullptr, *rb = nullptr;
    ibv_qp* qa = create_qp_mapped(a_, IBV_QPT_RC, &ra);
    ibv_qp* qb = create_qp_mapped(b_, IBV_QPT_RC, &rb);
    connect(qb, b_, qa, a_, kFullAccess);
    Answer a;
    UniqueFd fd = dial_b();
    if (holder < 0 || handshake_as(fd.get(), holder))
      a = hello(fd.get(), 0, qa->qp_num, qb->qp_num);
    fd.reset();
    EXPECT_EQ(ibv_destroy_qp(qb), 0);
    EXPECT_EQ(ibv_destroy_qp(qa), 0);
    return a;
  }

 private:
  // A blocking connection to b's express port (its link port + 1), from 127.0.0.1: the
  // address of every host of the cluster.
  static UniqueFd dial_b() {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    timeval tv{3, 0};
    setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(cluster_->port(1) + 1));
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
  }

  // The handshake of a router holding host `holder`'s certificate, as the connecting end, on
  // fd. Whether it succeeded.
  static bool handshake_as(int fd, int holder) {
    std::string why;
    const test_support::TestCerts::Host& h = cluster_->certificate(holder);
    auto tls = links::LinkTls::load(cluster_->ca(), h.cert, h.key, Cluster::name(holder),
                                    /*encrypt=*/false, &why);
    if (tls == nullptr) {
      ADD_FAILURE() << why;
      return false;
    }
    links::LinkTls::Session s = tls->start(fd, /*client=*/true);
    const bool done =
        s != nullptr && links::LinkTls::handshake(s.get(), &why) == links::LinkTls::Step::kDone;
    EXPECT_TRUE(done) << why;
    return done;
  }

  // Writes a Hello claiming to come from host `from` for the pair (src_qpn there, dst_qpn on
  // b), then reads the answer.
  static Answer hello(int fd, uint16_t from, uint32_t src_qpn, uint32_t dst_qpn) {
    proto::express::Hello h;
    h.src_host = from;
    h.src_qpn = src_qpn;
    h.dst_qpn = dst_qpn;
    h.incarnation = 1;
    uint8_t bytes[proto::express::kHelloSize];
    proto::encode(h, bytes, sizeof(bytes));
    EXPECT_EQ(send(fd, bytes, sizeof(bytes), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(bytes)));
    Answer a;
    char buf[256];
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        a.closed = n == 0 || errno == ECONNRESET;
        return a;
      }
      a.bytes.append(buf, static_cast<size_t>(n));
      if (a.line()) return a;  // the router writes nothing more
    }
  }
};

using ExpressAuthTest = ExpressForgeryTest<Cluster::Links::kAuthenticated>;

TEST_F(ExpressAuthTest, APlaintextHelloGetsNoLine) {
  const Answer a = offer_line(-1);
  EXPECT_TRUE(a.closed) << "the router kept a connection that never authenticated";
  EXPECT_FALSE(a.line());
}

TEST_F(ExpressAuthTest, ACertificateOfAnotherHostGetsNoLineAndTheHostsOwnGetsOne) {
  const Answer forged = offer_line(1);  // b's own certificate, claiming to be a
  EXPECT_TRUE(forged.closed);
  EXPECT_FALSE(forged.line());
  EXPECT_TRUE(offer_line(0).line()) << "a router with a's certificate got no line";
}

// The control: without authentication the same plaintext Hello is a line (the address is the
// only check), which is what the tests above show authentication takes away.
using ExpressPlainTest = ExpressForgeryTest<Cluster::Links::kPlain>;

TEST_F(ExpressPlainTest, APlaintextHelloGetsALine) { EXPECT_TRUE(offer_line(-1).line()); }

}  // namespace
}  // namespace wharf::verify
