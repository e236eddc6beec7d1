// wharf-run: runs a command as a Wharf "container": its own network namespace bridged to the
// host, registered with a router, with our libibverbs injected. See README.md beside this file.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "child.h"
#include "common/unique_fd.h"
#include "container/install_paths.h"
#include "container/record.h"
#include "container/router_session.h"
#include "container/sysfs_tree.h"
#include "control/api_client.h"
#include "control/credentials.h"
#include "control/placement.h"
#include "netns.h"
#include "network.h"
#include "options.h"
#include "proto/vip_gid.h"
#include "registration.h"

extern char** environ;

namespace wharf::run {
namespace {

constexpr int kLockTimeoutMs = 30000;

void say(const Options& o, const std::string& msg) {
  if (o.verbose) std::fprintf(stderr, "wharf-run: %s\n", msg.c_str());
}

int cleanup(const std::string& name) {
  if (!valid_container_name(name)) {
    std::fprintf(stderr, "wharf-run: invalid container name '%s'\n", name.c_str());
    return 2;
  }
  HostLock lock;
  if (!lock.acquire(kLockTimeoutMs)) return kExitSetupFailed;
  const std::string bridge = bridge_of(name);  // before its port goes
  if (remove_container_net(name, true)) {
    std::fprintf(stderr, "wharf-run: removed container %s\n", name.c_str());
  } else {
    std::fprintf(stderr, "wharf-run: nothing to clean up for container %s\n", name.c_str());
  }
  remove_bridge_if_unused(bridge, true);
  // Anything still there means removal failed (the ip errors were printed).
  return netns_file_exists(netns_path(name)) || link_exists(veth_name(name)) ? 1 : 0;
}

// The first of SIGINT/SIGTERM/SIGHUP that arrived during setup, if any.
std::optional<int> pending_stop_signal(int signal_fd) {
  for (;;) {
    signalfd_siginfo si;
    ssize_t n = ::read(signal_fd, &si, sizeof(si));
    if (n != static_cast<ssize_t>(sizeof(si))) return std::nullopt;
    if (si.ssi_signo != SIGCHLD) return static_cast<int>(si.ssi_signo);
  }
}

int run(Options o) {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "wharf-run: must run as root (it creates network namespaces)\n");
    return kExitSetupFailed;
  }
  const std::string router = container::absolute_path(o.router);
  const std::string lib_dir =
      container::absolute_path(o.lib_dir.empty() ? container::bundled_lib_dir() : o.lib_dir);
  const std::string lib = lib_dir + "/libibverbs.so.1";
  if (::access(lib.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "wharf-run: warning: %s: %s; CMD will not see wharf0 (see --lib-dir)\n",
                 lib.c_str(), std::strerror(errno));
  }

  // Signals are taken synchronously from here on, so none can interrupt setup half-way; they
  // stay pending until CMD runs (or setup is abandoned because of them).
  sigset_t old_mask;
  sigset_t sigs = supervised_signals();
  ::sigprocmask(SIG_BLOCK, &sigs, &old_mask);
  UniqueFd signal_fd(::signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!signal_fd.valid()) {
    std::fprintf(stderr, "wharf-run: signalfd: %s\n", std::strerror(errno));
    return kExitSetupFailed;
  }

