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
// TLS records (AES-GCM or ChaCha20-Poly1305, as the two ends agree): an on-path attacker can
// neither read nor change it, and a record that fails its check ends the connection.
#pragma once

#include <sys/types.h>

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
  // `encrypt`: links carry TLS records after the handshake (else plaintext).
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

  // Whether a link keeps its session after the handshake and moves its bytes with read()
  // and write().
  bool encrypts() const { return encrypt_; }
  // The link's bytes through an established session, as recv() and send() move them on a
  // nonblocking socket: the bytes moved, 0 when the peer closed the link, or -1 with errno
  // (EAGAIN: not now; EPROTO: a record failed its check, *why says why; another: the socket's).
  // write() may move fewer than n bytes; what it did not move must be offered again, from
  // the same bytes (they may have moved in memory), before anything after them.
  static ssize_t read(SSL* session, uint8_t* to, size_t n, std::string* why);
  static ssize_t write(SSL* session, const uint8_t* from, size_t n, std::string* why);
  // Whether the session holds bytes read from the socket that read() has not returned: the
  // socket will not signal them.
  static bool buffered(SSL* session);
  // After the handshake of a session that carries the link: write() gathers records and
  // puts them on the socket a buffer at a time (one send() for many records, not one
  // each), so they go only as flush() pushes them. False: no memory for the buffer.
  static bool gather_writes(SSL* session);
  // Puts what write() gathered on the socket: 1 all of it, 0 not all now (EAGAIN), -1 the
  // socket failed (errno).
  static int flush(SSL* session);
  // Whether write() gathered bytes that flush() has not put on the socket.
  static bool unflushed(SSL* session);

 private:
  LinkTls() = default;
  bool encrypt_ = false;
  SSL_CTX* client_ = nullptr;
  SSL_CTX* server_ = nullptr;
};

}  // namespace wharf::links
