// wharfd: the per-host router, the software RNIC shared by all containers on the host.
#include <grp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <string>

#include "control/api_client.h"
#include "control/cidr.h"
#include "control/container_watch.h"
#include "control/credentials.h"
#include "control/host_agent.h"
#include "control/link_join.h"
#include "router/metrics.h"
#include "router/remote.h"
#include "router/router.h"
#include "upgrade.h"

namespace {

// The router holds descriptors per container object (ring memfds, one memfd per registration,
// channel sockets): allow as many as the hard limit permits.
void raise_fd_limit() {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == rl.rlim_max) return;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) spdlog::warn("could not raise the descriptor limit");
}

int run_wharfd(int argc, char** argv) {
  CLI::App app{"wharfd - Wharf router: a software RDMA NIC shared by the host's containers"};
  wharf::router::RouterConfig cfg;
  cfg.socket_path = "/run/wharf/wharfd.sock";
  std::string link_layer = "ib";
  std::string log_level = "info";
  std::string direct_path = "on";
  std::string express = "on";
  uint32_t express_lines = 256;
  uint32_t lid_base = cfg.lid_base;
  uint32_t lid_count = cfg.lid_count;
  uint64_t spin_us = cfg.spin_ns / 1000;
  uint64_t watchdog_ms = cfg.watchdog_ns / 1000000;
  uint64_t peer_grace_ms = cfg.peer_restart_grace_ns / 1000000;
  uint64_t cm_timeout_ms = cfg.cm_timeout_ns / 1000000;
  app.add_option("--socket", cfg.socket_path, "Unix socket the verbs libraries connect to")
      ->capture_default_str()
      ->envname("WHARF_SOCKET");
  bool upgrade = false;
  app.add_flag("--upgrade", upgrade,
               "Upgrade the router serving --socket in place: it executes its binary (as now "
               "on disk) again, keeping its process and socket; applications resume their "
               "sessions. Prints the outcome and exits (SIGUSR2 does the same)");
  app.add_option("--resume-key", cfg.resume_key_path,
                 "File of the key with which libraries resume their sessions after a restart "
                 "(made, mode 0600, if missing); default: the socket's path + .key; \"none\": "
                 "applications' objects end with the router process")
      ->envname("WHARF_RESUME_KEY");
  std::string socket_group;
  app.add_option("--socket-group", socket_group,
                 "Group (name or number) whose members may use the socket besides its owner "
                 "(mode 0660); default: the router's own group")
      ->envname("WHARF_SOCKET_GROUP");
  app.add_option("--link-layer", link_layer, "Port link layer: ib (LIDs) or eth (GIDs only)")
      ->check(CLI::IsMember({"ib", "eth"}))
      ->capture_default_str()
      ->envname("WHARF_LINK_LAYER");
  app.add_option("--spin-us", spin_us, "Keep polling this long after the last work before sleeping")
      ->capture_default_str()
      ->envname("WHARF_SPIN_US");
  app.add_option("--direct-path", direct_path,
                 "on: RC QPs between containers of this host execute their sends in the sending "
                 "library, which maps the peer's queues and registrations (containers trust each "
                 "other); off: every operation goes through the router")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str()
      ->envname("WHARF_DIRECT_PATH");
  CLI::Option* express_option =
      app.add_option(
             "--express", express,
             "on: RC QPs connected to QPs on other hosts move their small SENDs over a TCP "
             "connection per QP pair that the routers set up and the two libraries use (express "
             "lines); off: everything between hosts goes through the routers. Off with "
             "--link-security encrypt (express lines are not encrypted)")
          ->envname("WHARF_EXPRESS")
          ->check(CLI::IsMember({"on", "off"}))
          ->capture_default_str();
  app.add_option("--express-lines", express_lines,
                 "At most this many express lines at once (a TCP connection each); QPs beyond "
                 "them go through the routers")
      ->envname("WHARF_EXPRESS_LINES")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  app.add_option("--lid-base", lid_base, "First LID handed to containers")
      ->check(CLI::Range(1, 0xbfff))
      ->capture_default_str()
      ->envname("WHARF_LID_BASE");
  app.add_option("--lid-count", lid_count, "How many LIDs this router may hand out")
      ->check(CLI::Range(1, 0xbfff))
      ->capture_default_str()
      ->envname("WHARF_LID_COUNT");
  app.add_option("--cluster", cfg.cluster_file,
                 "Cluster file (hosts, addresses, subnets, LID ranges, ports): routes RDMA to "
                 "containers on other hosts")
      ->envname("WHARF_CLUSTER");
  app.add_option("--host", cfg.host_name, "This host's name in the cluster file")
      ->envname("WHARF_HOST");
  std::string link_security = "auth";
  app.add_option(
         "--link-security", link_security,
         "auth: every link to another router starts with a TLS 1.3 handshake in which "
         "both prove they are hosts of the cluster (--link-ca, --link-cert, "
         "--link-key); encrypt: the same, and every byte after it travels in AES-GCM "
         "records keyed by it (fabrics with on-path attackers); off: links are not authenticated "
         "(trusted networks only)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auth", "encrypt", "off"}))
      ->envname("WHARF_LINK_SECURITY");
  app.add_option("--link-ca", cfg.link_ca, "The cluster CA's certificate (PEM)")
      ->envname("WHARF_LINK_CA");
  app.add_option("--link-cert", cfg.link_cert,
                 "This host's certificate (PEM), signed by the cluster CA, naming --host")
      ->envname("WHARF_LINK_CERT");
  app.add_option("--link-key", cfg.link_key, "The private key of --link-cert (PEM)")
      ->envname("WHARF_LINK_KEY");
  app.add_option("--peer-restart-grace-ms", peer_grace_ms,
                 "How long another host's router may refuse connections (restarting) before "
                 "the QPs that used it fail; one that comes back with its state within it "
                 "continues them")
      ->capture_default_str()
      ->envname("WHARF_PEER_RESTART_GRACE_MS");
  app.add_option("--watchdog-ms", watchdog_ms,
                 "Move to error an RC QP whose peer on another host has refused its work (RNR, "
                 "rnr_retry 7) this long without progress; 0: never")
      ->capture_default_str()
      ->envname("WHARF_WATCHDOG_MS");
  app.add_option("--cm-timeout-ms", cm_timeout_ms,
                 "rdma_cm: how long a connection handshake waits for the peer's next step "
                 "before failing with ETIMEDOUT")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{3600000}))
      ->envname("WHARF_CM_TIMEOUT_MS");
  double pingmesh_interval = static_cast<double>(cfg.pingmesh_interval_ns) / 1e9;
  app.add_option("--pingmesh-interval", pingmesh_interval,
                 "Seconds between Pingmesh's probes to every other router; 0: none")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str()
      ->envname("WHARF_PINGMESH_INTERVAL");
  std::vector<std::string> pingmesh_networks;
  app.add_option("--pingmesh-networks", pingmesh_networks,
                 "TENANT/NETWORK,...: also probe within these tenants' virtual networks, between "
                 "the routers that probe or serve them")
      ->delimiter(',')
      ->envname("WHARF_PINGMESH_NETWORKS");
  std::string emulate;
  app.add_option(
         "--emulate", emulate,
         "KEY=VALUE,...: emulate an RNIC's caches for wharf-scala: qp_cache=N "
         "[,qp_miss_ns=NS], mtt_cache=N[,mtt_page=4k][,mtt_miss_ns=NS] (docs/OPERATIONS.md)")
      ->envname("WHARF_EMULATE");
  std::string metrics_address;
  app.add_option("--metrics", metrics_address,
                 "ADDR:PORT: serve Prometheus metrics at http://ADDR:PORT/metrics (default: none)")
      ->envname("WHARF_METRICS");
  bool metrics_per_qp = false;
  app.add_flag("--metrics-per-qp", metrics_per_qp,
               "With --metrics: also a series per live QP (wharf_qp_*; many QPs, many series)")
      ->envname("WHARF_METRICS_PER_QP");
  wharf::control::ApiEndpoint orchestrator;
  int host_ttl = 10;
  app.add_option("--orchestrator", orchestrator.url,
                 "http://HOST:PORT or https://HOST:PORT of wharf-orchestrator: register this host "
                 "(--host) there on a lease that lapses when the router dies, and enforce the "
                 "policies of the containers placed on it")
      ->envname("WHARF_ORCHESTRATOR");
  app.add_option("--tls-ca", orchestrator.ca_file, wharf::control::kTlsCaHelp)
      ->envname("WHARF_TLS_CA");
  std::string token_file;
  app.add_option("--token-file", token_file,
                 "a file holding the token (host or admin) to present to the orchestrator, read "
                 "at each registration and watch, so a rotated token is picked up; else "
                 "$WHARF_TOKEN")
      ->envname("WHARF_TOKEN_FILE");
  std::string join_token_file;
  app.add_option("--join-token-file", join_token_file,
                 "A file holding a one-time join token (wharfctl token add join host NAME): "
                 "unless --link-dir holds credentials already, the router makes its key and has "
                 "the orchestrator's cluster CA sign a certificate for --host, kept in --link-dir "
                 "with a host token for its registrations")
      ->envname("WHARF_JOIN_TOKEN_FILE");
  std::string link_dir = "/var/lib/wharf/link";
  app.add_option("--link-dir", link_dir,
                 "The link credentials a router got by joining (ca.pem, host.pem, host.key, "
                 "host.token), used when --link-ca, --link-cert and --link-key are not given")
      ->capture_default_str()
      ->envname("WHARF_LINK_DIR");
  app.add_option("--host-ttl", host_ttl, "Seconds the host's entry outlives the router")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str()
      ->envname("WHARF_HOST_TTL");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str()
      ->envname("WHARF_LOG_LEVEL");
  CLI11_PARSE(app, argc, argv);
  if (upgrade) return wharf::wharfd::request_upgrade(cfg.socket_path, 10000);
  const std::string binary = wharf::wharfd::own_binary();
  if (cfg.resume_key_path.empty())
    cfg.resume_key_path = cfg.socket_path + ".key";
  else if (cfg.resume_key_path == "none")
    cfg.resume_key_path.clear();
  // Sessions that resume continue their connections to other hosts too.
  if (!cfg.resume_key_path.empty()) {
    cfg.kept_state_path = cfg.socket_path + ".state";
    cfg.kept_cm_path = cfg.socket_path + ".cm";
    cfg.kept_accounting_path = cfg.socket_path + ".accounting";
  }
  if (lid_base + lid_count - 1 > 0xbfff) {
    fprintf(stderr, "wharfd: --lid-base + --lid-count - 1 must not exceed 0xbfff (49151)\n");
    return 2;
  }
  if (std::string error; !wharf::emulator::parse_emulation(emulate, &cfg.emulate, &error)) {
    fprintf(stderr, "wharfd: %s\n", error.c_str());
    return 2;
  }
  if (cfg.host_name.empty() && (!cfg.cluster_file.empty() || !orchestrator.url.empty())) {
    fprintf(stderr, "wharfd: --cluster and --orchestrator need --host\n");
    return 2;
  }
  if (!cfg.host_name.empty() && cfg.cluster_file.empty() && orchestrator.url.empty()) {
    fprintf(stderr, "wharfd: --host goes with --cluster or --orchestrator\n");
    return 2;
  }
  if (!orchestrator.url.empty()) {
    const wharf::Status api = wharf::control::check_api_endpoint(orchestrator);
    if (!api.is_ok()) {
      fprintf(stderr, "wharfd: %s\n", api.message().c_str());
      return 2;
    }
  }
  if (!join_token_file.empty() && orchestrator.url.empty()) {
    fprintf(stderr, "wharfd: --join-token-file goes with --orchestrator\n");
    return 2;
  }
  if (!join_token_file.empty() && !wharf::control::joined(link_dir)) {
    std::string join_token, why;
    if (!wharf::control::TokenSource(join_token_file).get(&join_token, &why)) {
      fprintf(stderr, "wharfd: --join-token-file: %s\n", why.c_str());
      return 2;
    }
    const wharf::Status joined =
        wharf::control::join_cluster(orchestrator, join_token, cfg.host_name, link_dir);
    if (!joined.is_ok()) {
      fprintf(stderr, "wharfd: joining the cluster as %s: %s\n", cfg.host_name.c_str(),
              joined.message().c_str());
      return 1;
    }
    spdlog::info("joined the cluster as {}: link credentials in {}", cfg.host_name, link_dir);
  }
  std::string host_token_file;  // the host token that joining the cluster left in link_dir
  if (link_security != "off" && cfg.link_cert.empty() && wharf::control::joined(link_dir)) {
    const wharf::control::LinkFiles got = wharf::control::link_files(link_dir);
    cfg.link_ca = got.ca;
    cfg.link_cert = got.cert;
    cfg.link_key = got.key;
    host_token_file = got.token;  // came with the certificate; used unless another is given
  }
  if (link_security == "off") {
    cfg.link_ca.clear();
    cfg.link_cert.clear();
    cfg.link_key.clear();
    if (!cfg.cluster_file.empty())
      spdlog::warn("--link-security off: links to other routers are not authenticated");
  } else if (!cfg.cluster_file.empty() &&
             (cfg.link_ca.empty() || cfg.link_cert.empty() || cfg.link_key.empty())) {
    fprintf(stderr,
            "wharfd: --cluster with --link-security auth (the default) or encrypt needs "
            "--link-ca, --link-cert and --link-key, or credentials from joining "
            "(--join-token-file, --link-dir), or --link-security off on a trusted network\n");
    return 2;
  }
  cfg.link_encrypt = link_security == "encrypt";
  if (!socket_group.empty()) {
    const group* g = getgrnam(socket_group.c_str());
    const bool number = socket_group.size() <= 9 &&
                        socket_group.find_first_not_of("0123456789") == std::string::npos;
    if (g != nullptr) {
      cfg.socket_gid = g->gr_gid;
    } else if (number) {
      cfg.socket_gid = std::stoll(socket_group);
    } else {
      fprintf(stderr, "wharfd: --socket-group %s: no such group\n", socket_group.c_str());
      return 2;
    }
  }
  cfg.lid_base = static_cast<uint16_t>(lid_base);
  cfg.lid_count = static_cast<uint16_t>(lid_count);

  spdlog::set_level(spdlog::level::from_str(log_level));
  cfg.link_layer = link_layer == "eth" ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  cfg.spin_ns = spin_us * 1000;
  cfg.watchdog_ns = watchdog_ms * 1000000;
  cfg.peer_restart_grace_ns = peer_grace_ms * 1000000;
  cfg.cm_timeout_ns = cm_timeout_ms * 1000000;
  cfg.pingmesh_interval_ns = static_cast<uint64_t>(pingmesh_interval * 1e9);
  for (const std::string& n : pingmesh_networks) {
    const size_t slash = n.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == n.size() ||
        n.find('/', slash + 1) != std::string::npos) {
      fprintf(stderr, "wharfd: --pingmesh-networks: '%s' is not TENANT/NETWORK\n", n.c_str());
      return 2;
    }
    cfg.pingmesh_networks.emplace_back(n.substr(0, slash), n.substr(slash + 1));
  }
  cfg.direct_path = direct_path == "on";
  cfg.express = express == "on";
  if (cfg.link_encrypt && cfg.express) {
    // Express lines carry SENDs between the libraries in clear, past the encrypted links.
    if (express_option->count() > 0) {
      fprintf(stderr,
              "wharfd: --express on cannot go with --link-security encrypt: express lines "
              "are not encrypted\n");
      return 2;
    }
    cfg.express = false;
    spdlog::info("--link-security encrypt: express lines off (they are not encrypted)");
  }
  cfg.express_lines = express_lines;
  raise_fd_limit();
  wharf::router::Router router(cfg);
  if (router.start() != 0) return 1;
  if (cfg.emulate.enabled())
    spdlog::warn("emulating an RNIC's caches ({}): work through this router pays their misses",
                 wharf::emulator::describe(cfg.emulate));
  std::unique_ptr<wharf::router::MetricsServer> metrics;  // goes before the router
  if (!metrics_address.empty()) {
    std::string why;
    metrics = wharf::router::MetricsServer::start(&router, metrics_address, metrics_per_qp, &why);
    if (metrics == nullptr) {
      fprintf(stderr, "wharfd: --metrics: %s\n", why.c_str());
      return 1;
    }
    spdlog::info("metrics at http://{}:{}/metrics",
                 metrics_address.substr(0, metrics_address.rfind(':')), metrics->port());
  }
  std::unique_ptr<wharf::control::HostAgent> agent;
  std::unique_ptr<wharf::control::ContainerWatch> watch;
  if (!orchestrator.url.empty()) {
    // LIDs as start() left them (the cluster file's, when it names them); in a cluster, the
    // host's address on the links between routers and its container subnet.
    const wharf::router::RouterConfig& running = router.config();
    wharf::control::HostInfo me{cfg.host_name, 0x7f000001, running.lid_base,
                                static_cast<uint16_t>(running.lid_base + running.lid_count - 1)};
    if (const wharf::router::RemotePath* remote = router.remote()) {
      const auto& dir = remote->directory();
      const wharf::links::ClusterHost& self = dir.hosts()[static_cast<size_t>(dir.self())];
      me.address = self.address;
      me.subnet = {self.subnet, self.prefix};
    }
    // The host's report for the orchestrator's views, from the router thread ("" if it is
    // too busy to answer within a second: that report is skipped).
    auto report = [&router] {
      return router
          .ask<std::string>([&router] { return router.describe_report_st(); },
                            std::chrono::milliseconds(1000))
          .value_or("");
    };
    agent = std::make_unique<wharf::control::HostAgent>(
        orchestrator, wharf::control::TokenSource(token_file, host_token_file), me, host_ttl,
        report);
    watch = std::make_unique<wharf::control::ContainerWatch>(
        orchestrator, wharf::control::TokenSource(token_file, host_token_file), cfg.host_name,
        [&router](const std::string& tenant, const std::string& name,
                  const wharf::ContainerPolicy& policy) {
          router.post(
              [&router, tenant, name, policy] { router.set_policy_st(tenant, name, policy); });
        },
        [&router](const std::string& tenant, const std::string& network, uint32_t vip,
                  const std::string& host) {
          router.post([&router, tenant, network, vip, host] {
            router.set_placement_st(tenant, network, vip, host);
          });
        });
  }
  for (;;) {
    router.run(/*handle_signals=*/true);
    if (!router.upgrade_requested()) return 0;
    const int err = wharf::wharfd::execute_again(binary, argv, router.listen_fd());
    spdlog::error("upgrade: cannot execute {}: {}; serving on", binary, strerror(err));
    router.continue_serving();
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A peer that goes away must not kill the router: OpenSSL writes to the links' and express
  // lines' sockets with write(), which raises SIGPIPE on a connection the peer reset (the
  // router's own send() calls pass MSG_NOSIGNAL). The error comes back as EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  try {
    return run_wharfd(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "wharfd: %s\n", e.what());
  } catch (...) {
    fprintf(stderr, "wharfd: unknown error\n");
  }
  return 1;
}
