// The orchestrator's HTTP API (control/api.h) on a SQLite store, through a real HTTP client:
// status codes for each kind of refusal, the list-then-watch protocol routers follow, and who
// may do what with which token (401, 403, tenants' own objects, the audit log), and routers
// joining with one-time join tokens.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "control/api.h"
#include "control/api_metrics.h"
#include "control/files.h"
#include "control/host_ca.h"
#include "control/kv_store.h"
#include "control/link_join.h"
#include "control/tokens.h"
#include "support/tcp_sockets.h"
#include "support/temp_dir.h"

namespace wharf::control {
namespace {

using nlohmann::json;

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "cannot make a temporary directory";
    Status st = open_kv_store("sqlite:" + dir_.path() + "/state.db", &store_);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_TRUE(HostCa::open(dir_.path() + "/link-ca", &ca_).is_ok());
    api_ = std::make_unique<ApiServer>(store_.get(), audit_log(), ApiTls{}, ca_.get());
    port_ = api_->bind("127.0.0.1", 0);
    ASSERT_GT(port_, 0);
    server_ = std::thread([this] { api_->serve(); });
    admin_ = token(Role::kAdmin);
    client_ = client(admin_);
  }
  void TearDown() override {
    if (api_ != nullptr) api_->stop();
    if (server_.joinable()) server_.join();
    client_.reset();
    api_.reset();
    store_.reset();
  }

  std::string audit_log() const { return dir_.path() + "/audit.log"; }

  // A new token of `role` made in the store (ttl_seconds 0: never expires; made_at: when).
  std::string token(Role role, const std::string& tenant = "", int64_t ttl_seconds = 0,
                    int64_t made_at = std::time(nullptr)) {
    TokenStore tokens(store_.get());
    std::string secret;
    TokenRecord r;
    Status st = tokens.add(role, tenant, "test", ttl_seconds, made_at, &secret, &r);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return secret;
  }

  // A client presenting `bearer` ("" : none).
  std::unique_ptr<httplib::Client> client(const std::string& bearer) const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_read_timeout(30);
    if (!bearer.empty()) c->set_bearer_token_auth(bearer.c_str());
    return c;
  }

  // Status code and parsed body of one request, by `c` (default: the admin's client).
  std::pair<int, json> call(const std::string& method, const std::string& path,
                            const json& body = nullptr, httplib::Client* c = nullptr) {
    if (c == nullptr) c = client_.get();
    httplib::Result r = method == "GET"      ? c->Get(path)
                        : method == "DELETE" ? c->Delete(path)
                                             : c->Post(path, body.dump(), "application/json");
    if (!r) return {0, nullptr};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  int code(const std::string& bearer, const std::string& method, const std::string& path,
           const json& body = json::object()) {
    auto c = client(bearer);
    return call(method, path, body, c.get()).first;
  }

  // Tenant red, its network n (198.18.1.0/24) and its container a, placed on host h1.
  void add_container_red_a() {
    ASSERT_EQ(call("POST", "/v1/tenants", {{"name", "red"}}).first, 200);
    ASSERT_EQ(
        call("POST", "/v1/tenants/red/networks", {{"name", "n"}, {"cidr", "198.18.1.0/24"}}).first,
        200);
    ASSERT_EQ(call("POST", "/v1/tenants/red/containers",
                   {{"name", "a"}, {"network", "n"}, {"host", "h1"}})
                  .first,
              200);
  }

  test_support::TempDir dir_{"wharf-api"};
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<HostCa> ca_;
  std::unique_ptr<ApiServer> api_;
  int port_ = 0;
  std::thread server_;
  std::string admin_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ApiTest, EachKindOfRefusalHasItsStatusAndAMessage) {
  EXPECT_EQ(call("POST", "/v1/tenants", {{"name", "red"}}).first, 200);
  auto [code, body] = call("POST", "/v1/tenants", {{"name", "red"}});
  EXPECT_EQ(code, 409);
  EXPECT_TRUE(body.contains("error") && body["error"].is_string());
  EXPECT_EQ(call("POST", "/v1/tenants", {{"name", "Not/Valid"}}).first, 400);
  EXPECT_EQ(call("POST", "/v1/tenants", json::array()).first, 400);
  EXPECT_EQ(call("DELETE", "/v1/tenants/blue").first, 404);
  EXPECT_EQ(call("POST", "/v1/tenants/red/networks", {{"name", "n"}, {"cidr", "bad"}}).first, 400);
  EXPECT_EQ(
      call("POST", "/v1/tenants/red/networks", {{"name", "n"}, {"cidr", "198.18.1.0/30"}}).first,
      200);
  ASSERT_EQ(
      call("POST", "/v1/tenants/red/containers", {{"name", "a"}, {"network", "n"}, {"host", "h1"}})
          .first,
      200);
  // A /30 has one address for containers (.2): the next placement finds none.
  EXPECT_EQ(
      call("POST", "/v1/tenants/red/containers", {{"name", "b"}, {"network", "n"}, {"host", "h1"}})
          .first,
      409);
  EXPECT_EQ(call("POST", "/v1/tenants/red/containers",
                 {{"name", "b"}, {"network", "n"}, {"host", "h1"}, {"vip", "300.1.1.1"}})
                .first,
            400);
  EXPECT_EQ(call("DELETE", "/v1/tenants/red").first, 409);  // still has a network
  auto [got, c] = call("GET", "/v1/tenants/red/containers/a");
  EXPECT_EQ(got, 200);
  EXPECT_EQ(c["vip"], "198.18.1.2");
  EXPECT_EQ(call("GET", "/v1/tenants/red/containers/zz").first, 404);
  const json host = {
      {"name", "h1"}, {"address", "127.0.0.1"}, {"ttl", 5}, {"lid_first", 1}, {"lid_last", 9}};
  for (const auto& [key, bad] : std::vector<std::pair<const char*, json>>{{"address", "x"},
                                                                          {"ttl", 0},
                                                                          {"ttl", -1},
                                                                          {"lid_first", nullptr},
                                                                          {"lid_first", -1},
                                                                          {"lid_last", 0xc000},
                                                                          {"lid_last", 70000},
                                                                          {"subnet", "198.18.1.0"},
                                                                          {"subnet", 5}}) {
    json b = host;
    b[key] = bad;
    EXPECT_EQ(call("POST", "/v1/hosts", b).first, 400) << b.dump();
  }
  EXPECT_EQ(call("POST", "/v1/hosts/h1/keepalive", {{"lease", 12345}}).first, 404);
}

