#include "control/tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "control/files.h"
#include "control/host_ca.h"
#include "control/registry.h"

namespace wharf::control {
namespace {

using Code = Status::Code;
using nlohmann::json;

constexpr std::string_view kPrefix = "wharf_";
constexpr size_t kIdHex = 16;
constexpr size_t kSecretHex = 64;
constexpr size_t kSha256Hex = 64;
const std::string kRecordPrefix = "/wharf-auth/token/";

constexpr std::array<const char*, 5> kRoleNames = {"admin", "tenant-admin", "viewer", "host",
                                                   "join"};

bool is_hex(std::string_view s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string to_hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

// n random bytes as 2n hex digits; "" if the kernel's generator failed.
std::string random_hex(size_t n) {
  std::array<unsigned char, 32> bytes{};
  if (n > bytes.size() || RAND_bytes(bytes.data(), static_cast<int>(n)) != 1) return {};
  return to_hex(bytes.data(), n);
}

std::string sha256_hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), md.data(), &len, EVP_sha256(), nullptr) != 1) return {};
  return to_hex(md.data(), len);
}

// A tenant-admin belongs to exactly one tenant and a join token to one host; no other role
// to either.
bool scope_fits(Role role, const std::string& tenant, const std::string& host) {
  if ((role == Role::kTenantAdmin) != !tenant.empty()) return false;
  if ((role == Role::kJoin) != !host.empty()) return false;
  return (tenant.empty() || Registry::valid_name(tenant)) &&
         (host.empty() || valid_host_name(host));
}

bool int_field(const json& j, const char* name, int64_t* out) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return false;
  *out = it->get<int64_t>();
  return true;
}

