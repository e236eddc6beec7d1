#include "control/host_ca.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "control/files.h"

namespace wharf::control {
namespace {

struct Free {
  void operator()(BIO* b) const { BIO_free_all(b); }
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  void operator()(X509* c) const { X509_free(c); }
  void operator()(X509_REQ* r) const { X509_REQ_free(r); }
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
  void operator()(BIGNUM* n) const { BN_free(n); }
};
template <class T>
using Owned = std::unique_ptr<T, Free>;

Status failed(const std::string& what) {
  std::string text = what;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    text += text == what ? ": " : "; ";
    text += buf;
  }
  return Status::error(Status::Code::kInternal, text);
}

// What `write` puts in a memory BIO, as a string ("" if it fails).
template <class Write>
std::string pem_of(Write write) {
  Owned<BIO> mem(BIO_new(BIO_s_mem()));
  if (mem == nullptr || write(mem.get()) != 1) return "";
  char* data = nullptr;
  const long len = BIO_get_mem_data(mem.get(), &data);
  return len > 0 ? std::string(data, static_cast<size_t>(len)) : "";
}

Owned<EVP_PKEY> new_key() { return Owned<EVP_PKEY>(EVP_EC_gen("P-256")); }

// A random positive 127-bit serial number (RFC 5280: unique per CA, at most 20 bytes).
bool set_random_serial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return false;
  bytes[0] &= 0x7f;
  Owned<BIGNUM> n(BN_bin2bn(bytes, sizeof(bytes), nullptr));
  return n != nullptr && BN_to_ASN1_INTEGER(n.get(), X509_get_serialNumber(cert)) != nullptr;
}

bool set_common_name(X509_NAME* name, const std::string& cn) {
  return X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8,
                                    reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                    0) == 1;
}

// Adds extension `nid` = `value` (OpenSSL's configuration syntax) to `cert`, issued by `issuer`.
bool add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Owned<X509_EXTENSION> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  return ext != nullptr && X509_add_ext(cert, ext.get(), -1) == 1;
}

// A new certificate on `key` for subject `cn`, valid `days` from a few minutes ago (clocks
// differ), with a random serial; issuer and extensions are the caller's.
Owned<X509> new_certificate(EVP_PKEY* key, const std::string& cn, int days) {
  Owned<X509> cert(X509_new());
  if (cert == nullptr || X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      !set_random_serial(cert.get()) ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400L * days) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1 ||
      !set_common_name(X509_get_subject_name(cert.get()), cn))
    return nullptr;
  return cert;
}

}  // namespace

bool valid_host_name(const std::string& name) {
  if (name.empty() || name.size() > 31 || name[0] == '.' || name[0] == '-') return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

HostCa::~HostCa() {
  EVP_PKEY_free(key_);
  X509_free(cert_);
}

Status HostCa::open(const std::string& dir, std::unique_ptr<HostCa>* out) {
  ERR_clear_error();
  const std::string cert_path = dir + "/ca.pem", key_path = dir + "/ca.key";
  std::unique_ptr<HostCa> ca(new HostCa());
  std::error_code ec;
  if (!std::filesystem::exists(cert_path, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return failed("cannot make " + dir + ": " + ec.message());
    ::chmod(dir.c_str(), 0700);
    Owned<EVP_PKEY> key = new_key();
    if (key == nullptr) return failed("cannot make the CA's key");
    Owned<X509> cert = new_certificate(key.get(), "wharf cluster CA", kCaDays);
    if (cert == nullptr ||
        X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1 ||
        !add_extension(cert.get(), cert.get(), NID_basic_constraints,
                       "critical,CA:TRUE,pathlen:0") ||
        !add_extension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !add_extension(cert.get(), cert.get(), NID_subject_key_identifier, "hash") ||
        X509_sign(cert.get(), key.get(), EVP_sha256()) == 0)
      return failed("cannot make the CA's certificate");
    const std::string key_pem = pem_of([&](BIO* b) {
      return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
    });
    const std::string cert_pem = pem_of([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
    // The key first: a certificate without its key would be taken for a finished CA.
    if (key_pem.empty() || cert_pem.empty() || !write_file_replacing(key_path, key_pem, 0600) ||
        !write_file_replacing(cert_path, cert_pem, 0644))
      return failed("cannot write the CA to " + dir + ": " + std::strerror(errno));
  }
  std::string key_pem;
  if (!read_whole_file(cert_path, &ca->cert_pem_) || !read_whole_file(key_path, &key_pem))
    return failed("cannot read the CA in " + dir);
  Owned<BIO> cert_bio(
      BIO_new_mem_buf(ca->cert_pem_.data(), static_cast<int>(ca->cert_pem_.size())));
  Owned<BIO> key_bio(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())));
  if (cert_bio == nullptr || key_bio == nullptr) return failed("out of memory");
  ca->cert_ = PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr);
  ca->key_ = PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr);
  if (ca->cert_ == nullptr || ca->key_ == nullptr ||
      X509_check_private_key(ca->cert_, ca->key_) != 1)
    return failed("cannot use the CA in " + dir + " (" + cert_path + " and " + key_path + ")");
  *out = std::move(ca);
  return Status::ok();
}

