#include "engine.h"

#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "agent.h"
#include "common/clock.h"
#include "device.h"
#include "half.h"

namespace wharf::scala {
namespace {

// Both halves in this process: every thread drives its share of each, and the last one warm
// starts the measured interval. The halves' QPs go first, both sides' before either side's
// memory, so that no work in flight lands in memory about to be freed.
PointResult run_here(Half& a, Half& b, const RunOptions& opts) {
  std::vector<Half*> halves{&a, &b};
  const uint64_t start = now_ns();
  Meter meter(opts.threads);
  std::vector<Tally> tallies(opts.threads);
  for (Tally& t : tallies) t.latencies.reserve(1u << 16);
  std::vector<std::thread> threads;
  for (uint32_t t = 1; t < opts.threads; ++t)
    threads.emplace_back(
        [&, t] { drive(halves, t, opts, start, /*start_when_warm=*/true, &meter, &tallies[t]); });
  drive(halves, 0, opts, start, /*start_when_warm=*/true, &meter, &tallies[0]);
  for (std::thread& t : threads) t.join();
  a.destroy_qps();
  b.destroy_qps();
  return summarize(tallies, opts.measure_s);
}

}  // namespace

std::unique_ptr<Engine> Engine::open(const std::string& local, const std::string& remote,
                                     std::unique_ptr<AgentClient> agent, std::string* error) {
  std::unique_ptr<Engine> e(new Engine);
  e->local_ = open_device(local, error);
  if (e->local_ == nullptr) return nullptr;
  if (agent != nullptr) {
    e->agent_ = std::move(agent);
    e->remote_name_ = e->agent_->device_name();
  } else {
    e->remote_ = open_device(remote, error);
    if (e->remote_ == nullptr) return nullptr;
    e->remote_name_ = e->remote_->dev.name;
  }
  if (e->agent_ != nullptr || !is_router_socket(local) || !is_router_socket(remote))
    e->fixed_.push_back({"networks",
                         "tenant networks are those of two Wharf routers this "
                         "process reaches (not two devices, nor an agent)"});
  else if (geteuid() != 0)
    e->fixed_.push_back({"networks", "registering tenant networks needs root"});
  if (e->fixed_.empty()) {
    e->networks_.push_back(std::make_unique<TenantNetworks>(local, 0, &e->namespaces_));
    if (remote != local)
      e->networks_.push_back(std::make_unique<TenantNetworks>(remote, 1, &e->namespaces_));
  }
  std::string why = Half::probe_rules(e->local_->dev);
  if (why.empty())
    why = e->agent_ != nullptr ? e->agent_->no_rules() : Half::probe_rules(e->remote_->dev);
  if (!why.empty()) e->fixed_.push_back({"rules", "no flow steering: " + why});
  return e;
}

Engine::~Engine() = default;

const std::string& Engine::local_name() const { return local_->dev.name; }
const std::string& Engine::remote_name() const { return remote_name_; }
uint32_t Engine::max_qp_wr() const {
  const auto mine = static_cast<uint32_t>(local_->dev.attr.max_qp_wr);
  return std::min(mine, agent_ != nullptr ? agent_->max_qp_wr()
                                          : static_cast<uint32_t>(remote_->dev.attr.max_qp_wr));
}

PointResult Engine::run(const PointSpec& spec, const RunOptions& opts) {
  if (spec.networks > 1 && networks_.empty())
    return PointResult::failure("networks > 1: tenant networks need two Wharf routers and root");
  for (auto& n : networks_)
    if (std::string error = n->hold(spec.networks - 1); !error.empty())
      return PointResult::failure(error);
  Half local(&local_->dev, 0, spec, opts);
  if (std::string e = local.build(); !e.empty()) return PointResult::failure(e);
  if (agent_ != nullptr) return agent_->run(local, spec, opts);
  Half remote(&remote_->dev, 1, spec, opts);
  if (std::string e = remote.build(); !e.empty()) return PointResult::failure(e);
  if (std::string e = local.connect(remote.info()); !e.empty()) return PointResult::failure(e);
  if (std::string e = remote.connect(local.info()); !e.empty()) return PointResult::failure(e);
  return run_here(local, remote, opts);
}

}  // namespace wharf::scala
