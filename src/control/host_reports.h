// What the routers last reported (issue #20), for the cluster's views: each HostAgent posts its
// router's Pingmesh rows and its containers' usage every few seconds (POST /v1/hosts/H/report);
// the orchestrator serves the Pingmesh matrix (GET /v1/pingmesh) and the containers' usage
// (GET /v1/usage), which the dashboard draws.
//
// Kept in the orchestrator's memory only: a restarted orchestrator has everything again within
// one report period. Reports are hostile input: one with anything but the fields below (names
// of 1 to 63 bytes of [A-Za-z0-9_.-], figures finite and >= 0, at most kMaxRows rows of each kind)
// is refused whole. A host whose last report is older than kStaleAfter shows its Pingmesh links as
// "stale" (it may be the host that was cut off) and its containers no more.
//
// A report: {"pingmesh": [{"peer", "state": up|down|unknown, "rtt_p50_us", "rtt_p99_us",
// "loss": 0-1}, ...], "containers": [{"tenant", "network", "container", "tx_bytes",
// "rx_bytes", "tx_msgs", "rx_msgs", "objects": {KIND: N}, "quota": {KIND: N}}, ...]} (KIND: a
// quota kind, common/policy.h; a kind without a quota is left out of "quota"; tenant and
// network are "" for a container not placed by the orchestrator). Other fields are dropped.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace wharf::control {

class HostReports {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxRows = 4096;
  static constexpr auto kStaleAfter = std::chrono::seconds(15);

  // Replaces host's report with `report` as of now. kInvalidArgument, changing nothing, for
  // a bad host name or report.
  Status report(const std::string& host, const nlohmann::json& report, Clock::time_point now);
  // {"hosts": [names], "links": [{"from", "to", "state", "rtt_p50_us", "rtt_p99_us", "loss",
  // "age_s"}]}: hosts are `registered` and every host reported by or about, sorted; a link per
  // reported row (from: the reporter), its state "stale" when the report is.
  nlohmann::json pingmesh(const std::vector<std::string>& registered, Clock::time_point now) const;
  // [{"host", "age_s", and a container's fields}] from the reports that are not stale.
  nlohmann::json usage(Clock::time_point now) const;

 private:
  struct Report {
    nlohmann::json pingmesh;    // checked rows
    nlohmann::json containers;  // checked rows
    Clock::time_point at;
  };
  mutable std::mutex mu_;
  std::map<std::string, Report> reports_;  // guarded by mu_
};

}  // namespace wharf::control
