// Fuzz target for the orchestrator's API (control/api.h): a hostile request, decoded as
// httplib decodes one off the socket, answered by ApiServer::handle() (the routing, token
// checks, handlers and audit line the server runs) over a fresh in-memory SQLite store per
// input that holds tenant red with network n and container a, and a token of the role the
// input presents. The server is made once (compiling its routes' regexes takes longer than a
// request); the store behind it is replaced for every input, so an input's answer depends on
// that input alone.
//
// Input: [method][credential] then text: the request target (PATH[?QUERY], percent-encoded)
// up to the first '\n', a raw Authorization value up to the next '\n', and the body after it.
//   method:     its low 3 bits pick GET, POST, DELETE, HEAD, PUT, PATCH, OPTIONS or GET
//   credential: its low 3 bits pick no header, the admin's, red's tenant-admin's, the viewer's,
//               the host's token, the raw value, "Bearer " + the raw value, or the admin's
//               with its last digit changed
// A /v1/watch that would wait (timeout_ms accepted, or absent or empty: 10 s) waits 0 ms.
//
// Checked for every input: the dashboard's files (/ui/...) come to anyone, non-empty, with
// their content security policy (/ui: a redirect to /ui/); everything else: the status is one
// api.h documents (200, 400, 401, 403, 404, 409, 410, 500, 503); every answer is JSON, an error one
// an object with a string "error"; a 401 asks for a bearer token; no request without a valid token
// gets past the token check (only 400 for an overlong path, 401, or 404 for no route); an admin is
// never refused as unauthorized or forbidden; a viewer never changes anything nor reads the raw
// store; a host never reaches a tenant's objects; nobody but an admin reads or makes tokens; and
// red's tenant-admin succeeds only under /v1/tenants/red/ or in listings.
#include <httplib.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "control/api.h"
#include "control/kv_store.h"
#include "control/registry.h"
#include "control/sqlite_store.h"
#include "control/tokens.h"
#include "fuzz_check.h"

using namespace wharf::control;
using nlohmann::json;
using wharf::Status;

namespace {

enum class Credential { kNone, kAdmin, kTenantAdmin, kViewer, kHost, kRaw, kRawBearer, kWrong };

// A KvStore whose calls go to the store of the current input.
class Fresh : public KvStore {
 public:
  std::unique_ptr<KvStore> now;

  Status get(const std::string& key, KeyValue* out) override { return now->get(key, out); }
  Status range(const std::string& prefix, std::vector<KeyValue>* out, int64_t* revision) override {
    return now->range(prefix, out, revision);
  }
  Status put(const std::string& key, const std::string& value, int64_t lease,
             int64_t* revision) override {
    return now->put(key, value, lease, revision);
  }
  Status del(const std::string& key, bool* deleted, int64_t* revision) override {
    return now->del(key, deleted, revision);
  }
  Status txn(const std::vector<Compare>& when, const std::vector<TxnOp>& ops, bool* succeeded,
             int64_t* revision) override {
    return now->txn(when, ops, succeeded, revision);
  }
  Status grant_lease(int64_t ttl_seconds, int64_t* lease) override {
    return now->grant_lease(ttl_seconds, lease);
  }
  Status keep_alive(int64_t lease) override { return now->keep_alive(lease); }
  Status revoke_lease(int64_t lease) override { return now->revoke_lease(lease); }
  Status watch(const std::string& prefix, int64_t from_revision,
               std::unique_ptr<Watch>* out) override {
    return now->watch(prefix, from_revision, out);
  }
};

// A fresh store behind `store`: red, its network n and container a on host h1, and the token
// `who` presents (with `wrong`, the same with its last digit changed) in *token.
bool fresh_store(Fresh* store, Credential who, std::string* token) {
  if (!open_sqlite_store(":memory:", &store->now).is_ok()) return false;
  static constexpr Role kRoles[] = {Role::kAdmin, Role::kAdmin, Role::kTenantAdmin, Role::kViewer,
                                    Role::kHost,  Role::kAdmin, Role::kAdmin,       Role::kAdmin};
  const Role role = kRoles[static_cast<size_t>(who)];
  TokenStore tokens(store);
  TokenRecord r;
  Registry registry(store);
  ContainerInfo c;
  return tokens
             .add(role, role == Role::kTenantAdmin ? "red" : "", "fuzz", 0, std::time(nullptr),
                  token, &r)
             .is_ok() &&
         registry.add_tenant("red").is_ok() &&
         registry.add_network("red", "n", "198.18.1.0/24").is_ok() &&
         registry.add_container("red", "n", "a", "h1", 0, &c).is_ok();
}

// httplib's request-line decoding: the target splits at '?' (more than one: refused before
// routing), the path is percent-decoded, the query parsed into params.
bool decode_target(const std::string& target, httplib::Request* req) {
  const size_t q = target.find('?');
  if (q != std::string::npos && target.find('?', q + 1) != std::string::npos) return false;
  req->target = target;
  req->path = httplib::detail::decode_url(target.substr(0, q), false);
  if (q != std::string::npos && q + 1 < target.size())
    httplib::detail::parse_query_text(target.substr(q + 1), req->params);
  return true;
}

// A timeout_ms the watch route would accept (and wait for) becomes 0: absent or empty (the
// default, 10 s) or 0-60000; a refused one stays.
void no_waiting(httplib::Params* params) {
  const auto [it, end_of_them] = params->equal_range("timeout_ms");  // the first is used
  if (it == end_of_them) {
    params->emplace("timeout_ms", "0");
    return;
  }
  const std::string& v = it->second;
  int64_t ms = -1;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), ms);
  if (v.empty() || (ec == std::errc() && end == v.data() + v.size() && ms >= 0 && ms <= 60000))
    it->second = "0";
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

