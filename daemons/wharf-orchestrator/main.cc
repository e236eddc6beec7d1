// wharf-orchestrator: the control plane's API (tenants, virtual networks, containers, hosts)
// over a KvStore: SQLite on one host, etcd for a cluster (docs/OPERATIONS.md).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <ctime>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>

#include "control/api.h"
#include "control/host_ca.h"
#include "control/kv_store.h"
#include "control/tokens.h"

namespace {

// The directory the orchestrator keeps its files in: a SQLite store's, else /var/lib/wharf.
std::string state_dir(const std::string& store_url) {
  constexpr std::string_view kSqlite = "sqlite:";
  if (store_url.rfind(kSqlite, 0) == 0) {
    const std::filesystem::path db(store_url.substr(kSqlite.size()));
    return db.has_parent_path() ? db.parent_path().string() : ".";
  }
  return "/var/lib/wharf";
}

int run_orchestrator(int argc, char** argv) {
  CLI::App app{"wharf-orchestrator - Wharf's control plane: tenants, networks, containers"};
  std::string listen = "127.0.0.1:7480";
  std::string store_url = "sqlite:/var/lib/wharf/orchestrator.db";
  app.add_option("--listen", listen,
                 "HOST:PORT to serve the HTTP/JSON API on (PORT 0: any); HTTPS with --tls-cert")
      ->capture_default_str()
      ->envname("WHARF_ORCHESTRATOR_LISTEN");
  app.add_option("--store", store_url, "sqlite:PATH or etcd:http://HOST:PORT")
      ->capture_default_str()
      ->envname("WHARF_ORCHESTRATOR_STORE");
  std::string admin_token_file;
  std::string audit_log;
  app.add_option("--admin-token-file", admin_token_file,
                 "where the first start writes the admin token (default: beside a SQLite "
                 "store, else /var/lib/wharf/orchestrator-admin.token)")
      ->envname("WHARF_ORCHESTRATOR_ADMIN_TOKEN_FILE");
  app.add_option("--audit-log", audit_log,
                 "the file every change request is logged to (default: beside the admin token, "
                 "orchestrator-audit.log)")
      ->envname("WHARF_ORCHESTRATOR_AUDIT_LOG");
  std::string link_ca_dir;
  app.add_option("--link-ca-dir", link_ca_dir,
                 "the cluster CA that signs routers' link certificates when they join with a "
                 "join token (ca.pem, ca.key; made on first start; default: beside the admin "
                 "token, link-ca/)")
      ->envname("WHARF_ORCHESTRATOR_LINK_CA_DIR");
  wharf::control::ApiTls tls;
  app.add_option("--tls-cert", tls.cert_file,
                 "serve HTTPS (TLS 1.2 or later) with this certificate (PEM, the chain after it), "
                 "naming the orchestrator's address or host name; needs --tls-key")
      ->envname("WHARF_TLS_CERT");
  app.add_option("--tls-key", tls.key_file, "the private key (PEM) of --tls-cert")
      ->envname("WHARF_TLS_KEY");
  std::string metrics_address;
  app.add_option("--metrics", metrics_address,
                 "ADDR:PORT: serve Prometheus metrics at http://ADDR:PORT/metrics (default: none)")
      ->envname("WHARF_ORCHESTRATOR_METRICS");
  CLI11_PARSE(app, argc, argv);
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    spdlog::error("--tls-cert and --tls-key go together (or neither, for plain HTTP)");
    return 2;
  }
  if (admin_token_file.empty())
    admin_token_file = state_dir(store_url) + "/orchestrator-admin.token";
  const std::filesystem::path beside = std::filesystem::path(admin_token_file).parent_path();
  if (audit_log.empty()) audit_log = beside / "orchestrator-audit.log";
  if (link_ca_dir.empty()) link_ca_dir = beside / "link-ca";
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(listen.substr(colon + 1));
    } catch (const std::exception&) {
    }
  }
  if (port < 0 || port > 65535) {
    spdlog::error("--listen '{}': expected HOST:PORT", listen);
    return 2;
  }

  // Signals are taken by a thread of our own, so the server can be stopped cleanly.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<wharf::control::KvStore> store;
  wharf::Status st = wharf::control::open_kv_store(store_url, &store);
  if (!st.is_ok()) {
    spdlog::error("store {}: {}", store_url, st.message());
    return 1;
  }
  std::error_code mkdir_failed;
  if (!beside.empty()) std::filesystem::create_directories(beside, mkdir_failed);
  if (mkdir_failed) {
    spdlog::error("cannot make {}: {}", beside.string(), mkdir_failed.message());
    return 1;
  }
  wharf::control::TokenStore tokens(store.get());
  bool made = false;
  st = wharf::control::bootstrap_admin_token(&tokens, admin_token_file, std::time(nullptr), &made);
  if (!st.is_ok()) {
    spdlog::error("admin token: {}", st.message());
    return 1;
  }
  if (made)
    spdlog::info(
        "first start: an admin token is in {} (mode 0600); give it to wharfctl as "
        "WHARF_TOKEN_FILE={}",
        admin_token_file, admin_token_file);
  std::unique_ptr<wharf::control::HostCa> link_ca;
  st = wharf::control::HostCa::open(link_ca_dir, &link_ca);
  if (!st.is_ok()) {
    spdlog::error("link CA: {}", st.message());
    return 1;
  }
  spdlog::info("link CA in {}: routers join with `wharfctl token add join host NAME` tokens",
               link_ca_dir);
  // Throws when the certificate or key cannot be loaded: never plain HTTP instead.
  wharf::control::ApiServer api(store.get(), audit_log, tls, link_ca.get());
  std::unique_ptr<wharf::control::ApiMetrics> metrics;
  if (!metrics_address.empty()) {
    std::string why;
    metrics = wharf::control::ApiMetrics::start(metrics_address, store.get(), &why);
    if (metrics == nullptr) {
      spdlog::error("--metrics: {}", why);
      return 1;
    }
    api.set_metrics(metrics.get());
    spdlog::info("metrics at http://{}:{}/metrics",
                 metrics_address.substr(0, metrics_address.rfind(':')), metrics->port());
  }
  const int bound = api.bind(listen.substr(0, colon), port);
  if (bound < 0) {
    spdlog::error("cannot listen on {}", listen);
    return 1;
  }
  spdlog::info("wharf-orchestrator: serving on {}:{} ({}) with store {}, audit log {}",
               listen.substr(0, colon), bound,
               tls.cert_file.empty() ? "plain HTTP" : "HTTPS, certificate " + tls.cert_file,
               store_url, audit_log);
  const std::string host = listen.substr(0, colon);
  const bool loopback = host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
  if (tls.cert_file.empty() && !loopback)
    spdlog::warn(
        "plain HTTP on {}: tokens travel in clear; give --tls-cert and --tls-key unless the "
        "network is trusted (docs/SECURITY.md)",
        host);
  std::atomic<bool> served{false};
  std::thread waiter([&] {
    const timespec tick{0, 200'000'000};  // to notice that serve() ended by itself
    while (!served.load()) {
      const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig > 0) {
        spdlog::info("signal {}: stopping", sig);
        api.stop();
        return;
      }
    }
  });
  api.serve();
  served.store(true);
  waiter.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run_orchestrator(argc, argv);
  } catch (const std::exception& e) {
    spdlog::error("wharf-orchestrator: {}", e.what());
  }
  return 1;
}