Status HostCa::sign(const std::string& csr_pem, const std::string& host,
                    std::string* cert_pem) const {
  ERR_clear_error();
  if (!valid_host_name(host))
    return Status::error(Status::Code::kInvalidArgument, "not a host name: '" + host + "'");
  Owned<BIO> in(BIO_new_mem_buf(csr_pem.data(), static_cast<int>(csr_pem.size())));
  Owned<X509_REQ> req(in == nullptr ? nullptr
                                    : PEM_read_bio_X509_REQ(in.get(), nullptr, nullptr, nullptr));
  EVP_PKEY* const key = req == nullptr ? nullptr : X509_REQ_get0_pubkey(req.get());
  if (key == nullptr || X509_REQ_verify(req.get(), key) != 1) {
    ERR_clear_error();
    return Status::error(Status::Code::kInvalidArgument,
                         "not a certificate signing request signed by its key");
  }
  Owned<X509> cert = new_certificate(key, host, kHostCertDays);
  if (cert == nullptr || X509_set_issuer_name(cert.get(), X509_get_subject_name(cert_)) != 1 ||
      !add_extension(cert.get(), cert_, NID_basic_constraints, "critical,CA:FALSE") ||
      !add_extension(cert.get(), cert_, NID_key_usage, "critical,digitalSignature") ||
      !add_extension(cert.get(), cert_, NID_ext_key_usage, "serverAuth,clientAuth") ||
      !add_extension(cert.get(), cert_, NID_subject_alt_name, "DNS:" + host) ||
      !add_extension(cert.get(), cert_, NID_authority_key_identifier, "keyid") ||
      X509_sign(cert.get(), key_, EVP_sha256()) == 0)
    return failed("cannot sign a certificate for " + host);
  *cert_pem = pem_of([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
  return cert_pem->empty() ? failed("cannot write a certificate") : Status::ok();
}

Status make_host_request(const std::string& host, std::string* key_pem, std::string* csr_pem) {
  ERR_clear_error();
  Owned<EVP_PKEY> key = new_key();
  Owned<X509_REQ> req(X509_REQ_new());
  if (key == nullptr || req == nullptr || X509_REQ_set_version(req.get(), 0) != 1 ||
      !set_common_name(X509_REQ_get_subject_name(req.get()), host) ||
      X509_REQ_set_pubkey(req.get(), key.get()) != 1 ||
      X509_REQ_sign(req.get(), key.get(), EVP_sha256()) == 0)
    return failed("cannot make a key and a certificate signing request");
  *key_pem = pem_of([&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  *csr_pem = pem_of([&](BIO* b) { return PEM_write_bio_X509_REQ(b, req.get()); });
  return key_pem->empty() || csr_pem->empty() ? failed("cannot write a key or request")
                                              : Status::ok();
}

}  // namespace wharf::control