  // Connect first: a missing router is the commonest mistake and needs nothing undone.
  Registration registration(router, o.reconnect_s, o.verbose);
  if (!registration.connect()) return kExitSetupFailed;
  container::RouterSession::Info router_info;
  if (!registration.session().router_info(&router_info)) return kExitSetupFailed;
  uint16_t lid = 0;  // the orchestrator's for the container; 0: the router picks
  if (!o.tenant.empty()) {
    std::string token;
    std::string why;
    if (!control::TokenSource(o.token_file).get(&token, &why)) {
      std::fprintf(stderr, "wharf-run: %s\n", why.c_str());
      return kExitSetupFailed;
    }
    control::Placement p{{o.orchestrator, o.tls_ca}, token, o.tenant, o.network, o.name,
                         router_info.host,           o.vip};
    if (const Status st = control::check_api_endpoint(p.orchestrator); !st.is_ok()) {
      std::fprintf(stderr, "wharf-run: %s\n", st.message().c_str());
      return kExitSetupFailed;
    }
    if (p.host.empty()) {
      std::fprintf(stderr,
                   "wharf-run: router %s has no host name; start wharfd with --orchestrator and "
                   "--host to use --tenant\n",
                   router.c_str());
      return kExitSetupFailed;
    }
    if (const Status st = control::place_container(p, &o.vip, &lid); !st.is_ok()) {
      std::fprintf(stderr, "wharf-run: %s\n", st.message().c_str());
      return kExitSetupFailed;
    }
    say(o, "orchestrator " + o.orchestrator + ": container " + o.tenant + "/" + o.name + " at " +
               format_ipv4(o.vip) + " with LID " + std::to_string(lid) + " on host " + p.host);
  }

  // The container joins the router's host: this namespace, or a wharf-lab host's, whose
  // bridge fixes the gateway and the container subnet.
  NetConfig cfg{o.name, o.vip, o.prefix, o.bridge_ip, o.bridge, o.verbose, {}};
  std::string err;
  if (!named_netns_of(registration.session().router_pid(), &cfg.host_netns, &err)) {
    std::fprintf(stderr, "wharf-run: %s\n", err.c_str());
    return kExitSetupFailed;
  }
  if (!cfg.host_netns.empty()) {
    if (cfg.bridge != kBridgeName) {
      std::fprintf(stderr, "wharf-run: --bridge: host %s has its one bridge, %s\n",
                   cfg.host_netns.c_str(), std::string(kBridgeName).c_str());
      return kExitSetupFailed;
    }
    if (!lab_bridge_address(cfg.host_netns, &cfg.bridge_ip, &cfg.prefix)) return kExitSetupFailed;
    if (std::string bad = check_addresses(cfg.vip, cfg.bridge_ip, cfg.prefix); !bad.empty()) {
      // The orchestrator's address, from another host's subnet: the lab routes it here.
      cfg.guest = !o.tenant.empty() && cfg.vip != cfg.bridge_ip;
      if (!cfg.guest) {
        std::fprintf(stderr, "wharf-run: %s (the container subnet of host %s)\n", bad.c_str(),
                     cfg.host_netns.c_str());
        return kExitSetupFailed;
      }
      say(o, format_ipv4(cfg.vip) + " is not of host " + cfg.host_netns +
                 "'s subnet: routing it there in the lab");
    }
  } else if (!o.tenant.empty()) {  // a --vip was checked with the options
    if (std::string bad = check_addresses(cfg.vip, cfg.bridge_ip, cfg.prefix); !bad.empty()) {
      std::fprintf(stderr, "wharf-run: network %s gave %s: %s\n", o.network.c_str(),
                   format_ipv4(cfg.vip).c_str(), bad.c_str());
      return kExitSetupFailed;
    }
  }
  // Held until wharf-run exits: a later wharf-run of this name waits out our teardown.
  ContainerLock name_lock;
  if (!name_lock.acquire(o.name, kLockTimeoutMs)) return kExitSetupFailed;
  ContainerNet net(cfg);  // declared before the lock: on error it is torn down after unlocking
  {
    HostLock lock;
    if (!lock.acquire(kLockTimeoutMs) || !reclaim_name(o.name, cfg.host_netns, o.verbose) ||
        (cfg.host_netns.empty() &&
         !ensure_bridge(cfg.bridge, cfg.bridge_ip, cfg.prefix, o.verbose)) ||
        !net.create()) {
      return kExitSetupFailed;
    }
  }
  say(o, "network namespace " + netns_name(o.name) + " ready, " + format_ipv4(o.vip) + "/" +
             std::to_string(cfg.prefix) + " via " + format_ipv4(cfg.bridge_ip) +
             (cfg.host_netns.empty() ? "" : " on host " + cfg.host_netns));

