#include "router/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <spdlog/fmt/fmt.h>

#include <array>
#include <chrono>
#include <exception>
#include <limits>
#include <string>

#include "common/policy.h"
#include "links/host_links.h"
#include "router/remote.h"
#include "router/router.h"
#include "shm/layout.h"

namespace wharf::router {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// How long a scrape waits for the router thread's snapshot before it answers with none.
constexpr auto kSnapshotWait = std::chrono::milliseconds(2000);

// Label values for enum ibv_wr_opcode and enum ibv_wc_status: rdma-core's names in lower case
// without their prefix ("" where rdma-core defines no value).
constexpr std::array<const char*, shm::kCountedOpcodes> kOpcodeNames = {"rdma_write",
                                                                        "rdma_write_with_imm",
                                                                        "send",
                                                                        "send_with_imm",
                                                                        "rdma_read",
                                                                        "atomic_cmp_and_swp",
                                                                        "atomic_fetch_and_add",
                                                                        "local_inv",
                                                                        "bind_mw",
                                                                        "send_with_inv",
                                                                        "tso",
                                                                        "driver1",
                                                                        "",
                                                                        "",
                                                                        "",
                                                                        "atomic_write"};
constexpr std::array<const char*, shm::kCountedStatuses> kStatusNames = {"success",
                                                                         "loc_len_err",
                                                                         "loc_qp_op_err",
                                                                         "loc_eec_op_err",
                                                                         "loc_prot_err",
                                                                         "wr_flush_err",
                                                                         "mw_bind_err",
                                                                         "bad_resp_err",
                                                                         "loc_access_err",
                                                                         "rem_inv_req_err",
                                                                         "rem_access_err",
                                                                         "rem_op_err",
                                                                         "retry_exc_err",
                                                                         "rnr_retry_exc_err",
                                                                         "loc_rdd_viol_err",
                                                                         "rem_inv_rd_req_err",
                                                                         "rem_abort_err",
                                                                         "inv_eecn_err",
                                                                         "inv_eec_state_err",
                                                                         "fatal_err",
                                                                         "resp_timeout_err",
                                                                         "general_err",
                                                                         "tm_err",
                                                                         "tm_rndv_incomplete"};

// A series' labels: the container's, then `extra`.
std::vector<ClientMetric::Label> container_labels(const Router::ContainerUsage& u,
                                                  std::vector<ClientMetric::Label> extra = {}) {
  std::vector<ClientMetric::Label> labels = {
      {"tenant", u.tenant}, {"network", u.network}, {"container", u.name}};
  labels.insert(labels.end(), extra.begin(), extra.end());
  return labels;
}

// Sets m's value as a metric of family type `type` (a counter or a gauge).
void set_value(ClientMetric& m, MetricType type, double value) {
  (type == MetricType::Counter ? m.counter.value : m.gauge.value) = value;
}

// A family of one series per container: value(usage) with the container's labels.
template <class Value>
MetricFamily per_container(const char* name, const char* help, MetricType type,
                           const std::vector<Router::ContainerUsage>& usage, Value value) {
  MetricFamily f{name, help, type, {}};
  for (const Router::ContainerUsage& u : usage) {
    ClientMetric m;
    m.label = container_labels(u);
    set_value(m, type, static_cast<double>(value(u)));
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
      m.label = container_labels(u, {{"kind", kQuotaNames[k]}});
      m.gauge.value = static_cast<double>(v);
      f.metric.push_back(std::move(m));
    }
  }
  return f;
}

// A counter family of one series per container and `label` value that is not 0:
// counts(usage)[i] under names[i].
template <size_t N, class Counts>
MetricFamily per_value(const char* name, const char* help, const char* label,
                       const std::array<const char*, N>& names,
                       const std::vector<Router::ContainerUsage>& usage, Counts counts) {
  MetricFamily f{name, help, MetricType::Counter, {}};
  for (const Router::ContainerUsage& u : usage) {
    const std::array<uint64_t, N>& c = counts(u);
    for (size_t i = 0; i < N; ++i) {
      if (c[i] == 0 || *names[i] == '\0') continue;
      ClientMetric m;
      m.label = container_labels(u, {{label, names[i]}});
      m.counter.value = static_cast<double>(c[i]);
      f.metric.push_back(std::move(m));
    }
  }
  return f;
}

MetricFamily single(const char* name, const char* help, MetricType type, double value) {
  ClientMetric m;
  set_value(m, type, value);
  return MetricFamily{name, help, type, {m}};
}

