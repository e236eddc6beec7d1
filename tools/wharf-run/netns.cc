#include "netns.h"

#include <dirent.h>
#include <net/if.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

namespace wharf::run {

bool netns_file_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::vector<pid_t> netns_pids(const std::string& path) {
  std::vector<pid_t> pids;
  struct stat ns {};
  if (::stat(path.c_str(), &ns) != 0) return pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  pid_t self = ::getpid();
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0 || pid == self) continue;
    std::string link = std::string("/proc/") + e->d_name + "/ns/net";
    struct stat st {};
    // A namespace is identified by the (device, inode) of its nsfs file.
    if (::stat(link.c_str(), &st) == 0 && st.st_dev == ns.st_dev && st.st_ino == ns.st_ino) {
      pids.push_back(static_cast<pid_t>(pid));
    }
  }
  ::closedir(proc);
  return pids;
}

size_t terminate_netns_pids(const std::string& path, int grace_ms) {
  std::vector<pid_t> pids = netns_pids(path);
  if (pids.empty()) return 0;
  for (pid_t p : pids) ::kill(p, SIGTERM);
  constexpr int kStepMs = 20;
  for (int waited = 0; waited < grace_ms; waited += kStepMs) {
    timespec ts{0, kStepMs * 1000000L};
    ::nanosleep(&ts, nullptr);
    if (netns_pids(path).empty()) return pids.size();
  }
  for (pid_t p : netns_pids(path)) ::kill(p, SIGKILL);
  // SIGKILL is not instantaneous; give the kernel a moment so the namespace can be released.
  for (int waited = 0; waited < 1000 && !netns_pids(path).empty(); waited += kStepMs) {
    timespec ts{0, kStepMs * 1000000L};
    ::nanosleep(&ts, nullptr);
  }
  return pids.size();
}

bool link_exists(const std::string& ifname) { return ::if_nametoindex(ifname.c_str()) != 0; }

bool named_netns_of(pid_t pid, std::string* name, std::string* error) {
  struct stat theirs {
  }, ours{};
  std::string link = "/proc/" + std::to_string(pid) + "/ns/net";
  if (::stat(link.c_str(), &theirs) != 0 || ::stat("/proc/self/ns/net", &ours) != 0) {
    *error = "cannot read the network namespace of router pid " + std::to_string(pid);
    return false;
  }
  name->clear();
  if (theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev) return true;
  if (DIR* dir = ::opendir("/run/netns")) {
    while (dirent* e = ::readdir(dir)) {
      struct stat st {};
      std::string path = std::string("/run/netns/") + e->d_name;
      if (e->d_name[0] != '.' && ::stat(path.c_str(), &st) == 0 && st.st_ino == theirs.st_ino &&
          st.st_dev == theirs.st_dev) {
        *name = e->d_name;
        break;
      }
    }
    ::closedir(dir);
  }
  if (name->empty()) {
    *error = "the router (pid " + std::to_string(pid) +
             ") runs in a network namespace without a name under /run/netns; containers can "
             "only be attached to a router in this namespace or on a wharf-lab host";
    return false;
  }
  return true;
}

}  // namespace wharf::run
