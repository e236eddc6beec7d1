#include "control/api_metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <exception>
#include <vector>

#include "control/kv_store.h"

namespace wharf::control {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Asks the store for one key at each scrape: whether it answers (a missing key is an
// answer) and how long it took.
class ApiMetrics::StoreProbe : public prometheus::Collectable {
 public:
  explicit StoreProbe(KvStore* store) : store_(store) {}
  std::vector<MetricFamily> Collect() const override {
    const auto start = std::chrono::steady_clock::now();
    KeyValue kv;
    const Status st = store_->get("/wharf/metrics-probe", &kv);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool up = st.is_ok() || st.code() == Status::Code::kNotFound;
    ClientMetric m;
    m.gauge.value = up ? 1 : 0;
    MetricFamily health{"wharf_orchestrator_store_up",
                        "1 if the store answered this scrape's probe, else 0",
                        MetricType::Gauge,
                        {m}};
    m.gauge.value = seconds;
    MetricFamily latency{"wharf_orchestrator_store_probe_seconds",
                         "How long this scrape's probe of the store took",
                         MetricType::Gauge,
                         {m}};
    return {health, latency};
  }

 private:
  KvStore* store_;
};

std::unique_ptr<ApiMetrics> ApiMetrics::start(const std::string& address, KvStore* store,
                                              std::string* why) {
  std::unique_ptr<ApiMetrics> m(new ApiMetrics());
  try {
    m->exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    *why = "cannot serve metrics on " + address + ": " + e.what();
    return nullptr;
  }
  m->registry_ = std::make_shared<prometheus::Registry>();
  m->requests_ = &prometheus::BuildCounter()
                      .Name("wharf_orchestrator_requests_total")
                      .Help("API requests answered, by method, route and status code")
                      .Register(*m->registry_);
  m->durations_ = &prometheus::BuildHistogram()
                       .Name("wharf_orchestrator_request_duration_seconds")
                       .Help("How long answering an API request took, by method and route")
                       .Register(*m->registry_);
  m->probe_ = std::make_shared<StoreProbe>(store);
  m->exposer_->RegisterCollectable(m->registry_);
  m->exposer_->RegisterCollectable(m->probe_);
  return m;
}

ApiMetrics::~ApiMetrics() = default;

void ApiMetrics::count(const std::string& method, const std::string& route, int status,
                       double seconds) {
  requests_->Add({{"method", method}, {"route", route}, {"code", std::to_string(status)}})
      .Increment();
  // 100 us to 10 s: a GET from memory to a long-polled watch.
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
  durations_->Add({{"method", method}, {"route", route}}, kBuckets).Observe(seconds);
}

int ApiMetrics::port() const {
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace wharf::control
