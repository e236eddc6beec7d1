// wharf-exec NAME CMD [ARGS...]: runs a command inside a running container made by wharf-run,
// like `docker exec`, with the container's router and libraries. The command line is joined
// with spaces and run by /bin/sh -c, as ssh runs a remote command, so wharf-exec serves as
// the rsh agent of launchers such as Open MPI's mpirun (--mca plm_rsh_agent wharf-exec).
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "container/record.h"

extern char** environ;

namespace {

constexpr int kExitSetupFailed = 125;
constexpr int kExitExecFailed = 127;

void usage() {
  std::fprintf(stderr,
               "usage: wharf-exec NAME CMD [ARGS...]\n"
               "Runs CMD in the running container NAME (made by wharf-run): its network, UTS and "
               "mount namespaces, with Wharf's libraries injected as wharf-run injected them.\n"
               "Like ssh, the words are joined with spaces and run by /bin/sh -c.\n"
               "Exit status: CMD's; 125 if wharf-exec failed; 127 if CMD could not run.\n");
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

int exec_in(const std::string& name, const std::vector<std::string>& words) {
  wharf::container::Record rec;
  if (int err = wharf::container::read_record(name, &rec); err != 0) {
    std::fprintf(stderr, "wharf-exec: no running container %s (%s: %s)\n", name.c_str(),
                 wharf::container::record_path(name).c_str(),
                 err == ENOENT ? "not found" : "malformed");
    return kExitSetupFailed;
  }
  const std::string proc = "/proc/" + std::to_string(rec.pid) + "/ns/";
  // The record's process must still be the container's: a pid is reused after it exits.
  if (!same_file(proc + "net", "/run/netns/wharf-" + name)) {
    std::fprintf(stderr, "wharf-exec: container %s is not running (its process %d is gone)\n",
                 name.c_str(), static_cast<int>(rec.pid));
    return kExitSetupFailed;
  }
  char cwd[PATH_MAX];
  const bool have_cwd = ::getcwd(cwd, sizeof(cwd)) != nullptr;
  // Opened first, joined after: joining the mount namespace changes what /proc shows.
  const char* kinds[] = {"net", "uts", "mnt"};
  const int flags[] = {CLONE_NEWNET, CLONE_NEWUTS, CLONE_NEWNS};
  wharf::UniqueFd fds[3];
  for (int i = 0; i < 3; ++i) {
    fds[i].reset(::open((proc + kinds[i]).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fds[i].valid()) {
      std::fprintf(stderr, "wharf-exec: open %s%s: %s\n", proc.c_str(), kinds[i],
                   std::strerror(errno));
      return kExitSetupFailed;
    }
  }
  for (int i = 0; i < 3; ++i) {
    if (::setns(fds[i].get(), flags[i]) != 0) {
      std::fprintf(stderr, "wharf-exec: join the %s namespace of %s: %s\n", kinds[i], name.c_str(),
                   std::strerror(errno));
      return kExitSetupFailed;
    }
  }
  // Joining a mount namespace moves to its root; the container shares our file system.
  if (!have_cwd || ::chdir(cwd) != 0) (void)::chdir("/");

  std::vector<std::string> base;
  for (char** e = environ; *e != nullptr; ++e) base.emplace_back(*e);
  std::vector<std::string> env = wharf::container::container_environment(base, name, rec);
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::string line;
  for (const auto& w : words) line += (line.empty() ? "" : " ") + w;
  char sh[] = "/bin/sh", dash_c[] = "-c";
  char* argv[] = {sh, dash_c, line.data(), nullptr};
  ::execve(sh, argv, cenv.data());
  std::fprintf(stderr, "wharf-exec: cannot execute /bin/sh: %s\n", std::strerror(errno));
  return kExitExecFailed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    usage();
    return 0;
  }
  if (argc < 3) {
    usage();
    return 2;
  }
  if (::geteuid() != 0) {
    std::fprintf(stderr, "wharf-exec: must run as root (it joins a container's namespaces)\n");
    return kExitSetupFailed;
  }
  const std::string name = argv[1];
  if (name.find('/') != std::string::npos || name == "." || name == "..") {
    std::fprintf(stderr, "wharf-exec: invalid container name '%s'\n", name.c_str());
    return 2;
  }
  return exec_in(name, std::vector<std::string>(argv + 2, argv + argc));
}
