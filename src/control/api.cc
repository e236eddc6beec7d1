#include "control/api.h"

#include <fcntl.h>
#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "control/policy_json.h"
#include "control/ui_assets.h"

namespace wharf::control {
namespace {

using Code = Status::Code;
using nlohmann::json;

constexpr size_t kServerThreads = 64;
constexpr size_t kMaxPathBytes = 4096;

int http_status(Code code) {
  switch (code) {
    case Code::kOk: return 200;
    case Code::kInvalidArgument: return 400;
    case Code::kNotFound: return 404;
    case Code::kAlreadyExists:
    case Code::kFailedPrecondition:
    case Code::kExhausted: return 409;
    case Code::kUnavailable: return 503;
    case Code::kCompacted: return 410;
    case Code::kInternal: return 500;
  }
  return 500;
}

void reply(httplib::Response& res, const Status& st, const json& body = json::object()) {
  res.status = http_status(st.code());
  const json out = st.is_ok() ? body : json{{"error", st.message()}};
  // Bytes that are not UTF-8 (a key someone else wrote into etcd) become U+FFFD instead of
  // an exception.
  res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// The request's JSON object, or an error already written to res.
bool body_object(const httplib::Request& req, httplib::Response& res, json* out) {
  *out = json::parse(req.body, nullptr, false);
  if (out->is_object()) return true;
  reply(res, Status::error(Code::kInvalidArgument, "the body must be a JSON object"));
  return false;
}

// A string field of a request body; "" if absent or not a string.
std::string field(const json& j, const char* name) {
  auto it = j.find(name);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The prefix parameter of /v1/kv and /v1/watch: inside the orchestrator's keys.
bool prefix_param(const httplib::Request& req, httplib::Response& res, std::string* out) {
  *out = req.get_param_value("prefix");
  if (out->rfind("/wharf/", 0) == 0) return true;
  reply(res, Status::error(Code::kInvalidArgument, "prefix must start with /wharf/"));
  return false;
}

// A non-negative integer query parameter (def when absent); false if malformed.
bool int_param(const httplib::Request& req, const char* name, int64_t def, int64_t* out) {
  const std::string text = req.get_param_value(name);
  if (text.empty()) {
    *out = def;
    return true;
  }
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && *out >= 0;
}

json to_json(const ContainerInfo& c) {
  json j = {{"tenant", c.tenant},
            {"name", c.name},
            {"network", c.network},
            {"vip", format_ipv4(c.vip)},
            {"host", c.host},
            // null until the container's host registers and gives it one
            {"lid", c.lid != 0 ? json(c.lid) : json(nullptr)},
            // GID[0] of its port, as its applications see it (the vIP, IPv4-mapped)
            {"gid", "::ffff:" + format_ipv4(c.vip)}};
  policy_to_json(c.policy, &j);
  j["priority"] = c.policy.priority;  // always shown, 0 included
  return j;
}

json to_json(const TokenRecord& r) {
  return {{"id", r.id},     {"role", role_name(r.role)}, {"tenant", r.tenant},  {"host", r.host},
          {"name", r.name}, {"created", r.created},      {"expires", r.expires}};
}

// The audit log, appended to and readable by its owner only (it names who changed what).
FILE* open_audit_log(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return nullptr;
  FILE* f = ::fdopen(fd, "a");
  if (f == nullptr) ::close(fd);
  return f;
}

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

// Which roles may use each kind of route. `own_scope`: a tenant-admin only for the tenant
// the route names, a join token only for the host it names (kListing: the routes filter what
// a tenant-admin sees to its own).
struct RouteAccess {
  bool admin, tenant_admin, viewer, host, join, own_scope;
};
constexpr RouteAccess kRouteAccess[] = {
    //                 admin  tenant-admin viewer host   join   own_scope
    /* kAdmin */ {true, false, false, false, false, false},
    /* kTenantRead */ {true, true, true, false, false, true},
    /* kTenantWrite */ {true, true, false, false, false, true},
    /* kListing */ {true, true, true, true, false, false},
    /* kHostWrite */ {true, false, false, true, false, false},
    /* kHostRead */ {true, false, true, true, false, false},
    /* kStore */ {true, false, false, true, false, false},
    /* kJoin */ {true, false, false, false, true, true},
};

bool role_may(Access access, Role role) {
  const RouteAccess& a = kRouteAccess[static_cast<size_t>(access)];
  switch (role) {
    case Role::kAdmin: return a.admin;
    case Role::kTenantAdmin: return a.tenant_admin;
    case Role::kViewer: return a.viewer;
    case Role::kHost: return a.host;
    case Role::kJoin: return a.join;
  }
  return false;
}

// The bearer token of an Authorization header; "" if there is none.
std::string bearer_token(const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  constexpr std::string_view kScheme = "Bearer ";
  return h.size() > kScheme.size() && h.compare(0, kScheme.size(), kScheme) == 0
             ? h.substr(kScheme.size())
             : std::string();
}

void refuse(httplib::Response& res, int status, const std::string& why) {
  res.status = status;
  if (status == 401) res.set_header("WWW-Authenticate", "Bearer");
  // why may quote the path, whose bytes need not be UTF-8.
  res.set_content(json{{"error", why}}.dump(-1, ' ', false, json::error_handler_t::replace),
                  "application/json");
}

// Why OpenSSL failed: the first error it queued (the cause; later ones say where it was
// noticed), a system error as errno's text. The queue is emptied.
std::string tls_error() {
  const unsigned long e = ERR_peek_error();
  const char* reason =
      ERR_SYSTEM_ERROR(e) ? std::strerror(ERR_GET_REASON(e)) : ERR_reason_error_string(e);
  ERR_clear_error();
  return reason != nullptr ? reason : "unknown error";
}

// The API's TLS context: TLS 1.2 or later (1.2 with forward-secret AEAD suites only), no
// compression or renegotiation, and the certificate chain and the key that matches it.
bool setup_tls(SSL_CTX* ctx, const ApiTls& tls, std::string* why) {
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
      SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20") != 1) {
    *why = "cannot set up TLS: " + tls_error();
    return false;
  }
  if (SSL_CTX_use_certificate_chain_file(ctx, tls.cert_file.c_str()) != 1) {
    *why = "cannot load the TLS certificate " + tls.cert_file + ": " + tls_error();
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    *why = "cannot load the TLS key " + tls.key_file + " (of certificate " + tls.cert_file +
           "): " + tls_error();
    return false;
  }
  return true;
}

// A plain HTTP server, or an HTTPS one when tls names files; throws when it cannot be had.
std::unique_ptr<httplib::Server> make_server(const ApiTls& tls) {
  if (tls.cert_file.empty() && tls.key_file.empty()) return std::make_unique<httplib::Server>();
  if (tls.cert_file.empty() || tls.key_file.empty())
    throw std::runtime_error("TLS needs both a certificate and its key");
  std::string why;
  auto server = std::make_unique<httplib::SSLServer>(
      [&](SSL_CTX& ctx) { return setup_tls(&ctx, tls, &why); });
  if (!server->is_valid()) throw std::runtime_error(why.empty() ? "cannot set up TLS" : why);
  return server;
}

}  // namespace

ApiServer::ApiServer(KvStore* store, const std::string& audit_log, const ApiTls& tls,
                     const HostCa* ca)
    : store_(store),
      registry_(store),
      tokens_(store),
      ca_(ca),
      http_(make_server(tls)),
      audit_(audit_log.empty() ? nullptr : open_audit_log(audit_log), &std::fclose) {
  if (!audit_log.empty() && audit_ == nullptr)
    throw std::runtime_error("cannot open the audit log " + audit_log);
  // Every router keeps a watch waiting: more threads than httplib's default of about eight.
  http_->new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
  // httplib writes a response's headers and body separately: with Nagle's algorithm the body
  // waits for the client's delayed ACK, 40 ms on a kept-alive connection.
  http_->set_tcp_nodelay(true);
  routes();
  // Every request is routed by handle(), so that the fuzz target exercises what is served.
  const auto serve = [this](const httplib::Request& req, httplib::Response& res) {
    handle(req, res);
  };
  const char* const kAnyPath = R"([\s\S]*)";  // "." would not match a decoded newline
  http_->Get(kAnyPath, serve)
      .Post(kAnyPath, serve)
      .Put(kAnyPath, serve)
      .Patch(kAnyPath, serve)
      .Delete(kAnyPath, serve)
      .Options(kAnyPath, serve);
}

ApiServer::~ApiServer() = default;

int ApiServer::bind(const std::string& host, int port) {
  if (port == 0) return http_->bind_to_any_port(host);
  return http_->bind_to_port(host, port) ? port : -1;
}

void ApiServer::serve() { http_->listen_after_bind(); }
void ApiServer::stop() { http_->stop(); }

bool ApiServer::authorize(Access access, const httplib::Request& req, const std::smatch& path,
                          httplib::Response& res, TokenRecord* who) {
  if (access == Access::kPublic) return true;
  const std::string token = bearer_token(req);
  if (token.empty()) {
    refuse(res, 401, "this API needs a token: Authorization: Bearer TOKEN");
    return false;
  }
  Status st = tokens_.verify(token, unix_now(), who);
  if (st.code() == Status::Code::kNotFound) {
    refuse(res, 401, st.message());
    return false;
  }
  if (!st.is_ok()) {
    reply(res, st);
    return false;
  }
  const std::string& scope = who->role == Role::kTenantAdmin ? who->tenant : who->host;
  const bool scoped = who->role == Role::kTenantAdmin || who->role == Role::kJoin;
  const bool own = !kRouteAccess[static_cast<size_t>(access)].own_scope || !scoped ||
                   (path.size() > 1 && path[1] == scope);
  if (role_may(access, who->role) && own) return true;
  refuse(
      res, 403,
      std::string("a ") + role_name(who->role) + " token may not " + req.method + " " + req.path);
  return false;
}

void ApiServer::audit(const httplib::Request& req, const httplib::Response& res,
                      const TokenRecord* who) {
  if (audit_ == nullptr || req.method == "GET") return;
  std::array<char, 32> when{};
  const time_t now = std::time(nullptr);
  tm utc{};
  std::strftime(when.data(), when.size(), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &utc));
  const json line = {{"time", when.data()},
                     {"token", who != nullptr ? json(who->id) : json(nullptr)},
                     {"role", who != nullptr ? json(role_name(who->role)) : json(nullptr)},
                     {"tenant", who != nullptr ? json(who->tenant) : json(nullptr)},
                     {"method", req.method},
                     {"path", req.path},
                     {"status", res.status}};
  const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(audit_mutex_);
  std::fwrite(text.data(), 1, text.size(), audit_.get());
  std::fflush(audit_.get());
}

void ApiServer::add(const char* method, const char* path, Access access, Handler h, bool audited) {
  const std::string name = std::regex_replace(path, std::regex(R"(\([^)]*\))"), "{}");
  routes_.push_back({method, std::regex(path), access, std::move(h), audited, name});
}

void ApiServer::handle(const httplib::Request& req, httplib::Response& res) {
  const auto start = std::chrono::steady_clock::now();
  // HEAD is GET without the body, as httplib's own routing has it.
  const bool head = req.method == "HEAD";
  std::smatch path;
  const Route* route = nullptr;
  // std::regex recurses once per character: the path is bounded before it is matched
  // (httplib refuses request lines of over 8 KiB, and no route's names are that long).
  const bool too_long = req.path.size() > kMaxPathBytes;
  for (size_t i = 0; !too_long && route == nullptr && i < routes_.size(); ++i) {
    const Route& r = routes_[i];
    if ((r.method == req.method || (head && r.method == "GET")) &&
        std::regex_match(req.path, path, r.path))
      route = &r;
  }
  TokenRecord who;
  bool allowed = false;
  if (too_long) {
    refuse(res, 400, "the path is longer than " + std::to_string(kMaxPathBytes) + " bytes");
  } else if (route == nullptr) {
    refuse(res, 404, "no route " + req.method + " " + req.path);
  } else {
    allowed = authorize(route->access, req, path, res, &who);
    if (allowed) route->handler(req, path, res, who);
  }
  if (route == nullptr || route->audited || !allowed)
    audit(req, res, allowed || !who.id.empty() ? &who : nullptr);
  if (metrics_ != nullptr)
    metrics_->count(
        route != nullptr ? route->method : "other", route != nullptr ? route->name : "none",
        res.status,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void ApiServer::token_routes() {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  using Who = const TokenRecord&;
  using Path = const std::smatch&;
  add("GET", "/v1/tokens", Access::kAdmin, [this](Req, Path, Res res, Who) {
    std::vector<TokenRecord> all;
    Status st = tokens_.list(&all);
    json out = json::array();
    for (const TokenRecord& r : all) out.push_back(to_json(r));
    reply(res, st, out);
  });
  add("POST", "/v1/tokens", Access::kAdmin, [this](Req req, Path, Res res, Who) {
    json b;
    if (!body_object(req, res, &b)) return;
    Role role = Role::kViewer;
    const auto ttl = b.find("ttl");
    const std::string tenant = field(b, "tenant"), host = field(b, "host");
    if (!parse_role(field(b, "role"), &role) || (role == Role::kJoin && !tenant.empty()) ||
        (role != Role::kJoin && !host.empty()) ||
        (ttl != b.end() && (!ttl->is_number_unsigned() || ttl->get<uint64_t>() > INT32_MAX)))
      return reply(res, Status::error(Code::kInvalidArgument,
                                      "expected {\"role\": admin|tenant-admin|viewer|host|join"
                                      "[, \"tenant\": T | \"host\": H, \"name\": N, "
                                      "\"ttl\": seconds]}"));
    std::string token;
    TokenRecord r;
    // A tenant-admin's tenant or a join token's host (only a join token has a host, and it
    // no tenant, as checked above; TokenStore::add checks the rest).
    Status st = tokens_.add(role, tenant.empty() ? host : tenant, field(b, "name"),
                            ttl == b.end() ? 0 : ttl->get<int64_t>(), unix_now(), &token, &r);
    json out = to_json(r);
    out["token"] = token;
    reply(res, st, out);
  });
  add("DELETE", R"(/v1/tokens/([^/]+))", Access::kAdmin,
      [this](Req, Path m, Res res, Who) { reply(res, tokens_.del(m[1])); });
}

// A router's link certificate: the CA signs its request for the host the path names (a
// join token's own, kRouteAccess), then the join token is used up; the router gets a host
// token for its registrations with it.
void ApiServer::certificate_routes() {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  using Who = const TokenRecord&;
  using Path = const std::smatch&;
  add("POST", R"(/v1/hosts/([^/]+)/certificate)", Access::kJoin,
      [this](Req req, Path m, Res res, Who who) {
        if (ca_ == nullptr)
          return reply(
              res, Status::error(Code::kNotFound, "this orchestrator issues no link certificates"));
        json b;
        if (!body_object(req, res, &b)) return;
        std::string certificate;
        Status st = ca_->sign(field(b, "csr"), m[1], &certificate);
        if (!st.is_ok()) return reply(res, st);
        bool used = true;
        if (who.role == Role::kJoin) st = tokens_.use_once(who.id, &used);
        if (!st.is_ok()) return reply(res, st);
        // Another request with the same token got here first.
        if (!used) return refuse(res, 401, "the join token has been used");
        std::string token;
        TokenRecord host;
        st = tokens_.add(Role::kHost, "", "joined " + std::string(m[1]), 0, unix_now(), &token,
                         &host);
        reply(res, st,
              {{"certificate", certificate}, {"ca", ca_->certificate_pem()}, {"token", token}});
      });
}

void ApiServer::routes() {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  using Who = const TokenRecord&;
  using Path = const std::smatch&;
  token_routes();
  certificate_routes();
  report_routes();
  dashboard_routes();

  add("GET", "/v1/tenants", Access::kListing, [this](Req, Path, Res res, Who who) {
    std::vector<std::string> tenants;
    Status st = registry_.list_tenants(&tenants);
    // A tenant-admin sees its own tenant only.
    if (who.role == Role::kTenantAdmin)
      std::erase_if(tenants, [&](const std::string& t) { return t != who.tenant; });
    reply(res, st, tenants);
  });
  add("POST", "/v1/tenants", Access::kAdmin, [this](Req req, Path, Res res, Who) {
    json b;
    if (body_object(req, res, &b)) reply(res, registry_.add_tenant(field(b, "name")));
  });
  add("DELETE", R"(/v1/tenants/([^/]+))", Access::kAdmin,
      [this](Req, Path m, Res res, Who) { reply(res, registry_.del_tenant(m[1])); });

  add("GET", R"(/v1/tenants/([^/]+)/networks)", Access::kTenantRead,
      [this](Req, Path m, Res res, Who) {
        std::vector<NetworkInfo> nets;
        Status st = registry_.list_networks(m[1], &nets);
        json out = json::array();
        for (const NetworkInfo& n : nets)
          out.push_back({{"name", n.name}, {"cidr", format_cidr(n.cidr)}});
        reply(res, st, out);
      });
  add("POST", R"(/v1/tenants/([^/]+)/networks)", Access::kTenantWrite,
      [this](Req req, Path m, Res res, Who) {
        json b;
        if (body_object(req, res, &b))
          reply(res, registry_.add_network(m[1], field(b, "name"), field(b, "cidr")));
      });
  add("DELETE", R"(/v1/tenants/([^/]+)/networks/([^/]+))", Access::kTenantWrite,
      [this](Req, Path m, Res res, Who) { reply(res, registry_.del_network(m[1], m[2])); });

  add("GET", "/v1/containers", Access::kListing, [this](Req req, Path, Res res, Who who) {
    std::string tenant = req.get_param_value("tenant");
    // A tenant-admin lists its own tenant's containers only.
    if (who.role == Role::kTenantAdmin) {
      if (!tenant.empty() && tenant != who.tenant)
        return refuse(res, 403,
                      "a tenant-admin token of " + who.tenant + " may not list " + tenant);
      tenant = who.tenant;
    }
    std::vector<ContainerInfo> all;
    Status st = registry_.list_containers(tenant, &all);
    json out = json::array();
    for (const ContainerInfo& c : all) out.push_back(to_json(c));
    reply(res, st, out);
  });
  add("POST", R"(/v1/tenants/([^/]+)/containers)", Access::kTenantWrite,
      [this](Req req, Path m, Res res, Who) {
        json b;
        if (!body_object(req, res, &b)) return;
        uint32_t vip = 0;
        const std::string vip_text = field(b, "vip");
        if (!vip_text.empty() && !parse_ipv4(vip_text, &vip))
          return reply(res, Status::error(Code::kInvalidArgument,
                                          "vip '" + vip_text + "' is not an address"));
        ContainerInfo c;
        Status st = registry_.add_container(m[1], field(b, "network"), field(b, "name"),
                                            field(b, "host"), vip, &c);
        reply(res, st, to_json(c));
      });
  add("GET", R"(/v1/tenants/([^/]+)/containers/([^/]+))", Access::kTenantRead,
      [this](Req, Path m, Res res, Who) {
        ContainerInfo c;
        Status st = registry_.get_container(m[1], m[2], &c);
        reply(res, st, to_json(c));
      });
  add("POST", R"(/v1/tenants/([^/]+)/containers/([^/]+)/move)", Access::kTenantWrite,
      [this](Req req, Path m, Res res, Who) {
        json b;
        if (!body_object(req, res, &b)) return;
        ContainerInfo c;
        Status st = registry_.move_container(m[1], m[2], field(b, "host"), &c);
        reply(res, st, to_json(c));
      });
  add("POST", R"(/v1/tenants/([^/]+)/containers/([^/]+)/policy)", Access::kTenantWrite,
      [this](Req req, Path m, Res res, Who) {
        json change;
        if (!body_object(req, res, &change)) return;
        ContainerInfo c;
        Status st = registry_.update_policy(
            m[1], m[2], [&](ContainerPolicy* p) { return apply_policy_change(change, p); }, &c);
        reply(res, st, to_json(c));
      });
  add("DELETE", R"(/v1/tenants/([^/]+)/containers/([^/]+))", Access::kTenantWrite,
      [this](Req, Path m, Res res, Who) { reply(res, registry_.del_container(m[1], m[2])); });

  add("POST", "/v1/hosts", Access::kHostWrite, [this](Req req, Path, Res res, Who) {
    json b;
    if (!body_object(req, res, &b)) return;
    HostInfo h;
    h.name = field(b, "name");
    const auto ttl = b.find("ttl");
    if (!Registry::host_from_json(b, &h) || ttl == b.end() || !ttl->is_number_unsigned() ||
        ttl->get<uint64_t>() > INT32_MAX)
      return reply(res, Status::error(Code::kInvalidArgument,
                                      "expected {\"name\", \"address\": A.B.C.D, \"ttl\": "
                                      "1-3600, \"lid_first\": N, \"lid_last\": M[, "
                                      "\"subnet\": A.B.C.D/N]}"));
    int64_t lease = 0;
    Status st = registry_.add_host(h, static_cast<int64_t>(ttl->get<uint64_t>()), &lease);
    reply(res, st, {{"lease", lease}});
  });
  add("POST", R"(/v1/hosts/([^/]+)/keepalive)", Access::kHostWrite,
      [this](Req req, Path, Res res, Who) {
        json b;
        if (!body_object(req, res, &b)) return;
        const auto lease = b.find("lease");
        if (lease == b.end() || !lease->is_number_integer())
          return reply(res, Status::error(Code::kInvalidArgument, "expected {\"lease\": N}"));
        reply(res, store_->keep_alive(lease->get<int64_t>()));
      });
  add("GET", "/v1/kv", Access::kStore, [this](Req req, Path, Res res, Who) {
    std::string prefix;
    if (!prefix_param(req, res, &prefix)) return;
    std::vector<KeyValue> kvs;
    int64_t rev = 0;
    Status st = store_->range(prefix, &kvs, &rev);
    json items = json::array();
    for (const KeyValue& kv : kvs)
      items.push_back({{"key", kv.key}, {"value", kv.value}, {"mod_revision", kv.mod_revision}});
    reply(res, st, {{"revision", rev}, {"kvs", items}});
  });
  add("GET", "/v1/watch", Access::kStore, [this](Req req, Path, Res res, Who) {
    std::string prefix;
    if (!prefix_param(req, res, &prefix)) return;
    int64_t from = 0;
    int64_t timeout_ms = 0;
    if (!int_param(req, "revision", 0, &from) || from == 0 ||
        !int_param(req, "timeout_ms", 10000, &timeout_ms) || timeout_ms > 60000)
      return reply(res, Status::error(Code::kInvalidArgument,
                                      "expected revision=N (N > 0) and timeout_ms=0-60000"));
    std::unique_ptr<Watch> w;
    std::vector<WatchEvent> events;
    Status st = store_->watch(prefix, from, &w);
    if (st.is_ok()) st = w->next(&events, std::chrono::milliseconds(timeout_ms));
    json out = json::array();
    int64_t next = from;
    for (const WatchEvent& e : events) {
      out.push_back({{"type", e.type == WatchEvent::Type::kPut ? "put" : "delete"},
                     {"key", e.kv.key},
                     {"value", e.kv.value},
                     {"mod_revision", e.kv.mod_revision}});
      next = std::max(next, e.kv.mod_revision + 1);
    }
    reply(res, st, {{"events", out}, {"next", next}});
  });
  add("GET", "/v1/hosts", Access::kHostRead, [this](Req, Path, Res res, Who) {
    std::vector<HostInfo> hosts;
    Status st = registry_.list_hosts(&hosts);
    json out = json::array();
    for (const HostInfo& h : hosts) {
      json j = {{"name", h.name}, {"lease", h.lease}};
      Registry::host_to_json(h, &j);
      out.push_back(j);
    }
    reply(res, st, out);
  });
}

void ApiServer::report_routes() {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  using Who = const TokenRecord&;
  using Path = const std::smatch&;
  // A router's report, every few seconds: not audited (it would drown the audit log).
  add(
      "POST", R"(/v1/hosts/([^/]+)/report)", Access::kHostWrite,
      [this](Req req, Path m, Res res, Who) {
        json b;
        if (!body_object(req, res, &b)) return;
        reply(res, reports_.report(m[1], b, HostReports::Clock::now()));
      },
      /*audited=*/false);
  add("GET", "/v1/pingmesh", Access::kHostRead, [this](Req, Path, Res res, Who) {
    std::vector<HostInfo> hosts;
    Status st = registry_.list_hosts(&hosts);
    std::vector<std::string> names;
    for (const HostInfo& h : hosts) names.push_back(h.name);
    reply(res, st, reports_.pingmesh(names, HostReports::Clock::now()));
  });
  add("GET", "/v1/usage", Access::kHostRead, [this](Req, Path, Res res, Who) {
    reply(res, Status::ok(), reports_.usage(HostReports::Clock::now()));
  });
}

void ApiServer::dashboard_routes() {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  using Who = const TokenRecord&;
  using Path = const std::smatch&;
  add("GET", "/ui", Access::kPublic, [](Req, Path, Res res, Who) { res.set_redirect("/ui/"); });
  add("GET", R"(/ui/([a-z.]*))", Access::kPublic, [](Req, Path m, Res res, Who) {
    const std::string name = m[1].length() == 0 ? "index.html" : m[1].str();
    for (const UiAsset& a : ui_assets()) {
      if (name != a.name) continue;
      res.status = 200;
      res.set_content(a.body.data(), a.body.size(), a.content_type);
      // The page reads the API with a token it keeps: no framing, no other origin's scripts.
      res.set_header("Content-Security-Policy",
                     "default-src 'self'; frame-ancestors 'none'; base-uri 'none'");
      res.set_header("X-Content-Type-Options", "nosniff");
      return;
    }
    refuse(res, 404, "no file /ui/" + name);
  });
}

}  // namespace wharf::control
