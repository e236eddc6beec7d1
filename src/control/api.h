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
//   GET    /v1/tokens                        -> [{"id","role","tenant","host","name",
//                                               "created","expires"}, ...]
//   POST   /v1/tokens                        {"role"[,"tenant"|"host","name","ttl"]} -> the
//                                            same and "token": the only copy of the secret
//   DELETE /v1/tokens/ID
// and, for a router joining with its join token (or an admin), its link certificate
// (control/host_ca.h, control/link_join.h); a join token is used up by its first success:
//   POST   /v1/hosts/H/certificate           {"csr": PEM} -> {"certificate": PEM for H,
//                                               "ca": PEM, "token": a new host token}
// Every request carries "Authorization: Bearer TOKEN"; which roles may use a route is
// kRouteAccess's row in api.cc. Errors: {"error": message} with 400 (bad input), 401 (no
// token, or one that is unknown, expired or deleted), 403 (the token's role may not do
// that), 404 (unknown object or route), 409 (exists, in use, overlaps, no address left), 410
// (watch history compacted), 503 (store unreachable) or 500. Every request but a GET is
// written to the audit log, refused or not: one JSON object a line,
// {"time","token","role","tenant","method","path","status"}.
// In transit the tokens are only as safe as the connection: with ApiTls the API is served
// over HTTPS (TLS 1.2 or later), and clients verify it (control/api_client.h); without it,
// over plain HTTP (docs/SECURITY.md says when that is acceptable).
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "control/api_metrics.h"
#include "control/host_ca.h"
#include "control/host_reports.h"
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
  kJoin,         // a host's certificate, /v1/hosts/H/certificate: admins, H's join token
  kPublic,       // the dashboard's files, /ui/: anyone, no token (they hold no data)
};

// The certificate (chain) and private key, PEM files, of an API served over TLS.
struct ApiTls {
  std::string cert_file;
  std::string key_file;
};

class ApiServer {
 public:
  // audit_log: the file every request but a GET is appended to ("" for none). tls: serve
  // HTTPS with that certificate and key (TLS 1.2 or later); both empty: plain HTTP. Throws
  // std::runtime_error when the audit log cannot be opened, or only one of tls's files is
  // given, or they cannot be loaded (never falls back to plain HTTP).
  // ca: the cluster CA that signs routers' link certificates (nullptr: none is issued).
  explicit ApiServer(KvStore* store, const std::string& audit_log = "", const ApiTls& tls = {},
                     const HostCa* ca = nullptr);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0: any free one). Returns the port, or -1.
  int bind(const std::string& host, int port);
  // Serves until stop() (from another thread or a signal handler's thread).
  void serve();
  void stop();

  // Answers one request as parsed by httplib (method, decoded path, query params, headers,
  // body): routes it by method and path, checks its token, runs the route's handler and
  // audits it. Everything the server answers goes through here; the fuzz target calls it
  // without a socket. May be called from any thread.
  void handle(const httplib::Request& req, httplib::Response& res);
  // Counts every request handle() answers in `metrics` (which outlives the server; nullptr:
  // none). Set before serve().
  void set_metrics(ApiMetrics* metrics) { metrics_ = metrics; }

 private:
  // A route's handler, run only for a caller whose token passes the route's access; `path`
  // holds the route pattern's captures (tenant, container, ...).
  using Handler = std::function<void(const httplib::Request&, const std::smatch& path,
                                     httplib::Response&, const TokenRecord&)>;
  struct Route {
    std::string method;  // GET, POST or DELETE
    std::regex path;     // matched against the whole decoded path
    Access access;
    Handler handler;
    bool audited = true;  // false: routers' routine reports, which change nothing lasting
    std::string name;     // the pattern with each capture as {}: the metrics' `route` label
  };
  void add(const char* method, const char* path, Access access, Handler h, bool audited = true);
  // Whether the request's token passes `access`; if not, the refusal is written to res.
  bool authorize(Access access, const httplib::Request& req, const std::smatch& path,
                 httplib::Response& res, TokenRecord* who);
  void audit(const httplib::Request& req, const httplib::Response& res, const TokenRecord* who);
  void routes();
  void token_routes();
  void certificate_routes();
  void report_routes();
  void dashboard_routes();

  KvStore* store_;
  Registry registry_;
  TokenStore tokens_;
  HostReports reports_;
  ApiMetrics* metrics_ = nullptr;
  const HostCa* ca_;
  std::vector<Route> routes_;  // filled by the constructor, read-only after
  std::unique_ptr<httplib::Server> http_;
  std::mutex audit_mutex_;
  std::unique_ptr<FILE, int (*)(FILE*)> audit_;  // guarded by audit_mutex_
};

}  // namespace wharf::control
