// Fuzz target for the cluster CA's decoder of certificate signing requests
// (control/host_ca.h): a request comes from whoever holds a join token, over the network.
// The first byte chooses the form: even, the rest is taken as PEM text as sent; odd, the rest
// is DER, wrapped in PEM armour here so that the ASN.1 decoder sees arbitrary bytes.
//
// Checked for every input: a request is either refused as kInvalidArgument or signed into a
// certificate that names exactly host "h1", is no CA, and chains to the CA.
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "control/host_ca.h"
#include "fuzz_check.h"

using namespace wharf;
using namespace wharf::control;

namespace {

// One CA per process, in a directory removed at exit.
const HostCa& ca() {
  static std::string dir = [] {
    char d[] = "/tmp/wharf-fuzz-ca-XXXXXX";
    if (mkdtemp(d) == nullptr) std::abort();
    return std::string(d);
  }();
  static std::unique_ptr<HostCa> the = [] {
    std::unique_ptr<HostCa> c;
    if (!HostCa::open(dir + "/ca", &c).is_ok()) std::abort();
    std::atexit([] { std::filesystem::remove_all(dir); });
    return c;
  }();
  return *the;
}

std::string armoured(const uint8_t* der, size_t n) {
  std::string b64(4 * ((n + 2) / 3) + 1, '\0');
  const int len =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()), der, static_cast<int>(n));
  b64.resize(static_cast<size_t>(len));
  std::string pem = "-----BEGIN CERTIFICATE REQUEST-----\n";
  for (size_t i = 0; i < b64.size(); i += 64) pem += b64.substr(i, 64) + "\n";
  return pem + "-----END CERTIFICATE REQUEST-----\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string csr = (data[0] & 1) != 0
                              ? armoured(data + 1, size - 1)
                              : std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string pem;
  const Status s = ca().sign(csr, "h1", &pem);
  if (!s.is_ok()) {
    WHARF_FUZZ_CHECK(s.code() == Status::Code::kInvalidArgument, "a request failed otherwise");
    return 0;
  }
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  WHARF_FUZZ_CHECK(cert != nullptr, "the certificate does not parse");
  WHARF_FUZZ_CHECK(
      X509_check_host(cert, "h1", 2, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, nullptr) == 1,
      "the certificate does not name h1");
  WHARF_FUZZ_CHECK(X509_check_host(cert, "h2", 2, 0, nullptr) != 1, "it names another host");
  WHARF_FUZZ_CHECK(X509_check_ca(cert) == 0, "a host certificate is a CA");
  const std::string& ca_pem = ca().certificate_pem();
  BIO* cb = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  X509* issuer = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  BIO_free(cb);
  WHARF_FUZZ_CHECK(issuer != nullptr && X509_verify(cert, X509_get0_pubkey(issuer)) == 1,
                   "the certificate is not the CA's");
  X509_free(issuer);
  X509_free(cert);
  return 0;
}