// A container's LID is its host's: null while the host has not registered, then one of the
// range the host's router registered with.
TEST_F(ApiTest, AContainerShowsALidOfItsHostOnceTheHostHasRegistered) {
  ASSERT_NO_FATAL_FAILURE(add_container_red_a());  // on h1, not registered
  auto [got, a] = call("GET", "/v1/tenants/red/containers/a");
  ASSERT_EQ(got, 200);
  EXPECT_TRUE(a["lid"].is_null()) << a.dump();
  EXPECT_EQ(a["gid"], "::ffff:198.18.1.2");
  const json host = {{"name", "h1"},      {"address", "198.18.0.1"}, {"ttl", 30},
                     {"lid_first", 1025}, {"lid_last", 2048},        {"subnet", "198.18.1.0/24"}};
  ASSERT_EQ(call("POST", "/v1/hosts", host).first, 200);
  auto [listed, hosts] = call("GET", "/v1/hosts");
  ASSERT_EQ(listed, 200);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0]["address"], "198.18.0.1");
  EXPECT_EQ(hosts[0]["lid_first"], 1025);
  EXPECT_EQ(hosts[0]["lid_last"], 2048);
  EXPECT_EQ(hosts[0]["subnet"], "198.18.1.0/24");
  auto [moved, now] = call("POST", "/v1/tenants/red/containers/a/move", {{"host", "h1"}});
  ASSERT_EQ(moved, 200);
  EXPECT_EQ(now["lid"], 1025);
}

TEST_F(ApiTest, APolicyChangeIsStoredAndShownWithTheContainer) {
  ASSERT_NO_FATAL_FAILURE(add_container_red_a());
  const std::string path = "/v1/tenants/red/containers/a/policy";
  auto [code, c] = call("POST", path, json::parse(R"({"quota": {"qp": 4, "mr_bytes": 1048576},
                                                      "ratelimit": {"rate": 100000000,
                                                                    "burst": 65536},
                                                      "priority": 5})"));
  ASSERT_EQ(code, 200) << c.dump();
  EXPECT_EQ(c["name"], "a");
  EXPECT_EQ(c["quota"], json::parse(R"({"qp": 4, "mr_bytes": 1048576})"));
  EXPECT_EQ(c["ratelimit"], json::parse(R"({"rate": 100000000, "burst": 65536})"));
  EXPECT_EQ(c["priority"], 5);
  auto [got, stored] = call("GET", "/v1/tenants/red/containers/a");
  ASSERT_EQ(got, 200);
  EXPECT_EQ(stored, c);
  EXPECT_EQ(stored["host"], "h1");  // the placement stays

  // Keys present replace, null clears one field or a whole group, absent keys stay.
  std::tie(code, c) = call("POST", path, json::parse(R"({"quota": {"qp": null, "cq": 2},
                                                         "ratelimit": null})"));
  ASSERT_EQ(code, 200) << c.dump();
  EXPECT_EQ(c["quota"], json::parse(R"({"cq": 2, "mr_bytes": 1048576})"));
  EXPECT_FALSE(c.contains("ratelimit"));
  EXPECT_EQ(c["priority"], 5);
  std::tie(code, c) = call("POST", path, json::parse(R"({"quota": null, "priority": null})"));
  ASSERT_EQ(code, 200) << c.dump();
  EXPECT_FALSE(c.contains("quota"));
  EXPECT_EQ(c["priority"], 0);
  std::tie(got, stored) = call("GET", "/v1/tenants/red/containers/a");
  ASSERT_EQ(got, 200);
  EXPECT_EQ(stored, c);
}

