// The orchestrator's credentials (issue #19): bearer tokens with a role, kept hashed in the
// KvStore, and what each role may do.
//
// A token reads "wharf_<id>_<secret>": <id> 16 hex digits naming its record, <secret> 64 hex
// digits (32 random bytes). The store keeps only the secret's SHA-256, under
//   /wharf-auth/token/<id>   {"role", "tenant", "host", "name", "created", "expires", "sha256"}
// outside /wharf/, so the raw store API (/v1/kv, /v1/watch: "/wharf/" prefixes only) never
// shows it. "created" and "expires" are Unix seconds; "expires" 0 is never. A record read back
// from the store is decoded as hostile input (another etcd client may have written it).
// Thread safety: as the KvStore's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "control/kv_store.h"

namespace wharf::control {

// admin: everything. tenant-admin: its tenant's objects (networks, containers, policy).
// viewer: reads everything but the raw store. host: what a router needs (register its host,
// follow the raw store, read hosts and containers). join: one certificate for its host from
// the cluster CA (control/link_join.h), once: the token is gone when it has been used.
enum class Role { kAdmin, kTenantAdmin, kViewer, kHost, kJoin };
const char* role_name(Role role);
bool parse_role(std::string_view text, Role* out);

struct TokenRecord {
  std::string id;  // 16 hex digits
  Role role = Role::kViewer;
  std::string tenant;  // a tenant-admin's tenant; "" for the other roles
  std::string host;    // a join token's host; "" for the other roles
  std::string name;    // what the operator called it
  int64_t created = 0;
  int64_t expires = 0;  // Unix seconds; 0: never
  std::string sha256;   // of the secret, 64 hex digits
};

// The parts of a bearer token; false unless it has exactly the form above.
bool split_token(std::string_view token, std::string* id, std::string* secret);
// A record's JSON, and back (false for anything but a well-formed record; `id` is the key's).
std::string encode_token_record(const TokenRecord& r);
bool decode_token_record(std::string_view id, std::string_view json_text, TokenRecord* out);

class TokenStore {
 public:
  explicit TokenStore(KvStore* store) : store_(store) {}

  // Makes a token with a fresh id and secret; *token is the only copy of the secret.
  // `scope`: a tenant-admin token's tenant, a join token's host (control/host_ca.h's
  // valid_host_name); "" for the other roles. ttl_seconds 0: it never expires, but a join
  // token expires after kJoinTtl.
  Status add(Role role, const std::string& scope, const std::string& name, int64_t ttl_seconds,
             int64_t now, std::string* token, TokenRecord* out);
  static constexpr int64_t kJoinTtl = 3600;
  // kNotFound if there is no such token.
  Status del(const std::string& id);
  // Deletes token `id` for its one use: *used is true for exactly one caller however many
  // race (false: it was gone already).
  Status use_once(const std::string& id, bool* used);
  Status list(std::vector<TokenRecord>* out);
  // Who presents `token` at time `now`: kNotFound for a malformed, unknown, wrong, expired or
  // deleted token (one answer for all, so a caller learns nothing about which);
  // kUnavailable when the store cannot say.
  Status verify(std::string_view token, int64_t now, TokenRecord* who);
  // Whether any admin token exists (expired ones too: they still name an operator).
  Status has_admin(bool* out);

 private:
  KvStore* store_;
};

// The orchestrator's first start: when the store has no admin token, makes one named
// "bootstrap" and writes it to `path` (mode 0600, replacing what was there); *made says
// whether it did. A token whose file cannot be written is deleted again.
Status bootstrap_admin_token(TokenStore* tokens, const std::string& path, int64_t now, bool* made);

}  // namespace wharf::control
