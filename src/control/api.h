// The orchestrator's HTTP/JSON API (docs/OPERATIONS.md, "wharf-orchestrator and wharfctl"),
// served from a Registry and the KvStore behind it. Routes, with request -> answer bodies
// (all JSON):
//   GET    /v1/tenants                       -> ["red", ...]
//   POST   /v1/tenants                       {"name"}
//   DELETE /v1/tenants/T
//   GET    /v1/tenants/T/networks            -> [{"name","cidr"}, ...]
//   POST   /v1/tenants/T/networks            {"name","cidr"}
//   DELETE /v1/tenants/T/networks/N
//   GET    /v1/containers[?tenant=T]         -> [CONTAINER, ...]
//   POST   /v1/tenants/T/containers          {"name","network","host"[,"vip"]} -> CONTAINER
//   GET    /v1/tenants/T/containers/C        -> CONTAINER
//   POST   /v1/tenants/T/containers/C/move   {"host"} -> CONTAINER
//   POST   /v1/tenants/T/containers/C/policy POLICY CHANGE -> CONTAINER (control/policy_json.h)
//   DELETE /v1/tenants/T/containers/C
//   POST   /v1/hosts                         {"name","address","ttl"} -> {"lease"}: the host's
//                                            entry (/wharf/host/<name>) lives on that lease
//   POST   /v1/hosts/H/keepalive             {"lease"}
//   GET    /v1/hosts                         -> [{"name","address","lease"}, ...]
// where CONTAINER is {"tenant","name","network","vip","host","lid"} and its policy's keys;
// and, for routers that follow the state (list, then watch from the next revision):
//   GET    /v1/kv?prefix=P                   -> {"revision", "kvs": [{"key","value",
//                                               "mod_revision"}, ...]}
//   GET    /v1/watch?prefix=P&revision=N[&timeout_ms=T]
//                                            -> {"events": [{"type": "put"|"delete", "key",
//                                               "value","mod_revision"}, ...], "next": the
//                                               revision to ask for next}
//          waits up to T ms (default 10000, at most 60000) for a change at or after N under
//          P; 410 when N is older than the history the store keeps (list again).
// P must start with "/wharf/". Errors: {"error": message} with 400 (bad input), 404 (unknown
// object), 409 (exists, in use, overlaps, no address left), 503 (store unreachable) or 500.
#pragma once

#include <memory>
#include <string>

#include "control/kv_store.h"
#include "control/registry.h"

namespace httplib {
class Server;
}

namespace wharf::control {

class ApiServer {
 public:
  explicit ApiServer(KvStore* store);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0: any free one). Returns the port, or -1.
  int bind(const std::string& host, int port);
  // Serves until stop() (from another thread or a signal handler's thread).
  void serve();
  void stop();

 private:
  void routes();

  KvStore* store_;
  Registry registry_;
  std::unique_ptr<httplib::Server> http_;
};

}  // namespace wharf::control
