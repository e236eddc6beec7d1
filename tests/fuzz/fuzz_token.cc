// Fuzz target for control/tokens.h's decoders: a bearer token as a client presents it (an
// Authorization header is anyone's input) and a token record as the store gives it back
// (another etcd client may have written it). The whole input goes to each.
//
// Checked for every input: an accepted token is exactly "wharf_" + its id + "_" + its secret,
// both lowercase hex of 16 and 64 digits; an accepted record has a known role, a tenant exactly
// when it is a tenant-admin, a valid host exactly when it is a join token, non-negative times and a
// 64-digit hash, and encodes to a record that decodes to the same fields.
#include <cstddef>
#include <cstdint>
#include <string>

#include "control/host_ca.h"
#include "control/tokens.h"
#include "fuzz_check.h"

using namespace wharf::control;

namespace {

bool lower_hex(const std::string& s, size_t len) {
  if (s.size() != len) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

void check_token(const std::string& text) {
  std::string id, secret;
  if (!split_token(text, &id, &secret)) return;
  WHARF_FUZZ_CHECK(lower_hex(id, 16) && lower_hex(secret, 64), "token parts are not hex");
  WHARF_FUZZ_CHECK("wharf_" + id + "_" + secret == text, "token parts do not make the token");
}

void check_record(const std::string& text) {
  TokenRecord r;
  if (!decode_token_record("0123456789abcdef", text, &r)) return;
  WHARF_FUZZ_CHECK(r.id == "0123456789abcdef", "record id misread");
  WHARF_FUZZ_CHECK((r.role == Role::kTenantAdmin) == !r.tenant.empty(),
                   "a tenant on a record that is not a tenant-admin's, or none on one that is");
  WHARF_FUZZ_CHECK(
      (r.role == Role::kJoin) == !r.host.empty() && (r.host.empty() || valid_host_name(r.host)),
      "a host on a record that is not a join token's, none on one that is, or a bad one");
  WHARF_FUZZ_CHECK(r.created >= 0 && r.expires >= 0, "negative time accepted");
  WHARF_FUZZ_CHECK(lower_hex(r.sha256, 64), "hash is not 64 hex digits");
  TokenRecord back;
  WHARF_FUZZ_CHECK(decode_token_record(r.id, encode_token_record(r), &back),
                   "an accepted record does not round-trip");
  WHARF_FUZZ_CHECK(back.role == r.role && back.tenant == r.tenant && back.host == r.host &&
                       back.name == r.name && back.created == r.created &&
                       back.expires == r.expires && back.sha256 == r.sha256,
                   "a record round-trips to other fields");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check_token(text);
  check_record(text);
  return 0;
}
