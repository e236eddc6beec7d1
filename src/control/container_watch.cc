#include "control/container_watch.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>

#include "control/agent_thread.h"
#include "control/kv_store.h"
#include "control/registry.h"

namespace wharf::control {
namespace {

using nlohmann::json;

constexpr auto kRetry = std::chrono::seconds(1);
constexpr int kWatchTimeoutMs = 10000;
// The read timeout outlasts the long poll.
constexpr int kReadTimeoutS = kWatchTimeoutMs / 1000 + 5;

}  // namespace

ContainerWatch::ContainerWatch(ApiEndpoint orchestrator, TokenSource token, std::string host,
                               Report report, Place place)
    : orchestrator_(std::move(orchestrator)),
      token_(std::move(token)),
      host_(std::move(host)),
      report_(std::move(report)),
      place_(std::move(place)),
      client_(make_agent_client(orchestrator_, token_, kReadTimeoutS)) {
  thread_ = spawn_without_signals([this] { run(); });
}

ContainerWatch::~ContainerWatch() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
    client_->stop();  // ends a long poll in progress
  }
  stop_cv_.notify_all();
  thread_.join();
}

void ContainerWatch::update_placement(const std::string& key, const ContainerInfo* c) {
  auto it = placed_.find(key);
  if (it != placed_.end()) {
    const Placed& old = it->second;
    if (c != nullptr && old.network == c->network && old.vip == c->vip && old.host == c->host)
      return;
    if (c == nullptr || old.network != c->network || old.vip != c->vip)
      place_(old.tenant, old.network, old.vip, "");
    placed_.erase(it);
  }
  if (c == nullptr) return;
  placed_[key] = Placed{c->tenant, c->network, c->vip, c->host};
  place_(c->tenant, c->network, c->vip, c->host);
}

void ContainerWatch::update(const std::string& key, const std::string* value) {
  ContainerInfo c;
  const bool valid = value != nullptr && Registry::decode_container(KeyValue{key, *value}, &c);
  update_placement(key, valid ? &c : nullptr);
  const bool here = valid && c.host == host_;
  auto it = mine_.find(key);
  if (!here) {
    if (it == mine_.end()) return;
    // Deleted or moved away: the router forgets its limits.
    mine_.erase(it);
    std::string tenant, name;
    if (Registry::split_container_key(key, &tenant, &name))
      report_(tenant, name, ContainerPolicy{});
    return;
  }
  if (it != mine_.end() && it->second == c.policy) return;
  mine_[key] = c.policy;
  report_(c.tenant, c.name, c.policy);
}

bool ContainerWatch::list(int64_t* next_revision) {
  present_token(client_.get(), token_);  // a rotated token counts from the next list
  auto r = client_->Get(std::string("/v1/kv?prefix=") + Registry::kContainerPrefix);
  const json j = r && r->status == 200 ? json::parse(r->body, nullptr, false) : json();
  if (!j.is_object() || !j.contains("revision") || !j["revision"].is_number_integer() ||
      !j.contains("kvs") || !j["kvs"].is_array()) {
    spdlog::warn("orchestrator {}: cannot list containers: {}", orchestrator_.url,
                 r ? "HTTP " + std::to_string(r->status) : httplib::to_string(r.error()));
    return false;
  }
  std::set<std::string> present;
  for (const json& kv : j["kvs"]) {
    if (!kv.is_object() || !kv.contains("key") || !kv["key"].is_string() || !kv.contains("value") ||
        !kv["value"].is_string())
      continue;
    const std::string key = kv["key"].get<std::string>();
    const std::string value = kv["value"].get<std::string>();
    present.insert(key);
    update(key, &value);
  }
  std::vector<std::string> gone;  // every container reported is placed_, ours also in mine_
  for (const auto& [key, placed] : placed_)
    if (present.count(key) == 0) gone.push_back(key);
  for (const std::string& key : gone) update(key, nullptr);
  *next_revision = j["revision"].get<int64_t>() + 1;
  return true;
}

int ContainerWatch::watch(int64_t* revision) {
  present_token(client_.get(), token_);
  auto r = client_->Get(std::string("/v1/watch?prefix=") + Registry::kContainerPrefix +
                        "&revision=" + std::to_string(*revision) +
                        "&timeout_ms=" + std::to_string(kWatchTimeoutMs));
  if (!r) return -1;
  if (r->status != 200) return r->status;
  const json j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("events") || !j["events"].is_array() || !j.contains("next") ||
      !j["next"].is_number_integer())
    return 500;
  for (const json& e : j["events"]) {
    if (!e.is_object() || !e.contains("key") || !e["key"].is_string()) continue;
    const std::string key = e["key"].get<std::string>();
    if (e.value("type", "") == "put" && e.contains("value") && e["value"].is_string()) {
      const std::string value = e["value"].get<std::string>();
      update(key, &value);
    } else {
      update(key, nullptr);
    }
  }
  *revision = j["next"].get<int64_t>();
  return 0;
}

void ContainerWatch::run() {
  int64_t revision = 0;  // 0: list first
  std::unique_lock<std::mutex> g(mu_);
  while (!stop_) {
    g.unlock();
    bool pause = false;  // before asking again
    if (revision == 0) {
      pause = !list(&revision);
    } else if (const int status = watch(&revision); status == 410) {
      spdlog::info("orchestrator {}: watch history compacted; listing again", orchestrator_.url);
      revision = 0;
    } else if (status != 0) {
      spdlog::warn("orchestrator {}: container watch failed ({}); retrying", orchestrator_.url,
                   status < 0 ? "no answer" : "HTTP " + std::to_string(status));
      pause = true;
    }
    g.lock();
    if (pause) stop_cv_.wait_for(g, kRetry, [this] { return stop_; });
  }
}

}  // namespace wharf::control
