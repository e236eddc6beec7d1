// The router's metric families (router/metrics.h): one series per container, labelled with its
// tenant, network and name (and quota kind), none per QP; a container that went stays listed
// so that the next scrapes see what it moved, and when one of the same name comes back the two
// are one series, never two with the same labels (which Prometheus refuses).
#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "router/metrics.h"
#include "router/router.h"

namespace wharf::router {
namespace {

using prometheus::MetricFamily;
using Labels = std::map<std::string, std::string>;

constexpr uint32_t kVip = 0xc6120a00;  // 198.18.10.0 + n

RouterConfig config() {
  RouterConfig cfg;
  cfg.socket_path = "/nonexistent/unused.sock";  // never started
  return cfg;
}

const MetricFamily* family(const std::vector<MetricFamily>& all, const std::string& name) {
  for (const MetricFamily& f : all) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The family's series: labels -> value (counter or gauge, as the family is typed).
std::map<Labels, double> series(const std::vector<MetricFamily>& all, const std::string& name) {
  std::map<Labels, double> out;
  const MetricFamily* f = family(all, name);
  if (f == nullptr) return out;
  for (const auto& m : f->metric) {
    Labels l;
    for (const auto& label : m.label) l[label.name] = label.value;
    out[l] = f->type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
  }
  return out;
}

double single(const std::vector<MetricFamily>& all, const std::string& name) {
  const auto s = series(all, name);
  return s.size() == 1 ? s.begin()->second : -1;
}

// No family has two series with the same labels, nor a label set that names a QP.
void expect_well_formed(const std::vector<MetricFamily>& all) {
  for (const MetricFamily& f : all) {
    std::set<Labels> seen;
    for (const auto& m : f.metric) {
      Labels l;
      for (const auto& label : m.label) {
        EXPECT_NE(label.name, "qp") << f.name;
        l[label.name] = label.value;
      }
      EXPECT_TRUE(seen.insert(l).second) << f.name << ": two series with the same labels";
    }
  }
}

Labels container(const std::string& name) {
  return {{"tenant", "t"}, {"network", "n"}, {"container", name}};
}

TEST(RouterMetricsTest, ASeriesPerContainerWithItsQuotas) {
  Router r(config());
  uint16_t lid = 0;
  ASSERT_EQ(r.register_container("t", "n", "a", 1, kVip + 1, 0, &lid), 0);
  ASSERT_EQ(r.register_container("t", "n", "b", 2, kVip + 2, 0, &lid), 0);
  ContainerPolicy p;
  p.quota[static_cast<size_t>(QuotaKind::kQp)] = 4;
  r.set_policy_st("t", "a", p);
  const auto m = router_metrics_st(r);
  expect_well_formed(m);
  EXPECT_EQ(series(m, "wharf_container_tx_bytes_total"),
            (std::map<Labels, double>{{container("a"), 0}, {container("b"), 0}}));
  Labels qp_quota = container("a");
  qp_quota["kind"] = "qp";
  EXPECT_EQ(series(m, "wharf_container_quota"), (std::map<Labels, double>{{qp_quota, 4}}));
  EXPECT_EQ(series(m, "wharf_container_objects")[qp_quota], 0);
  EXPECT_EQ(series(m, "wharf_container_objects").size(), 2 * kQuotaKinds);
  EXPECT_EQ(single(m, "wharf_router_containers"), 2);
  EXPECT_EQ(single(m, "wharf_router_qps"), 0);
  EXPECT_EQ(single(m, "wharf_router_busy_ratio"), 0) << "a router that never ran";
  EXPECT_EQ(single(m, "wharf_router_busy_seconds_total"), 0);
  EXPECT_EQ(series(m, "wharf_container_ratelimit_throttled_seconds_total").size(), 2u);
  EXPECT_EQ(family(m, "wharf_link_refused_peers_total"), nullptr) << "no links without a cluster";
}

TEST(RouterMetricsTest, AContainerThatWentStaysListedAndOneThatComesBackIsOneSeries) {
  Router r(config());
  uint16_t lid = 0;
  ASSERT_EQ(r.register_container("t", "n", "a", 1, kVip + 1, 0, &lid), 0);
  r.unregister_container("t", "a");
  auto m = router_metrics_st(r);
  expect_well_formed(m);
  EXPECT_EQ(series(m, "wharf_container_tx_bytes_total").count(container("a")), 1u);
  EXPECT_EQ(single(m, "wharf_router_containers"), 0);
  EXPECT_TRUE(series(m, "wharf_container_quota").empty());
  // `wharfctl statistic show` lists only the containers that are here.
  EXPECT_TRUE(r.container_usage_st(false).empty());

  ASSERT_EQ(r.register_container("t", "n", "a", 2, kVip + 1, 0, &lid), 0);
  r.unregister_container("t", "a");
  ASSERT_EQ(r.register_container("t", "n", "a", 3, kVip + 1, 0, &lid), 0);
  m = router_metrics_st(r);
  expect_well_formed(m);
  EXPECT_EQ(series(m, "wharf_container_tx_bytes_total").size(), 1u);
  EXPECT_EQ(single(m, "wharf_router_containers"), 1);
  const auto usage = r.container_usage_st(true);
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_NE(usage[0].live, nullptr);
}

// A router keeps at most kDepartedKept gone containers, the newest.
TEST(RouterMetricsTest, GoneContainersAreKeptBounded) {
  Router r(config());
  for (size_t i = 0; i < Router::kDepartedKept + 10; ++i) {
    uint16_t lid = 0;
    const std::string name = "c" + std::to_string(i);
    ASSERT_EQ(r.register_container("t", "n", name, i + 1, kVip + 1, 0, &lid), 0);
    r.unregister_container("t", name);
  }
  const auto usage = r.container_usage_st(true);
  EXPECT_EQ(usage.size(), Router::kDepartedKept);
  EXPECT_EQ(series(router_metrics_st(r), "wharf_container_tx_bytes_total").count(container("c0")),
            0u);
}

}  // namespace
}  // namespace wharf::router
