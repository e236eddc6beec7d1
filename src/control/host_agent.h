// A router's presence in the orchestrator (issue #4): registers the host, with the LIDs its
// router gives out and its container subnet, on a lease (POST /v1/hosts) and keeps the lease alive
// from a thread of its own, so the host's entry disappears within `ttl_seconds` of the router's
// death. When the orchestrator is away or has forgotten the lease, it registers again (retrying
// every second); it never blocks the router's loop. With a report source it also posts the
// router's report every report period while registered (POST /v1/hosts/H/report,
// control/host_reports.h): Pingmesh's rows and the containers' usage, for the cluster's views.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "control/api_client.h"
#include "control/credentials.h"
#include "control/registry.h"

namespace wharf::control {

class HostAgent {
 public:
  // orchestrator: its URL and CA (control/api_client.h), token: where a host or admin token
  // comes from; host: what to register (its lease is not used).
  // report: the router's report as JSON text, "" when it has none to give now; called from
  // the agent's thread. Empty: no reports.
  HostAgent(ApiEndpoint orchestrator, TokenSource token, HostInfo host, int ttl_seconds,
            std::function<std::string()> report = {},
            std::chrono::milliseconds report_period = std::chrono::seconds(2));
  ~HostAgent();  // stops the thread; the entry then lapses with its lease
  HostAgent(const HostAgent&) = delete;
  HostAgent& operator=(const HostAgent&) = delete;

 private:
  void run();
  bool register_host(int64_t* lease);
  bool keep_alive(int64_t lease);
  void send_report();

  const ApiEndpoint orchestrator_;
  const TokenSource token_;
  const HostInfo host_;
  const int ttl_seconds_;
  const std::function<std::string()> report_;
  const std::chrono::milliseconds report_period_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace wharf::control
