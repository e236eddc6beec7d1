#include "links/link_tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cerrno>

namespace wharf::links {
namespace {

constexpr const char* kSuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

// OpenSSL's last error as text ("" if none), and the queue emptied.
std::string ssl_error() {
  std::string text;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!text.empty()) text += "; ";
    text += buf;
  }
  return text;
}

// A context for one side: TLS 1.3 only, the peer's certificate required and verified
// against the CA, no session tickets or cache (every link proves itself afresh, and no
// ticket follows the handshake on the socket).
SSL_CTX* make_context(bool client, const std::string& ca, const std::string& cert,
                      const std::string& key, std::string* why) {
  SSL_CTX* ctx = SSL_CTX_new(client ? TLS_client_method() : TLS_server_method());
  if (ctx == nullptr) {
    *why = "no TLS context: " + ssl_error();
    return nullptr;
  }
  // The suite protects only the handshake's own messages: a link's bytes go in records of
  // its own (links/link_records.h).
  const bool ok = SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1 &&
                  SSL_CTX_set_ciphersuites(ctx, kSuites) == 1 &&
                  SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) == 1 &&
                  SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) == 1 &&
                  SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) == 1 &&
                  SSL_CTX_check_private_key(ctx) == 1 && SSL_CTX_set_num_tickets(ctx, 0) == 1;
  if (!ok) {
    *why = "cannot use CA " + ca + ", certificate " + cert + " and key " + key + ": " + ssl_error();
    SSL_CTX_free(ctx);
    return nullptr;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  // Record by record: the session must not read past the peer's Finished, where the link's
  // own bytes begin.
  SSL_CTX_set_read_ahead(ctx, 0);
  return ctx;
}

}  // namespace

void LinkTls::SessionDeleter::operator()(SSL* s) const { SSL_free(s); }
void LinkTls::CertDeleter::operator()(X509* c) const { X509_free(c); }

std::unique_ptr<LinkTls> LinkTls::load(const std::string& ca_file, const std::string& cert_file,
                                       const std::string& key_file, const std::string& self,
                                       bool encrypt, std::string* why) {
  std::unique_ptr<LinkTls> t(new LinkTls());
  t->encrypt_ = encrypt;
  t->client_ = make_context(true, ca_file, cert_file, key_file, why);
  if (t->client_ == nullptr) return nullptr;
  t->server_ = make_context(false, ca_file, cert_file, key_file, why);
  if (t->server_ == nullptr) return nullptr;
  if (!names(SSL_CTX_get0_certificate(t->client_), self)) {
    *why = "certificate " + cert_file + " does not name this host, " + self;
    return nullptr;
  }
  return t;
}

LinkTls::~LinkTls() {
  SSL_CTX_free(client_);
  SSL_CTX_free(server_);
}

LinkTls::Session LinkTls::start(int fd, bool client) const {
  Session s(SSL_new(client ? client_ : server_));
  if (s == nullptr || SSL_set_fd(s.get(), fd) != 1) return nullptr;
  if (client)
    SSL_set_connect_state(s.get());
  else
    SSL_set_accept_state(s.get());
  return s;
}

LinkTls::Step LinkTls::handshake(SSL* session, std::string* why) {
  ERR_clear_error();
  const int rc = SSL_do_handshake(session);
  if (rc == 1) return Step::kDone;
  switch (SSL_get_error(session, rc)) {
    case SSL_ERROR_WANT_READ: return Step::kWantRead;
    case SSL_ERROR_WANT_WRITE: return Step::kWantWrite;
    default: break;
  }
  const long verify = SSL_get_verify_result(session);
  *why = verify != X509_V_OK ? X509_verify_cert_error_string(verify) : ssl_error();
  if (why->empty()) *why = "the peer closed the connection during the handshake";
  return Step::kFailed;
}

LinkTls::Cert LinkTls::peer_certificate(SSL* session) {
  return Cert(SSL_get1_peer_certificate(session));
}

bool LinkTls::names(X509* cert, const std::string& name) {
  if (cert == nullptr || name.empty()) return false;
  if (X509_check_host(cert, name.c_str(), name.size(), X509_CHECK_FLAG_NEVER_CHECK_SUBJECT,
                      nullptr) == 1)
    return true;
  // Or by its subject's CN.
  char cn[256];
  const int len =
      X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
  return len > 0 && static_cast<size_t>(len) == name.size() &&
         name.compare(0, name.size(), cn, len) == 0;
}

}  // namespace wharf::links