// Per host link (peer, traffic_class): what links::HostLinks counts.
std::vector<MetricFamily> link_families(const RemotePath& remote) {
  MetricFamily tx{"wharf_link_tx_bytes_total",
                  "Bytes written to the connections with the peer in this class (after the "
                  "handshake; with encrypt, the records' bytes)",
                  MetricType::Counter,
                  {}};
  MetricFamily rx{"wharf_link_rx_bytes_total",
                  "Bytes read from the connections with the peer in this class",
                  MetricType::Counter,
                  {}};
  MetricFamily reconnects{"wharf_link_reconnects_total",
                          "Times this router's connection to the peer in this class was linked "
                          "again after the first",
                          MetricType::Counter,
                          {}};
  MetricFamily retransmitted{
      "wharf_link_retransmitted_packets_total",
      "Request packets RC QPs sent again to the peer in this class (go-back-N, "
      "ACK timeouts, RNR waits, a returning link)",
      MetricType::Counter,
      {}};
  MetricFamily rnr_naks{"wharf_link_rnr_naks_total",
                        "RNR NAKs the peer answered RC requests in this class with",
                        MetricType::Counter,
                        {}};
  MetricFamily up{"wharf_link_up",
                  "1 while this router's connection to the peer in this class is linked",
                  MetricType::Gauge,
                  {}};
  const auto& hosts = remote.directory().hosts();
  remote.links().for_each_link(
      [&](int host, int dscp, const links::HostLinks::LinkStats& s, bool linked) {
        const std::vector<ClientMetric::Label> labels = {
            {"peer", hosts[static_cast<size_t>(host)].name},
            {"traffic_class", std::to_string(dscp << 2)}};
        ClientMetric m;
        m.label = labels;
        m.counter.value = static_cast<double>(s.tx_bytes);
        tx.metric.push_back(m);
        m.counter.value = static_cast<double>(s.rx_bytes);
        rx.metric.push_back(m);
        m.counter.value = static_cast<double>(s.linked > 0 ? s.linked - 1 : 0);
        reconnects.metric.push_back(m);
        m.counter.value = static_cast<double>(s.retransmitted_packets);
        retransmitted.metric.push_back(m);
        m.counter.value = static_cast<double>(s.rnr_naks);
        rnr_naks.metric.push_back(m);
        m.counter.value = 0;
        m.gauge.value = linked ? 1 : 0;
        up.metric.push_back(m);
      });
  return {tx, rx, reconnects, retransmitted, rnr_naks, up};
}

// Per peer router: what Pingmesh measured (pingmesh/mesh.h), its routers' own mesh with
// tenant and network "" and each tenant network's mesh with its names.
std::vector<MetricFamily> pingmesh_families(const RemotePath& remote) {
  MetricFamily rtt{"wharf_pingmesh_rtt_seconds",
                   "Round trips of Pingmesh's probes to the peer router, its own delay taken out",
                   MetricType::Histogram,
                   {}};
  MetricFamily loss{"wharf_pingmesh_loss_ratio",
                    "Share of the last probes to the peer (Pingmesh's window) that were lost",
                    MetricType::Gauge,
                    {}};
  MetricFamily up{"wharf_pingmesh_peer_up",
                  "1 while the peer answers Pingmesh's probes, 0 while it is down (its last 3 "
                  "probes lost) or not heard yet",
                  MetricType::Gauge,
                  {}};
  MetricFamily probes{
      "wharf_pingmesh_probes_total", "Probes sent to the peer router", MetricType::Counter, {}};
  MetricFamily lost{"wharf_pingmesh_probes_lost_total",
                    "Probes to the peer router not answered within an interval",
                    MetricType::Counter,
                    {}};
  const auto& hosts = remote.directory().hosts();
  remote.for_each_pingmesh_peer(true, [&](const std::string& tenant, const std::string& network,
                                          const pingmesh::Mesh& mesh, int h) {
    const pingmesh::PeerTotals& t = mesh.totals(h);
    const pingmesh::PeerSummary s = mesh.summary(h);
    ClientMetric m;
    m.label = {
        {"peer", hosts[static_cast<size_t>(h)].name}, {"tenant", tenant}, {"network", network}};
    ClientMetric hist = m;
    hist.histogram.sample_count = t.answered;
    hist.histogram.sample_sum = static_cast<double>(t.rtt_sum_ns) * 1e-9;
    uint64_t cumulative = 0;
    for (size_t b = 0; b < t.rtt_buckets.size(); ++b) {
      cumulative += t.rtt_buckets[b];
      hist.histogram.bucket.push_back({cumulative, b < pingmesh::kRttBuckets.size()
                                                       ? pingmesh::kRttBuckets[b]
                                                       : std::numeric_limits<double>::infinity()});
    }
    rtt.metric.push_back(std::move(hist));
    m.gauge.value = s.loss;
    loss.metric.push_back(m);
    m.gauge.value = s.state == pingmesh::PeerState::kUp ? 1 : 0;
    up.metric.push_back(m);
    m.gauge.value = 0;
    m.counter.value = static_cast<double>(t.probes);
    probes.metric.push_back(m);
    m.counter.value = static_cast<double>(t.lost);
    lost.metric.push_back(m);
  });
  return {rtt, loss, up, probes, lost};
}

