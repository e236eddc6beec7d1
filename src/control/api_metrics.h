// The orchestrator's own metrics (issue #20): `wharf-orchestrator --metrics ADDR:PORT` serves
// them in Prometheus's text format (prometheus-cpp's exposer, threads of its own):
//   wharf_orchestrator_requests_total{method, route, code}      requests answered
//   wharf_orchestrator_request_duration_seconds{method, route}  how long answering took
//   wharf_orchestrator_store_up                                  1 if the store answered the
//                                                               scrape's probe, else 0
//   wharf_orchestrator_store_probe_seconds                      how long that probe took
// `route` is the route's pattern with each name it captures as {} ("/v1/tenants/{}"), or
// "none" for a path no route has, so the label set stays bounded whatever clients send.
#pragma once

#include <memory>
#include <string>

namespace prometheus {
class Exposer;
class Registry;
class Counter;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace wharf::control {

class KvStore;

class ApiMetrics {
 public:
  // Serves /metrics at address (HOST:PORT, port 0: any free one), probing `store` (which
  // outlives it) at each scrape. nullptr with *why when it cannot listen there.
  static std::unique_ptr<ApiMetrics> start(const std::string& address, KvStore* store,
                                           std::string* why);
  ~ApiMetrics();
  ApiMetrics(const ApiMetrics&) = delete;
  ApiMetrics& operator=(const ApiMetrics&) = delete;

  // One request answered with `status` after `seconds`. Thread-safe.
  void count(const std::string& method, const std::string& route, int status, double seconds);
  int port() const;

 private:
  class StoreProbe;
  ApiMetrics() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;
  prometheus::Family<prometheus::Histogram>* durations_ = nullptr;
  std::shared_ptr<StoreProbe> probe_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace wharf::control