TEST_F(ApiTest, ABadPolicyChangeIsRefusedAndChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(add_container_red_a());
  const std::string path = "/v1/tenants/red/containers/a/policy";
  ASSERT_EQ(
      call("POST", path, json::parse(R"({"ratelimit": {"rate": 1000}, "priority": 3})")).first,
      200);
  auto [before_code, before] = call("GET", "/v1/tenants/red/containers/a");
  ASSERT_EQ(before_code, 200);

  auto [code, body] =
      call("POST", path, json::parse(R"({"priority": 1, "ratelimit": {"rate": -1}})"));
  EXPECT_EQ(code, 400);
  EXPECT_EQ(body["error"], "rate must not be negative");
  std::tie(code, body) = call("POST", path, json::parse(R"({"owner": "x"})"));
  EXPECT_EQ(code, 400);
  EXPECT_NE(body["error"].get<std::string>().find("unknown policy key 'owner'"), std::string::npos)
      << body.dump();
  EXPECT_EQ(call("POST", path, json::parse(R"({"priority": 8})")).first, 400);
  EXPECT_EQ(call("POST", path, json::array()).first, 400);
  EXPECT_EQ(call("GET", "/v1/tenants/red/containers/a").second, before);

  std::tie(code, body) =
      call("POST", "/v1/tenants/red/containers/zz/policy", json::parse(R"({"priority": 1})"));
  EXPECT_EQ(code, 404);
  EXPECT_TRUE(body.contains("error") && body["error"].is_string());
  EXPECT_EQ(
      call("POST", "/v1/tenants/blue/containers/a/policy", json::parse(R"({"priority": 1})")).first,
      404);
}

// httplib writes a response's headers and body separately; with Nagle's algorithm on, the
// body waited for the client's delayed ACK (40 ms per request on a kept-alive connection,
// 37 container creations per second instead of 570). The server's own end of the
// connection (in this process) must have TCP_NODELAY.
TEST_F(ApiTest, TheServerSendsWithoutNaglesDelay) {
  httplib::Client kept("127.0.0.1", port_);
  kept.set_bearer_token_auth(admin_.c_str());
  kept.set_keep_alive(true);
  auto r = kept.Get("/v1/tenants");
  ASSERT_TRUE(r && r->status == 200);  // the connection stays open for the next request
  const std::vector<int> fds =
      test_support::connected_sockets(port_, test_support::PortSide::kLocal);
  ASSERT_FALSE(fds.empty());
  for (int fd : fds) EXPECT_TRUE(test_support::has_nodelay(fd)) << "fd " << fd;
}

TEST_F(ApiTest, ARouterListsThenWatchesFromTheNextRevision) {
  ASSERT_EQ(call("POST", "/v1/tenants", {{"name", "red"}}).first, 200);
  auto [code, list] = call("GET", "/v1/kv?prefix=/wharf/tenant/");
  ASSERT_EQ(code, 200);
  ASSERT_EQ(list["kvs"].size(), 1u);
  EXPECT_EQ(list["kvs"][0]["key"], "/wharf/tenant/red");
  const int64_t next = list["revision"].get<int64_t>() + 1;
  EXPECT_EQ(call("GET", "/v1/kv?prefix=/etc/").first, 400);
  EXPECT_EQ(call("GET", "/v1/watch?prefix=/wharf/&revision=x").first, 400);

  // Nothing yet: the long poll ends empty after its timeout, asking for the same revision.
  auto [c0, empty] =
      call("GET",
           "/v1/watch?prefix=/wharf/tenant/&revision=" + std::to_string(next) + "&timeout_ms=100");
  ASSERT_EQ(c0, 200);
  EXPECT_TRUE(empty["events"].empty());
  EXPECT_EQ(empty["next"], next);

  // A change made while the watch waits ends it.
  std::thread writer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto other = client(admin_);
    other->Post("/v1/tenants", json{{"name", "blue"}}.dump(), "application/json");
  });
  auto [c1, changes] =
      call("GET", "/v1/watch?prefix=/wharf/tenant/&revision=" + std::to_string(next) +
                      "&timeout_ms=20000");
  writer.join();
  ASSERT_EQ(c1, 200);
  ASSERT_EQ(changes["events"].size(), 1u);
  EXPECT_EQ(changes["events"][0]["type"], "put");
  EXPECT_EQ(changes["events"][0]["key"], "/wharf/tenant/blue");
  EXPECT_EQ(changes["next"], changes["events"][0]["mod_revision"].get<int64_t>() + 1);
}

