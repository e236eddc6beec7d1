// A real etcd (Debian's etcd-server, /usr/bin/etcd) for tests: one member on loopback, on free
// ports, with a fresh data directory under $TMPDIR (or /tmp) that the destructor removes along
// with the process.
//
//   if (!EtcdProcess::available()) GTEST_SKIP() << EtcdProcess::kMissing;
//   EtcdProcess etcd;
//   ASSERT_TRUE(etcd.ok());
//   open_etcd_store(etcd.base_url(), &store);
//
// etcd's output goes to etcd.log beside the data directory and is printed when it fails to
// start. The child dies with the thread that started it (PR_SET_PDEATHSIG), so a crashed test
// leaves no etcd behind. Not thread-safe: one test thread drives it.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/free_ports.h"

namespace wharf::test_support {

class EtcdProcess {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";
  static constexpr const char* kMissing =
      "needs /usr/bin/etcd (Debian package etcd-server; scripts/install-deps.sh installs it)";

  static bool available() { return access(kBinary, X_OK) == 0; }

  // Starts etcd and waits until it answers; ok() says whether it did.
  EtcdProcess() {
    std::error_code ec;
    std::string dir = (std::filesystem::temp_directory_path(ec) / "wharf-etcd.XXXXXX").string();
    if (ec || mkdtemp(dir.data()) == nullptr) {
      std::perror("EtcdProcess: mkdtemp");
      return;
    }
    dir_ = dir;
    // Something else may bind the ports between free_ports() and etcd: try fresh ones.
    for (int attempt = 0; attempt < 3 && !ok_; ++attempt) {
      const int port = free_ports(2);
      if (port == 0) continue;
      client_port_ = port;
      peer_port_ = port + 1;
      std::error_code ignored;
      std::filesystem::remove_all(dir_ + "/data", ignored);
      ok_ = start();
    }
  }

  ~EtcdProcess() {
    stop();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Running and answering (false after kill_hard() until restart()).
  bool ok() const { return ok_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(client_port_); }
  int client_port() const { return client_port_; }

  // A crash: SIGKILL, nothing flushed beyond what etcd already synced.
  void kill_hard() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = 0;
    }
    ok_ = false;
  }

  // Stops etcd if it runs and starts it again on the same ports and data, waiting until it
  // answers; ok() says whether it does.
  void restart() {
    stop();
    ok_ = start();
  }

 private:
  static constexpr auto kStartLimit = std::chrono::seconds(20);
  static constexpr auto kStopLimit = std::chrono::seconds(10);
  static constexpr auto kPoll = std::chrono::milliseconds(20);

  std::string url(int port) const { return "http://127.0.0.1:" + std::to_string(port); }

  // Forks etcd and waits (bounded) until it answers; on failure leaves nothing running.
  bool start() {
    const std::string peer = url(peer_port_);
    const std::vector<std::string> args = {kBinary,
                                           "--name=default",
                                           "--data-dir=" + dir_ + "/data",
                                           "--listen-client-urls=" + base_url(),
                                           "--advertise-client-urls=" + base_url(),
                                           "--listen-peer-urls=" + peer,
                                           "--initial-advertise-peer-urls=" + peer,
                                           "--initial-cluster=default=" + peer,
                                           "--initial-cluster-state=new",
                                           "--logger=zap",
                                           "--log-outputs=stderr"};
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    // A fixed environment, so that ETCD_* variables of whoever runs the tests change nothing.
    char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
    char* envp[] = {path_env, nullptr};
    const std::string log = dir_ + "/etcd.log";
    const pid_t parent = getpid();

    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("EtcdProcess: fork");
      return false;
    }
    if (pid == 0) {  // only async-signal-safe calls from here on
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      const int in = open("/dev/null", O_RDONLY);
      if (out < 0 || in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(127);
      close_range(3, ~0u, 0);  // the test's sockets must not outlive it in etcd
      execve(kBinary, argv.data(), envp);
      _exit(127);
    }
    pid_ = pid;

    const auto deadline = std::chrono::steady_clock::now() + kStartLimit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {  // exited: typically a port taken
        pid_ = 0;
        break;
      }
      if (answers()) return true;
      std::this_thread::sleep_for(kPoll);
    }
    if (pid_ > 0) kill_hard();
    std::ifstream f(log);
    std::stringstream text;
    text << f.rdbuf();
    const std::string all = text.str();
    std::fprintf(stderr, "EtcdProcess: etcd on %s did not start; the end of %s:\n%s\n",
                 base_url().c_str(), log.c_str(),
                 all.substr(all.size() > 3000 ? all.size() - 3000 : 0).c_str());
    return false;
  }

  // SIGTERM, then SIGKILL if etcd is still there after kStopLimit.
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + kStopLimit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = 0;
        ok_ = false;
        return;
      }
      std::this_thread::sleep_for(kPoll);
    }
    kill_hard();
  }

  // GET /health answers 200 {"health":"true"} once etcd serves clients and has a leader.
  bool answers() const {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    timeval tv{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(client_port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string reply;
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      const std::string req = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
      if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
        char buf[1024];
        ssize_t n;
        while (reply.size() < 8192 && (n = recv(fd, buf, sizeof(buf), 0)) > 0) reply.append(buf, n);
      }
    }
    close(fd);
    return reply.rfind("HTTP/1.", 0) == 0 && reply.find(" 200 ") != std::string::npos &&
           reply.find("\"health\":\"true\"") != std::string::npos;
  }

  std::string dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  pid_t pid_ = 0;
  bool ok_ = false;
};

}  // namespace wharf::test_support
