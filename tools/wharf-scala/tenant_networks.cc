#include "tenant_networks.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace wharf::scala {
namespace {

constexpr char kTenant[] = "wharf-scala";
constexpr uint32_t kAddressBase = 0xc6130000;  // 198.19.0.0

}  // namespace

int NamespacePool::get(size_t i, std::string* error) {
  if (i < fds_.size()) return fds_[i].get();
  // A thread of its own makes them: unshare moves only the calling thread into each new
  // namespace, and the thread ends with its last one; the fds keep them alive.
  int err = 0;
  std::thread maker([&] {
    while (fds_.size() <= i) {
      if (unshare(CLONE_NEWNET) != 0) {
        err = errno;
        return;
      }
      UniqueFd fd(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) {
        err = errno;
        return;
      }
      fds_.push_back(std::move(fd));
    }
  });
  maker.join();
  if (err != 0) {
    *error = std::string("cannot make a network namespace for a tenant network: ") +
             std::strerror(err) + " (networks > 1 needs root)";
    return -1;
  }
  return fds_[i].get();
}

std::string OwnContainer::join(const std::vector<std::string>& sockets,
                               const std::vector<uint32_t>& vips) {
  if (unshare(CLONE_NEWNET) != 0)
    return std::string("cannot move into a network namespace of its own: ") + std::strerror(errno) +
           " (--vip needs root)";
  netns_ = UniqueFd(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
  if (!netns_.valid()) return std::string("/proc/self/ns/net: ") + std::strerror(errno);
  for (size_t i = 0; i < sockets.size(); ++i) {
    if (i > 0 && sockets[i] == sockets[0]) continue;
    auto session = std::make_unique<container::RouterSession>();
    if (!session->connect(sockets[i])) return "cannot connect to the router at " + sockets[i];
    uint16_t lid = 0;
    const std::string name = "wharf-scala-" + std::to_string(getpid());
    if (!session->register_container("", "", name, vips[i], 0, netns_.get(), &lid))
      return "the router at " + sockets[i] + " refused the engine's container (see above)";
    sessions_.push_back(std::move(session));
  }
  return {};
}

std::string TenantNetworks::hold(size_t count) {
  if (count > kMaxTenantNetworks)
    return "networks: at most " + std::to_string(kMaxTenantNetworks + 1);
  while (sessions_.size() > count) {
    sessions_.back()->unregister_container("scala-" + std::to_string(side_) + "-" +
                                           std::to_string(sessions_.size() - 1));
    sessions_.pop_back();
  }
  while (sessions_.size() < count) {
    const size_t i = sessions_.size();
    std::string error;
    const int netns = pool_->get(i, &error);
    if (netns < 0) return error;
    auto session = std::make_unique<container::RouterSession>();
    if (!session->connect(socket_)) return "cannot connect to the router at " + socket_;
    const auto vip = static_cast<uint32_t>(kAddressBase + (side_ << 14) + i + 1);
    uint16_t lid = 0;
    const std::string name = "scala-" + std::to_string(side_) + "-" + std::to_string(i);
    if (!session->register_container(kTenant, "scala-net-" + std::to_string(i), name, vip, 0, netns,
                                     &lid))
      return "the router at " + socket_ + " refused tenant network " + std::to_string(i) +
             " (see above; networks > 1 needs root)";
    sessions_.push_back(std::move(session));
  }
  return {};
}

}  // namespace wharf::scala
