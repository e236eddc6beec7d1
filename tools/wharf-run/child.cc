#include "child.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "container/device_view.h"
#include "options.h"
#include "registration.h"

namespace wharf::run {

sigset_t supervised_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGCHLD);
  return set;
}

pid_t spawn_in_container(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const ContainerSetup& setup, const sigset_t& child_mask) {
  // Everything the child needs is prepared before fork().
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    std::fprintf(stderr, "wharf-run: fork: %s\n", std::strerror(errno));
    return -1;
  }
  if (pid > 0) return pid;

  // Child. A container does not outlive its wharf-run: without the registration socket the
  // router no longer serves it, and nobody would remove its namespace.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(kExitExecFailed);
  if (::setns(setup.netns_fd, CLONE_NEWNET) != 0) {
    std::fprintf(stderr, "wharf-run: setns: %s\n", std::strerror(errno));
    ::_exit(kExitExecFailed);
  }
  if (::unshare(CLONE_NEWUTS) != 0 ||
      ::sethostname(setup.hostname.data(), setup.hostname.size()) != 0) {
    std::fprintf(stderr, "wharf-run: hostname: %s\n", std::strerror(errno));
    ::_exit(kExitExecFailed);
  }
  std::string step;
  if (int err = container::enter_device_view(*setup.class_tree, &step); err != 0) {
    std::fprintf(stderr, "wharf-run: device view: %s: %s\n", step.c_str(), std::strerror(err));
    ::_exit(kExitExecFailed);
  }
  ::sigprocmask(SIG_SETMASK, &child_mask, nullptr);
  ::execvpe(cargv[0], cargv.data(), cenv.data());
  std::fprintf(stderr, "wharf-run: cannot execute %s: %s\n", cargv[0], std::strerror(errno));
  ::_exit(kExitExecFailed);
}

int supervise(pid_t child, int signal_fd, Registration* registration) {
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      continue;
    }
    if (r < 0 && errno != EINTR) {
      std::fprintf(stderr, "wharf-run: waitpid: %s\n", std::strerror(errno));
      return kExitSetupFailed;
    }

    // POLLRDHUP only: replies are read by RouterSession, here we only notice a hang-up. A
    // negative fd (no registration socket) is ignored by poll.
    pollfd fds[2] = {{signal_fd, POLLIN, 0}, {registration->fd(), POLLRDHUP, 0}};
    int n = ::poll(fds, 2, registration->poll_timeout_ms());
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "wharf-run: poll: %s\n", std::strerror(errno));
      return kExitSetupFailed;
    }
    registration->on_poll(fds[1].revents);
    if ((fds[0].revents & POLLIN) == 0) continue;
    signalfd_siginfo si;
    ssize_t got = ::read(signal_fd, &si, sizeof(si));
    if (got != static_cast<ssize_t>(sizeof(si))) continue;
    int sig = static_cast<int>(si.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped at the top of the loop
    // A signal the kernel generated from the terminal (Ctrl-C, hangup) went to the whole
    // foreground process group, which includes CMD; forwarding it would deliver it twice.
    if (si.ssi_code == SI_KERNEL) continue;
    ::kill(child, sig);
  }
}

}  // namespace wharf::run