// Every kind of route refuses a request without a token, or with a malformed, unknown,
// expired or deleted one, with 401, and changes nothing.
TEST_F(ApiTest, ARequestWithoutAValidTokenIsUnauthorizedAndChangesNothing) {
  add_container_red_a();
  const std::string expired = token(Role::kAdmin, "", 60, std::time(nullptr) - 3600);
  const std::string deleted = token(Role::kAdmin);
  auto [listed, tokens] = call("GET", "/v1/tokens");
  ASSERT_EQ(listed, 200);
  for (const json& t : tokens) {
    EXPECT_FALSE(t.contains("sha256")) << "a token listing shows its hash";
    EXPECT_FALSE(t.contains("token")) << "a token listing shows its secret";
  }
  const std::string deleted_id = deleted.substr(6, 16);
  ASSERT_EQ(call("DELETE", "/v1/tokens/" + deleted_id).first, 200);
  const std::string wrong_secret =
      admin_.substr(0, admin_.size() - 1) + (admin_.back() == '0' ? "1" : "0");
  const std::vector<std::pair<std::string, std::string>> requests = {
      {"GET", "/v1/tenants"},
      {"POST", "/v1/tenants"},
      {"DELETE", "/v1/tenants/red"},
      {"GET", "/v1/tenants/red/networks"},
      {"POST", "/v1/tenants/red/containers"},
      {"DELETE", "/v1/tenants/red/containers/a"},
      {"GET", "/v1/containers"},
      {"POST", "/v1/hosts"},
      {"GET", "/v1/hosts"},
      {"GET", "/v1/kv?prefix=/wharf/"},
      {"GET", "/v1/watch?prefix=/wharf/&revision=1&timeout_ms=0"},
      {"GET", "/v1/tokens"},
      {"POST", "/v1/tokens"}};
  for (const std::string& bad :
       {std::string(), std::string("wharf_nonsense"), expired, deleted, wrong_secret})
    for (const auto& [method, path] : requests)
      EXPECT_EQ(code(bad, method, path, {{"name", "evil"}, {"role", "admin"}}), 401)
          << method << " " << path << " with '" << bad << "'";
  auto [code_after, tenants] = call("GET", "/v1/tenants");
  EXPECT_EQ(tenants, json::array({"red"}));
  auto [c, a] = call("GET", "/v1/tenants/red/containers/a");
  EXPECT_EQ(c, 200) << "a refused DELETE removed the container";
}

// Everything the server answers is routed by ApiServer::handle(): a path or method no route
// has is a 404 with a JSON error, HEAD is routed as GET, and a refusal that quotes a path whose
// bytes are not UTF-8 is still JSON (it once was an exception, and a 500).
TEST_F(ApiTest, AnUnknownRouteIsNotFoundWithAJsonError) {
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/nothing"},
           {"GET", "/v1/tenants/"},
           {"POST", "/v1/containers"},
           {"DELETE", "/v1/hosts"},
           {"GET", "/v1/tenants/red/networks/n/extra"}}) {
    auto [status, body] = call(method, path, json::object());
    EXPECT_EQ(status, 404) << method << " " << path;
    EXPECT_TRUE(body.is_object() && body.contains("error")) << method << " " << path;
  }
  httplib::Result put = client_->Put("/v1/tenants", "{}", "application/json");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 404);
  EXPECT_TRUE(json::parse(put->body, nullptr, false).contains("error"));
  httplib::Result head = client_->Head("/v1/tenants");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  auto red = client(token(Role::kTenantAdmin, "red"));
  auto [status, body] = call("GET", "/v1/tenants/%FF%FE/networks", nullptr, red.get());
  EXPECT_EQ(status, 403);
  EXPECT_TRUE(body.is_object() && body.contains("error"));
}

TEST_F(ApiTest, ATenantAdminSeesAndChangesItsOwnTenantOnly) {
  add_container_red_a();
  ASSERT_EQ(call("POST", "/v1/tenants", {{"name", "blue"}}).first, 200);
  const std::string red = token(Role::kTenantAdmin, "red");
  auto rc = client(red);
  EXPECT_EQ(call("GET", "/v1/tenants", nullptr, rc.get()).second, json::array({"red"}));
  auto [listed, containers] = call("GET", "/v1/containers", nullptr, rc.get());
  ASSERT_EQ(listed, 200);
  ASSERT_EQ(containers.size(), 1u);
  EXPECT_EQ(containers[0]["name"], "a");
  EXPECT_EQ(code(red, "GET", "/v1/containers?tenant=blue"), 403);
  EXPECT_EQ(code(red, "GET", "/v1/tenants/red/containers/a"), 200);
  EXPECT_EQ(code(red, "POST", "/v1/tenants/red/containers/a/policy", {{"priority", 2}}), 200);
  // Another tenant's objects, tenants themselves, hosts, the raw store and tokens: refused.
  EXPECT_EQ(code(red, "GET", "/v1/tenants/blue/networks"), 403);
  EXPECT_EQ(
      code(red, "POST", "/v1/tenants/blue/networks", {{"name", "n"}, {"cidr", "10.0.0.0/24"}}),
      403);
  EXPECT_EQ(code(red, "POST", "/v1/tenants", {{"name", "green"}}), 403);
  EXPECT_EQ(code(red, "DELETE", "/v1/tenants/red"), 403);
  EXPECT_EQ(code(red, "POST", "/v1/hosts", {{"name", "h9"}}), 403);
  EXPECT_EQ(code(red, "GET", "/v1/kv?prefix=/wharf/"), 403);
  EXPECT_EQ(code(red, "POST", "/v1/tokens", {{"role", "admin"}}), 403);
  auto [c, blue_networks] = call("GET", "/v1/tenants/blue/networks");
  EXPECT_EQ(blue_networks, json::array()) << "a refused request changed another tenant";
}

