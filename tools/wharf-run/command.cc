#include "command.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/unique_fd.h"

namespace wharf::run {
namespace {

// `ip` lives in /usr/sbin, which is not on every PATH (e.g. sudo without secure_path).
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = ::getenv("PATH") != nullptr ? ::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    start = end + 1;
  }
  return name;
}

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) {
    if (!s.empty()) s += ' ';
    s += w;
  }
  return s;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult result;
  if (argv.empty()) return result;
  std::string program = resolve_program(argv[0]);
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    result.output = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  UniqueFd rd(pipefd[0]);
  UniqueFd wr(pipefd[1]);
  pid_t pid = ::fork();
  if (pid < 0) {
    result.output = std::string("fork: ") + std::strerror(errno);
    return result;
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(wr.get(), STDOUT_FILENO);
    ::dup2(wr.get(), STDERR_FILENO);
    ::execv(program.c_str(), cargv.data());
    std::fprintf(stderr, "cannot execute %s: %s\n", program.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  wr.reset();
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(rd.get(), buf, sizeof(buf));
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool run_ip(const std::vector<std::string>& args, bool verbose, bool quiet) {
  std::vector<std::string> argv{"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  if (verbose) std::fprintf(stderr, "wharf-run: + %s\n", join(argv).c_str());
  CommandResult r = run_command(argv);
  if (r.status == 0) return true;
  if (!quiet) {
    std::string msg = r.output;
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    if (msg.empty()) msg = "failed with status " + std::to_string(r.status);
    std::fprintf(stderr, "wharf-run: %s: %s\n", join(argv).c_str(), msg.c_str());
  }
  return false;
}

}  // namespace wharf::run
