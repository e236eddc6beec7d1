#include "control/host_agent.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "control/agent_thread.h"

namespace wharf::control {
namespace {

constexpr auto kRetry = std::chrono::seconds(1);
constexpr int kReadTimeoutS = 5;

}  // namespace

HostAgent::HostAgent(ApiEndpoint orchestrator, TokenSource token, HostInfo host, int ttl_seconds,
                     std::function<std::string()> report, std::chrono::milliseconds report_period)
    : orchestrator_(std::move(orchestrator)),
      token_(std::move(token)),
      host_(std::move(host)),
      ttl_seconds_(ttl_seconds),
      report_(std::move(report)),
      report_period_(report_period) {
  thread_ = spawn_without_signals([this] { run(); });
}

HostAgent::~HostAgent() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

bool HostAgent::register_host(int64_t* lease) {
  nlohmann::json body = {{"name", host_.name}, {"ttl", ttl_seconds_}};
  Registry::host_to_json(host_, &body);
  auto r = make_agent_client(orchestrator_, token_, kReadTimeoutS)
               ->Post("/v1/hosts", body.dump(), "application/json");
  if (!r || r->status != 200) {
    spdlog::warn("orchestrator {}: could not register host {}: {}", orchestrator_.url, host_.name,
                 r ? r->body : httplib::to_string(r.error()));
    return false;
  }
  const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("lease") || !j["lease"].is_number_integer()) return false;
  *lease = j["lease"].get<int64_t>();
  spdlog::info("orchestrator {}: host {} registered with LIDs {}-{} (lease {}, {} s)",
               orchestrator_.url, host_.name, host_.lid_first, host_.lid_last, *lease,
               ttl_seconds_);
  return true;
}

bool HostAgent::keep_alive(int64_t lease) {
  auto r = make_agent_client(orchestrator_, token_, kReadTimeoutS)
               ->Post("/v1/hosts/" + host_.name + "/keepalive",
                      nlohmann::json{{"lease", lease}}.dump(), "application/json");
  return r && r->status == 200;
}

void HostAgent::send_report() {
  const std::string body = report_();
  if (body.empty()) return;
  auto r = make_agent_client(orchestrator_, token_, kReadTimeoutS)
               ->Post("/v1/hosts/" + host_.name + "/report", body, "application/json");
  if (!r || r->status != 200)
    spdlog::debug("orchestrator {}: the report of {} was refused: {}", orchestrator_.url,
                  host_.name, r ? r->body : httplib::to_string(r.error()));
}

void HostAgent::run() {
  using Clock = std::chrono::steady_clock;
  int64_t lease = 0;
  // Renew three times per TTL, so one lost renewal does not let the entry lapse.
  const auto period = std::chrono::milliseconds(ttl_seconds_ * 1000 / 3);
  Clock::time_point renew_at = Clock::now();
  Clock::time_point report_at = renew_at + report_period_;
  std::unique_lock<std::mutex> g(mu_);
  while (!stop_) {
    g.unlock();
    if (Clock::now() >= renew_at) {
      bool ok = lease != 0 && keep_alive(lease);
      if (!ok) {
        if (lease != 0)
          spdlog::warn("orchestrator {}: lost the lease of host {}", orchestrator_.url, host_.name);
        lease = 0;
        ok = register_host(&lease);
      }
      renew_at = Clock::now() + (ok ? period : std::chrono::milliseconds(kRetry));
    }
    if (report_ && lease != 0 && Clock::now() >= report_at) {
      send_report();
      report_at = Clock::now() + report_period_;
    }
    g.lock();
    stop_cv_.wait_until(g, report_ ? std::min(renew_at, report_at) : renew_at,
                        [this] { return stop_; });
  }
}

}  // namespace wharf::control
