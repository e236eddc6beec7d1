// Authentication of the links between routers (issue #19; docs/SECURITY.md): before either
// end reads a Hello, the two routers run a TLS 1.3 handshake in which each proves, with a
// certificate the cluster's CA signed, that it is a host of the cluster; the Hello's host
// name must then be one the peer's certificate names (CN or DNS subject alternative name).
// With `auth` the link carries plaintext after the handshake: that defeats off-path
// attackers (a tenant's container that reaches the port cannot speak as a router), not one
// on the path between hosts. Nothing is left over from the handshake on the socket then: no
// session tickets are sent and OpenSSL reads record by record, so the first byte after the
// peer's Finished is the Hello.
// With `encrypt` every byte of the link after the handshake, the Hello included, travels in
// records sealed with keys the session exports (links/link_records.h): an on-path attacker
// can neither read nor change it, and a record that fails its check ends the connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

using SSL = struct ssl_st;
using SSL_CTX = struct ssl_ctx_st;
using X509 = struct x509_st;

namespace wharf::links {

class LinkTls {
 public:
  // The cluster CA (PEM), this host's certificate (PEM, signed by the CA, naming `self`) and
  // its private key. nullptr with *why when any of them cannot be used.
  // `encrypt`: links carry sealed records after the handshake (else plaintext).
  static std::unique_ptr<LinkTls> load(const std::string& ca_file, const std::string& cert_file,
                                       const std::string& key_file, const std::string& self,
                                       bool encrypt, std::string* why);
  ~LinkTls();
  LinkTls(const LinkTls&) = delete;
  LinkTls& operator=(const LinkTls&) = delete;

  // A handshake on connected socket fd, as the end that dialled (client) or accepted.
  struct SessionDeleter {
    void operator()(SSL* s) const;
  };
  using Session = std::unique_ptr<SSL, SessionDeleter>;
  Session start(int fd, bool client) const;

  enum class Step { kDone, kWantRead, kWantWrite, kFailed };
  // Moves the handshake on as far as the socket allows. kFailed: the peer is not a host of
  // the cluster (or speaks no TLS 1.3); *why says so.
  static Step handshake(SSL* session, std::string* why);

  struct CertDeleter {
    void operator()(X509* c) const;
  };
  using Cert = std::unique_ptr<X509, CertDeleter>;
  // After kDone: the certificate the peer proved it holds.
  static Cert peer_certificate(SSL* session);
  // Whether `cert` names host `name` (its CN or a DNS subject alternative name).
  static bool names(X509* cert, const std::string& name);

  // Whether links seal their bytes in records after the handshake (links/link_records.h).
  bool encrypts() const { return encrypt_; }

 private:
  LinkTls() = default;
  bool encrypt_ = false;
  SSL_CTX* client_ = nullptr;
  SSL_CTX* server_ = nullptr;
};

}  // namespace wharf::links