TEST_F(ApiTest, AViewerReadsAndAHostRegistersAndFollowsTheStore) {
  add_container_red_a();
  const std::string viewer = token(Role::kViewer);
  EXPECT_EQ(code(viewer, "GET", "/v1/tenants"), 200);
  EXPECT_EQ(code(viewer, "GET", "/v1/tenants/red/containers/a"), 200);
  EXPECT_EQ(code(viewer, "GET", "/v1/hosts"), 200);
  EXPECT_EQ(code(viewer, "POST", "/v1/tenants", {{"name", "green"}}), 403);
  EXPECT_EQ(code(viewer, "POST", "/v1/tenants/red/containers/a/policy", {{"priority", 2}}), 403);
  EXPECT_EQ(code(viewer, "GET", "/v1/kv?prefix=/wharf/"), 403);

  const std::string host = token(Role::kHost);
  EXPECT_EQ(code(host, "POST", "/v1/hosts",
                 {{"name", "h1"},
                  {"address", "127.0.0.1"},
                  {"ttl", 10},
                  {"lid_first", 1},
                  {"lid_last", 100}}),
            200);
  EXPECT_EQ(code(host, "GET", "/v1/kv?prefix=/wharf/container/"), 200);
  EXPECT_EQ(code(host, "GET", "/v1/watch?prefix=/wharf/&revision=1&timeout_ms=0"), 200);
  EXPECT_EQ(code(host, "POST", "/v1/tenants", {{"name", "green"}}), 403);
  EXPECT_EQ(code(host, "DELETE", "/v1/tenants/red/containers/a"), 403);
  EXPECT_EQ(code(host, "GET", "/v1/tokens"), 403);
}

TEST_F(ApiTest, AnAdminMakesAndDeletesTokensWhoseSecretOnlyTheAnswerHolds) {
  auto [made, t] =
      call("POST", "/v1/tokens",
           {{"role", "tenant-admin"}, {"tenant", "red"}, {"name", "ci"}, {"ttl", 3600}});
  ASSERT_EQ(made, 200) << t.dump();
  EXPECT_EQ(t["role"], "tenant-admin");
  EXPECT_EQ(t["expires"].get<int64_t>() - t["created"].get<int64_t>(), 3600);
  const std::string secret = t["token"].get<std::string>();
  EXPECT_EQ(code(secret, "GET", "/v1/tenants"), 200);
  EXPECT_EQ(call("POST", "/v1/tokens", {{"role", "tenant-admin"}}).first, 400);  // no tenant
  EXPECT_EQ(call("POST", "/v1/tokens", {{"role", "viewer"}, {"tenant", "red"}}).first, 400);
  EXPECT_EQ(call("POST", "/v1/tokens", {{"role", "root"}}).first, 400);
  EXPECT_EQ(call("POST", "/v1/tokens", {{"role", "viewer"}, {"ttl", -1}}).first, 400);
  ASSERT_EQ(call("DELETE", "/v1/tokens/" + t["id"].get<std::string>()).first, 200);
  EXPECT_EQ(code(secret, "GET", "/v1/tenants"), 401);
  EXPECT_EQ(call("DELETE", "/v1/tokens/" + t["id"].get<std::string>()).first, 404);
}

TEST_F(ApiTest, AJoinTokenGetsItsHostsCertificateAndAHostTokenOnce) {
  const std::string join = token(Role::kJoin, "h1");
  std::string key, csr;
  ASSERT_TRUE(make_host_request("h1", &key, &csr).is_ok());
  auto c = client(join);
  auto [got, answer] = call("POST", "/v1/hosts/h1/certificate", {{"csr", csr}}, c.get());
  ASSERT_EQ(got, 200) << answer.dump();
  EXPECT_EQ(answer["ca"], ca_->certificate_pem());
  EXPECT_NE(answer["certificate"].get<std::string>().find("BEGIN CERTIFICATE"), std::string::npos);
  // The host token registers hosts and follows the store, and nothing more.
  const std::string host = answer["token"].get<std::string>();
  EXPECT_EQ(code(host, "GET", "/v1/hosts"), 200);
  EXPECT_EQ(code(host, "POST", "/v1/tenants", {{"name", "x"}}), 403);
  // Used: a second request, and every other, is refused as for an unknown token.
  EXPECT_EQ(call("POST", "/v1/hosts/h1/certificate", {{"csr", csr}}, c.get()).first, 401);
  EXPECT_EQ(code(join, "GET", "/v1/hosts"), 401);
}

