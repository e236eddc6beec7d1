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
#include "verbs_fixture.h"

namespace wharf::verify {

// Routers "a", "b" (and "c") on 127.0.0.1, sharing a cluster file in a temporary directory;
// host K serves 198.18.K.0/24 and LIDs (K-1)*1024+1 .. K*1024. Routers are started for the
// first `started` hosts (all by default); the others' ports are for a FakePeer.
class Cluster {
 public:
  explicit Cluster(int hosts, std::vector<std::string> router_args = {}, int started = -1)
      : router_args_(std::move(router_args)) {
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
  static std::string name(int i) { return std::string(1, static_cast<char>('a' + i)); }
  std::unique_ptr<RouterProcess> start(int i) {
    // Unauthenticated links: the FakePeer speaks the host wire protocol in plaintext, and
    // the links' authentication has tests of its own (links_host_links_test).
    std::vector<std::string> args{"--cluster", file_, "--host", name(i), "--link-security", "off"};
    args.insert(args.end(), router_args_.begin(), router_args_.end());
    return std::make_unique<RouterProcess>(args);
  }
  std::vector<std::string> router_args_;
  std::string dir_, file_;
  int port_ = 0;
  std::vector<std::unique_ptr<RouterProcess>> routers_;
};

}  // namespace wharf::verify
