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
// P must start with "/wharf/". And, for admins, the credentials (control/tokens.h):
//   GET    /v1/tokens                        -> [{"id","role","tenant","name","created",
//                                               "expires"}, ...]
//   POST   /v1/tokens                        {"role"[,"tenant","name","ttl"]} -> the same
//                                            and "token": the only copy of the secret
//   DELETE /v1/tokens/ID
// Every request carries "Authorization: Bearer TOKEN"; which roles may use a route is
// kRouteAccess's row in api.cc. Errors: {"error": message} with 400 (bad input), 401 (no
// token, or one that is unknown, expired or deleted), 403 (the token's role may not do
// that), 404 (unknown object), 409 (exists, in use, overlaps, no address left), 503 (store
// unreachable) or 500. Every request but a GET is written to the audit log, refused or not:
// one JSON object a line, {"time","token","role","tenant","method","path","status"}.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "control/kv_store.h"
#include "control/registry.h"
#include "control/tokens.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace wharf::control {

// Who may use a kind of route (one row each in api.cc's kRouteAccess).
enum class Access {
  kAdmin,        // tokens
  kTenantRead,   // GET /v1/tenants/T/...: admins, viewers, T's tenant-admins
  kTenantWrite,  // changes under /v1/tenants/T/: admins, T's tenant-admins
  kListing,      // GET /v1/tenants, /v1/containers: all roles, a tenant-admin its own only
  kHostWrite,    // a host's registration and keep-alive: admins, hosts
  kHostRead,     // GET /v1/hosts: admins, viewers, hosts
  kStore,        // the raw store, /v1/kv and /v1/watch: admins, hosts
};

class ApiServer {
 public:
  // audit_log: the file every request but a GET is appended to ("" for none).
  explicit ApiServer(KvStore* store, const std::string& audit_log = "");
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0: any free one). Returns the port, or -1.
  int bind(const std::string& host, int port);
  // Serves until stop() (from another thread or a signal handler's thread).
  void serve();
  void stop();

 private:
  using Handler =
      std::function<void(const httplib::Request&, httplib::Response&, const TokenRecord&)>;
  // h, run only for a caller whose token passes `access` (else 401 or 403), and audited.
  std::function<void(const httplib::Request&, httplib::Response&)> guarded(Access access,
                                                                           Handler h);
  // Whether the request's token passes `access`; if not, the refusal is written to res.
  bool authorize(Access access, const httplib::Request& req, httplib::Response& res,
                 TokenRecord* who);
  void audit(const httplib::Request& req, const httplib::Response& res, const TokenRecord* who);
  void routes();
  void token_routes();

  KvStore* store_;
  Registry registry_;
  TokenStore tokens_;
  std::unique_ptr<httplib::Server> http_;
  std::mutex audit_mutex_;
  std::unique_ptr<FILE, int (*)(FILE*)> audit_;  // guarded by audit_mutex_
};

}  // namespace wharf::control