TEST_F(ApiTest, AJoinTokenMayAskForItsOwnHostsCertificateOnlyAndARefusalDoesNotUseItUp) {
  const std::string join = token(Role::kJoin, "h1");
  std::string key, csr;
  ASSERT_TRUE(make_host_request("h1", &key, &csr).is_ok());
  EXPECT_EQ(code(join, "POST", "/v1/hosts/h2/certificate", {{"csr", csr}}), 403);
  EXPECT_EQ(code(join, "GET", "/v1/hosts"), 403);
  EXPECT_EQ(code(join, "GET", "/v1/tenants"), 403);
  EXPECT_EQ(code(join, "GET", "/v1/kv?prefix=/wharf/"), 403);
  EXPECT_EQ(code(join, "POST", "/v1/hosts", {{"name", "h1"}, {"address", "198.18.0.1"}}), 403);
  EXPECT_EQ(code(join, "POST", "/v1/tokens", {{"role", "admin"}}), 403);
  EXPECT_EQ(code(join, "POST", "/v1/hosts/h1/certificate", {{"csr", "not a request"}}), 400);
  EXPECT_EQ(code(join, "POST", "/v1/hosts/h1/certificate", json::object()), 400);
  // Still good after all of that.
  EXPECT_EQ(code(join, "POST", "/v1/hosts/h1/certificate", {{"csr", csr}}), 200);
  // Other roles: only an admin may have a certificate signed.
  for (Role r : {Role::kViewer, Role::kHost})
    EXPECT_EQ(code(token(r), "POST", "/v1/hosts/h1/certificate", {{"csr", csr}}), 403);
  EXPECT_EQ(
      code(token(Role::kTenantAdmin, "red"), "POST", "/v1/hosts/h1/certificate", {{"csr", csr}}),
      403);
  EXPECT_EQ(call("POST", "/v1/hosts/h1/certificate", {{"csr", csr}}).first, 200);
  EXPECT_EQ(call("POST", "/v1/hosts/a,DNS:b/certificate", {{"csr", csr}}).first, 400);
}

TEST_F(ApiTest, AnAdminMakesJoinTokensForAHostThatExpireWithinTheHour) {
  auto [made, t] = call("POST", "/v1/tokens", {{"role", "join"}, {"host", "h7"}});
  ASSERT_EQ(made, 200) << t.dump();
  EXPECT_EQ(t["host"], "h7");
  EXPECT_EQ(t["expires"].get<int64_t>() - t["created"].get<int64_t>(), TokenStore::kJoinTtl);
  EXPECT_EQ(call("POST", "/v1/tokens", {{"role", "join"}}).first, 400);
  EXPECT_EQ(call("POST", "/v1/tokens", {{"role", "join"}, {"tenant", "red"}}).first, 400);
  EXPECT_EQ(call("POST", "/v1/tokens", {{"role", "host"}, {"host", "h7"}}).first, 400);
  EXPECT_EQ(call("POST", "/v1/tokens", {{"role", "join"}, {"host", "h 7"}}).first, 400);
}

// A router's side (control/link_join.h): it joins once, keeping its key and token private.
TEST_F(ApiTest, ARouterJoinsWithItsTokenAndKeepsWhatItGot) {
  const ApiEndpoint api{"http://127.0.0.1:" + std::to_string(port_), ""};
  const std::string link = dir_.path() + "/router-link";
  EXPECT_FALSE(joined(link));
  EXPECT_EQ(join_cluster(api, token(Role::kJoin, "h2"), "h1", link).code(), Status::Code::kNotFound)
      << "another host's token";
  const std::string join = token(Role::kJoin, "h1");
  const Status st = join_cluster(api, join, "h1", link);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_TRUE(joined(link));
  const LinkFiles f = link_files(link);
  for (const std::string& file : {f.key, f.token}) {
    struct stat sb {};
    ASSERT_EQ(stat(file.c_str(), &sb), 0) << file;
    EXPECT_EQ(sb.st_mode & 0777, 0600u) << file;
  }
  std::string host_token;
  ASSERT_TRUE(read_whole_file(f.token, &host_token));
  while (!host_token.empty() && host_token.back() == '\n') host_token.pop_back();
  EXPECT_EQ(code(host_token, "GET", "/v1/hosts"), 200);
  EXPECT_EQ(join_cluster(api, join, "h1", dir_.path() + "/again").code(), Status::Code::kNotFound)
      << "a join token served twice";
  EXPECT_EQ(join_cluster({"http://127.0.0.1:1", ""}, join, "h1", dir_.path() + "/x").code(),
            Status::Code::kUnavailable);
}

