// The orchestrator's API over TLS (control/api.h ApiTls, control/api_client.h), with a CA and a
// server certificate made for each test (support/test_certs.h): a client that trusts the CA
// reaches it at the address and the name the certificate holds; one that trusts another CA,
// or only the system's, or that asks for a name the certificate does not hold, or that speaks
// plain HTTP, gets no answer; tokens are checked as over HTTP; and a server whose certificate
// or key cannot be loaded does not start.
#include <gtest/gtest.h>
#include <httplib.h>

#include <ctime>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "control/api.h"
#include "control/api_client.h"
#include "control/kv_store.h"
#include "control/tokens.h"
#include "support/temp_dir.h"
#include "support/test_certs.h"

namespace wharf::control {
namespace {

using test_support::TestCerts;

constexpr const char* kApiAltNames = "DNS:localhost,IP:127.0.0.1";

class ApiTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "cannot make a temporary directory";
    Status st = open_kv_store("sqlite:" + dir_.path() + "/state.db", &store_);
    ASSERT_TRUE(st.is_ok()) << st.message();
    TokenStore tokens(store_.get());
    TokenRecord r;
    st = tokens.add(Role::kAdmin, "", "test", 0, std::time(nullptr), &admin_, &r);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_FALSE(certs_.ca().empty()) << "cannot make the test CA";
  }
  void TearDown() override {
    if (api_ != nullptr) api_->stop();
    if (server_.joinable()) server_.join();
    api_.reset();
    store_.reset();
  }

  // Serves the API over TLS with a certificate of `ca` holding `alt_names`, on 127.0.0.1.
  void start(const std::string& alt_names = kApiAltNames,
             const std::string& ca = TestCerts::kClusterCa) {
    const TestCerts::Host cert = certs_.host("orchestrator", ca, alt_names);
    ASSERT_FALSE(cert.cert.empty()) << "cannot make the server certificate";
    api_ = std::make_unique<ApiServer>(store_.get(), "", ApiTls{cert.cert, cert.key});
    port_ = api_->bind("127.0.0.1", 0);
    ASSERT_GT(port_, 0);
    server_ = std::thread([this] { api_->serve(); });
  }

  // GET /v1/tenants at scheme://host:port_, verifying against ca_file, presenting `token`.
  httplib::Result get(const std::string& scheme, const std::string& host,
                      const std::string& ca_file, const std::string& token) {
    const ApiEndpoint api{scheme + "://" + host + ":" + std::to_string(port_), ca_file};
    EXPECT_TRUE(check_api_endpoint(api).is_ok()) << api.url;
    return make_api_client(api, token, 5, 5)->Get("/v1/tenants");
  }

  TestCerts certs_;
  test_support::TempDir dir_{"wharf-api-tls"};
  std::unique_ptr<KvStore> store_;
  std::string admin_;
  std::unique_ptr<ApiServer> api_;
  int port_ = 0;
  std::thread server_;
};

TEST_F(ApiTlsTest, AClientThatTrustsTheCaIsAnsweredAtTheAddressAndTheName) {
  start();
  for (const char* host : {"127.0.0.1", "localhost"}) {
    httplib::Result r = get("https", host, certs_.ca(), admin_);
    ASSERT_TRUE(r) << host << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << host;
    EXPECT_EQ(r->body, "[]") << host;
  }
}

TEST_F(ApiTlsTest, TokensAreCheckedOverTlsAsOverHttp) {
  start();
  for (const std::string& bad : {std::string(), std::string("wharf_nonsense")}) {
    httplib::Result r = get("https", "127.0.0.1", certs_.ca(), bad);
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 401) << "with '" << bad << "'";
  }
}

TEST_F(ApiTlsTest, AClientThatDoesNotTrustTheServersCaGetsNoAnswer) {
  start();
  ASSERT_FALSE(certs_.ca("other").empty());
  // Another CA's file, and the system's CAs (none of which signed the test CA).
  for (const std::string& ca : {certs_.ca("other"), std::string()}) {
    httplib::Result r = get("https", "127.0.0.1", ca, admin_);
    EXPECT_FALSE(r) << "answered " << r->status << " trusting '" << ca << "'";
    if (!r) {
      EXPECT_EQ(r.error(), httplib::Error::SSLServerVerification);
    }
  }
}

TEST_F(ApiTlsTest, AServerWhoseCertificateNamesAnotherHostGetsNoAnswer) {
  start("DNS:elsewhere.example,IP:192.0.2.1");
  for (const char* host : {"127.0.0.1", "localhost"}) {
    httplib::Result r = get("https", host, certs_.ca(), admin_);
    EXPECT_FALSE(r) << host << ": answered " << r->status;
    if (!r) {
      EXPECT_EQ(r.error(), httplib::Error::SSLServerVerification) << host;
    }
  }
}

TEST_F(ApiTlsTest, PlainHttpToTheTlsPortGetsNoAnswer) {
  start();
  httplib::Result r = get("http", "127.0.0.1", "", admin_);
  EXPECT_FALSE(r) << "a plain HTTP request was answered " << r->status;
}

TEST_F(ApiTlsTest, AServerWithoutAUsableCertificateAndKeyDoesNotStart) {
  const TestCerts::Host cert = certs_.host("orchestrator", TestCerts::kClusterCa, kApiAltNames);
  const TestCerts::Host other = certs_.host("other", TestCerts::kClusterCa);
  ASSERT_FALSE(cert.cert.empty());
  ASSERT_FALSE(other.cert.empty());
  const ApiTls unusable[] = {
      {cert.cert, ""},                          // a certificate without its key
      {"", cert.key},                           // a key without its certificate
      {certs_.path("missing.pem"), cert.key},   // no such certificate file
      {cert.cert, certs_.path("missing.key")},  // no such key file
      {cert.key, cert.key},                     // a key where the certificate belongs
      {cert.cert, other.key},                   // another certificate's key
  };
  for (const ApiTls& tls : unusable)
    EXPECT_THROW(ApiServer(store_.get(), "", tls), std::runtime_error)
        << "certificate '" << tls.cert_file << "', key '" << tls.key_file << "'";
}

TEST(ApiEndpointTest, HttpsAloneTakesACaFile) {
  EXPECT_TRUE(check_api_endpoint({"http://127.0.0.1:7480", ""}).is_ok());
  EXPECT_TRUE(check_api_endpoint({"https://orchestrator:7480", ""}).is_ok());
  EXPECT_TRUE(check_api_endpoint({"https://orchestrator:7480", "/etc/wharf/ca.pem"}).is_ok());
  EXPECT_EQ(check_api_endpoint({"http://127.0.0.1:7480", "/etc/wharf/ca.pem"}).code(),
            Status::Code::kInvalidArgument);
  for (const char* url : {"", "127.0.0.1:7480", "ftp://127.0.0.1:7480", "HTTPS://x:1"})
    EXPECT_EQ(check_api_endpoint({url, ""}).code(), Status::Code::kInvalidArgument) << url;
}

}  // namespace
}  // namespace wharf::control
