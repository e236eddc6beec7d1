#include "router/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include <chrono>
#include <exception>
#include <future>

#include "common/policy.h"
#include "router/remote.h"
#include "router/router.h"

namespace wharf::router {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// How long a scrape waits for the router thread's snapshot before it answers with none.
constexpr auto kSnapshotWait = std::chrono::seconds(2);

// A family of one series per container: value(usage) with the container's labels.
template <class Value>
MetricFamily per_container(const char* name, const char* help, MetricType type,
                           const std::vector<Router::ContainerUsage>& usage, Value value) {
  MetricFamily f{name, help, type, {}};
  for (const Router::ContainerUsage& u : usage) {
    ClientMetric m;
    m.label = {{"tenant", u.tenant}, {"network", u.network}, {"container", u.name}};
    const double v = static_cast<double>(value(u));
    if (type == MetricType::Counter)
      m.counter.value = v;
    else
      m.gauge.value = v;
    f.metric.push_back(std::move(m));
  }
  return f;
}

// A family of one series per container and quota kind (label `kind`): value(usage, kind).
// A kUnlimited value (no quota) has no series.
template <class Value>
MetricFamily per_kind(const char* name, const char* help,
                      const std::vector<Router::ContainerUsage>& usage, Value value) {
  MetricFamily f{name, help, MetricType::Gauge, {}};
  for (const Router::ContainerUsage& u : usage) {
    for (size_t k = 0; k < kQuotaKinds; ++k) {
      const uint64_t v = value(u, static_cast<QuotaKind>(k));
      if (v == ContainerPolicy::kUnlimited) continue;  // no quota: no series
      ClientMetric m;
      m.label = {{"tenant", u.tenant},
                 {"network", u.network},
                 {"container", u.name},
                 {"kind", kQuotaNames[k]}};
      m.gauge.value = static_cast<double>(v);
      f.metric.push_back(std::move(m));
    }
  }
  return f;
}

MetricFamily single(const char* name, const char* help, MetricType type, uint64_t value) {
  ClientMetric m;
  if (type == MetricType::Counter)
    m.counter.value = static_cast<double>(value);
  else
    m.gauge.value = static_cast<double>(value);
  return MetricFamily{name, help, type, {m}};
}

}  // namespace

std::vector<MetricFamily> router_metrics_st(const Router& router) {
  const std::vector<Router::ContainerUsage> usage = router.container_usage_st(true);
  using U = Router::ContainerUsage;
  std::vector<MetricFamily> out;
  out.push_back(per_container(
      "wharf_container_tx_bytes_total",
      "Bytes the container's QPs sent (the direct path included), destroyed QPs included",
      MetricType::Counter, usage, [](const U& u) { return u.traffic.tx_bytes; }));
  out.push_back(per_container(
      "wharf_container_rx_bytes_total",
      "Bytes the container's QPs received (the direct path included), destroyed QPs included",
      MetricType::Counter, usage, [](const U& u) { return u.traffic.rx_bytes; }));
  out.push_back(per_container("wharf_container_tx_messages_total",
                              "Messages the container's QPs sent", MetricType::Counter, usage,
                              [](const U& u) { return u.traffic.tx_msgs; }));
  out.push_back(per_container("wharf_container_rx_messages_total",
                              "Messages the container's QPs received", MetricType::Counter, usage,
                              [](const U& u) { return u.traffic.rx_msgs; }));
  out.push_back(per_container("wharf_container_completion_errors_total",
                              "Work completions with an error status on the container's QPs",
                              MetricType::Counter, usage,
                              [](const U& u) { return u.traffic.errors; }));
  out.push_back(per_kind("wharf_container_objects",
                         "Objects the container holds now, by quota kind (mr_bytes: bytes)", usage,
                         [](const U& u, QuotaKind k) { return u.held[static_cast<size_t>(k)]; }));
  out.push_back(per_kind("wharf_container_quota",
                         "The container's quota by kind (mr_bytes: bytes); kinds without one "
                         "are left out",
                         usage, [](const U& u, QuotaKind k) {
                           return u.live != nullptr ? u.live->policy.limit(k)
                                                    : ContainerPolicy::kUnlimited;
                         }));
  uint64_t qps = 0;
  uint64_t containers = 0;
  for (const U& u : usage) {
    qps += u.held[static_cast<size_t>(QuotaKind::kQp)];
    containers += u.live != nullptr ? 1 : 0;
  }
  out.push_back(
      single("wharf_router_qps", "QPs the router's applications hold", MetricType::Gauge, qps));
  out.push_back(single("wharf_router_containers", "Containers the router serves", MetricType::Gauge,
                       containers));
  const RouterCounters& c = router.counters();
  out.push_back(single("wharf_router_watchdog_trips_total",
                       "RC QPs the watchdog moved to error (their peer refused work too long)",
                       MetricType::Counter, c.watchdog_isolations));
  out.push_back(single("wharf_router_peer_qps_failed_total",
                       "QPs failed because their peer router died or restarted",
                       MetricType::Counter, c.peer_qps_failed));
  out.push_back(single("wharf_router_rnr_naks_received_total", "RNR NAKs received from other hosts",
                       MetricType::Counter, c.rnr_naks_received));
  out.push_back(single("wharf_router_stray_packets_dropped_total",
                       "Packets from other hosts that no QP here takes, dropped",
                       MetricType::Counter, c.stray_packets_dropped));
  if (const RemotePath* remote = router.remote()) {
    out.push_back(single("wharf_link_refused_peers_total",
                         "Peers that failed the host links' authentication", MetricType::Counter,
                         remote->refused_peers()));
    out.push_back(single("wharf_link_refused_records_total",
                         "Link connections closed for a record that failed its check (encrypt)",
                         MetricType::Counter, remote->refused_records()));
    out.push_back(single("wharf_express_refused_lines_total",
                         "Express-line connections that failed to authenticate",
                         MetricType::Counter, remote->express().refused_lines()));
  }
  return out;
}

// What the exposer collects: a snapshot the router thread makes on request.
class MetricsServer::Snapshots : public prometheus::Collectable {
 public:
  explicit Snapshots(Router* router) : router_(router) {}
  std::vector<MetricFamily> Collect() const override {
    auto promise = std::make_shared<std::promise<std::vector<MetricFamily>>>();
    std::future<std::vector<MetricFamily>> snapshot = promise->get_future();
    Router* router = router_;
    router->post([router, promise] { promise->set_value(router_metrics_st(*router)); });
    if (snapshot.wait_for(kSnapshotWait) != std::future_status::ready) return {};
    return snapshot.get();
  }

 private:
  Router* router_;
};

std::unique_ptr<MetricsServer> MetricsServer::start(Router* router, const std::string& address,
                                                    std::string* why) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  try {
    s->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    *why = "cannot serve metrics on " + address + ": " + e.what();
    return nullptr;
  }
  s->snapshots_ = std::make_shared<Snapshots>(router);
  s->exposer_->RegisterCollectable(s->snapshots_);
  return s;
}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const {
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace wharf::router