void check_answer(const httplib::Request& req, const httplib::Response& res, Credential who) {
  const int s = res.status;
  // The dashboard's files: anyone may fetch them (no token), and they are not JSON; a name
  // that is none of them is a 404 like any other.
  if ((req.method == "GET" || req.method == "HEAD") && (s == 200 || s == 302) &&
      starts_with(req.path, "/ui")) {
    WHARF_FUZZ_CHECK(s == 302 ? req.path == "/ui" : starts_with(req.path, "/ui/"),
                     "a dashboard answer for another path");
    if (s == 200)
      WHARF_FUZZ_CHECK(
          !res.body.empty() &&
              res.get_header_value("Content-Security-Policy").find("default-src 'self'") !=
                  std::string::npos,
          "a dashboard file empty or without its content security policy");
    return;
  }
  WHARF_FUZZ_CHECK(s == 200 || s == 400 || s == 401 || s == 403 || s == 404 || s == 409 ||
                       s == 410 || s == 500 || s == 503,
                   "a status api.h does not document");
  const json body = json::parse(res.body, nullptr, false);
  WHARF_FUZZ_CHECK(!body.is_discarded(), "an answer that is not JSON");
  WHARF_FUZZ_CHECK(res.get_header_value("Content-Type") == "application/json",
                   "an answer not labelled JSON");
  if (s != 200)
    WHARF_FUZZ_CHECK(body.is_object() && body.contains("error") && body["error"].is_string(),
                     "an error without {\"error\": message}");
  if (s == 401)
    WHARF_FUZZ_CHECK(res.get_header_value("WWW-Authenticate") == "Bearer",
                     "a 401 that does not ask for a bearer token");
  const bool valid = who == Credential::kAdmin || who == Credential::kTenantAdmin ||
                     who == Credential::kViewer || who == Credential::kHost;
  // Before the token check come only a path too long to match (api.cc's limit, 4096 bytes),
  // a path no route has, and a dashboard file that does not exist.
  if (!valid)
    WHARF_FUZZ_CHECK(s == 401 || (s == 400 && req.path.size() > 4096) ||
                         (s == 404 && (starts_with(body["error"].get<std::string>(), "no route") ||
                                       (starts_with(req.path, "/ui/") &&
                                        starts_with(body["error"].get<std::string>(), "no file")))),
                     "past the token check without a token");
  if (who == Credential::kAdmin) WHARF_FUZZ_CHECK(s != 401 && s != 403, "an admin refused");
  if (s != 200) return;
  const bool read = req.method == "GET" || req.method == "HEAD";
  const std::string& p = req.path;
  if (who != Credential::kAdmin)
    WHARF_FUZZ_CHECK(!starts_with(p, "/v1/tokens"), "tokens read or made by a non-admin");
  if (who == Credential::kViewer)
    WHARF_FUZZ_CHECK(read && !starts_with(p, "/v1/kv") && !starts_with(p, "/v1/watch"),
                     "a viewer changed something or read the raw store");
  if (who == Credential::kHost)
    WHARF_FUZZ_CHECK(!starts_with(p, "/v1/tenants/"), "a host reached a tenant's objects");
  if (who == Credential::kTenantAdmin)
    WHARF_FUZZ_CHECK(starts_with(p, "/v1/tenants/red/") ||
                         (read && (p == "/v1/tenants" || p == "/v1/containers")),
                     "a tenant-admin went beyond its tenant");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const kMethods[] = {"GET", "POST",  "DELETE",  "HEAD",
                                         "PUT", "PATCH", "OPTIONS", "GET"};
  if (size < 2) return 0;
  const auto who = static_cast<Credential>(data[1] & 7);
  const std::string text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const size_t eol1 = text.find('\n');
  const size_t eol2 = eol1 == std::string::npos ? eol1 : text.find('\n', eol1 + 1);
  const std::string target = text.substr(0, eol1);
  const std::string raw =
      eol1 == std::string::npos ? std::string() : text.substr(eol1 + 1, eol2 - eol1 - 1);

  httplib::Request req;
  req.method = kMethods[data[0] & 7];
  if (!decode_target(target, &req)) return 0;
  if (req.path == "/v1/watch") no_waiting(&req.params);
  if (eol2 != std::string::npos) req.body = text.substr(eol2 + 1);

  static Fresh store;
  // /dev/null: the audit line is made and written, and nothing kept.
  static ApiServer api(&store, "/dev/null");
  std::string token;
  WHARF_FUZZ_CHECK(fresh_store(&store, who, &token), "cannot set up the in-memory store");
  if (who == Credential::kWrong) token.back() = token.back() == '0' ? '1' : '0';
  switch (who) {
    case Credential::kNone: break;
    case Credential::kRaw: req.set_header("Authorization", raw); break;
    case Credential::kRawBearer: req.set_header("Authorization", "Bearer " + raw); break;
    default: req.set_header("Authorization", "Bearer " + token); break;
  }
  httplib::Response res;
  api.handle(req, res);
  check_answer(req, res, who);
  return 0;
}
