// The orchestrator's HTTP API (control/api.h) on a SQLite store, through a real HTTP client:
// status codes for each kind of refusal, and the list-then-watch protocol routers follow.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "control/api.h"
#include "control/kv_store.h"
#include "support/tcp_sockets.h"

namespace wharf::control {
namespace {

using nlohmann::json;

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/wharf-api-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    Status st = open_kv_store("sqlite:" + dir_ + "/state.db", &store_);
    ASSERT_TRUE(st.is_ok()) << st.message();
    api_ = std::make_unique<ApiServer>(store_.get());
    port_ = api_->bind("127.0.0.1", 0);
    ASSERT_GT(port_, 0);
    server_ = std::thread([this] { api_->serve(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(30);
  }
  void TearDown() override {
    if (api_ != nullptr) api_->stop();
    if (server_.joinable()) server_.join();
    client_.reset();
    api_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Status code and parsed body of one request.
  std::pair<int, json> call(const std::string& method, const std::string& path,
                            const json& body = nullptr) {
    httplib::Result r = method == "GET"      ? client_->Get(path)
                        : method == "DELETE" ? client_->Delete(path)
                                             : client_->Post(path, body.dump(), "application/json");
    if (!r) return {0, nullptr};
    return {r->status, json::parse(r->body, nullptr, false)};
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

  std::string dir_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<ApiServer> api_;
  int port_ = 0;
  std::thread server_;
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
    httplib::Client other("127.0.0.1", port_);
    other.Post("/v1/tenants", json{{"name", "blue"}}.dump(), "application/json");
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

}  // namespace
}  // namespace wharf::control
