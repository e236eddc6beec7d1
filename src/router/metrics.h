// The router's Prometheus metrics (wharfd --metrics ADDR:PORT; docs/OPERATIONS.md, "Metrics").
// prometheus-cpp's exposer serves /metrics from threads of its own; each scrape asks the
// router thread for a snapshot (Router::post) and waits for it, so nothing the data path
// touches is shared with the exposer or locked for it, and a scrape costs the router one pass
// over its containers (what `wharfctl statistic show` costs). Labels are bounded: per
// container (tenant, network, container) and per kind, per QP only when asked for
// (`--metrics-per-qp`: a series per live QP, which a router with many QPs may not want).
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Exposer;
struct MetricFamily;
}  // namespace prometheus

namespace wharf::router {

class Router;

// The metric families of `router` now (with per_qp, also wharf_qp_*). Router thread only.
std::vector<prometheus::MetricFamily> router_metrics_st(const Router& router, bool per_qp = false);

class MetricsServer {
 public:
  // Serves router's metrics at http://ADDR:PORT/metrics; nullptr with *why if it cannot
  // listen there. The server must go before the router.
  static std::unique_ptr<MetricsServer> start(Router* router, const std::string& address,
                                              bool per_qp, std::string* why);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  // The port it listens on (for ADDR:0).
  int port() const;

 private:
  class Snapshots;
  MetricsServer() = default;
  std::shared_ptr<Snapshots> snapshots_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace wharf::router