// Every request but a GET is logged with who made it and what it got, refused ones too;
// reads are not.
TEST_F(ApiTest, TheAuditLogHasEveryChangeRequestWithItsCallerAndOutcome) {
  ASSERT_EQ(call("POST", "/v1/tenants", {{"name", "red"}}).first, 200);
  ASSERT_EQ(call("GET", "/v1/tenants").first, 200);
  ASSERT_EQ(code("", "DELETE", "/v1/tenants/red"), 401);
  ASSERT_EQ(code(token(Role::kViewer), "POST", "/v1/tenants", {{"name", "x"}}), 403);
  std::ifstream in(audit_log());
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["method"], "POST");
  EXPECT_EQ(lines[0]["path"], "/v1/tenants");
  EXPECT_EQ(lines[0]["status"], 200);
  EXPECT_EQ(lines[0]["role"], "admin");
  EXPECT_EQ(lines[0]["token"], admin_.substr(6, 16));
  EXPECT_EQ(lines[1]["status"], 401);
  EXPECT_TRUE(lines[1]["token"].is_null());
  EXPECT_EQ(lines[2]["status"], 403);
  EXPECT_EQ(lines[2]["role"], "viewer");
  for (const json& l : lines) EXPECT_TRUE(l["time"].is_string());
}

// Routers' reports (control/host_reports.h) make the Pingmesh matrix GET /v1/pingmesh and the
// usage GET /v1/usage serve; a bad report is refused whole; viewers read them but may not
// report; reports are not audited.
TEST_F(ApiTest, RoutersReportsMakeThePingmeshMatrixAndTheUsageOfTheirContainers) {
  const json row_h2 = {{"peer", "h2"},       {"state", "up"}, {"rtt_p50_us", 41.5},
                       {"rtt_p99_us", 90.0}, {"loss", 0.0},   {"answered", 64}};
  const json row_h3 = {
      {"peer", "h3"}, {"state", "down"}, {"rtt_p50_us", 0}, {"rtt_p99_us", 0}, {"loss", 0.25}};
  const json usage = {{"tenant", "red"},       {"network", "n"},
                      {"container", "Job.A1"}, {"tx_bytes", 4096},
                      {"rx_bytes", 0},         {"tx_msgs", 1},
                      {"rx_msgs", 0},          {"objects", {{"qp", 2}, {"mr", 1}}},
                      {"quota", {{"qp", 8}}}};
  ASSERT_EQ(
      call("POST", "/v1/hosts/h1/report", {{"pingmesh", {row_h2, row_h3}}, {"containers", {usage}}})
          .first,
      200);
  const std::string host = token(Role::kHost);
  EXPECT_EQ(code(host, "POST", "/v1/hosts/h2/report",
                 {{"pingmesh",
                   {{{"peer", "h1"},
                     {"state", "up"},
                     {"rtt_p50_us", 38},
                     {"rtt_p99_us", 50},
                     {"loss", 0}}}}}),
            200);
  const std::string viewer = token(Role::kViewer);
  EXPECT_EQ(code(viewer, "POST", "/v1/hosts/h2/report", json::object()), 403);

  auto [got, m] = call("GET", "/v1/pingmesh");
  ASSERT_EQ(got, 200) << m.dump();
  EXPECT_EQ(m["hosts"], json({"h1", "h2", "h3"}));
  ASSERT_EQ(m["links"].size(), 3u) << m.dump();
  const json& first = m["links"][0];
  EXPECT_EQ(first["from"], "h1");
  EXPECT_EQ(first["to"], "h2");
  EXPECT_EQ(first["state"], "up");
  EXPECT_EQ(first["rtt_p50_us"], 41.5);
  EXPECT_FALSE(first.contains("answered")) << "only the checked fields are kept";
  EXPECT_EQ(m["links"][1]["state"], "down");
  EXPECT_EQ(m["links"][2]["from"], "h2");
  EXPECT_EQ(code(viewer, "GET", "/v1/pingmesh"), 200);
  auto [listed, used] = call("GET", "/v1/usage");
  ASSERT_EQ(listed, 200);
  ASSERT_EQ(used.size(), 1u) << used.dump();
  EXPECT_EQ(used[0]["host"], "h1");
  EXPECT_EQ(used[0]["tx_bytes"], 4096);
  EXPECT_EQ(used[0]["objects"]["qp"], 2);
  EXPECT_EQ(used[0]["quota"], json({{"qp", 8}}));

  // Refused whole, and h1's last report stays.
  json bad_quota = usage;
  bad_quota["quota"] = {{"gpus", 1}};
  json negative = usage;
  negative["tx_bytes"] = -1;
  json bad_peer = row_h2;
  bad_peer["peer"] = "h/3";
  json bad_loss = row_h2;
  bad_loss["loss"] = 1.5;
  json bad_state = row_h2;
  bad_state["state"] = "sideways";
  for (const json& bad :
       {json{{"pingmesh", {row_h2, bad_state}}}, json{{"pingmesh", {bad_peer}}},
        json{{"pingmesh", {bad_loss}}}, json{{"pingmesh", "h2"}}, json{{"containers", {bad_quota}}},
        json{{"containers", {negative}}}, json{{"containers", {{{"x", 1}}}}}})
    EXPECT_EQ(call("POST", "/v1/hosts/h1/report", bad).first, 400) << bad.dump();
  EXPECT_EQ(call("POST", "/v1/hosts/h1/report", json::array()).first, 400);
  EXPECT_EQ(call("POST", "/v1/hosts/not%2Fa%2Fname/report", json::object()).first, 404);
  EXPECT_EQ(call("GET", "/v1/pingmesh").second["links"].size(), 3u);
  EXPECT_EQ(call("GET", "/v1/usage").second.size(), 1u);

  // Only the requests refused before a report was read are in the audit log: the viewer's and
  // the one to no route.
  std::ifstream in(audit_log());
  std::string line;
  std::vector<std::string> reports;
  while (std::getline(in, line))
    if (line.find("/report") != std::string::npos) reports.push_back(line);
  ASSERT_EQ(reports.size(), 2u) << "reports are not audited";
  EXPECT_NE(reports[0].find("403"), std::string::npos) << reports[0];
  EXPECT_NE(reports[1].find("404"), std::string::npos) << reports[1];
}

