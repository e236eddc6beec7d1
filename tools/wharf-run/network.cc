#include "network.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "command.h"
#include "netns.h"
#include "options.h"

namespace wharf::run {
namespace {

constexpr int kTerminateGraceMs = 2000;

std::string cidr(uint32_t addr, int prefix) {
  return format_ipv4(addr) + "/" + std::to_string(prefix);
}

// `ip ARGS` in the host namespace: ours, or a wharf-lab host's.
bool run_host_ip(const std::string& host_netns, std::vector<std::string> args, bool verbose,
                 bool quiet = false) {
  if (!host_netns.empty()) args.insert(args.begin(), {"-n", host_netns});
  return run_ip(args, verbose, quiet);
}

bool host_link_exists(const std::string& host_netns, const std::string& ifname) {
  if (host_netns.empty()) return link_exists(ifname);
  return run_ip({"-n", host_netns, "link", "show", ifname}, false, /*quiet=*/true);
}

}  // namespace

bool HostLock::acquire(int timeout_ms) {
  if (::mkdir(kLockDir, 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "wharf-run: mkdir %s: %s\n", kLockDir, std::strerror(errno));
    return false;
  }
  fd_.reset(::open(kLockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd_.valid()) {
    std::fprintf(stderr, "wharf-run: open %s: %s\n", kLockPath, std::strerror(errno));
    return false;
  }
  constexpr int kStepMs = 20;
  for (int waited = 0;; waited += kStepMs) {
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) {
      std::fprintf(stderr, "wharf-run: flock %s: %s\n", kLockPath, std::strerror(errno));
      return false;
    }
    if (waited >= timeout_ms) {
      std::fprintf(stderr, "wharf-run: timed out waiting for %s (held by another wharf-run)\n",
                   kLockPath);
      return false;
    }
    timespec ts{0, kStepMs * 1000000L};
    ::nanosleep(&ts, nullptr);
  }
}

bool ensure_bridge(const std::string& br, uint32_t bridge_ip, int prefix, bool verbose) {
  if (!link_exists(br) && !run_ip({"link", "add", br, "type", "bridge"}, verbose)) return false;
  // `replace` is idempotent when the address is already there.
  return run_ip({"addr", "replace", cidr(bridge_ip, prefix), "dev", br}, verbose) &&
         run_ip({"link", "set", br, "up"}, verbose);
}

// The last container out removes the bridge, so nothing is left on the host. Caller holds
// HostLock, which also serialises ensure_bridge().
void remove_bridge_if_unused(const std::string& br, bool verbose) {
  if (br.empty() || !link_exists(br)) return;
  std::error_code ec;
  std::filesystem::directory_iterator ports("/sys/class/net/" + br + "/brif", ec);
  if (ec || ports != std::filesystem::directory_iterator()) return;
  (void)run_ip({"link", "del", br}, verbose);
}

std::string bridge_of(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path master =
      std::filesystem::read_symlink("/sys/class/net/" + veth_name(name) + "/master", ec);
  return ec ? std::string() : master.filename().string();
}

bool lab_bridge_address(const std::string& host_netns, uint32_t* ip, int* prefix) {
  CommandResult r = run_command(
      {"ip", "-n", host_netns, "-4", "-o", "addr", "show", "dev", std::string(kBridgeName)});
  // One line per address: "N: wharfbr0    inet A.B.C.D/P brd ... scope global wharfbr0".
  size_t at = r.output.find(" inet ");
  if (r.status == 0 && at != std::string::npos) {
    std::string addr = r.output.substr(at + 6, r.output.find(' ', at + 6) - (at + 6));
    size_t slash = addr.find('/');
    auto parsed = parse_ipv4(addr.substr(0, slash));
    if (slash != std::string::npos && parsed) {
      *ip = *parsed;
      *prefix = std::atoi(addr.c_str() + slash + 1);
      return true;
    }
  }
  std::fprintf(stderr,
               "wharf-run: host namespace %s has no IPv4 bridge %s (is it a wharf-lab host?)\n",
               host_netns.c_str(), std::string(kBridgeName).c_str());
  return false;
}

namespace {

void say_running(const std::string& name, pid_t pid) {
  std::fprintf(stderr,
               "wharf-run: container %s is already running (network namespace %s is used by pid "
               "%d); choose another --name\n",
               name.c_str(), netns_name(name).c_str(), static_cast<int>(pid));
}

}  // namespace

bool ContainerLock::acquire(const std::string& name, int timeout_ms) {
  const std::string dir = std::string(kLockDir) + "/locks";
  if ((::mkdir(kLockDir, 0755) != 0 && errno != EEXIST) ||
      (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)) {
    std::fprintf(stderr, "wharf-run: mkdir %s: %s\n", dir.c_str(), std::strerror(errno));
    return false;
  }
  const std::string path = dir + "/" + name;
  fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd_.valid()) {
    std::fprintf(stderr, "wharf-run: open %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  constexpr int kStepMs = 20;
  for (int waited = 0;; waited += kStepMs) {
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) {
      std::fprintf(stderr, "wharf-run: flock %s: %s\n", path.c_str(), std::strerror(errno));
      return false;
    }
    std::vector<pid_t> pids = netns_pids(netns_path(name));
    if (!pids.empty()) {
      say_running(name, pids.front());
      return false;
    }
    if (waited >= timeout_ms) {
      std::fprintf(stderr, "wharf-run: container %s is still being stopped by another wharf-run\n",
                   name.c_str());
      return false;
    }
    timespec ts{0, kStepMs * 1000000L};
    ::nanosleep(&ts, nullptr);
  }
}

bool reclaim_name(const std::string& name, const std::string& host_netns, bool verbose) {
  const std::string path = netns_path(name);
  if (netns_file_exists(path)) {
    std::vector<pid_t> pids = netns_pids(path);
    if (!pids.empty()) {
      say_running(name, pids.front());
      return false;
    }
    std::fprintf(stderr,
                 "wharf-run: reclaiming network namespace %s: no process uses it and no "
                 "wharf-run owns it (left by a killed wharf-run)\n",
                 netns_name(name).c_str());
  }
  if (!host_netns.empty() && host_link_exists(host_netns, veth_name(name)))
    (void)run_host_ip(host_netns, {"link", "del", veth_name(name)}, verbose, true);
  if (host_netns.empty() && link_exists(veth_name(name))) {
    std::fprintf(stderr, "wharf-run: reclaiming interface %s left by a killed wharf-run\n",
                 veth_name(name).c_str());
  }
  remove_container_net(name, verbose);
  if (netns_file_exists(path) || host_link_exists(host_netns, veth_name(name))) {
    std::fprintf(stderr,
                 "wharf-run: could not remove what is left of container %s; try wharf-run "
                 "--cleanup %s\n",
                 name.c_str(), name.c_str());
    return false;
  }
  return true;
}

bool remove_container_net(const std::string& name, bool verbose) {
  bool removed = false;
  std::string path = netns_path(name);
  if (netns_file_exists(path)) {
    size_t n = terminate_netns_pids(path, kTerminateGraceMs);
    if (n > 0) {
      std::fprintf(stderr, "wharf-run: terminated %zu process(es) left in %s\n", n,
                   netns_name(name).c_str());
    }
  }
  // Deleting one end of a veth pair deletes both.
  if (link_exists(veth_name(name))) {
    removed |= run_ip({"link", "del", veth_name(name)}, verbose);
  }
  if (netns_file_exists(path)) removed |= run_ip({"netns", "del", netns_name(name)}, verbose);
  return removed;
}

bool ContainerNet::create() {
  const std::string ns = netns_name(cfg_.name);
  const std::string veth = veth_name(cfg_.name);
  const std::string ifname(kContainerIfName);
  const bool v = cfg_.verbose;
  if (cfg_.guest && !guest_routes_.plan(cfg_.host_netns, cfg_.vip)) return false;
  if (!run_ip({"netns", "add", ns}, v)) return false;
  created_ = true;
  struct stat st {};
  if (::stat(netns_path(cfg_.name).c_str(), &st) == 0)
    netns_dev_ = st.st_dev, netns_ino_ = st.st_ino;
  // The peer is created directly inside the namespace: "eth0" usually exists on the host.
  const std::string& host = cfg_.host_netns;
  std::vector<std::string> gateway = {
      "-n", ns, "route", "add", "default", "via", format_ipv4(cfg_.bridge_ip), "dev", ifname};
  if (cfg_.guest) gateway.push_back("onlink");  // not in the container's /32
  if (!(run_host_ip(
            host, {"link", "add", veth, "type", "veth", "peer", "name", ifname, "netns", ns}, v) &&
        run_host_ip(host, {"link", "set", veth, "master", cfg_.bridge, "up"}, v) &&
        run_ip({"-n", ns, "link", "set", "lo", "up"}, v) &&
        run_ip(
            {"-n", ns, "addr", "add", cidr(cfg_.vip, cfg_.guest ? 32 : cfg_.prefix), "dev", ifname},
            v) &&
        run_ip({"-n", ns, "link", "set", ifname, "up"}, v) && run_ip(gateway, v)))
    return false;
  if (!cfg_.guest) return true;
  routed_ = true;
  return guest_routes_.add(cfg_.bridge, v);
}

void ContainerNet::teardown() {
  if (!created_) return;
  created_ = false;
  if (routed_) guest_routes_.remove(cfg_.verbose);
  routed_ = false;
  // Take the lock so a concurrent wharf-run with the same name never sees a half-removed
  // container; remove anyway if the lock cannot be had, leaving nothing behind is worth more.
  HostLock lock;
  (void)lock.acquire(10000);
  // Only the namespace this object made: never a later container's of the same name.
  struct stat st {};
  if (::stat(netns_path(cfg_.name).c_str(), &st) == 0 &&
      (st.st_dev != netns_dev_ || st.st_ino != netns_ino_))
    return;
  // On a lab host the host end goes first, synchronously: the kernel removes a veth pair
  // whose namespace is deleted only later, and a new container could not reuse the name.
  if (!cfg_.host_netns.empty() && host_link_exists(cfg_.host_netns, veth_name(cfg_.name)))
    (void)run_host_ip(cfg_.host_netns, {"link", "del", veth_name(cfg_.name)}, cfg_.verbose, true);
  remove_container_net(cfg_.name, cfg_.verbose);
  if (cfg_.host_netns.empty()) remove_bridge_if_unused(cfg_.bridge, cfg_.verbose);
}

}  // namespace wharf::run
