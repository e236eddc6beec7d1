// Certificates for tests of authenticated host links (links/link_tls.h), made with OpenSSL's
// API as `wharf-lab certs` makes them with its CLI: EC P-256 CAs, self-signed, and host
// certificates they signed whose CN and DNS subject alternative name are the host's name (or
// the names given, as the orchestrator's API certificate names its addresses).
// PEM files in a fresh directory under /tmp, removed with everything in it when the object
// goes. Every CA has the same subject name, so a certificate of another CA differs from the
// cluster's only by its signature.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <sys/stat.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "support/temp_dir.h"

namespace wharf::test_support {

class TestCerts {
 public:
  static constexpr const char* kClusterCa = "cluster";
  struct Host {
    std::string cert;  // PEM certificate
    std::string key;   // PEM private key
  };

  TestCerts() = default;
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  // A file name in the directory (the file need not exist).
  std::string path(const std::string& file) const { return dir_.path() + "/" + file; }

  // The PEM file of CA `ca`, made at first use; "" if it could not be made.
  std::string ca(const std::string& ca = kClusterCa) {
    const Ca* c = find_or_make(ca);
    return c == nullptr ? "" : c->file;
  }

  // A certificate naming host `name`, signed by CA `ca`, and its key (made at every call:
  // <ca>-<name>.pem and .key, replacing earlier ones). Empty names if they could not be made.
  // alt_names: its subject alternative names in OpenSSL's syntax ("DNS:localhost,IP:127.0.0.1");
  // "": DNS:<name>.
  Host host(const std::string& name, const std::string& ca = kClusterCa,
            const std::string& alt_names = "") {
    const Ca* c = find_or_make(ca);
    if (c == nullptr) return {};
    Key key(EVP_EC_gen("P-256"));
    const std::string subject_alt_name = alt_names.empty() ? "DNS:" + name : alt_names;
    Cert cert = make_cert(name, key.get(), c,
                          {{NID_basic_constraints, "critical,CA:FALSE"},
                           {NID_key_usage, "critical,digitalSignature"},
                           {NID_subject_alt_name, subject_alt_name.c_str()}});
    Host h{path(ca + "-" + name + ".pem"), path(ca + "-" + name + ".key")};
    if (cert == nullptr || !write(h.cert, cert.get(), nullptr) || !write(h.key, nullptr, key.get()))
      return {};
    return h;
  }

 private:
  struct KeyFree {
    void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  };
  struct CertFree {
    void operator()(X509* c) const { X509_free(c); }
  };
  using Key = std::unique_ptr<EVP_PKEY, KeyFree>;
  using Cert = std::unique_ptr<X509, CertFree>;
  struct Ca {
    Key key;
    Cert cert;
    std::string file;
  };
  struct Extension {
    int nid;
    const char* value;
  };

  const Ca* find_or_make(const std::string& name) {
    if (dir_.path().empty()) return nullptr;
    auto it = cas_.find(name);
    if (it != cas_.end()) return &it->second;
    Ca ca{Key(EVP_EC_gen("P-256")), nullptr, path(name + "-ca.pem")};
    ca.cert = make_cert("wharf cluster CA", ca.key.get(), nullptr,
                        {{NID_basic_constraints, "critical,CA:TRUE"},
                         {NID_key_usage, "critical,keyCertSign,cRLSign"},
                         {NID_subject_key_identifier, "hash"}});
    if (ca.cert == nullptr || !write(ca.file, ca.cert.get(), nullptr)) return nullptr;
    return &cas_.emplace(name, std::move(ca)).first->second;
  }

  // A certificate for `cn` holding `key`, signed by `issuer` (nullptr: by itself).
  Cert make_cert(const std::string& cn, EVP_PKEY* key, const Ca* issuer,
                 std::initializer_list<Extension> extensions) {
    if (key == nullptr) return nullptr;
    Cert x(X509_new());
    X509_NAME* subject = X509_get_subject_name(x.get());
    bool ok =
        X509_set_version(x.get(), X509_VERSION_3) == 1 &&
        ASN1_INTEGER_set(X509_get_serialNumber(x.get()), ++serial_) == 1 &&
        X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600) != nullptr &&
        X509_gmtime_adj(X509_getm_notAfter(x.get()), 24 * 3600) != nullptr &&
        X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                   0) == 1 &&
        X509_set_issuer_name(x.get(), issuer != nullptr ? X509_get_subject_name(issuer->cert.get())
                                                        : subject) == 1 &&
        X509_set_pubkey(x.get(), key) == 1;
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer != nullptr ? issuer->cert.get() : x.get(), x.get(), nullptr,
                   nullptr, 0);
    for (const Extension& e : extensions) {
      X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, e.nid, e.value);
      ok = ok && ext != nullptr && X509_add_ext(x.get(), ext, -1) == 1;
      X509_EXTENSION_free(ext);
    }
    EVP_PKEY* signer = issuer != nullptr ? issuer->key.get() : key;
    if (!ok || X509_sign(x.get(), signer, EVP_sha256()) == 0) return nullptr;
    return x;
  }

  // Writes `cert` or `key` (mode 0600) as PEM to `file`.
  static bool write(const std::string& file, X509* cert, EVP_PKEY* key) {
    FILE* f = fopen(file.c_str(), "w");
    if (f == nullptr) return false;
    fchmod(fileno(f), 0600);
    const bool ok = cert != nullptr
                        ? PEM_write_X509(f, cert) == 1
                        : PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
    return fclose(f) == 0 && ok;
  }

  TempDir dir_{"wharf-certs"};
  std::map<std::string, Ca> cas_;
  long serial_ = 0;
};

}  // namespace wharf::test_support
