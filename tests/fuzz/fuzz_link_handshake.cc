// Fuzz target for links/link_tls.h: the accepting end of a host link's TLS handshake faces
// whatever a peer sends (docs/SECURITY.md: before the handshake, anyone who reaches the port).
//
// The input is everything the peer sends, then it closes its side: written to one end of a
// socket pair, which the server session reads (what the server answers is read and dropped).
// Checked for every input: the handshake stops (failed) within a bounded number of steps and
// never succeeds, since no input can prove it holds a certificate of a CA made afresh at the
// target's first call (so a recorded handshake of another run is a replay, not a login).
//
// Seeds (corpus/fuzz_link_handshake/): a router's plaintext Hello (what a router without
// authentication sends), a TLS 1.3 ClientHello and the whole client side of a completed
// handshake (ClientHello, Certificate, CertificateVerify, Finished, then a Hello) recorded from
// a LinkTls client, a TLS 1.2-only ClientHello, and random bytes.
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "fuzz_check.h"
#include "links/link_tls.h"
#include "support/test_certs.h"

using wharf::UniqueFd;
using wharf::links::LinkTls;

namespace {

// Far more than a handshake takes: every step reads or writes at least a record header.
constexpr int kMaxSteps = 10000;

// Where each handshake stopped (OpenSSL's state), as coverage: a distribution's OpenSSL is not
// instrumented, so libFuzzer would otherwise see every input take the same path and keep
// none of them. It reads counters in this section as features of the input (with g++ the
// section is just a name).
constexpr size_t kStates = 128;
__attribute__((section("__libfuzzer_extra_counters"))) uint8_t g_stopped_in[kStates];

// The server's context: the cluster CA and host b's certificate, made once (their files
// are removed at exit; the context keeps what it loaded).
const LinkTls& server() {
  static wharf::test_support::TestCerts certs;
  static const std::unique_ptr<LinkTls> tls = [] {
    const auto b = certs.host("b");
    std::string why;
    auto t = LinkTls::load(certs.ca(), b.cert, b.key, "b", false, &why);
    if (t == nullptr) {
      std::fprintf(stderr, "fuzz_link_handshake: no server context: %s\n", why.c_str());
      std::abort();
    }
    return t;
  }();
  return *tls;
}

// Reads and drops what the server wrote, so that it is never blocked on output.
void drain(int fd) {
  char buf[4096];
  while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const LinkTls& tls = server();
  int fds[2];
  WHARF_FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0,
                   "socketpair");
  UniqueFd peer(fds[0]), ours(fds[1]);
  // What fits in the socket buffer (hundreds of KiB; inputs are a few KiB).
  const ssize_t sent = send(peer.get(), data, size, MSG_NOSIGNAL);
  WHARF_FUZZ_CHECK(size == 0 || sent > 0, "the input was not written");
  shutdown(peer.get(), SHUT_WR);

  LinkTls::Session session = tls.start(ours.get(), false);
  WHARF_FUZZ_CHECK(session != nullptr, "no session");
  std::string why;
  for (int step = 0;; ++step) {
    WHARF_FUZZ_CHECK(step < kMaxSteps, "the handshake does not stop");
    const LinkTls::Step s = LinkTls::handshake(session.get(), &why);
    WHARF_FUZZ_CHECK(s != LinkTls::Step::kDone, "a peer authenticated without a certificate");
    if (s == LinkTls::Step::kFailed) break;
    drain(peer.get());
  }
  WHARF_FUZZ_CHECK(!why.empty(), "a failure without a reason");
  const size_t state = static_cast<size_t>(SSL_get_state(session.get()));
  ++g_stopped_in[state < kStates ? state : kStates - 1];
  return 0;
}
