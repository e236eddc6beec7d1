// The cluster CA the orchestrator keeps for the routers' host links (issue #19; links/link_tls.h,
// docs/SECURITY.md), and the requests routers make of it.
//
// A router joining with a one-time join token makes its own key, sends a certificate signing
// request (CSR), and gets back a certificate naming its host (CN and DNS subject alternative
// name), for TLS clients and servers alike, valid kHostCertDays, with the CA's certificate
// to check its peers' against. The router's key never leaves it. What the CSR asks for beyond
// its public key is ignored: the orchestrator decides the name (the token's host), the
// validity and the uses. EC P-256 keys, SHA-256 signatures.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

using EVP_PKEY = struct evp_pkey_st;
using X509 = struct x509_st;

namespace wharf::control {

// Whether `name` can be a host's name in a certificate and a Hello: 1-31 characters of
// letters, digits, '.', '-' and '_', not starting with '.' or '-'.
bool valid_host_name(const std::string& name);

class HostCa {
 public:
  static constexpr int kCaDays = 3650;
  static constexpr int kHostCertDays = 365;

  // The CA in `dir` (ca.pem, ca.key), made there on first use (the key mode 0600, the
  // directory 0700). kInternal with the reason if it cannot be read or made.
  static Status open(const std::string& dir, std::unique_ptr<HostCa>* out);
  ~HostCa();
  HostCa(const HostCa&) = delete;
  HostCa& operator=(const HostCa&) = delete;

  // A certificate for host `host` (valid_host_name) on the public key of `csr_pem` (a PEM
  // CSR whose signature must verify), PEM. kInvalidArgument for a bad name or CSR.
  Status sign(const std::string& csr_pem, const std::string& host, std::string* cert_pem) const;
  // The CA's certificate, PEM: what peers' certificates are checked against.
  const std::string& certificate_pem() const { return cert_pem_; }

 private:
  HostCa() = default;
  EVP_PKEY* key_ = nullptr;
  X509* cert_ = nullptr;
  std::string cert_pem_;
};

// A router's side: a new EC P-256 key and a CSR for `host` signed with it, both PEM.
Status make_host_request(const std::string& host, std::string* key_pem, std::string* csr_pem);

}  // namespace wharf::control