bool string_field(const json& j, const char* name, std::string* out) {
  auto it = j.find(name);
  if (it == j.end() || !it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

}  // namespace

const char* role_name(Role role) { return kRoleNames.at(static_cast<size_t>(role)); }

bool parse_role(std::string_view text, Role* out) {
  for (size_t i = 0; i < kRoleNames.size(); ++i) {
    if (text == kRoleNames[i]) {
      *out = static_cast<Role>(i);
      return true;
    }
  }
  return false;
}

bool split_token(std::string_view token, std::string* id, std::string* secret) {
  if (token.size() != kPrefix.size() + kIdHex + 1 + kSecretHex || token.substr(0, 6) != kPrefix ||
      token[kPrefix.size() + kIdHex] != '_')
    return false;
  const std::string_view i = token.substr(kPrefix.size(), kIdHex);
  const std::string_view s = token.substr(kPrefix.size() + kIdHex + 1);
  if (!is_hex(i, kIdHex) || !is_hex(s, kSecretHex)) return false;
  *id = i;
  *secret = s;
  return true;
}

std::string encode_token_record(const TokenRecord& r) {
  return json{
      {"role", role_name(r.role)}, {"tenant", r.tenant},   {"host", r.host},    {"name", r.name},
      {"created", r.created},      {"expires", r.expires}, {"sha256", r.sha256}}
      .dump();
}

bool decode_token_record(std::string_view id, std::string_view json_text, TokenRecord* out) {
  const json j = json::parse(json_text, nullptr, false);
  if (!j.is_object() || !is_hex(id, kIdHex)) return false;
  TokenRecord r;
  r.id = id;
  std::string role;
  if (!string_field(j, "role", &role) || !parse_role(role, &r.role) ||
      !string_field(j, "tenant", &r.tenant) || !string_field(j, "name", &r.name) ||
      !int_field(j, "created", &r.created) || !int_field(j, "expires", &r.expires) ||
      !string_field(j, "sha256", &r.sha256) || !is_hex(r.sha256, kSha256Hex))
    return false;
  // Records from before join tokens have no host.
  if (j.contains("host") && !string_field(j, "host", &r.host)) return false;
  if (!scope_fits(r.role, r.tenant, r.host)) return false;
  *out = std::move(r);
  return true;
}

Status TokenStore::add(Role role, const std::string& scope, const std::string& name,
                       int64_t ttl_seconds, int64_t now, std::string* token, TokenRecord* out) {
  const std::string tenant = role == Role::kTenantAdmin ? scope : "";
  const std::string host = role == Role::kJoin ? scope : "";
  if (tenant.empty() && host.empty() && !scope.empty())
    return Status::error(Code::kInvalidArgument,
                         std::string("a ") + role_name(role) + " token has no tenant or host");
  if (!scope_fits(role, tenant, host))
    return Status::error(Code::kInvalidArgument,
                         role == Role::kJoin
                             ? "a join token needs a host name (letters, digits, '.', '-', '_')"
                             : "a tenant-admin token needs a tenant name");
  if (name.size() > 63)
    return Status::error(Code::kInvalidArgument, "a token's name is at most 63 characters");
  if (ttl_seconds < 0)
    return Status::error(Code::kInvalidArgument, "a token's lifetime cannot be negative");
  TokenRecord r;
  r.role = role;
  r.tenant = tenant;
  r.host = host;
  r.name = name;
  r.created = now;
  if (role == Role::kJoin && ttl_seconds == 0) ttl_seconds = kJoinTtl;
  r.expires = ttl_seconds == 0 ? 0 : now + ttl_seconds;
  const std::string secret = random_hex(kSecretHex / 2);
  r.id = random_hex(kIdHex / 2);
  r.sha256 = sha256_hex(secret);
  if (secret.empty() || r.id.empty() || r.sha256.empty())
    return Status::error(Code::kInternal, "no random bytes for a token");
  bool made = false;
  int64_t rev = 0;
  // Two tokens never share an id: the record is made only where none was.
  Status st = store_->txn({Compare::absent(kRecordPrefix + r.id)},
                          {TxnOp::put(kRecordPrefix + r.id, encode_token_record(r))}, &made, &rev);
  if (!st.is_ok()) return st;
  if (!made)
    return Status::error(Code::kAlreadyExists, "token id " + r.id + " is taken; try again");
  *token = std::string(kPrefix) + r.id + "_" + secret;
  *out = std::move(r);
  return Status::ok();
}

Status TokenStore::del(const std::string& id) {
  if (!is_hex(id, kIdHex)) return Status::error(Code::kNotFound, "no token " + id);
  bool deleted = false;
  int64_t rev = 0;
  Status st = store_->del(kRecordPrefix + id, &deleted, &rev);
  if (st.is_ok() && !deleted) return Status::error(Code::kNotFound, "no token " + id);
  return st;
}

Status TokenStore::use_once(const std::string& id, bool* used) {
  // One delete succeeds, however many race: the store says which.
  const Status st = del(id);
  *used = st.is_ok();
  return st.code() == Code::kNotFound ? Status::ok() : st;
}

Status TokenStore::list(std::vector<TokenRecord>* out) {
  std::vector<KeyValue> kvs;
  int64_t rev = 0;
  Status st = store_->range(kRecordPrefix, &kvs, &rev);
  if (!st.is_ok()) return st;
  out->clear();
  for (const KeyValue& kv : kvs) {
    TokenRecord r;
    if (decode_token_record(std::string_view(kv.key).substr(kRecordPrefix.size()), kv.value, &r))
      out->push_back(std::move(r));
  }
  return Status::ok();
}

Status TokenStore::verify(std::string_view token, int64_t now, TokenRecord* who) {
  const Status refused = Status::error(Code::kNotFound, "unknown, expired or malformed token");
  std::string id;
  std::string secret;
  if (!split_token(token, &id, &secret)) return refused;
  KeyValue kv;
  Status st = store_->get(kRecordPrefix + id, &kv);
  if (st.code() == Code::kNotFound) return refused;
  if (!st.is_ok()) return Status::error(Code::kUnavailable, st.message());
  TokenRecord r;
  if (!decode_token_record(id, kv.value, &r)) return refused;
  const std::string presented = sha256_hex(secret);
  if (presented.size() != r.sha256.size() ||
      CRYPTO_memcmp(presented.data(), r.sha256.data(), presented.size()) != 0)
    return refused;
  if (r.expires != 0 && now >= r.expires) return refused;
  *who = std::move(r);
  return Status::ok();
}

Status TokenStore::has_admin(bool* out) {
  std::vector<TokenRecord> all;
  Status st = list(&all);
  if (!st.is_ok()) return st;
  *out = false;
  for (const TokenRecord& r : all) *out = *out || r.role == Role::kAdmin;
  return Status::ok();
}

Status bootstrap_admin_token(TokenStore* tokens, const std::string& path, int64_t now, bool* made) {
  *made = false;
  bool exists = false;
  Status st = tokens->has_admin(&exists);
  if (!st.is_ok() || exists) return st;
  std::string token;
  TokenRecord r;
  st = tokens->add(Role::kAdmin, "", "bootstrap", 0, now, &token, &r);
  if (!st.is_ok()) return st;
  if (!write_file_replacing(path, token + "\n", 0600)) {
    const int err = errno;
    (void)tokens->del(r.id);
    return Status::error(Code::kInternal,
                         "cannot write the admin token to " + path + ": " + std::strerror(err));
  }
  *made = true;
  return Status::ok();
}

}  // namespace wharf::control
