#include "control/host_reports.h"

#include <cctype>
#include <cmath>
#include <set>

#include "common/policy.h"
#include "control/registry.h"

namespace wharf::control {
namespace {

using nlohmann::json;

// The figure `key` of `row` if it is a finite number >= 0 (and <= 1 for a ratio).
bool figure(const json& row, const char* key, bool ratio, double* out) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_number()) return false;
  *out = it->get<double>();
  return std::isfinite(*out) && *out >= 0 && (!ratio || *out <= 1);
}

// The string `key` of `row` if it can name a host, tenant, network or container on a router:
// 1 to 63 bytes of [A-Za-z0-9_.-] (the registry's names, and wharf-run's, which allows capitals
// for containers it runs without the orchestrator), or "" where `empty_ok`.
bool name(const json& row, const char* key, bool empty_ok, std::string* out) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_string()) return false;
  *out = it->get<std::string>();
  if (out->empty()) return empty_ok;
  if (out->size() > 63) return false;
  for (char c : *out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-')
      return false;
  return true;
}

// A Pingmesh row as kept, or null when it is not one.
json pingmesh_row(const json& row) {
  std::string peer;
  const auto state = row.is_object() ? row.find("state") : row.end();
  if (!row.is_object() || !name(row, "peer", false, &peer) || state == row.end() ||
      !state->is_string())
    return nullptr;
  const std::string s = state->get<std::string>();
  if (s != "up" && s != "down" && s != "unknown") return nullptr;
  double p50 = 0, p99 = 0, loss = 0;
  if (!figure(row, "rtt_p50_us", false, &p50) || !figure(row, "rtt_p99_us", false, &p99) ||
      !figure(row, "loss", true, &loss))
    return nullptr;
  return {{"peer", peer}, {"state", s}, {"rtt_p50_us", p50}, {"rtt_p99_us", p99}, {"loss", loss}};
}

// {KIND: N} with quota kinds only, as kept; null when it is not that.
json per_kind(const json& row, const char* key) {
  const auto it = row.find(key);
  if (it == row.end() || !it->is_object() || it->size() > kQuotaKinds) return nullptr;
  json out = json::object();
  for (const auto& [kind, n] : it->items()) {
    bool known = false;
    for (const char* k : kQuotaNames) known |= kind == k;
    if (!known || !n.is_number_unsigned()) return nullptr;
    out[kind] = n;
  }
  return out;
}

// A container's usage as kept, or null when it is not one.
json container_row(const json& row) {
  std::string tenant, network, container;
  if (!row.is_object() || !name(row, "tenant", true, &tenant) ||
      !name(row, "network", true, &network) || !name(row, "container", false, &container))
    return nullptr;
  json out = {{"tenant", tenant}, {"network", network}, {"container", container}};
  for (const char* k : {"tx_bytes", "rx_bytes", "tx_msgs", "rx_msgs"}) {
    const auto it = row.find(k);
    if (it == row.end() || !it->is_number_unsigned()) return nullptr;
    out[k] = *it;
  }
  for (const char* k : {"objects", "quota"}) {
    json kinds = per_kind(row, k);
    if (kinds.is_null()) return nullptr;
    out[k] = std::move(kinds);
  }
  return out;
}

// The checked rows of report[key] (absent: none) into *out; false if any is bad.
bool rows(const json& report, const char* key, json (*check)(const json&), json* out) {
  *out = json::array();
  const auto it = report.find(key);
  if (it == report.end()) return true;
  if (!it->is_array() || it->size() > HostReports::kMaxRows) return false;
  for (const json& row : *it) {
    json kept = check(row);
    if (kept.is_null()) return false;
    out->push_back(std::move(kept));
  }
  return true;
}

double age_seconds(HostReports::Clock::duration d) {
  return std::round(std::chrono::duration<double>(d).count() * 10) / 10;
}

}  // namespace

Status HostReports::report(const std::string& host, const json& report, Clock::time_point now) {
  const auto bad = [](const std::string& why) {
    return Status::error(Status::Code::kInvalidArgument, "a host report: " + why);
  };
  if (!Registry::valid_name(host)) return bad("bad host name");
  if (!report.is_object()) return bad("expected an object");
  Report r;
  r.at = now;
  if (!rows(report, "pingmesh", pingmesh_row, &r.pingmesh))
    return bad("\"pingmesh\": at most " + std::to_string(kMaxRows) +
               " rows, each with \"peer\" (a host name), \"state\" (up, down, unknown), "
               "\"rtt_p50_us\" and \"rtt_p99_us\" (>= 0) and \"loss\" (0 to 1)");
  if (!rows(report, "containers", container_row, &r.containers))
    return bad("\"containers\": at most " + std::to_string(kMaxRows) +
               " rows, each with \"tenant\", \"network\", \"container\" (names), \"tx_bytes\", "
               "\"rx_bytes\", \"tx_msgs\", \"rx_msgs\" (counts) and \"objects\" and \"quota\" "
               "({KIND: N} by quota kind)");
  std::lock_guard<std::mutex> g(mu_);
  reports_[host] = std::move(r);
  return Status::ok();
}

json HostReports::pingmesh(const std::vector<std::string>& registered,
                           Clock::time_point now) const {
  std::set<std::string> hosts(registered.begin(), registered.end());
  json links = json::array();
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& [from, report] : reports_) {
    hosts.insert(from);
    const bool stale = now - report.at > kStaleAfter;
    for (const json& row : report.pingmesh) {
      hosts.insert(row["peer"].get<std::string>());
      json link = row;
      link.erase("peer");
      link["from"] = from;
      link["to"] = row["peer"];
      if (stale) link["state"] = "stale";
      link["age_s"] = age_seconds(now - report.at);
      links.push_back(std::move(link));
    }
  }
  return {{"hosts", json(std::vector<std::string>(hosts.begin(), hosts.end()))}, {"links", links}};
}

json HostReports::usage(Clock::time_point now) const {
  json out = json::array();
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& [host, report] : reports_) {
    if (now - report.at > kStaleAfter) continue;
    for (const json& row : report.containers) {
      json c = row;
      c["host"] = host;
      c["age_s"] = age_seconds(now - report.at);
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace wharf::control
