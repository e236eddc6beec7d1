// wharf-device-plugin: a kubelet device plugin (API v1beta1) that offers the host's Wharf
// device to pods as an extended resource (rdma/wharf): a pod that asks for one gets the
// router's socket, our libraries preloaded and the device's files. It makes the device files
// on the host, serves DevicePlugin on a socket in the kubelet's directory, registers, and
// serves and registers again whenever the kubelet restarts. Exit status: 0 after SIGTERM or
// SIGINT, 1 when setup fails, 2 for usage errors. See README.md beside this file.
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>

#include "common/unique_fd.h"
#include "container/install_paths.h"
#include "container/router_session.h"
#include "host_state.h"
#include "kubelet_api.h"
#include "kubelet_registration.h"
#include "plugin_server.h"
#include "proto/router_client.h"
#include "router_health.h"

namespace wharf::device_plugin {
namespace {

namespace fs = std::filesystem;

constexpr int kExitSetupFailed = 1;
constexpr int kExitUsage = 2;
// How often the plugin looks for its socket and retries registering.
constexpr std::chrono::milliseconds kTick{1000};

struct Options {
  std::string resource = "rdma/wharf";
  int count = 64;
  std::string kubelet_dir{kDefaultKubeletDir};
  std::string endpoint = "wharf.sock";
  std::string router = proto::router_socket_path();
  std::string lib_dir;  // empty: <dir of the executable>/../lib
  // Not under the router's directory, which every pod sees.
  std::string state_dir = "/var/lib/wharf/device-plugin";
  bool mount_sysfs = false;
};

// Why the options cannot work, or empty.
std::string check_options(const Options& o) {
  const size_t slash = o.resource.find('/');
  if (slash == 0 || slash == std::string::npos || slash + 1 == o.resource.size() ||
      o.resource.find('/', slash + 1) != std::string::npos)
    return "--resource " + o.resource + " is not DOMAIN/NAME";
  if (o.endpoint.empty() || o.endpoint.find('/') != std::string::npos ||
      o.endpoint == kKubeletSocket || o.endpoint == "." || o.endpoint == "..")
    return "--endpoint " + o.endpoint + " is not a socket's file name of its own";
  if (o.kubelet_dir.size() + 1 + o.endpoint.size() >= sizeof(sockaddr_un::sun_path))
    return "--kubelet-dir and --endpoint make a socket path longer than " +
           std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes";
  return {};
}

// Logs `problem` unless it is the one logged last: a retry every tick says it once.
void report_once(const std::string& problem, std::string* last) {
  if (problem != *last) spdlog::warn("{} (retrying every second)", problem);
  *last = problem;
}

// The number of the first stop signal within `timeout`, or 0.
int wait_for_signal(int signal_fd, std::chrono::milliseconds timeout) {
  pollfd p{signal_fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return 0;
  signalfd_siginfo si{};
  if (::read(signal_fd, &si, sizeof(si)) != static_cast<ssize_t>(sizeof(si))) return 0;
  return static_cast<int>(si.ssi_signo);
}

// Serves and registers until a stop signal; again whenever the socket goes (the kubelet
// restarted).
int serve(const Options& o, const PluginConfig& config, const RouterHealth* health, int signal_fd) {
  const std::string socket = o.kubelet_dir + "/" + o.endpoint;
  const std::string kubelet = o.kubelet_dir + "/" + std::string(kKubeletSocket);
  std::string why;
  std::unique_ptr<PluginServer> server = PluginServer::start(socket, config, health, &why);
  if (server == nullptr) {
    spdlog::error("{}", why);
    return kExitSetupFailed;
  }
  spdlog::info("serving {} devices of {} on {}", config.count, config.resource, socket);
  bool registered = false;
  std::string last_problem;
  for (;;) {
    if (server == nullptr || server->socket_gone()) {
      if (server != nullptr)
        spdlog::warn("{} is gone (the kubelet restarted?): serving and registering again", socket);
      server.reset();  // gRPC removes the path as it stops: before the next one is made there
      server = PluginServer::start(socket, config, health, &why);
      registered = false;
      if (server == nullptr) report_once(why, &last_problem);
    }
    if (server != nullptr && !registered) {
      const grpc::Status status = register_with_kubelet(kubelet, o.endpoint, config.resource);
      registered = status.ok();
      if (registered) {
        spdlog::info("registered {} with the kubelet at {} (endpoint {})", config.resource, kubelet,
                     o.endpoint);
        last_problem.clear();
      } else {
        report_once(
            "cannot register with the kubelet at " + kubelet + ": " + status.error_message(),
            &last_problem);
      }
    }
    if (const int sig = wait_for_signal(signal_fd, kTick); sig != 0) {
      spdlog::info("{}: stopping", strsignal(sig));
      return 0;
    }
  }
}

// Sets up and serves; the paths in `o` are absolute.
int run(const Options& o, int signal_fd) {
  PluginConfig config{o.resource, o.count, {}};
  config.host.router_socket = o.router;
  config.host.lib_dir = o.lib_dir;

  std::error_code ec;
  if (!fs::is_directory(o.kubelet_dir, ec)) {
    spdlog::error("{} is not a directory (is the kubelet running here? see --kubelet-dir)",
                  o.kubelet_dir);
    return kExitSetupFailed;
  }
  const std::string libibverbs = config.host.lib_dir + "/libibverbs.so.1";
  if (::access(libibverbs.c_str(), R_OK) != 0) {
    spdlog::error("{}: {} (see --lib-dir)", libibverbs, std::strerror(errno));
    return kExitSetupFailed;
  }
  config.host.has_rdmacm = ::access((config.host.lib_dir + "/librdmacm.so.1").c_str(), R_OK) == 0;

  container::RouterSession::Info router;
  {
    container::RouterSession session;
    if (const int err = session.connect_quietly(o.router); err != 0) {
      spdlog::error("cannot connect to the router at {}: {} (is wharfd running? see --router)",
                    o.router, std::strerror(err));
      return kExitSetupFailed;
    }
    if (!session.router_info(&router)) {
      spdlog::error("the router at {} did not say who it is", o.router);
      return kExitSetupFailed;
    }
  }
  std::string step;
  if (const int err =
          make_host_state(o.state_dir, router.node_guid, router.link_layer, &config.host, &step);
      err != 0) {
    spdlog::error("making the device's files in {}: {}: {}", o.state_dir, step, std::strerror(err));
    return kExitSetupFailed;
  }
  // A runtime cannot make a mount point in a container's sysfs: without the directories on
  // the node (no RDMA kernel module), a pod given the view would not start.
  if (!o.mount_sysfs) config.host.class_dirs.clear();
  spdlog::info("device files for router {} (node GUID {:016x}) in {}", o.router, router.node_guid,
               o.state_dir);

  const RouterHealth health(o.router, true);
  return serve(o, config, &health, signal_fd);
}

int parse_and_run(int argc, char** argv) {
  Options o;
  CLI::App app{
      "wharf-device-plugin: offers the host's Wharf device to pods as a Kubernetes extended "
      "resource (kubelet device-plugin API v1beta1). Exit status: 0 after SIGTERM or SIGINT, "
      "1 when setup fails, 2 for usage errors.",
      "wharf-device-plugin"};
  app.add_option("--resource", o.resource, "The extended resource pods ask for")
      ->capture_default_str()
      ->envname("WHARF_DP_RESOURCE");
  app.add_option("--count", o.count,
                 "Devices to offer, wharf-0 ... wharf-<count - 1>: the router is shared, so this "
                 "is how many pods with a device the node admits")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str()
      ->envname("WHARF_DP_COUNT");
  app.add_option("--kubelet-dir", o.kubelet_dir,
                 "The kubelet's device-plugin directory, holding kubelet.sock")
      ->capture_default_str()
      ->envname("WHARF_DP_KUBELET_DIR");
  app.add_option("--endpoint", o.endpoint, "The plugin's socket: a file name in --kubelet-dir")
      ->capture_default_str()
      ->envname("WHARF_DP_ENDPOINT");
  app.add_option("--router", o.router,
                 "The router's (wharfd's) socket on the host; its directory is bound into pods "
                 "as /run/wharf")
      ->capture_default_str()
      ->envname("WHARF_ROUTER");
  app.add_option("--lib-dir", o.lib_dir,
                 "Host directory holding Wharf's libibverbs.so.1 and librdmacm.so.1, bound into "
                 "pods as /opt/wharf/lib (default: ../lib beside wharf-device-plugin)")
      ->envname("WHARF_DP_LIB_DIR");
  app.add_option("--state-dir", o.state_dir,
                 "Host directory for the device nodes and the sysfs view made for pods")
      ->capture_default_str()
      ->envname("WHARF_DP_STATE_DIR");
  app.add_flag("--mount-sysfs", o.mount_sysfs,
               "Also bind the sysfs view into pods as /sys/class/infiniband and "
               "/sys/class/infiniband_verbs: only on nodes whose sysfs has those directories "
               "(an RDMA kernel module loaded), since a runtime cannot create mount points in "
               "sysfs")
      ->envname("WHARF_DP_MOUNT_SYSFS");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  o.kubelet_dir = container::absolute_path(o.kubelet_dir);
  o.router = container::absolute_path(o.router);
  o.lib_dir =
      container::absolute_path(o.lib_dir.empty() ? container::bundled_lib_dir() : o.lib_dir);
  o.state_dir = container::absolute_path(o.state_dir);
  if (const std::string bad = check_options(o); !bad.empty()) {
    std::fprintf(stderr, "wharf-device-plugin: %s (see --help)\n", bad.c_str());
    return kExitUsage;
  }

  spdlog::set_default_logger(spdlog::stderr_color_mt("wharf-device-plugin"));
  // Taken synchronously, and blocked before any thread starts so that every thread inherits
  // the mask: gRPC's and the health probe's threads must not take them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  ::sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  const UniqueFd signal_fd(::signalfd(-1, &stop_signals, SFD_CLOEXEC));
  if (!signal_fd.valid()) {
    spdlog::error("signalfd: {}", std::strerror(errno));
    return kExitSetupFailed;
  }
  return run(o, signal_fd.get());
}

}  // namespace
}  // namespace wharf::device_plugin

int main(int argc, char** argv) {
  try {
    return wharf::device_plugin::parse_and_run(argc, argv);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc; CLI11's own errors are handled
    std::fprintf(stderr, "wharf-device-plugin: %s\n", e.what());
    return wharf::device_plugin::kExitSetupFailed;
  }
}