  UniqueFd netns_fd(::open(netns_path(o.name).c_str(), O_RDONLY | O_CLOEXEC));
  if (!netns_fd.valid()) {
    std::fprintf(stderr, "wharf-run: open %s: %s\n", netns_path(o.name).c_str(),
                 std::strerror(errno));
    return kExitSetupFailed;
  }
  if (!registration.register_container(o.tenant, o.network, o.name, o.vip, lid, netns_fd.get()))
    return kExitSetupFailed;
  lid = registration.lid();
  say(o,
      "registered container " + o.name + " with router " + router + ", LID " + std::to_string(lid));

  if (auto sig = pending_stop_signal(signal_fd.get())) {
    std::fprintf(stderr, "wharf-run: interrupted by signal %d before starting CMD\n", *sig);
    registration.unregister();
    return 128 + *sig;
  }

  const container::Record record{0, router, lib_dir, o.dropin};
  std::vector<std::string> base_env;
  for (char** e = environ; *e != nullptr; ++e) base_env.emplace_back(*e);
  std::vector<std::string> env = container::container_environment(base_env, o.name, record);
  container::DeviceFacts facts{router_info.node_guid, lid, router_info.link_layer,
                               proto::gid_for_vip(o.vip), std::string(kContainerIfName)};
  const std::vector<container::SysfsEntry> class_tree = container::infiniband_class_tree(facts);
  pid_t child = spawn_in_container(o.command, env, {netns_fd.get(), o.name, &class_tree}, old_mask);
  int status = kExitSetupFailed;
  if (child > 0) {
    container::Record running = record;
    running.pid = child;
    if (int werr = container::write_record(o.name, running); werr != 0)
      std::fprintf(stderr, "wharf-run: warning: %s: %s (wharf-exec cannot find the container)\n",
                   container::record_path(o.name).c_str(), std::strerror(werr));
    status = supervise(child, signal_fd.get(), &registration);
    container::remove_record(o.name);
    say(o, "CMD exited with status " + std::to_string(status));
  }
  registration.unregister();
  net.teardown();
  return status;
}

