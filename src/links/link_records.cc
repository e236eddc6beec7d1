#include "links/link_records.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cstring>

namespace wharf::links {
namespace {

constexpr size_t kKeySize = 16;  // AES-128
// The exporter labels of the two directions (RFC 8446 section 7.5: "EXPORTER" and ours).
constexpr char kDiallerLabel[] = "EXPORTER-wharf-link-records-dialler";
constexpr char kAcceptorLabel[] = "EXPORTER-wharf-link-records-acceptor";

// HKDF-Expand (RFC 5869) with SHA-256: n bytes of `secret` (kSecretSize bytes) for `info`.
bool expand(const uint8_t* secret, const char* info, uint8_t* out, size_t n) {
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* ctx = kdf == nullptr ? nullptr : EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(secret),
                                        RecordCipher::kSecretSize),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, const_cast<char*>(info),
                                        std::strlen(info)),
      OSSL_PARAM_construct_end()};
  const bool ok = ctx != nullptr && EVP_KDF_derive(ctx, out, n, params) == 1;
  EVP_KDF_CTX_free(ctx);
  return ok;
}

}  // namespace

RecordCipher::RecordCipher(Direction direction, uint64_t records_per_key)
    : direction_(direction), records_per_key_(records_per_key) {}

RecordCipher::~RecordCipher() {
  EVP_CIPHER_CTX_free(ctx_);
  OPENSSL_cleanse(secret_, sizeof(secret_));
}

std::unique_ptr<RecordCipher> RecordCipher::make(const uint8_t* secret, Direction direction,
                                                 uint64_t records_per_key) {
  std::unique_ptr<RecordCipher> c(new RecordCipher(direction, records_per_key));
  std::memcpy(c->secret_, secret, kSecretSize);
  c->ctx_ = EVP_CIPHER_CTX_new();
  if (c->ctx_ == nullptr || !c->use_secret()) return nullptr;
  return c;
}

bool RecordCipher::from_session(SSL* session, bool client, Pair* out, std::string* why) {
  uint8_t dialler[kSecretSize];
  uint8_t acceptor[kSecretSize];
  const auto exported = [session](const char* label, uint8_t* to) {
    return SSL_export_keying_material(session, to, kSecretSize, label, std::strlen(label), nullptr,
                                      0, 0) == 1;
  };
  if (exported(kDiallerLabel, dialler) && exported(kAcceptorLabel, acceptor)) {
    out->seal = make(client ? dialler : acceptor, Direction::kSeal);
    out->open = make(client ? acceptor : dialler, Direction::kOpen);
  }
  OPENSSL_cleanse(dialler, sizeof(dialler));
  OPENSSL_cleanse(acceptor, sizeof(acceptor));
  if (out->seal != nullptr && out->open != nullptr) return true;
  char text[256];
  ERR_error_string_n(ERR_get_error(), text, sizeof(text));
  *why = std::string("cannot derive the link's record keys: ") + text;
  return false;
}

bool RecordCipher::use_secret() {
  uint8_t key[kKeySize];
  bool ok =
      expand(secret_, "wharf key", key, kKeySize) && expand(secret_, "wharf iv", iv_, kIvSize);
  if (ok) {
    ok = direction_ == Direction::kSeal
             ? EVP_EncryptInit_ex(ctx_, EVP_aes_128_gcm(), nullptr, key, nullptr) == 1
             : EVP_DecryptInit_ex(ctx_, EVP_aes_128_gcm(), nullptr, key, nullptr) == 1;
  }
  OPENSSL_cleanse(key, sizeof(key));
  sequence_ = 0;
  return ok;
}

bool RecordCipher::next_nonce(uint8_t* iv) {
  if (sequence_ == records_per_key_) {
    uint8_t next[kSecretSize];
    const bool ok = expand(secret_, "wharf key update", next, kSecretSize);
    std::memcpy(secret_, next, kSecretSize);
    OPENSSL_cleanse(next, sizeof(next));
    if (!ok || !use_secret()) return false;
  }
  std::memcpy(iv, iv_, kIvSize);
  for (size_t i = 0; i < 8; ++i) iv[kIvSize - 1 - i] ^= static_cast<uint8_t>(sequence_ >> (8 * i));
  ++sequence_;
  return true;
}

size_t RecordCipher::payload_size(const uint8_t* header) {
  const size_t n = (size_t{header[0]} << 24) | (size_t{header[1]} << 16) |
                   (size_t{header[2]} << 8) | size_t{header[3]};
  return n <= kMaxPayload ? n : 0;
}

bool RecordCipher::seal(const uint8_t* plain, size_t n, uint8_t* record) {
  uint8_t iv[kIvSize];
  if (!next_nonce(iv)) return false;
  for (int i = 0; i < 4; ++i) record[i] = static_cast<uint8_t>(n >> (24 - 8 * i));
  uint8_t* const body = record + kHeaderSize;
  int len = 0;
  return EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, iv) == 1 &&
         EVP_EncryptUpdate(ctx_, nullptr, &len, record, kHeaderSize) == 1 &&
         EVP_EncryptUpdate(ctx_, body, &len, plain, static_cast<int>(n)) == 1 &&
         EVP_EncryptFinal_ex(ctx_, body + n, &len) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_GET_TAG, kTagSize, body + n) == 1;
}

bool RecordCipher::open(const uint8_t* record, uint8_t* plain) {
  const size_t n = payload_size(record);
  uint8_t iv[kIvSize];
  if (n == 0 || !next_nonce(iv)) return false;
  const uint8_t* const body = record + kHeaderSize;
  int len = 0;
  return EVP_DecryptInit_ex(ctx_, nullptr, nullptr, nullptr, iv) == 1 &&
         EVP_DecryptUpdate(ctx_, nullptr, &len, record, kHeaderSize) == 1 &&
         EVP_DecryptUpdate(ctx_, plain, &len, body, static_cast<int>(n)) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, kTagSize,
                             const_cast<uint8_t*>(body + n)) == 1 &&
         EVP_DecryptFinal_ex(ctx_, plain + n, &len) == 1;
}

bool RecordCipher::seal_queued(ByteQueue* plain, ByteQueue* sealed, size_t limit, size_t* taken) {
  *taken = 0;
  while (!plain->empty() && sealed->size() < limit) {
    const size_t n = std::min(plain->size(), kMaxPayload);
    if (!seal(plain->data(), n, sealed->append(n + kOverhead))) return false;
    plain->consume(n);
    *taken += n;
  }
  return true;
}

bool RecordCipher::open_queued(ByteQueue* sealed, ByteQueue* plain) {
  while (sealed->size() >= kHeaderSize) {
    const size_t n = payload_size(sealed->data());
    if (n != 0 && sealed->size() < n + kOverhead) return true;  // the rest is on its way
    if (n == 0) return false;
    if (!open(sealed->data(), plain->append(n))) {
      plain->unappend(n);
      return false;
    }
    sealed->consume(n + kOverhead);
  }
  return true;
}

}  // namespace wharf::links