// The dashboard's files (ui/, built in) come to anyone without a token, with their content
// types and a content security policy; nothing else does.
TEST_F(ApiTest, TheDashboardsFilesNeedNoTokenAndNothingElseComesWithThem) {
  auto anyone = client("");
  auto page = anyone->Get("/ui/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("Pingmesh"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  auto script = anyone->Get("/ui/dashboard.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  EXPECT_EQ(script->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  auto bare = anyone->Get("/ui");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 302);
  EXPECT_EQ(bare->get_header_value("Location"), "/ui/");
  EXPECT_EQ(anyone->Get("/ui/secrets.js")->status, 404);
  EXPECT_EQ(anyone->Get("/ui/../v1/tokens")->status, 404);  // no route: never a file
  EXPECT_EQ(anyone->Get("/v1/pingmesh")->status, 401);
  EXPECT_EQ(anyone->Post("/ui/", "", "text/plain")->status, 404);
}

// wharf-orchestrator --metrics (control/api_metrics.h): every answered request is counted by
// method, route pattern and code (a path no route has as "none"), and each scrape probes the
// store.
TEST(ApiMetricsTest, RequestsAreCountedByRoutePatternAndTheStoreIsProbed) {
  test_support::TempDir dir{"wharf-api-metrics"};
  std::unique_ptr<KvStore> store;
  ASSERT_TRUE(open_kv_store("sqlite:" + dir.path() + "/state.db", &store).is_ok());
  ApiServer api(store.get());
  std::string why;
  auto metrics = ApiMetrics::start("127.0.0.1:0", store.get(), &why);
  ASSERT_NE(metrics, nullptr) << why;
  api.set_metrics(metrics.get());
  const auto answer = [&](const char* method, const char* path) {
    httplib::Request req;
    req.method = method;
    req.path = path;
    httplib::Response res;
    api.handle(req, res);
    return res.status;
  };
  EXPECT_EQ(answer("GET", "/v1/tenants/red/containers/a"), 401);
  EXPECT_EQ(answer("GET", "/v1/tenants/blue/containers/b"), 401);
  EXPECT_EQ(answer("GET", "/no/such/thing"), 404);
  EXPECT_EQ(answer("GET", "/ui/"), 200);

  httplib::Client scraper("127.0.0.1", metrics->port());
  auto r = scraper.Get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const std::string& text = r->body;
  const std::string container_route = R"(route="/v1/tenants/{}/containers/{}")";
  for (const std::string& line :
       {R"(wharf_orchestrator_requests_total{code="401",method="GET",)" + container_route + "} 2",
        std::string(
            R"(wharf_orchestrator_requests_total{code="404",method="other",route="none"} 1)"),
        std::string(
            R"(wharf_orchestrator_requests_total{code="200",method="GET",route="/ui/{}"} 1)"),
        std::string(
            R"(wharf_orchestrator_request_duration_seconds_count{method="GET",route="/ui/{}"} 1)"),
        std::string("wharf_orchestrator_store_up 1")})
    EXPECT_NE(text.find(line), std::string::npos) << line << " not in\n" << text;
  EXPECT_NE(text.find("wharf_orchestrator_store_probe_seconds "), std::string::npos);
}

}  // namespace
}  // namespace wharf::control