int parse_and_run(int argc, char** argv) {
  Options o;
  std::string vip;
  std::string bridge_ip(kDefaultBridgeIp);
  std::string cleanup_name;

  CLI::App app{
      "  wharf-run --router PATH --name NAME --vip A.B.C.D [OPTIONS] -- CMD [ARGS...]\n"
      "  wharf-run --cleanup NAME\n\n"
      "Runs CMD as a Wharf container: in its own network namespace wharf-NAME, bridged to the "
      "host by wharfbr0 (or --bridge), registered with the router, with Wharf's libibverbs "
      "injected.\n"
      "After a wharf-run was killed (SIGKILL), `wharf-run --cleanup NAME` removes what it left "
      "behind.\nExit status: CMD's; 128+N if CMD died of signal N; 127 if CMD could not be "
      "executed; 125 if wharf-run itself failed; 2 for usage errors.",
      "wharf-run"};
  app.add_option("--router", o.router, "Router (wharfd) control socket path");
  app.add_option("--name", o.name,
                 "Container name: 1-12 characters of [A-Za-z0-9_.-]; the netns is wharf-NAME, "
                 "the host veth wv-NAME");
  app.add_option("--vip", vip,
                 "Container's virtual IPv4 address (with --tenant: the one to ask for; by default "
                 "the orchestrator picks)");
  const char* env_orchestrator = std::getenv("WHARF_ORCHESTRATOR");
  o.orchestrator = env_orchestrator != nullptr ? env_orchestrator : "http://127.0.0.1:7480";
  app.add_option("--orchestrator", o.orchestrator,
                 "wharf-orchestrator's http://HOST:PORT or https://HOST:PORT, used with --tenant "
                 "(default: $WHARF_ORCHESTRATOR or http://127.0.0.1:7480)");
  app.add_option("--tls-ca", o.tls_ca, control::kTlsCaHelp)->envname("WHARF_TLS_CA");
  app.add_option("--token-file", o.token_file,
                 "A file holding the token to present to the orchestrator (admin or the "
                 "tenant's tenant-admin); else $WHARF_TOKEN")
      ->envname("WHARF_TOKEN_FILE");
  app.add_option("--tenant", o.tenant,
                 "Run as container NAME of this tenant: the orchestrator keeps its record and "
                 "address (moved to this router's host if it ran elsewhere), gives it a LID of "
                 "this host's range, and its policies apply; needs --network");
  app.add_option("--network", o.network, "The tenant's virtual network the container joins");
  app.add_option("--prefix", o.prefix, "Prefix length of the VIP and bridge subnet")
      ->check(CLI::Range(1, 30))
      ->capture_default_str();
  app.add_option("--bridge-ip", bridge_ip, "Address of the bridge, the default gateway")
      ->capture_default_str();
  app.add_option("--bridge", o.bridge,
                 "Host bridge to join (made with the first container, removed with the last): "
                 "virtual networks whose addresses overlap need one each")
      ->capture_default_str();
  app.add_flag("--dropin", o.dropin,
               "Inject the library via LD_LIBRARY_PATH instead of LD_PRELOAD");
  app.add_option("--lib-dir", o.lib_dir,
                 "Directory holding Wharf's libibverbs.so.1 (default: ../lib beside wharf-run)");
  app.add_option("--cleanup", cleanup_name,
                 "Remove the namespace, veth and processes left by a killed wharf-run for NAME");
  app.add_option("--reconnect-s", o.reconnect_s,
                 "When the router goes away while CMD runs, re-register the container with the "
                 "router restarted at the same socket path, trying for this many seconds; 0: "
                 "do not (the container stays unserved)")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str()
      ->envname("WHARF_RUN_RECONNECT_S");
  app.add_flag("-v,--verbose", o.verbose, "Print setup steps");
  app.add_option("command", o.command, "CMD and its arguments, after --");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  if (!cleanup_name.empty()) {
    if (!o.command.empty() || !o.name.empty()) {
      std::fprintf(stderr, "wharf-run: --cleanup takes only a name\n");
      return 2;
    }
    return cleanup(cleanup_name);
  }

  auto usage_error = [](const std::string& msg) {
    std::fprintf(stderr, "wharf-run: %s (see --help)\n", msg.c_str());
    return 2;
  };
  if (o.router.empty()) return usage_error("--router is required");
  if (o.name.empty()) return usage_error("--name is required");
  if (!valid_container_name(o.name)) {
    return usage_error("invalid container name '" + o.name + "': use 1-" +
                       std::to_string(kMaxNameLen) + " characters of [A-Za-z0-9_.-]");
  }
  if (!valid_bridge_name(o.bridge))
    return usage_error("invalid bridge name '" + o.bridge +
                       "': use 1-15 characters of [A-Za-z0-9_.-]");
  if (o.tenant.empty() != o.network.empty())
    return usage_error("--tenant and --network go together");
  if (vip.empty() && o.tenant.empty()) return usage_error("--vip is required without --tenant");
  auto vip_addr = vip.empty() ? std::optional<uint32_t>(0) : parse_ipv4(vip);
  if (!vip_addr) return usage_error("--vip '" + vip + "' is not an IPv4 address");
  auto bridge_addr = parse_ipv4(bridge_ip);
  if (!bridge_addr) return usage_error("--bridge-ip '" + bridge_ip + "' is not an IPv4 address");
  if (*vip_addr != 0) {
    if (std::string err = check_addresses(*vip_addr, *bridge_addr, o.prefix); !err.empty())
      return usage_error(err);
  }
  if (o.command.empty()) return usage_error("no command given (put it after --)");
  o.vip = *vip_addr;
  o.bridge_ip = *bridge_addr;
  return run(o);
}

}  // namespace
}  // namespace wharf::run

int main(int argc, char** argv) {
  try {
    return wharf::run::parse_and_run(argc, argv);
  } catch (const std::exception& e) {  // e.g. std::bad_alloc; CLI11's own errors are handled
    std::fprintf(stderr, "wharf-run: %s\n", e.what());
    return wharf::run::kExitSetupFailed;
  }
}
