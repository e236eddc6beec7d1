// A cluster of routers on one machine for the verifier's tests between hosts.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "support/free_ports.h"
#include "support/test_certs.h"
#include "verbs_fixture.h"

namespace wharf::verify {

// Routers "a", "b" (and "c") on 127.0.0.1, sharing a cluster file in a temporary directory;
// host K serves 198.18.K.0/24 and LIDs (K-1)*1024+1 .. K*1024. Routers are started for the
// first `started` hosts (all by default); the others' ports are for a FakePeer.
// Links (and express lines) are plaintext, or with kAuthenticated authenticated by
// certificates of a test CA (--link-security auth; certificate(i)).
class Cluster {
 public:
  enum class Links { kPlain, kAuthenticated };
  explicit Cluster(int hosts, std::vector<std::string> router_args = {}, int started = -1,
                   Links links = Links::kPlain)
      : router_args_(std::move(router_args)) {
    if (links == Links::kAuthenticated) {
      certs_ = std::make_unique<test_support::TestCerts>();
      for (int i = 0; i < hosts; ++i) host_certs_.push_back(certs_->host(name(i)));
    }
    char tmpl[] = "/tmp/wharf-verify-cluster.XXXXXX";
    dir_ = mkdtemp(tmpl);
    file_ = dir_ + "/cluster";
    // Two ports a host: its router's host links, and the express lines' (the next one).
    port_ = test_support::free_ports(2 * hosts);
    EXPECT_NE(port_, 0) << "no free ports";
    std::ofstream out(file_);
    for (int k = 1; k <= hosts; ++k)
      out << name(k - 1) << " 127.0.0.1 198.18." << k << ".0/24 " << (k - 1) * 1024 + 1 << "-"
          << k * 1024 << " " << port(k - 1) << "\n";
    out.close();
    for (int i = 0; i < (started < 0 ? hosts : started); ++i) routers_.push_back(start(i));
  }
  // The port host i's router listens on.
  int port(int i) const { return port_ + 2 * i; }
  // Host i's certificate and key, and the CA's certificate (kAuthenticated only).
  const test_support::TestCerts::Host& certificate(int i) const {
    return host_certs_[static_cast<size_t>(i)];
  }
  std::string ca() const { return certs_ == nullptr ? "" : certs_->ca(); }
  static std::string name(int i) { return std::string(1, static_cast<char>('a' + i)); }
  ~Cluster() {
    routers_.clear();
    unlink(file_.c_str());
    rmdir(dir_.c_str());
  }
  RouterProcess& a() { return *routers_[0]; }
  RouterProcess& b() { return *routers_[1]; }
  RouterProcess& router(int i) { return *routers_[static_cast<size_t>(i)]; }
  // Starts host i's router anew (a new incarnation, same address and port).
  void restart(int i) {
    routers_[static_cast<size_t>(i)].reset();
    routers_[static_cast<size_t>(i)] = start(i);
  }

 private:
  std::unique_ptr<RouterProcess> start(int i) {
    // Plain links by default: the FakePeer speaks the host wire protocol in plaintext, and
    // the links' authentication has tests of its own (links_tls_test).
    std::vector<std::string> args{"--cluster", file_, "--host", name(i)};
    if (certs_ == nullptr) {
      args.insert(args.end(), {"--link-security", "off"});
    } else {
      const test_support::TestCerts::Host& h = certificate(i);
      args.insert(args.end(), {"--link-security", "auth", "--link-ca", certs_->ca(), "--link-cert",
                               h.cert, "--link-key", h.key});
    }
    args.insert(args.end(), router_args_.begin(), router_args_.end());
    return std::make_unique<RouterProcess>(args);
  }
  std::vector<std::string> router_args_;
  std::unique_ptr<test_support::TestCerts> certs_;
  std::vector<test_support::TestCerts::Host> host_certs_;
  std::string dir_, file_;
  int port_ = 0;
  std::vector<std::unique_ptr<RouterProcess>> routers_;
};

// A fixture (a VerbsTest) whose sides are on two hosts: a_ served by host 0's router, b_ by
// host 1's, of a cluster made once per test suite (a derived suite may make another in its
// own SetUpTestSuite).
template <class Base>
class TwoHostSides : public Base {
 protected:
  static void SetUpTestSuite() { cluster_ = new Cluster(2); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { this->open_sides_on(cluster_->a().socket(), cluster_->b().socket()); }
  static inline Cluster* cluster_ = nullptr;
};

}  // namespace wharf::verify
