// Decoding of etcd v3's JSON gateway answers (etcd 3.4, grpc-gateway v1), apart from the network
// so that it can be fuzzed (tests/fuzz/fuzz_etcd_json.cc).
//
// Everything here treats its input as hostile: malformed JSON, wrong types, integers out of
// range, non-canonical base64 or missing required parts give kInternal, never an exception;
// outputs mean something only when the result is ok (vectors are then left empty). The
// gateway's conventions:
// - bytes (keys, values) are standard base64 with padding;
// - int64 fields are JSON strings of decimal digits (numbers are accepted too);
// - fields holding their default (0, false, "", PUT) are omitted;
// - streaming calls (watch, lease keepalive) answer one JSON object per line, each either
//   {"result": {...}} or {"error": {"grpc_code": N, "message": ...}};
// - a failed unary call answers a non-200 HTTP status and {"error", "code", "message"}.
// Thread safety: every function is pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "control/kv_store.h"

namespace wharf::control::etcd_json {

std::string base64_encode(std::string_view bytes);
// Strict: only the canonical encoding of some byte string is accepted (length a multiple of 4,
// at most two '=' and only at the end, unused bits zero), so decoding then encoding gives the
// text back.
bool base64_decode(std::string_view text, std::string* bytes);

// The Status the body of a failed unary call stands for: the gRPC code of etcd's error object
// mapped onto Status codes (NOT_FOUND -> kNotFound, ...), never ok. False when `body` is not
// such an object (which can then be a body cut short).
bool decode_error(std::string_view body, Status* status);

// A response whose only use is its header's store revision (put, lease revoke, status).
Status decode_header(std::string_view body, int64_t* revision);
// kv/range: the entries sorted by key (duplicates are malformed) and the store revision.
Status decode_range(std::string_view body, std::vector<KeyValue>* kvs, int64_t* revision);
// kv/deleterange: how many keys were deleted and the store revision after.
Status decode_delete(std::string_view body, int64_t* deleted, int64_t* revision);
// kv/txn: whether the comparisons held and the store revision after.
Status decode_txn(std::string_view body, bool* succeeded, int64_t* revision);
// lease/grant: the new lease's ID (positive).
Status decode_lease_grant(std::string_view body, int64_t* lease);
// lease/keepalive after one request: the first message of the stream. *ttl is the renewed
// TTL, 0 when the lease does not exist (etcd then omits it).
Status decode_keep_alive(std::string_view body, int64_t* ttl);

// One message of a watch stream.
struct WatchMessage {
  bool created = false;            // etcd registered the watch (its first message)
  bool canceled = false;           // etcd ended the watch; see compact_revision and reason
  int64_t compact_revision = 0;    // canceled because history before this was compacted
  std::string cancel_reason;       // printable, bounded
  std::vector<WatchEvent> events;  // in revision order, as etcd sent them
};
// One line of the watch stream. An in-stream error object gives its mapped Status.
Status decode_watch_message(std::string_view line, WatchMessage* out);

}  // namespace wharf::control::etcd_json
