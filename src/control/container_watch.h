// A router's view of the orchestrator's containers (issue #4): lists /wharf/container/, then
// follows changes with long-polled watches (GET /v1/kv, then /v1/watch from the next
// revision), and reports the policy of every container placed on this host, again whenever
// it changes. A container that is deleted or moved to another host is reported once more
// with a default policy (no limits). It also reports where every container of the cluster
// runs (its network, vIP and host), so that the router can send RDMA for its address there. When
// the orchestrator is away it retries every second and carries on from the revision it had; when
// that history is gone (410) it lists again. Runs on a thread of its own; `report` is called on
// that thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/policy.h"
#include "control/api_client.h"
#include "control/credentials.h"

namespace httplib {
class Client;
}

namespace wharf::control {

struct ContainerInfo;

class ContainerWatch {
 public:
  using Report = std::function<void(const std::string& tenant, const std::string& name,
                                    const ContainerPolicy& policy)>;
  // Container tenant/network's vIP runs on `host`; "" once the container is deleted.
  using Place = std::function<void(const std::string& tenant, const std::string& network,
                                   uint32_t vip, const std::string& host)>;

  // orchestrator: its URL and CA (control/api_client.h); token: where a host or admin token
  // comes from (read again before each list and watch).
  ContainerWatch(ApiEndpoint orchestrator, TokenSource token, std::string host, Report report,
                 Place place);
  ~ContainerWatch();  // stops the thread, interrupting a pending watch
  ContainerWatch(const ContainerWatch&) = delete;
  ContainerWatch& operator=(const ContainerWatch&) = delete;

 private:
  void run();
  // Lists every container; false when the orchestrator could not be asked.
  bool list(int64_t* next_revision);
  // Waits for changes from *revision on; 0 on success, or the HTTP status (410: list again;
  // -1: no answer).
  int watch(int64_t* revision);
  // Takes a container's new record (nullptr: deleted) and reports what changed for us.
  void update(const std::string& key, const std::string* value);
  // Reports the placement of the container at `key` (c: its record, nullptr: gone) if it
  // changed.
  void update_placement(const std::string& key, const ContainerInfo* c);

  struct Placed {
    std::string tenant;
    std::string network;
    uint32_t vip = 0;
    std::string host;
  };

  const ApiEndpoint orchestrator_;
  const TokenSource token_;
  const std::string host_;
  const Report report_;
  const Place place_;
  std::map<std::string, ContainerPolicy> mine_;  // by key: this host's containers, as reported
  std::map<std::string, Placed> placed_;         // by key: every container, as reported
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;                        // guarded by mu_
  std::unique_ptr<httplib::Client> client_;  // the thread's; only stop() comes from outside
  std::thread thread_;
};

}  // namespace wharf::control