// --metrics-per-qp: a series per live QP (its container's labels, `qpn` in hex as rdma-core
// prints it, `type`).
std::vector<MetricFamily> qp_families(const Router& router) {
  struct Kind {
    const char* name;
    const char* help;
    uint64_t Traffic::*value;
  };
  static const Kind kKinds[] = {
      {"wharf_qp_tx_bytes_total", "Bytes the QP sent", &Traffic::tx_bytes},
      {"wharf_qp_rx_bytes_total", "Bytes the QP received", &Traffic::rx_bytes},
      {"wharf_qp_tx_messages_total", "Work requests the QP completed", &Traffic::tx_msgs},
      {"wharf_qp_rx_messages_total", "Messages that consumed one of the QP's receives",
       &Traffic::rx_msgs},
  };
  std::vector<MetricFamily> out;
  const std::vector<Router::QpUsage> qps = router.qp_usage_st();
  for (const Kind& k : kKinds) {
    MetricFamily f{k.name, k.help, MetricType::Counter, {}};
    for (const Router::QpUsage& q : qps) {
      ClientMetric m;
      m.label = {{"tenant", q.container->tenant},
                 {"network", q.container->network},
                 {"container", q.container->name},
                 {"qpn", fmt::format("{:#x}", q.qpn)},
                 {"type", q.type}};
      m.counter.value = static_cast<double>(q.traffic.*k.value);
      f.metric.push_back(std::move(m));
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

std::vector<MetricFamily> router_metrics_st(const Router& router, bool per_qp) {
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
  out.push_back(
      per_container("wharf_container_ratelimit_throttled_seconds_total",
                    "Time the container's work waited for its rate limits, summed over its QPs",
                    MetricType::Counter, usage,
                    [](const U& u) { return static_cast<double>(u.traffic.throttled_ns) * 1e-9; }));
  out.push_back(per_value(
      "wharf_container_wrs_total", "Work requests the container's QPs completed, by opcode",
      "opcode", kOpcodeNames, usage,
      [](const U& u) -> const auto& { return u.traffic.tx_by_opcode; }));
  out.push_back(per_value(
      "wharf_container_completion_errors_total",
      "Completions with an error status (flushes aside) on the container's "
      "QPs, by status",
      "status", kStatusNames, usage,
      [](const U& u) -> const auto& { return u.traffic.errors_by_status; }));
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
  out.push_back(single("wharf_router_busy_ratio",
                       "Share of the last second the router's data-path passes did work",
                       MetricType::Gauge, router.busy_ratio()));
  out.push_back(single("wharf_router_busy_seconds_total",
                       "Time the router's data-path passes did work", MetricType::Counter,
                       static_cast<double>(router.busy_ns()) * 1e-9));
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
  out.push_back(single("wharf_router_backlogged_requests_dropped_total",
                       "Requests from other hosts dropped while their QP's answers waited for "
                       "the link",
                       MetricType::Counter, c.backlogged_requests_dropped));
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
    for (MetricFamily& f : link_families(*remote)) out.push_back(std::move(f));
    if (remote->pingmesh() != nullptr)
      for (MetricFamily& f : pingmesh_families(*remote)) out.push_back(std::move(f));
  }
  if (per_qp)
    for (MetricFamily& f : qp_families(router)) out.push_back(std::move(f));
  return out;
}

// What the exposer collects: a snapshot the router thread makes on request.
class MetricsServer::Snapshots : public prometheus::Collectable {
 public:
  Snapshots(Router* router, bool per_qp) : router_(router), per_qp_(per_qp) {}
  std::vector<MetricFamily> Collect() const override {
    Router* router = router_;
    const bool per_qp = per_qp_;
    return router
        ->ask<std::vector<MetricFamily>>(
            [router, per_qp] { return router_metrics_st(*router, per_qp); }, kSnapshotWait)
        .value_or(std::vector<MetricFamily>{});
  }

 private:
  Router* router_;
  bool per_qp_;
};

std::unique_ptr<MetricsServer> MetricsServer::start(Router* router, const std::string& address,
                                                    bool per_qp, std::string* why) {
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  try {
    s->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    *why = "cannot serve metrics on " + address + ": " + e.what();
    return nullptr;
  }
  s->snapshots_ = std::make_shared<Snapshots>(router, per_qp);
  s->exposer_->RegisterCollectable(s->snapshots_);
  return s;
}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const {
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace wharf::router
