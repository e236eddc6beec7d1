// The orchestrator's cluster CA (control/host_ca.h): made once and kept, it signs a host's
// request into a certificate the host links accept (links/link_tls.h) for exactly the
// orchestrator's choice of name, and refuses names that could smuggle in others and requests
// whose signature does not hold.
#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "control/files.h"
#include "control/host_ca.h"
#include "links/link_tls.h"
#include "support/temp_dir.h"

namespace wharf::control {
namespace {

struct X509Free {
  void operator()(X509* c) const { X509_free(c); }
};
std::unique_ptr<X509, X509Free> parse(const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  return std::unique_ptr<X509, X509Free>(c);
}

class HostCaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty()) << "cannot make a temporary directory";
  }

  // A certificate the CA in dir_ signed for `host` on a new key (*key_pem).
  std::string issue(const HostCa& ca, const std::string& host, std::string* key_pem) {
    std::string csr;
    EXPECT_TRUE(make_host_request(host, key_pem, &csr).is_ok());
    std::string cert;
    const Status s = ca.sign(csr, host, &cert);
    EXPECT_TRUE(s.is_ok()) << s.message();
    return cert;
  }

  test_support::TempDir dir_{"wharf-host-ca"};
};

TEST_F(HostCaTest, TheCaIsMadeOnceWithAPrivateKeyAndKept) {
  std::unique_ptr<HostCa> ca;
  ASSERT_TRUE(HostCa::open(dir_.path() + "/ca", &ca).is_ok());
  struct stat st {};
  ASSERT_EQ(stat((dir_.path() + "/ca/ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir_.path() + "/ca").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string first = ca->certificate_pem();
  std::unique_ptr<HostCa> again;
  ASSERT_TRUE(HostCa::open(dir_.path() + "/ca", &again).is_ok());
  EXPECT_EQ(again->certificate_pem(), first);
  auto cert = parse(first);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_ca(cert.get()), 1);
}

TEST_F(HostCaTest, ACaWhoseKeyIsMissingOrForeignIsRefused) {
  std::unique_ptr<HostCa> ca;
  ASSERT_TRUE(HostCa::open(dir_.path() + "/a", &ca).is_ok());
  ASSERT_TRUE(HostCa::open(dir_.path() + "/b", &ca).is_ok());
  std::string other_key;
  ASSERT_TRUE(read_whole_file(dir_.path() + "/b/ca.key", &other_key));
  ASSERT_TRUE(write_file_replacing(dir_.path() + "/a/ca.key", other_key, 0600));
  EXPECT_FALSE(HostCa::open(dir_.path() + "/a", &ca).is_ok());
  std::filesystem::remove(dir_.path() + "/b/ca.key");
  EXPECT_FALSE(HostCa::open(dir_.path() + "/b", &ca).is_ok());
}

TEST_F(HostCaTest, AnIssuedCertificateNamesTheHostAndTheHostLinksAcceptIt) {
  std::unique_ptr<HostCa> ca;
  ASSERT_TRUE(HostCa::open(dir_.path() + "/ca", &ca).is_ok());
  std::string key;
  const std::string pem = issue(*ca, "h1", &key);
  auto cert = parse(pem);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_ca(cert.get()), 0) << "a host certificate must not be a CA";
  EXPECT_EQ(X509_check_host(cert.get(), "h1", 2, 0, nullptr), 1);
  EXPECT_NE(X509_check_host(cert.get(), "h2", 2, 0, nullptr), 1);
  EXPECT_TRUE(X509_check_purpose(cert.get(), X509_PURPOSE_SSL_CLIENT, 0) == 1 &&
              X509_check_purpose(cert.get(), X509_PURPOSE_SSL_SERVER, 0) == 1);

  ASSERT_TRUE(write_file_replacing(dir_.path() + "/h1.pem", pem, 0644));
  ASSERT_TRUE(write_file_replacing(dir_.path() + "/h1.key", key, 0600));
  std::string why;
  EXPECT_NE(links::LinkTls::load(dir_.path() + "/ca/ca.pem", dir_.path() + "/h1.pem",
                                 dir_.path() + "/h1.key", "h1", false, &why),
            nullptr)
      << why;
  EXPECT_EQ(links::LinkTls::load(dir_.path() + "/ca/ca.pem", dir_.path() + "/h1.pem",
                                 dir_.path() + "/h1.key", "h2", false, &why),
            nullptr);
}

// The name comes from the orchestrator (the join token's host), whatever the request asks.
TEST_F(HostCaTest, TheRequestsOwnSubjectIsIgnored) {
  std::unique_ptr<HostCa> ca;
  ASSERT_TRUE(HostCa::open(dir_.path() + "/ca", &ca).is_ok());
  std::string key, csr, pem;
  ASSERT_TRUE(make_host_request("h2", &key, &csr).is_ok());
  ASSERT_TRUE(ca->sign(csr, "h1", &pem).is_ok());
  auto cert = parse(pem);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_host(cert.get(), "h1", 2, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr), 1);
  EXPECT_NE(X509_check_host(cert.get(), "h2", 2, 0, nullptr), 1);
}

TEST_F(HostCaTest, NamesThatCouldCarryOtherNamesAreRefused) {
  std::unique_ptr<HostCa> ca;
  ASSERT_TRUE(HostCa::open(dir_.path() + "/ca", &ca).is_ok());
  std::string key, csr, pem;
  ASSERT_TRUE(make_host_request("h1", &key, &csr).is_ok());
  const std::vector<std::string> bads{"",
                                      "h1,DNS:h2",
                                      "h1 h2",
                                      ".h1",
                                      "-h1",
                                      "h1/..",
                                      "h1\n",
                                      std::string(32, 'a'),
                                      std::string("h1\0h2", 5),
                                      "IP:1.2.3.4"};
  for (const std::string& bad : bads) {
    const Status s = ca->sign(csr, bad, &pem);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_TRUE(valid_host_name(std::string(31, 'a')));
  EXPECT_TRUE(valid_host_name("node-7.rack_2"));
}

TEST_F(HostCaTest, ARequestThatIsNotOneOrWhoseSignatureFailsIsRefused) {
  std::unique_ptr<HostCa> ca;
  ASSERT_TRUE(HostCa::open(dir_.path() + "/ca", &ca).is_ok());
  std::string key, csr, pem;
  ASSERT_TRUE(make_host_request("h1", &key, &csr).is_ok());
  EXPECT_EQ(ca->sign("", "h1", &pem).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(
      ca->sign("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
               "h1", &pem)
          .code(),
      Status::Code::kInvalidArgument);
  // Any character of the body changed (but the last line's, whose low bits base64 may not
  // use): it no longer parses, or its signature no longer holds (it covers the subject and
  // the key).
  int tried = 0, refused = 0;
  const size_t body = csr.find('\n') + 1;
  for (size_t at = body; at < csr.size() - 70; at += 7) {
    if (csr[at] == '\n') continue;
    std::string changed = csr;
    changed[at] = changed[at] == 'A' ? 'B' : 'A';
    ++tried;
    refused += ca->sign(changed, "h1", &pem).code() == Status::Code::kInvalidArgument ? 1 : 0;
  }
  EXPECT_GT(tried, 10);
  EXPECT_EQ(refused, tried);
}

}  // namespace
}  // namespace wharf::control
